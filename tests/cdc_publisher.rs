//! A publisher whose source is PostgreSQL's change log, run as `weir stream`
//! runs it, against Debian's PostgreSQL (`wal_level = logical`) and the
//! passthrough plugin in the real sandbox: the snapshot is committed as one
//! version of each output table at the slot's consistent point, then each
//! batch of changes with its end position, one input slot (and one output
//! table) a source table; a stop and a restart, with writes running
//! throughout, leave every change in its table exactly once, the change log
//! replayed by key equal to the source table; the slot is acknowledged only
//! up to what the catalog committed.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Int32Type, Int64Type};
use common::postgres::Postgres;
use tokio::sync::{mpsc, watch};
use weir::catalog::Catalog;
use weir::publisher::change_log::{PostgresCdcSource, Snapshot, StartFrom};
use weir::sources::postgres::publisher::{self, ChangeLogPublisher};
use weir::sources::postgres::{PostgresConnection, parse_lsn};
use weir::stream::buffer::MemoryBudget;
use weir::stream::{Node, WorkerEvent, WorkerExit, WorkerOptions};

fn server() -> &'static Postgres {
    static SERVER: OnceLock<Postgres> = OnceLock::new();
    SERVER.get_or_init(Postgres::start_logical)
}

fn connection(pg: &Postgres, database: &str) -> PostgresConnection {
    pg.connection(database)
}

struct Harness {
    _dir: tempfile::TempDir,
    catalog: Arc<Catalog>,
    node: Node,
    publisher: ChangeLogPublisher,
}

impl Harness {
    fn new(conn: PostgresConnection, tables: &[&str], changes_rollover: u64) -> Self {
        Self::with_plugin(conn, tables, changes_rollover, &common::guest("passthrough"))
    }

    fn with_plugin(conn: PostgresConnection, tables: &[&str], changes_rollover: u64, component: &[u8]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let catalog = Arc::new(Catalog::open(dir.path()).unwrap());
        let runtime = Arc::new(common::runtime());
        let plugin = runtime.load(component).unwrap();
        let node = Node {
            catalog: catalog.clone(),
            runtime,
            budget: Arc::new(MemoryBudget::new(1 << 30)),
            sources: Default::default(),
        };
        let source = PostgresCdcSource {
            tables: tables.iter().map(|t| t.to_string()).collect(),
            publication: format!("weir_{}", conn.database),
            slot: format!("weir_{}", conn.database),
            snapshot: Snapshot::Initial,
            start_from: StartFrom::Tail,
            time_rollover_seconds: 1,
            size_rollover_mb: None,
            changes_rollover: Some(changes_rollover),
        };
        let publisher = ChangeLogPublisher {
            collection: "events".into(),
            name: "log".into(),
            connection: conn,
            source,
            output_tables: tables.iter().map(|t| t.to_string()).collect(),
            flush_interval_mins: 1,
            plugin,
            limits: Default::default(),
        };
        Self { _dir: dir, catalog, node, publisher }
    }

    fn start(&self) -> Running {
        let (events_tx, events) = mpsc::unbounded_channel();
        let (stop, shutdown) = watch::channel(false);
        let options = WorkerOptions { first_backoff: Duration::from_millis(100), ..WorkerOptions::default() };
        let run = publisher::run(self.publisher.clone(), self.node.clone(), options, Some(events_tx), shutdown);
        Running { events, stop, handle: tokio::spawn(run) }
    }

    /// The committed position: the end of the last transaction committed.
    fn position(&self) -> Option<u64> {
        let key = self.publisher.position_key();
        self.catalog.offsets(&self.publisher.id(), &key).unwrap().get(&0).map(|p| *p as u64)
    }

    /// Every committed row of `table`, version after version.
    fn rows(&self, table: &str) -> Vec<RecordBatch> {
        let versions = self.catalog.versions("events", table).unwrap();
        let files = versions.into_iter().flat_map(|v| v.files);
        files.flat_map(|f| weir::input::read(&self.catalog.data_dir().join(&f.path), None).unwrap().batches).collect()
    }
}

