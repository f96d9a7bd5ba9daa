//! Several `weir serve` processes on one PostgreSQL catalog and one bucket
//! (throwaway servers: PostgreSQL from Debian, moto's S3) are one cluster,
//! each node with a data directory of its own, as on separate machines. A
//! publisher registered, paused, resumed or deleted on any node is so on
//! every node; Kafka's consumer group splits its partitions between them; a
//! node killed with -9 loses nothing (its partitions move to the others, which
//! resume from the catalog's offsets) and is shown as silent; every message
//! lands in the table exactly once, as an independent Delta reader finds it in
//! the bucket; a storage outage holds batches back and loses nothing; another
//! engine compacting the table in the bucket while two nodes write it hides
//! and doubles nothing. Fifty publishers on five connections share five
//! consumers a node, and the group still splits all their partitions
//! between the nodes, exactly once across a kill -9. Two nodes commit one
//! Iceberg table through the catalog's compare-and-set, and pyiceberg on
//! the same PostgreSQL database reads every row once.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::block_on;
use common::many;
use common::peers::{delta_py_with, iceberg_py_with};
use common::postgres::Postgres;
use common::s3::S3;
use common::serve::{Server, broker, event_ids, poll, registered_declaring, registered_with};
use common::stream::{clicks, produce};
use common::tansu::Tansu;

fn status(node: &Server, token: &str) -> Value {
    node.cli_json(token, &["publisher", "status", "events/read_clicks"])
}

/// What `publisher status` on `node` says each live node holds: node id → partitions.
fn holdings(node: &Server, token: &str) -> Vec<(String, Vec<i64>)> {
    status(node, token)["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter(|n| n["live"] == true && n["state"] == "consuming")
        .map(|n| {
            let partitions = n["partitions"].as_array().unwrap().iter().map(|p| p.as_i64().unwrap()).collect();
            (n["node"].as_str().unwrap().to_string(), partitions)
        })
        .collect()
}

/// Every one of `partitions` held by exactly one of `nodes` live nodes, each holding some.
fn split_between(node: &Server, token: &str, nodes: usize, partitions: i64) -> Option<Vec<(String, Vec<i64>)>> {
    let held = holdings(node, token);
    let all: Vec<i64> = held.iter().flat_map(|(_, p)| p.clone()).collect();
    let distinct: BTreeSet<i64> = all.iter().copied().collect();
    let whole = distinct == (0..partitions).collect() && all.len() == partitions as usize;
    (held.len() == nodes && whole && held.iter().all(|(_, p)| !p.is_empty())).then_some(held)
}

fn committed_rows(node: &Server, token: &str) -> u64 {
    let (status, versions) = node.http("GET", "/v1/collections/events/tables/clicks/versions", Some(token), None);
    if status != 200 {
        return 0;
    }
    versions.as_array().unwrap().iter().map(|v| v["rows"].as_u64().unwrap()).sum()
}

fn no_workers(node: &Server) -> Option<()> {
    (node.http("GET", "/health", None, None).1["publishers"] == json!({})).then_some(())
}

fn port(server: &Server) -> u16 {
    server.url.rsplit(':').next().unwrap().trim_end_matches('/').parse().unwrap()
}

/// A cluster's shared settings: the catalog, the store, the secret key.
struct Shared {
    dir: tempfile::TempDir,
    args: Vec<String>,
    env: Vec<(&'static str, String)>,
}

impl Shared {
    fn new(postgres: &Postgres, database: &str, s3: &S3, prefix: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("weir.key");
        std::fs::write(&key, "3c".repeat(32)).unwrap();
        std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        let args = vec![
            "--catalog".into(),
            postgres.database(database),
            "--store".into(),
            s3.url(prefix),
            "--secret-key-file".into(),
            key.display().to_string(),
            "--cluster-poll".into(),
            "500ms".into(),
        ];
        Self { dir, args, env: s3.env() }
    }

    /// A node with a data directory of its own.
    fn node(&self, name: &str) -> Server {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        Server::start_with_env(&self.dir.path().join(name), &args, &self.env)
    }
}

/// Produces `clicks(from..)` in rounds of `per_round` every 100 ms until told to
/// stop, independently of weir; returns how many it produced.
fn steady_producer(
    bootstrap: String,
    from: usize,
    per_round: usize,
) -> (Arc<AtomicBool>, std::thread::JoinHandle<usize>) {
    let stop = Arc::new(AtomicBool::new(false));
    let produced = Arc::new(AtomicUsize::new(from));
    let handle = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let at = produced.load(Ordering::SeqCst);
                block_on(produce(&bootstrap, "clicks", &clicks(at, per_round)));
                produced.store(at + per_round, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(100));
            }
            produced.load(Ordering::SeqCst)
        })
    };
    (stop, handle)
}

#[test]
fn three_nodes_on_postgres_and_a_bucket_lose_nothing_when_one_is_killed() {
    const PARTITIONS: i64 = 6;
    let postgres = Postgres::shared();
    let s3 = S3::start("weir-cluster");
    let cluster = Shared::new(postgres, "cluster_three_nodes", &s3, "three");
    let broker = Tansu::start();
    broker.create_topic("clicks", PARTITIONS as u32);
    let bootstrap = broker.address.clone();
    let a = cluster.node("a");
    let b = cluster.node("b");
    let c = cluster.node("c");

    // Registered on A: B and C pick it up, and the group splits the partitions.
    // weir's own session timeout (10 s) bounds the failover below.
    let token = registered_with(&a, cluster.dir.path(), &bootstrap, &[]);
    let started = Instant::now();
    let split = poll("the partitions split between the three nodes", || split_between(&b, &token, 3, PARTITIONS));
    eprintln!("registration on A → every node consuming its partitions: {:?} ({split:?})", started.elapsed());
    assert_eq!(poll("C's view of the same split", || split_between(&c, &token, 3, PARTITIONS)).len(), 3);

    // A steady producer throughout; kill -9 B mid-stream: its partitions move to A
    // and C, which resume from the catalog.
    let (stop, producer) = steady_producer(bootstrap.clone(), 0, 20);
    poll("rows committed while all three run", || (committed_rows(&a, &token) >= 200).then_some(()));
    let b_port = format!(":{}", port(&b));
    let b_id = holdings(&a, &token).into_iter().map(|(id, _)| id).find(|id| id.ends_with(&b_port));
    let b_id = b_id.expect("B holds partitions");
    let killed = Instant::now();
    b.kill();
    poll("A and C to hold every partition", || split_between(&a, &token, 2, PARTITIONS));
    let moved = killed.elapsed();
    let rows_then = committed_rows(&a, &token);
    poll("commits after the partitions moved", || (committed_rows(&a, &token) > rows_then + 100).then_some(()));
    eprintln!("kill -9 of B → its partitions held by A and C: {moved:?}; committing again: {:?}", killed.elapsed());
    let silent = poll("B shown as silent", || {
        let nodes = status(&a, &token)["nodes"].as_array().unwrap().clone();
        nodes.into_iter().find(|n| n["node"] == b_id.as_str() && n["live"] == false)
    });
    assert!(silent["heartbeat_age_ms"].as_i64().unwrap() > 0);

    // B again (a new node, on another port): it gets partitions back. A table
    // file it was uploading when killed is not needed (its batch was not
    // committed, and is read again): gone at start.
    let leftover = cluster.dir.path().join("b/outgoing/tables/acme/events/clicks/part-cut-short.parquet");
    std::fs::create_dir_all(leftover.parent().unwrap()).unwrap();
    std::fs::write(&leftover, b"PAR1 cut short").unwrap();
    let b = cluster.node("b");
    assert!(!leftover.exists(), "a stopped node's unstored files are cleared at start");
    poll("the partitions split between the three nodes again", || split_between(&c, &token, 3, PARTITIONS));
    stop.store(true, Ordering::SeqCst);
    let total = producer.join().unwrap();
    c.wait_for_rows(&token, "events", "clicks", total as u64);

    // Every message exactly once: through weir, and through the table's Delta log in the bucket.
    let mut expected: Vec<String> = (0..total).map(|i| format!("evt-{i}")).collect();
    expected.sort();
    let export = cluster.dir.path().join("all.parquet");
    a.cli_ok(&token, &["table", "export", "events/clicks", "-o", export.to_str().unwrap()]);
    let mut ids = event_ids(&export);
    ids.sort();
    assert_eq!(ids, expected, "every message exactly once across the nodes");
    let table = a.cli_json(&token, &["table", "show", "events/clicks"]);
    let (location, latest) = (table["location"].as_str().unwrap(), table["version"].as_i64().unwrap());
    assert!(location.starts_with("s3://weir-cluster/three/"), "{location}");
    let read =
        delta_py_with(&["read", location, "--key", "event_id", "--versions", &latest.to_string()], &s3.direct_env());
    assert_eq!(read["latest"], latest, "the bucket's log has every version the catalog committed");
    for reader in ["polars", "deltalake"] {
        let seen = &read["versions"][latest.to_string()][reader]["keys"];
        assert_eq!(seen, &json!(expected), "{reader} reads every message once from the bucket");
    }
    // Every node reads the same table.
    let versions = |n: &Server| n.http("GET", "/v1/collections/events/tables/clicks/versions", Some(&token), None).1;
    assert_eq!(versions(&a), versions(&b));
    assert_eq!(versions(&a), versions(&c));
    // The nodes keep no table files of their own: they are in the bucket.
    for node in ["a", "b", "c"] {
        assert!(!cluster.dir.path().join(node).join("tables").exists(), "node {node} kept table files locally");
    }
    // /metrics shows the whole cluster: B's old self silent, the three live nodes' partitions.
    let metrics = a.text("/metrics", common::serve::ADMIN);
    assert!(metrics.contains(&format!("weir_cluster_node_live{{node=\"{b_id}\"}} 0")), "{metrics}");
    let held: i64 = metrics
        .lines()
        .filter(|l| l.starts_with("weir_cluster_partitions{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<i64>().unwrap())
        .sum();
    assert_eq!(held, PARTITIONS + 2, "the live nodes' six partitions, and the two B held when it died: {metrics}");
}

#[test]
fn a_publisher_registered_paused_resumed_or_deleted_on_one_node_is_so_on_every_node() {
    let postgres = Postgres::shared();
    let s3 = S3::start("weir-control");
    let cluster = Shared::new(postgres, "cluster_control", &s3, "control");
    let broker = broker();
    let bootstrap = broker.bootstrap_servers();
    let (a, b, c) = (cluster.node("a"), cluster.node("b"), cluster.node("c"));

    // Registered on A: consuming on B and C too, the three partitions split.
    let token = registered_with(&a, cluster.dir.path(), bootstrap, &[]);
    let started = Instant::now();
    poll("the partitions split between the three nodes", || split_between(&b, &token, 3, 3));
    eprintln!("registration on A → every node consuming its partition: {:?}", started.elapsed());
    poll("C's view of the same split", || split_between(&c, &token, 3, 3));
    block_on(produce(bootstrap, "clicks", &clicks(0, 300)));
    a.wait_for_rows(&token, "events", "clicks", 300);

    // Pause on B stops every node's worker; nothing more is committed.
    b.cli_ok(&token, &["publisher", "pause", "events/read_clicks"]);
    let started = Instant::now();
    for n in [&a, &b, &c] {
        poll("the worker stopped there", || no_workers(n));
    }
    eprintln!("pause on B → no node running the worker: {:?}", started.elapsed());
    poll("every node's heartbeat saying so", || holdings(&a, &token).is_empty().then_some(()));
    block_on(produce(bootstrap, "clicks", &clicks(300, 100)));
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(committed_rows(&a, &token), 300, "a paused publisher commits nothing on any node");

    // Resume on C: every node consumes again, and the paused messages arrive.
    c.cli_ok(&token, &["publisher", "resume", "events/read_clicks"]);
    poll("the partitions split after the resume", || split_between(&a, &token, 3, 3));
    a.wait_for_rows(&token, "events", "clicks", 400);

    // Delete on C: no node runs it any more.
    c.cli_ok(&token, &["publisher", "delete", "events/read_clicks"]);
    let started = Instant::now();
    for n in [&a, &b, &c] {
        poll("the worker gone from every node", || no_workers(n));
    }
    eprintln!("delete on C → no node running the worker: {:?}", started.elapsed());
}

#[test]
fn a_storage_outage_holds_batches_back_and_loses_nothing() {
    let postgres = Postgres::shared();
    let s3 = S3::start("weir-outage");
    let cluster = Shared::new(postgres, "cluster_storage_outage", &s3, "outage");
    let broker = broker();
    let bootstrap = broker.bootstrap_servers();
    let a = cluster.node("a");
    let token = registered_with(&a, cluster.dir.path(), bootstrap, &[]);
    block_on(produce(bootstrap, "clicks", &clicks(0, 300)));
    a.wait_for_rows(&token, "events", "clicks", 300);
    let versions_before = a.cli_json(&token, &["table", "show", "events/clicks"])["version"].as_i64().unwrap();

    // The bucket goes away; the messages keep coming. Batches close, cannot store
    // their files, and wait: nothing is committed without its file.
    s3.outage(true);
    block_on(produce(bootstrap, "clicks", &clicks(300, 200)));
    let retrying = poll("a batch retrying", || {
        let s = status(&a, &token);
        (!s["retrying"].is_null()).then_some(s["retrying"].clone())
    });
    assert!(retrying.to_string().contains("unavailable"), "{retrying}");
    // Longer than the worker's five attempts with their backoff would take.
    std::thread::sleep(Duration::from_secs(20));
    assert_eq!(committed_rows(&a, &token), 300, "nothing committed while its file cannot be stored");
    let s = status(&a, &token);
    assert_eq!(s["worker"]["state"], "consuming", "an outage does not fail the publisher: {s}");

    // Back: the held batches commit, every message once, readable from the bucket.
    s3.outage(false);
    a.wait_for_rows(&token, "events", "clicks", 500);
    let latest = a.cli_json(&token, &["table", "show", "events/clicks"])["version"].as_i64().unwrap();
    assert!(latest > versions_before);
    let location = a.cli_json(&token, &["table", "show", "events/clicks"])["location"].as_str().unwrap().to_string();
    let read = delta_py_with(&["read", &location, "--key", "event_id"], &s3.direct_env());
    let mut expected: Vec<String> = (0..500).map(|i| format!("evt-{i}")).collect();
    expected.sort();
    for v in 1..=latest {
        let rows = read["versions"][v.to_string()]["deltalake"]["rows"].as_u64().unwrap();
        assert!(rows > 0, "version {v} reads from the bucket");
    }
    assert_eq!(read["versions"][latest.to_string()]["polars"]["keys"], json!(expected));
}

/// A partitioned table in a bucket: its partition directories hold Hive's
/// escapes (`url=%2Fdocs`), which the objects' names keep as they are, so
/// the engines find each file where the log (URL-encoded) names it.
#[test]
fn a_partitioned_table_in_a_bucket_is_read_by_other_engines_from_its_partitions() {
    let postgres = Postgres::shared();
    let s3 = S3::start("weir-partitioned");
    let cluster = Shared::new(postgres, "cluster_partitioned", &s3, "partitioned");
    let broker = broker();
    let bootstrap = broker.bootstrap_servers();
    let a = cluster.node("a");
    let token = registered_declaring(&a, cluster.dir.path(), bootstrap, "partition_by = [\"url\", \"day(ts)\"]");
    let values: Vec<String> = (0..100)
        .map(|i| {
            let url = ["/docs", "/a b?c"][i % 2];
            json!({"event_id": format!("evt-{i}"), "user_id": i, "url": url, "ts": "2026-11-29T10:00:00Z"}).to_string()
        })
        .collect();
    block_on(produce(bootstrap, "clicks", &values));
    a.wait_for_rows(&token, "events", "clicks", 100);

    let show = a.cli_json(&token, &["table", "show", "events/clicks"]);
    assert_eq!((&show["partition_by"], &show["partitions"]), (&json!(["url", "day(ts)"]), &json!(2)), "{show}");
    let (location, latest) = (show["location"].as_str().unwrap(), show["version"].as_i64().unwrap());
    let read = delta_py_with(&["read", location, "--key", "event_id"], &s3.direct_env());
    let mut expected: Vec<String> = (0..100).map(|i| format!("evt-{i}")).collect();
    expected.sort();
    for reader in ["polars", "deltalake"] {
        assert_eq!(read["versions"][latest.to_string()][reader]["keys"], json!(expected), "{reader}");
    }
}

#[test]
fn two_nodes_and_another_engines_compactions_on_one_bucket_keep_every_row_once() {
    const PARTITIONS: i64 = 4;
    let postgres = Postgres::shared();
    let s3 = S3::start("weir-foreign");
    let cluster = Shared::new(postgres, "cluster_foreign_writer", &s3, "foreign");
    let broker = Tansu::start();
    broker.create_topic("clicks", PARTITIONS as u32);
    let bootstrap = broker.address.clone();
    let a = cluster.node("a");
    let b = cluster.node("b");
    let token = registered_with(&a, cluster.dir.path(), &bootstrap, &[]);
    poll("the partitions split between the two nodes", || split_between(&b, &token, 2, PARTITIONS));

    // Both nodes commit while deltalake compacts the table in the bucket, twice.
    let (stop, producer) = steady_producer(bootstrap.clone(), 0, 20);
    let location = |n: &Server| n.cli_json(&token, &["table", "show", "events/clicks"])["location"].clone();
    let mut compacted = Vec::new();
    for round in 1..=2 {
        poll("rows committed by both nodes", || (committed_rows(&a, &token) >= 200 * round).then_some(()));
        let location = location(&a).as_str().unwrap().to_string();
        let done = delta_py_with(&["write", &location, "compact"], &s3.direct_env());
        compacted.push(done["version"].as_i64().unwrap());
    }
    let rows_then = committed_rows(&a, &token);
    poll("commits after the compactions", || (committed_rows(&a, &token) > rows_then + 100).then_some(()));
    stop.store(true, Ordering::SeqCst);
    let total = producer.join().unwrap();
    a.wait_for_rows(&token, "events", "clicks", total as u64);

    let mut expected: Vec<String> = (0..total).map(|i| format!("evt-{i}")).collect();
    expected.sort();
    let table = b.cli_json(&token, &["table", "show", "events/clicks"]);
    let latest = table["delta_version"].as_i64().unwrap();
    assert!(latest > table["version"].as_i64().unwrap(), "the log holds the other engine's commits too: {table}");
    assert!(table["log"].is_null(), "every version is in the log: {table}");
    let location = table["location"].as_str().unwrap();
    let read =
        delta_py_with(&["read", location, "--key", "event_id", "--versions", &latest.to_string()], &s3.direct_env());
    for reader in ["polars", "deltalake"] {
        let seen = &read["versions"][latest.to_string()][reader]["keys"];
        assert_eq!(seen, &json!(expected), "{reader} reads every message once ({compacted:?} compacted)");
    }
    let export = cluster.dir.path().join("all.parquet");
    b.cli_ok(&token, &["table", "export", "events/clicks", "-o", export.to_str().unwrap()]);
    let mut ids = event_ids(&export);
    ids.sort();
    assert_eq!(ids, expected, "weir's own export reads the whole log");
    let metrics = a.text("/metrics", common::serve::ADMIN);
    assert!(!metrics.contains("weir_table_versions_unlogged{"), "no version left out of the log: {metrics}");
}

/// Two nodes commit batches of one Iceberg table at once (the consumer group
/// splits its partitions between them), each moving the table's pointer in
/// the PostgreSQL catalog by compare-and-set, the loser making its metadata
/// again: pyiceberg's SqlCatalog on the same database, reading the bucket,
/// finds a snapshot for every version and every row once.
#[test]
fn two_nodes_commit_one_iceberg_table_through_the_catalogs_compare_and_set_every_row_once() {
    const PARTITIONS: i64 = 4;
    let postgres = Postgres::shared();
    let s3 = S3::start("weir-iceberg");
    let cluster = Shared::new(postgres, "cluster_iceberg", &s3, "iceberg");
    let broker = Tansu::start();
    broker.create_topic("clicks", PARTITIONS as u32);
    let bootstrap = broker.address.clone();
    let a = cluster.node("a");
    let b = cluster.node("b");
    let token = registered_declaring(&a, cluster.dir.path(), &bootstrap, "table_format = \"iceberg\"");
    poll("the partitions split between the two nodes", || split_between(&b, &token, 2, PARTITIONS));

    let (stop, producer) = steady_producer(bootstrap.clone(), 0, 20);
    poll("rows committed by both nodes", || (committed_rows(&a, &token) >= 600).then_some(()));
    stop.store(true, Ordering::SeqCst);
    let total = producer.join().unwrap();
    let versions = a.wait_for_rows(&token, "events", "clicks", total as u64);
    let latest = versions.as_array().unwrap().last().unwrap()["version"].as_i64().unwrap();

    let database = postgres.url("cluster_iceberg");
    let read = iceberg_py_with(&["read", &database, "acme.events.clicks", "--columns", "event_id"], &s3.direct_env());
    let ids: Vec<i64> = read["snapshots"].as_array().unwrap().iter().map(|s| s["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, (1..=latest).collect::<Vec<_>>(), "a snapshot for every version, each on the one before");
    assert_eq!(read["current"], latest);
    let mut expected: Vec<String> = (0..total).map(|i| format!("evt-{i}")).collect();
    expected.sort();
    for reader in ["pyiceberg", "polars"] {
        let mut seen: Vec<String> =
            read["rows"][reader].as_array().unwrap().iter().map(|r| r[0].as_str().unwrap().to_string()).collect();
        seen.sort();
        assert_eq!(seen, expected, "{reader} reads every message once");
    }
    assert!(read["location"].as_str().unwrap().starts_with("s3://weir-iceberg/iceberg/"), "{}", read["location"]);
}

/// What `/metrics` on `node` says each live node holds of `publisher`'s partitions.
fn held_by_live_nodes(metrics: &str, collection: &str, publisher: &str) -> Vec<(String, f64)> {
    let live: Vec<String> = many::series(metrics, "weir_cluster_node_live", &[])
        .into_iter()
        .filter(|(_, up)| *up == 1.0)
        .map(|(labels, _)| labels)
        .collect();
    let key = format!("/{collection}/{publisher}\"");
    many::series(metrics, "weir_cluster_partitions", &[])
        .into_iter()
        .filter(|(labels, _)| labels.contains(&key) && live.iter().any(|node| labels.contains(node.as_str())))
        .collect()
}

#[test]
fn fifty_publishers_on_five_connections_share_five_consumers_a_node_split_between_nodes_once() {
    const COLLECTIONS: usize = 5;
    const PER: usize = 10;
    const PARTITIONS: i32 = 2;
    let postgres = Postgres::shared();
    let s3 = S3::start("weir-shared");
    let cluster = Shared::new(postgres, "cluster_shared_consumers", &s3, "shared");
    let broker = broker();
    let bootstrap = broker.bootstrap_servers().to_string();
    let (a, b) = (cluster.node("a"), cluster.node("b"));
    let token = a.tenant("acme", json!({"max_publishers": 100}));
    let collection = |i: usize| format!("c{}", i / PER);
    for c in 0..COLLECTIONS {
        many::collection(&a, &token, &format!("c{c}"), &many::connection(&bootstrap));
    }
    let sha = many::plugin(&a, &token, &common::guest("passthrough"));
    for i in 0..COLLECTIONS * PER {
        broker.create_topic(&format!("t{i}"), PARTITIONS).unwrap();
        many::register(&a, &token, &collection(i), i, &sha);
    }

    // Each node: one consumer per connection; between them, every partition of every publisher once.
    let split = |node: &Server| {
        let metrics = node.text("/metrics", common::serve::ADMIN);
        let mut per_node: std::collections::BTreeMap<String, f64> = Default::default();
        for i in 0..COLLECTIONS * PER {
            let held = held_by_live_nodes(&metrics, &collection(i), &format!("p{i}"));
            if held.iter().map(|(_, n)| n).sum::<f64>() != f64::from(PARTITIONS) {
                return None;
            }
            for (labels, n) in held {
                let node = labels.split("node=\"").nth(1).unwrap().split('"').next().unwrap().to_string();
                *per_node.entry(node).or_default() += n;
            }
        }
        Some(per_node)
    };
    let shares = poll("every partition held once, by both nodes", || {
        split(&a).filter(|s| s.len() == 2 && s.values().all(|n| *n > 0.0))
    });
    eprintln!("partitions held by each node: {shares:?}");
    for node in [&a, &b] {
        let health = node.http("GET", "/health", None, None).1;
        assert_eq!(health["kafka_consumers"], COLLECTIONS, "one consumer per connection on each node: {health}");
    }

    // Messages to every topic; B killed with -9 halfway: A takes its partitions on and resumes from the catalog.
    let produce_round = |round: usize| {
        for i in 0..COLLECTIONS * PER {
            block_on(produce(&bootstrap, &format!("t{i}"), &clicks(i * 1000 + round * 10, 10)));
        }
    };
    produce_round(0);
    produce_round(1);
    b.kill();
    produce_round(2);
    poll("A holding every partition", || split(&a).filter(|s| s.len() == 1));
    produce_round(3);
    let rows = |i: usize| {
        let path = format!("/v1/collections/{}/tables/t{i}/versions", collection(i));
        match a.http("GET", &path, Some(&token), None) {
            (200, Value::Array(versions)) => versions.iter().map(|v| v["rows"].as_u64().unwrap()).sum(),
            _ => 0,
        }
    };
    for i in 0..COLLECTIONS * PER {
        poll(&format!("table t{i}'s 40 rows"), || (rows(i) >= 40).then_some(()));
    }
    // Settled: no table has a row more (a batch committed twice would show here), and
    // one table of each connection holds exactly its messages, each once.
    std::thread::sleep(Duration::from_secs(3));
    for i in 0..COLLECTIONS * PER {
        assert_eq!(rows(i), 40, "table t{i}: every message once across the kill");
    }
    for i in (0..COLLECTIONS * PER).step_by(PER) {
        let export = cluster.dir.path().join(format!("t{i}.parquet"));
        a.cli_ok(&token, &["table", "export", &format!("{}/t{i}", collection(i)), "-o", export.to_str().unwrap()]);
        let mut ids = event_ids(&export);
        ids.sort();
        let mut expected: Vec<String> = (i * 1000..i * 1000 + 40).map(|n| format!("evt-{n}")).collect();
        expected.sort();
        assert_eq!(ids, expected, "table t{i}: every message once across the kill");
    }
}