struct Running {
    events: mpsc::UnboundedReceiver<WorkerEvent>,
    stop: watch::Sender<bool>,
    handle: tokio::task::JoinHandle<anyhow::Result<WorkerExit>>,
}

impl Running {
    async fn stop(self) -> WorkerExit {
        self.stop.send(true).unwrap();
        tokio::time::timeout(Duration::from_secs(60), self.handle).await.unwrap().unwrap().unwrap()
    }
}

/// Waits until the committed position passes `lsn` (or the worker ends, which fails).
async fn committed_past(h: &Harness, running: &mut Running, lsn: u64) {
    let wait = async {
        while h.position().is_none_or(|p| p <= lsn) {
            tokio::select! {
                event = running.events.recv() => {
                    if let Some(WorkerEvent::AttemptFailed { error, .. }) = &event {
                        panic!("an attempt failed: {error}");
                    }
                    assert!(event.is_some(), "the worker ended: {:?}", (&mut running.handle).await);
                }
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(120), wait).await.expect("committed within two minutes");
}

async fn wal_now(client: &tokio_postgres::Client) -> u64 {
    let lsn: String = client.query_one("SELECT pg_current_wal_lsn()::text", &[]).await.unwrap().get(0);
    parse_lsn(&lsn).unwrap()
}

/// A table's change log replayed by key (`id`, an int8): the last image of
/// each row not deleted, its `n`. Fails on a change seen twice.
fn replay(batches: &[RecordBatch]) -> BTreeMap<i64, i32> {
    let mut changes = Vec::new();
    for batch in batches {
        let id = batch.column_by_name("id").unwrap().as_primitive::<Int64Type>();
        let n = batch.column_by_name("n").unwrap().as_primitive::<Int32Type>();
        let op = batch.column_by_name("_op").unwrap().as_string::<i32>();
        let lsn = batch.column_by_name("_lsn").unwrap().as_primitive::<Int64Type>();
        let ordinal = batch.column_by_name("_ordinal").unwrap().as_primitive::<Int64Type>();
        for row in 0..batch.num_rows() {
            let snapshot = op.value(row) == "r";
            let at = (lsn.value(row), !snapshot, if snapshot { id.value(row) } else { ordinal.value(row) });
            changes.push((at, op.value(row).to_string(), id.value(row), n.is_valid(row).then(|| n.value(row))));
        }
    }
    changes.sort_by_key(|c| c.0);
    let mut seen = HashSet::new();
    let mut state = BTreeMap::new();
    for (at, op, id, n) in changes {
        assert!(seen.insert(at), "change {at:?} ({op} of {id}) committed twice");
        match op.as_str() {
            "r" | "c" | "u" => {
                state.insert(id, n.expect("an image has n"));
            }
            "d" => {
                assert!(state.remove(&id).is_some(), "a delete of row {id}, never seen");
            }
            other => panic!("op {other}"),
        }
    }
    state
}

async fn source_rows(client: &tokio_postgres::Client, table: &str) -> BTreeMap<i64, i32> {
    let rows = client.query(&format!("SELECT id, n FROM {table}"), &[]).await.unwrap();
    rows.iter().map(|r| (r.get(0), r.get(1))).collect()
}

/// Tables `orders` (5,000 rows) and `lines` (2,000), each `id` and `n`.
async fn orders_and_lines(admin: &tokio_postgres::Client) {
    admin
        .batch_execute(
            "CREATE TABLE orders (id bigserial PRIMARY KEY, n int NOT NULL);
             INSERT INTO orders (n) SELECT g FROM generate_series(1, 5000) g;
             CREATE TABLE lines (id bigserial PRIMARY KEY, n int NOT NULL);
             INSERT INTO lines (n) SELECT g FROM generate_series(1, 2000) g;",
        )
        .await
        .unwrap();
}

/// Inserts, updates and deletes in both tables, a transaction at a time (some touching both).
async fn write(conn: PostgresConnection, from: i64, transactions: i64) {
    let client = conn.connect().await.unwrap();
    for i in from..from + transactions {
        let statement = match i % 6 {
            0 | 1 => format!("INSERT INTO orders (n) VALUES ({i})"),
            2 => format!("UPDATE orders SET n = n + 1 WHERE id = {}", (i * 7919) % 5000 + 1),
            3 => format!("DELETE FROM orders WHERE id = {}", (i * 104_729) % 5000 + 1),
            4 => format!(
                "BEGIN; INSERT INTO lines (n) VALUES ({i}); UPDATE orders SET n = -n WHERE id = {}; COMMIT",
                i % 5000 + 1
            ),
            _ => format!("DELETE FROM lines WHERE id = {}", (i * 31) % 2000 + 1),
        };
        client.batch_execute(&statement).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_snapshot_and_every_change_commit_exactly_once_across_a_restart_one_table_a_source_table() {
    let pg = server();
    pg.database("orders_db");
    let conn = connection(pg, "orders_db");
    let admin = conn.connect().await.unwrap();
    orders_and_lines(&admin).await;
    let h = Harness::new(conn.clone(), &["orders", "lines"], 200);

    // Writes run before, during and after the snapshot.
    let writer = tokio::spawn(write(conn.clone(), 0, 1500));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut running = h.start();
    writer.await.unwrap();
    committed_past(&h, &mut running, wal_now(&admin).await - 1).await;
    assert_eq!(running.stop().await, WorkerExit::Shutdown);

    let first = h.catalog.executions(&h.publisher.id()).unwrap();
    let snapshot = first.iter().min_by_key(|e| e.id).unwrap();
    assert_eq!(snapshot.rollover_reason, "snapshot");
    assert!(snapshot.rows_in >= 6800, "the snapshot is the first version: {snapshot:?}");
    assert_eq!(replay(&h.rows("orders")), source_rows(&admin, "orders").await);
    assert_eq!(replay(&h.rows("lines")), source_rows(&admin, "lines").await);

    // Stopped while the writer runs, its open batch committed; the writer goes on
    // while nothing reads, then a third run catches up.
    let running = h.start();
    let writer = tokio::spawn(write(conn.clone(), 1500, 6000));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(running.stop().await, WorkerExit::Shutdown);
    writer.await.unwrap();
    let mut running = h.start();
    committed_past(&h, &mut running, wal_now(&admin).await - 1).await;
    assert_eq!(running.stop().await, WorkerExit::Shutdown);

    assert_eq!(replay(&h.rows("orders")), source_rows(&admin, "orders").await);
    assert_eq!(replay(&h.rows("lines")), source_rows(&admin, "lines").await);
    let executions = h.catalog.executions(&h.publisher.id()).unwrap();
    let reasons: Vec<&str> = executions.iter().map(|e| e.rollover_reason.as_str()).collect();
    eprintln!("{} batches: {reasons:?}", executions.len());
    assert_eq!(reasons.iter().filter(|r| **r == "snapshot").count(), 1, "{reasons:?}");
    assert!(reasons.contains(&"messages") && reasons.len() > 20, "{reasons:?}");
    let slot = weir::sources::postgres::server::slot(&admin, "weir_orders_db").await.unwrap().unwrap();
    let confirmed = slot.confirmed_flush_lsn.unwrap();
    assert!(confirmed <= h.position().unwrap(), "the slot is acknowledged only up to what the catalog has");
    // Every output table's Delta log has every version.
    for table in ["orders", "lines"] {
        let versions = h.catalog.versions("events", table).unwrap();
        assert!(versions.iter().all(|v| v.delta_version.is_some()), "{table}: {versions:?}");
    }
}

/// `weir stream` of a change-log publisher, as a process of its own.
fn spawn(dir: &std::path::Path, crash_at: Option<&str>) -> std::process::Child {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_weir"));
    cmd.arg("stream")
        .arg(dir.join("publisher.toml"))
        .args(["--plugin", common::guest_path("passthrough").to_str().unwrap()])
        .arg("--connection-file")
        .arg(dir.join("connection.toml"))
        .arg("--data-dir")
        .arg(dir.join("data"))
        .env_remove("WEIR_CRASH_AT")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::OpenOptions::new().create(true).append(true).open(dir.join("weir.log")).unwrap());
    if let Some(point) = crash_at {
        cmd.env("WEIR_CRASH_AT", point);
    }
    cmd.spawn().unwrap()
}

/// Waits for the process to end by itself (within a minute); whether it crashed.
fn crashed(child: &mut std::process::Child) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return !status.success();
        }
        assert!(std::time::Instant::now() < deadline, "the process did not end");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_snapshot_before_and_after_its_commits_it_still_commits_every_change_exactly_once() {
    let pg = server();
    pg.database("crashes");
    let conn = connection(pg, "crashes");
    let admin = conn.connect().await.unwrap();
    orders_and_lines(&admin).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("publisher.toml"),
        "name = \"log\"\nflush_interval_mins = 1\n[source.postgres_cdc]\ntables = [\"public.orders\", \"public.lines\"]\n\
         replication_slot = \"weir_crashes\"\ntime_rollover_seconds = 1\nchanges_rollover = 150\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("connection.toml"),
        format!("kind = \"postgres-cdc-in\"\nhost = \"127.0.0.1\"\nport = {}\ndatabase = \"crashes\"\nuser = \"postgres\"\n", pg.port),
    )
    .unwrap();

    // The writer goes on until the kills are done, so that every run has changes to commit.
    let writing = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let writer = tokio::spawn({
        let writing = writing.clone();
        async move {
            let mut round = 0;
            while writing.load(std::sync::atomic::Ordering::Relaxed) {
                write(connection(server(), "crashes"), round * 300, 300).await;
                tokio::time::sleep(Duration::from_millis(300)).await;
                round += 1;
            }
        }
    });
    // Killed where it hurts, each point once or more; then at random moments.
    for point in [
        "during-snapshot",
        "before-catalog-commit",
        "after-catalog-commit",
        "after-catalog-commit",
        "before-catalog-commit",
    ] {
        let mut child = spawn(dir.path(), Some(point));
        assert!(tokio::task::block_in_place(|| crashed(&mut child)), "it crashed at {point}");
    }
    let mut rng = rand::rng();
    for _ in 0..3 {
        let mut child = spawn(dir.path(), None);
        tokio::time::sleep(Duration::from_millis(rand::Rng::random_range(&mut rng, 300..1500))).await;
        child.kill().unwrap();
        child.wait().unwrap();
    }
    writing.store(false, std::sync::atomic::Ordering::Relaxed);
    writer.await.unwrap();

    // Then it runs until the slot is acknowledged past the last write, and stops on SIGTERM.
    let target = wal_now(&admin).await;
    let mut child = spawn(dir.path(), None);
    let caught_up = async {
        loop {
            let slot = weir::sources::postgres::server::slot(&admin, "weir_crashes").await.unwrap();
            // Streaming (so past its start-up), and acknowledged past the last write.
            if slot.is_some_and(|s| s.active && s.confirmed_flush_lsn.is_some_and(|c| c >= target)) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(120), caught_up).await.expect("caught up within two minutes");
    let status = std::process::Command::new("kill").arg(child.id().to_string()).status().unwrap();
    assert!(status.success());
    let log = || std::fs::read_to_string(dir.path().join("weir.log")).unwrap();
    assert!(!tokio::task::block_in_place(|| crashed(&mut child)), "SIGTERM stops it cleanly: {}", log());

    let catalog = Catalog::open(&dir.path().join("data")).unwrap();
    let rows = |table: &str| -> Vec<RecordBatch> {
        let versions = catalog.versions("events", table).unwrap();
        let files = versions.into_iter().flat_map(|v| v.files);
        files.flat_map(|f| weir::input::read(&catalog.data_dir().join(&f.path), None).unwrap().batches).collect()
    };
    assert_eq!(replay(&rows("orders")), source_rows(&admin, "orders").await);
    assert_eq!(replay(&rows("lines")), source_rows(&admin, "lines").await);
    let snapshots = catalog.executions("events/log").unwrap();
    assert_eq!(snapshots.iter().filter(|e| e.rollover_reason == "snapshot").count(), 1, "one snapshot committed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_larger_than_a_batch_goes_through_the_plugin_in_parts_and_commits_as_one_version() {
    let pg = server();
    pg.database("big_tx");
    let conn = connection(pg, "big_tx");
    let admin = conn.connect().await.unwrap();
    admin.batch_execute("CREATE TABLE big (id bigserial PRIMARY KEY, n int NOT NULL, pad text)").await.unwrap();
    let mut h = Harness::new(conn.clone(), &["big"], 1_000_000);
    h.publisher.source.size_rollover_mb = Some(1.0);
    let mut running = h.start();
    // The slot exists (and the empty snapshot is committed) before the transaction.
    while h.position().is_none_or(|p| p == 0) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    admin
        .batch_execute("INSERT INTO big (n, pad) SELECT g, repeat('x', 60) FROM generate_series(1, 200000) g")
        .await
        .unwrap();
    committed_past(&h, &mut running, wal_now(&admin).await - 1).await;
    assert_eq!(running.stop().await, WorkerExit::Shutdown);

    let executions = h.catalog.executions(&h.publisher.id()).unwrap();
    let batch = executions.iter().find(|e| e.rows_in > 0 && e.rollover_reason != "snapshot").unwrap();
    assert_eq!((batch.rows_in, batch.rows_out), (200_000, 200_000), "one transaction, one batch");
    let calls = batch.plugin_log["lines"].as_array().unwrap().len();
    assert!(calls >= 10, "about 16 MB of changes through the plugin a megabyte at a time: {calls} calls");
    let versions = h.catalog.versions("events", "big").unwrap();
    assert_eq!(versions.iter().filter(|v| v.rows > 0).count(), 1, "one version: {versions:?}");
    assert_eq!(replay(&h.rows("big")), source_rows(&admin, "big").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_and_javascript_plugins_see_one_slot_a_source_table_too() {
    let pg = server();
    for (language, component) in
        [("python", common::python_guest("passthrough")), ("javascript", common::js_guest("passthrough"))]
    {
        let database = format!("slots_{language}");
        pg.database(&database);
        let conn = connection(pg, &database);
        let admin = conn.connect().await.unwrap();
        orders_and_lines(&admin).await;
        let h = Harness::with_plugin(conn.clone(), &["orders", "lines"], 200, &component);
        let mut running = h.start();
        write(conn.clone(), 0, 300).await;
        committed_past(&h, &mut running, wal_now(&admin).await - 1).await;
        assert_eq!(running.stop().await, WorkerExit::Shutdown);

        assert_eq!(replay(&h.rows("orders")), source_rows(&admin, "orders").await, "{language}");
        assert_eq!(replay(&h.rows("lines")), source_rows(&admin, "lines").await, "{language}");
        let snapshot = &h.catalog.executions(&h.publisher.id()).unwrap()[0];
        let said: Vec<&str> =
            snapshot.plugin_log["lines"].as_array().unwrap().iter().filter_map(|l| l["message"].as_str()).collect();
        // Slot by slot, each into its own table (the writer may have come first: more rows than created).
        let [orders, lines] = said[..] else { panic!("{language}: {said:?}") };
        assert!(orders.starts_with("passed 50") && orders.ends_with(" rows from orders into orders"), "{orders}");
        assert!(lines.starts_with("passed 20") && lines.ends_with(" rows from lines into lines"), "{lines}");
    }
}
