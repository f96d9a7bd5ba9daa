//! The catalog's contract, run against both databases it lives in: SQLite in
//! the data directory (the embedded default) and PostgreSQL (a cluster's
//! shared catalog, a throwaway server started by the harness). Every test
//! below runs once per database; "two nodes" are two catalogs opened on the
//! same database, as two `weir serve` processes would.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};

use common::postgres::Postgres;
use weir::catalog::{
    BatchCommit, Catalog, CatalogError, DataFile, Execution, ModuleFacts, NewVersion, PartitionRange, Quotas, Timings,
    Txn,
};
use weir::formats::{DeadLetter, RawMessage};
use weir::publisher::source::{KafkaConnection, SaslCredentials, SaslMechanism};
use weir::secrets::{Keyring, default_key_file};

/// Where a test's catalog lives: opens it as many times as a test has nodes.
struct Place {
    /// `None`: SQLite in the data directory.
    url: Option<String>,
    dir: tempfile::TempDir,
}

impl Place {
    fn sqlite() -> Self {
        Self { url: None, dir: tempfile::tempdir().unwrap() }
    }

    fn postgres(test: &str) -> Self {
        Self { url: Some(Postgres::shared().database(test)), dir: tempfile::tempdir().unwrap() }
    }

    /// A node's catalog. Nodes share the database and the secret key; each
    /// has a data directory of its own only where the database is a server.
    fn open(&self) -> Catalog {
        let dir = self.dir.path();
        let (keyring, _) = Keyring::open(&default_key_file(dir), true).unwrap();
        Catalog::open_at(self.url.as_deref(), dir, keyring).unwrap()
    }
}

/// Each contract test, once against SQLite and once against PostgreSQL.
macro_rules! contract {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $( #[test] fn $name() { super::$name(&super::Place::sqlite()) } )*
        }
        mod postgres {
            $( #[test] fn $name() { super::$name(&super::Place::postgres(stringify!($name))) } )*
        }
    };
}

contract!(
    commit_is_compare_and_set_on_offsets,
    two_nodes_racing_for_a_partition_commit_each_range_once,
    two_nodes_committing_other_partitions_of_one_table_both_commit,
    a_batch_commits_its_version_dead_letters_and_execution_together,
    tables_versions_and_compactions,
    the_schema_is_migrated_once_and_kept_across_opens,
    nodes_opening_a_new_catalog_at_once_all_open_it_with_one_key,
    tenants_tokens_and_their_lifecycle,
    collections_keep_their_connection_sealed,
    plugins_and_publishers,
    deleting_a_collection_removes_what_it_committed,
);

fn execution(publisher: &str) -> Execution {
    Execution {
        id: 0,
        publisher: publisher.into(),
        status: "committed".into(),
        rollover_reason: "messages".into(),
        rows_in: 10,
        rows_out: 10,
        dead_letters: 0,
        offsets: vec![],
        table_version: None,
        started_at_ms: 1_700_000_000_000,
        timings_ms: Timings::default(),
        plugin_log: serde_json::json!([]),
        error: None,
    }
}

fn schema(columns: &[&str]) -> serde_json::Value {
    let fields: Vec<_> = columns
        .iter()
        .map(|c| serde_json::json!({ "name": c, "type": "string", "nullable": true, "metadata": {} }))
        .collect();
    serde_json::json!({ "type": "struct", "fields": fields })
}

fn version(file: &str, rows: u64, columns: &[&str]) -> NewVersion {
    NewVersion {
        table: "t".into(),
        files: vec![DataFile {
            path: file.into(),
            size: 100,
            rows,
            stats: Some("{\"numRecords\":1}".into()),
            ..Default::default()
        }],
        rows,
        schema: schema(columns),
        txns: vec![Txn { app_id: "p-t-0".into(), version: rows as i64 }],
        partition_by: vec![],
        iceberg: None,
    }
}

fn commit(
    catalog: &Catalog,
    ranges: &[PartitionRange],
    version: Option<NewVersion>,
) -> Result<(i64, Option<i64>), CatalogError> {
    let exec = execution("acme/events/p");
    catalog.commit(&BatchCommit {
        collection: "acme/events",
        publisher: "acme/events/p",
        topic: "t",
        versions: version.into_iter().collect(),
        ranges,
        execution: &exec,
        dead_letters: &[],
        rerun: &[],
    })
}

fn range(partition: i32, first: i64, last: i64, expected: Option<i64>) -> PartitionRange {
    PartitionRange { partition, first, last, expected }
}

fn commit_is_compare_and_set_on_offsets(place: &Place) {
    let catalog = place.open();
    let first = [range(0, 0, 9, None)];
    assert_eq!(commit(&catalog, &first, Some(version("a", 10, &["x"]))).unwrap().1, Some(1));
    assert_eq!(catalog.offsets("acme/events/p", "t").unwrap(), BTreeMap::from([(0, 10)]));
    // The same batch again (a second worker, or a replay) is refused and changes nothing.
    let err = commit(&catalog, &first, Some(version("a", 10, &["x"]))).unwrap_err();
    assert!(matches!(err, CatalogError::OverlapsCommitted { partition: 0, first: 0, next: 10, .. }), "{err}");
    // A batch that began before another worker's commit is refused too.
    let err = commit(&catalog, &[range(0, 10, 12, None)], None).unwrap_err();
    assert!(
        matches!(err, CatalogError::ConflictingOffsets { partition: 0, expected: None, found: Some(10), .. }),
        "{err}"
    );
    // So is one that expected the offset at a partition nothing committed yet.
    let err = commit(&catalog, &[range(1, 5, 9, Some(5))], None).unwrap_err();
    assert!(matches!(err, CatalogError::ConflictingOffsets { partition: 1, found: None, .. }), "{err}");
    // A batch that re-reads committed offsets is refused, even when it began from the current offset.
    let err = commit(&catalog, &[range(0, 5, 19, Some(10))], None).unwrap_err();
    assert!(matches!(err, CatalogError::OverlapsCommitted { first: 5, next: 10, .. }), "{err}");
    // One refused partition refuses the whole batch: the other partition's offset did not move.
    let err = commit(&catalog, &[range(2, 0, 4, None), range(0, 3, 4, Some(10))], None).unwrap_err();
    assert!(matches!(err, CatalogError::OverlapsCommitted { partition: 0, .. }), "{err}");
    assert_eq!(catalog.offsets("acme/events/p", "t").unwrap(), BTreeMap::from([(0, 10)]));
    assert_eq!(commit(&catalog, &[range(0, 10, 19, Some(10))], Some(version("b", 10, &["x"]))).unwrap().1, Some(2));
    let versions = catalog.versions("acme/events", "t").unwrap();
    assert_eq!(versions.iter().map(|v| v.version).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(catalog.executions("acme/events/p").unwrap().len(), 2, "refused commits left no execution behind");
}

const ROUNDS: i64 = 40;

/// Two nodes (two catalogs on one database) each commit `ranges(node, round)`
/// as a version, [`ROUNDS`] times, both starting each round at the same
/// moment. Returns each node's commits and node 0's catalog.
fn two_nodes_in_lockstep(
    place: &Place,
    ranges: fn(usize, i64) -> Vec<PartitionRange>,
) -> (Vec<Vec<Result<(i64, Option<i64>), CatalogError>>>, Arc<Catalog>) {
    let nodes = [Arc::new(place.open()), Arc::new(place.open())];
    let barrier = Arc::new(Barrier::new(2));
    let handles: Vec<_> = nodes
        .iter()
        .enumerate()
        .map(|(n, catalog)| {
            let (catalog, barrier) = (catalog.clone(), barrier.clone());
            std::thread::spawn(move || {
                (0..ROUNDS)
                    .map(|round| {
                        let ranges = ranges(n, round);
                        let rows = ranges.iter().map(|r| (r.last - r.first + 1) as u64).sum();
                        barrier.wait();
                        let committed = commit(&catalog, &ranges, Some(version(&format!("{n}-{round}"), rows, &["x"])));
                        barrier.wait();
                        committed
                    })
                    .collect()
            })
        })
        .collect();
    (handles.into_iter().map(|h| h.join().unwrap()).collect(), nodes[0].clone())
}

/// Two nodes both read partitions 0 and 1 around a rebalance and commit the
/// same ranges at the same moment, round after round: each range is
/// committed exactly once, by one of them, and the other is told to re-read.
fn two_nodes_racing_for_a_partition_commit_each_range_once(place: &Place) {
    let (commits, catalog) = two_nodes_in_lockstep(place, |_, round| {
        let expected = (round > 0).then_some(round * 10);
        vec![range(0, round * 10, round * 10 + 9, expected), range(1, round * 10, round * 10 + 9, expected)]
    });
    let mut won = 0;
    for (n, node) in commits.iter().enumerate() {
        for (round, committed) in node.iter().enumerate() {
            match committed {
                Ok(_) => won += 1,
                Err(CatalogError::ConflictingOffsets { .. } | CatalogError::OverlapsCommitted { .. }) => {}
                Err(e) => panic!("node {n}, round {round}: {e}"),
            }
        }
    }
    assert_eq!(won, ROUNDS, "every round has exactly one winner");
    assert_eq!(catalog.offsets("acme/events/p", "t").unwrap(), BTreeMap::from([(0, ROUNDS * 10), (1, ROUNDS * 10)]));
    let versions = catalog.versions("acme/events", "t").unwrap();
    assert_eq!(versions.len() as i64, ROUNDS);
    assert_eq!(versions.iter().map(|v| v.rows).sum::<u64>(), ROUNDS as u64 * 20, "no range committed twice");
    assert_eq!(catalog.executions("acme/events/p").unwrap().len() as i64, ROUNDS);
}

/// Two nodes, each holding its own partition of one topic, commit versions of
/// the same table at the same moment, round after round: neither is refused
/// (regression: both numbered their version `MAX + 1` and the second failed on
/// the table's primary key, a failed attempt and a backoff), and the versions
/// follow one another.
fn two_nodes_committing_other_partitions_of_one_table_both_commit(place: &Place) {
    let (commits, catalog) = two_nodes_in_lockstep(place, |n, round| {
        vec![range(n as i32, round * 10, round * 10 + 9, (round > 0).then_some(round * 10))]
    });
    for (n, node) in commits.iter().enumerate() {
        for (round, committed) in node.iter().enumerate() {
            assert!(committed.is_ok(), "node {n}, round {round}: {committed:?}");
        }
    }
    assert_eq!(catalog.offsets("acme/events/p", "t").unwrap(), BTreeMap::from([(0, ROUNDS * 10), (1, ROUNDS * 10)]));
    let versions: Vec<i64> = catalog.versions("acme/events", "t").unwrap().iter().map(|v| v.version).collect();
    assert_eq!(versions, (1..=2 * ROUNDS).collect::<Vec<_>>());
}

fn a_batch_commits_its_version_dead_letters_and_execution_together(place: &Place) {
    let catalog = place.open();
    let bad = |offset: i64, key: Option<&[u8]>| DeadLetter {
        message: RawMessage::new(
            3,
            offset,
            Some(1_700_000_000_123),
            key,
            Some(&[0xff, 0x00, b'{']),
            vec![("trace".into(), Some(vec![1, 2])), ("empty".into(), None)],
        ),
        error: "expected value at line 1 column 1".into(),
    };
    let dead = [bad(7, Some(b"k")), bad(8, None)];
    let mut exec = execution("acme/events/p");
    exec.dead_letters = 2;
    exec.offsets = vec![range(3, 0, 9, None)];
    exec.plugin_log = serde_json::json!([{ "level": "info", "message": "hello" }]);
    let (id, version) = catalog
        .commit(&BatchCommit {
            collection: "acme/events",
            publisher: "acme/events/p",
            topic: "t",
            versions: vec![version("a", 8, &["x"])],
            ranges: &[range(3, 0, 9, None)],
            execution: &exec,
            dead_letters: &dead,
            rerun: &[],
        })
        .unwrap();
    assert_eq!(version, Some(1));
    let stored = catalog.dead_letters("acme/events/p").unwrap();
    assert_eq!(stored.len(), 2);
    assert_eq!((stored[0].partition, stored[0].offset, stored[0].execution), (3, 7, id));
    assert_eq!(stored[0].key.as_deref(), Some(&b"k"[..]));
    assert_eq!(stored[1].key, None);
    assert_eq!(stored[0].value.as_deref(), Some(&[0xff, 0x00, b'{'][..]), "values are kept byte for byte");
    assert_eq!(stored[0].headers, vec![("trace".to_string(), Some(vec![1, 2])), ("empty".to_string(), None)]);
    assert_eq!(stored[0].timestamp, Some(1_700_000_000_123));

    let recorded = catalog.execution(id).unwrap().unwrap();
    assert_eq!((recorded.table_version, recorded.dead_letters, recorded.rows_in), (Some(1), 2, 10));
    assert_eq!(recorded.offsets, vec![range(3, 0, 9, None)]);
    assert_eq!(recorded.plugin_log, exec.plugin_log);
    let timings = Timings { decode: 1.5, publish: 2.25, commit: 3.0, ..Timings::default() };
    catalog.set_timings(id, &timings).unwrap();
    assert_eq!(catalog.execution(id).unwrap().unwrap().timings_ms.publish, 2.25);

    // A failed batch is recorded with nothing committed.
    let mut failed = execution("acme/events/p");
    failed.status = "failed".into();
    failed.error = Some("the plugin trapped".into());
    let failed_id = catalog.record(&failed).unwrap();
    assert!(failed_id > id);
    let recent = catalog.recent_executions("acme/events/p", 1).unwrap();
    assert_eq!((recent.len(), recent[0].id, recent[0].error.as_deref()), (1, failed_id, Some("the plugin trapped")));
    assert_eq!(catalog.executions("acme/events/p").unwrap().iter().map(|e| e.id).collect::<Vec<_>>(), [id, failed_id]);
    assert!(catalog.execution(failed_id + 100).unwrap().is_none());
}

fn tables_versions_and_compactions(place: &Place) {
    let catalog = place.open();
    assert!(catalog.table_record("acme/events", "t").unwrap().is_none());
    commit(&catalog, &[range(0, 0, 9, None)], Some(version("a", 10, &["x"]))).unwrap();
    // A later version may add a column; its schema is kept with it.
    commit(&catalog, &[range(0, 10, 19, Some(10))], Some(version("b", 5, &["x", "y"]))).unwrap();
    // It may not drop one.
    let err = commit(&catalog, &[range(0, 20, 29, Some(20))], Some(version("c", 5, &["y"]))).unwrap_err();
    assert!(matches!(err, CatalogError::Schema(_)), "{err}");
    assert_eq!(
        catalog.offsets("acme/events/p", "t").unwrap(),
        BTreeMap::from([(0, 20)]),
        "a refused version moves no offset"
    );

    let versions = catalog.versions("acme/events", "t").unwrap();
    assert_eq!(versions.len(), 2);
    assert_eq!(
        versions[0].files,
        vec![DataFile {
            path: "a".into(),
            size: 100,
            rows: 10,
            stats: Some("{\"numRecords\":1}".into()),
            ..Default::default()
        }]
    );
    assert_eq!(versions[1].txns, vec![Txn { app_id: "p-t-0".into(), version: 5 }]);
    assert!(versions[0].schema.is_some() && versions[1].schema.is_some());
    assert_eq!(catalog.versions_after("acme/events", "t", 1).unwrap().len(), 1);

    let record = catalog.table_record("acme/events", "t").unwrap().unwrap();
    assert_eq!(record.delta_id.len(), 36);
    assert_eq!(catalog.table_record("acme/events", "t").unwrap().unwrap(), record, "a table keeps its Delta id");
    assert_eq!(catalog.all_tables().unwrap(), vec![("acme/events".to_string(), "t".to_string())]);

    let live: Vec<DataFile> = versions.iter().flat_map(|v| v.files.clone()).collect();
    let merged = [DataFile { path: "ab".into(), size: 150, rows: 15, stats: None, ..Default::default() }];
    assert_eq!(catalog.commit_compaction("acme/events", "t", &merged, &live).unwrap(), 3);
    let err = catalog.commit_compaction("acme/events", "t", &merged, &live).unwrap_err();
    assert!(matches!(err, CatalogError::Exists(_)), "a file is compacted once: {err}");
    let compacted = catalog.versions_after("acme/events", "t", 2).unwrap();
    assert_eq!((compacted[0].execution, compacted[0].rows, compacted[0].removed.len()), (None, 0, 2));

    let summary = catalog.tables("acme/events").unwrap();
    assert_eq!(summary.len(), 1);
    assert_eq!(
        (summary[0].name.as_str(), summary[0].versions, summary[0].latest_version, summary[0].rows),
        ("t", 3, Some(3), 15)
    );
    assert!(catalog.tables("acme/other").unwrap().is_empty());
}

fn the_schema_is_migrated_once_and_kept_across_opens(place: &Place) {
    let first = place.open();
    let tenant = first.create_tenant("acme", &Quotas::default()).unwrap();
    commit(&first, &[range(0, 0, 9, None)], Some(version("a", 10, &["x"]))).unwrap();
    assert!(first.add_setting("k", "v1").unwrap());
    assert!(!first.add_setting("k", "v2").unwrap(), "a setting is added once");
    drop(first);
    // Opened again (a restart, or another node joining): nothing is migrated twice, everything is there.
    let again = place.open();
    assert_eq!(again.offsets("acme/events/p", "t").unwrap(), BTreeMap::from([(0, 10)]));
    assert_eq!(again.tenant("acme").unwrap().unwrap().id, tenant.id);
    assert_eq!(again.setting("k").unwrap().as_deref(), Some("v1"));
    assert_eq!(again.setting("missing").unwrap(), None);
}

/// Processes started together on a new data directory (a service and a CLI
/// command, a benchmark and the worker it watches): each creates the schema
/// and the secret key if missing. One does; the others use what it made.
fn nodes_opening_a_new_catalog_at_once_all_open_it_with_one_key(place: &Place) {
    const NODES: usize = 6;
    let barrier = Barrier::new(NODES);
    let nodes: Vec<Catalog> = std::thread::scope(|s| {
        let opening: Vec<_> = (0..NODES)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    place.open()
                })
            })
            .collect();
        opening.into_iter().map(|node| node.join().expect("every node opens the new catalog")).collect()
    });
    // One schema, and one key: what one node seals, every other reads.
    let acme = nodes[0].create_tenant("acme", &Quotas::default()).unwrap();
    nodes[1].create_collection(&acme, "events", "sources", Some(&connection()), None).unwrap();
    for node in &nodes {
        assert_eq!(node.collection(&acme, "events").unwrap().unwrap().connection, Some(connection()));
    }
}

fn tenants_tokens_and_their_lifecycle(place: &Place) {
    let catalog = place.open();
    let quotas = Quotas { max_publishers: 3, ..Quotas::default() };
    let acme = catalog.create_tenant("acme", &quotas).unwrap();
    let err = catalog.create_tenant("acme", &Quotas::default()).unwrap_err();
    assert!(matches!(err, CatalogError::Exists(ref what) if what == "tenant `acme`"), "{err}");
    let beta = catalog.create_tenant("beta", &Quotas::default()).unwrap();
    assert_ne!(acme.id, beta.id);
    assert_eq!(catalog.tenants().unwrap().iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["acme", "beta"]);
    assert_eq!(catalog.tenant("acme").unwrap().unwrap().quotas, quotas);
    assert!(catalog.tenant("nobody").unwrap().is_none());

    let sha = "ab".repeat(32);
    let info = catalog.add_token(acme.id, &sha, Some(i64::MAX)).unwrap();
    assert_eq!(info.id, "ab".repeat(6));
    let (tenant, token) = catalog.tenant_by_token(&sha).unwrap().unwrap();
    assert_eq!((tenant.name.as_str(), token.expires_at_ms), ("acme", Some(i64::MAX)));
    assert!(catalog.tokens(acme.id).unwrap()[0].last_used_ms.is_some(), "a use is recorded");
    assert!(catalog.tenant_by_token(&"cd".repeat(32)).unwrap().is_none());
    assert!(!catalog.revoke_token(beta.id, &info.id).unwrap(), "a tenant revokes only its own tokens");
    assert!(catalog.revoke_token(acme.id, &info.id).unwrap());
    let (_, revoked) = catalog.tenant_by_token(&sha).unwrap().unwrap();
    assert!(revoked.revoked_at_ms.is_some() && !revoked.usable(weir::catalog::now_ms()));
}

fn connection() -> KafkaConnection {
    KafkaConnection {
        bootstrap_servers: "b:9092".into(),
        credentials: Some(SaslCredentials {
            mechanism: SaslMechanism::ScramSha512,
            username: "alice".into(),
            password: "pw-77c1".into(),
        }),
        ..KafkaConnection::default()
    }
}

fn collections_keep_their_connection_sealed(place: &Place) {
    let catalog = place.open();
    let acme = catalog.create_tenant("acme", &Quotas::default()).unwrap();
    let events = catalog.create_collection(&acme, "events", "sources", Some(&connection()), None).unwrap();
    let err = catalog.create_collection(&acme, "events", "sources", None, None).unwrap_err();
    assert!(matches!(err, CatalogError::Exists(_)), "{err}");
    catalog.create_collection(&acme, "bare", "sources", None, None).unwrap();
    let read = catalog.collection(&acme, "events").unwrap().unwrap();
    assert_eq!((read.id, read.group.as_str(), read.connection), (events.id, "sources", Some(connection())));
    assert_eq!(
        catalog.collections(&acme).unwrap().iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["bare", "events"]
    );

    let mut changed = connection();
    changed.bootstrap_servers = "c:9092".into();
    catalog.set_connection(&events, &changed).unwrap();
    assert_eq!(catalog.collection(&acme, "events").unwrap().unwrap().connection, Some(changed.clone()));

    // Another node with the same key reads it; the password is never stored in clear.
    let other = place.open();
    assert_eq!(other.collection(&acme, "events").unwrap().unwrap().connection, Some(changed.clone()));
    let rotation = catalog.rotate_secret_key().unwrap();
    assert_eq!(rotation.connections_resealed, 1);
    assert_eq!(catalog.collection(&acme, "events").unwrap().unwrap().connection, Some(changed));
}

fn plugins_and_publishers(place: &Place) {
    let catalog = place.open();
    let acme = catalog.create_tenant("acme", &Quotas::default()).unwrap();
    let beta = catalog.create_tenant("beta", &Quotas::default()).unwrap();
    let sha = "0f".repeat(32);
    let module = ModuleFacts { sha256: &sha, size: 1234, language: "Rust", contract: "0.2.1" };
    assert!(catalog.add_plugin(&acme, module, None).unwrap());
    assert!(!catalog.add_plugin(&acme, module, None).unwrap(), "an upload of the same module again adds nothing");
    assert!(catalog.add_plugin(&beta, module, Some("std")).unwrap(), "tenants' modules are apart");
    let stored = catalog.plugin(&acme, &sha).unwrap().unwrap();
    assert_eq!(
        (stored.size, stored.language.as_deref(), stored.contract.as_deref()),
        (1234, Some("Rust"), Some("0.2.1"))
    );
    assert_eq!(catalog.plugins(&acme).unwrap().len(), 1);
    assert!(catalog.plugin(&acme, &"11".repeat(32)).unwrap().is_none());
    // Names: per tenant, moved by the next push under them.
    assert_eq!(catalog.plugin_named(&beta, "std").unwrap(), Some(sha.clone()));
    assert_eq!(catalog.plugin_named(&acme, "std").unwrap(), None);
    let newer = "1e".repeat(32);
    let module = ModuleFacts { sha256: &newer, size: 99, language: "Python", contract: "0.2.1" };
    assert!(catalog.add_plugin(&beta, module, Some("std")).unwrap());
    assert_eq!(catalog.plugin_named(&beta, "std").unwrap(), Some(newer.clone()));
    let listed = catalog.plugins(&beta).unwrap();
    let names: Vec<(&str, Vec<String>)> = listed.iter().map(|m| (m.sha256.as_str(), m.names.clone())).collect();
    assert_eq!(names, [(sha.as_str(), vec![]), (newer.as_str(), vec!["std".to_string()])]);

    let events = catalog.create_collection(&acme, "events", "g", Some(&connection()), None).unwrap();
    catalog.put_publisher(&events, "clicks", "declaration 1", &sha, false).unwrap();
    let err = catalog.put_publisher(&events, "clicks", "declaration 2", &sha, false).unwrap_err();
    assert!(matches!(err, CatalogError::Exists(ref what) if what == "publisher `events/clicks`"), "{err}");
    catalog.put_publisher(&events, "clicks", "declaration 2", &sha, true).unwrap();
    let publisher = catalog.publisher(&events, "clicks").unwrap().unwrap();
    assert_eq!((publisher.declaration.as_str(), publisher.paused), ("declaration 2", false));
    assert_eq!(publisher.key(), "acme/events/clicks");
    assert_eq!(publisher.collection.connection, Some(connection()));
    catalog.set_paused(&publisher, true).unwrap();
    assert!(catalog.publisher(&events, "clicks").unwrap().unwrap().paused);
    catalog.put_publisher(&events, "views", "declaration 3", &sha, false).unwrap();
    assert_eq!(
        catalog.publishers(&events).unwrap().iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        ["clicks", "views"]
    );
    assert_eq!(catalog.tenant_publishers(&beta).unwrap().len(), 0);
    assert_eq!(catalog.all_publishers().unwrap().len(), 2);
    catalog.delete_publisher(&publisher).unwrap();
    assert!(catalog.publisher(&events, "clicks").unwrap().is_none());
}

fn deleting_a_collection_removes_what_it_committed(place: &Place) {
    let catalog = place.open();
    let acme = catalog.create_tenant("acme", &Quotas::default()).unwrap();
    let events = catalog.create_collection(&acme, "events", "g", None, None).unwrap();
    let other = catalog.create_collection(&acme, "events2", "g", None, None).unwrap();
    catalog.put_publisher(&events, "p", "d", "x", false).unwrap();
    commit(&catalog, &[range(0, 0, 9, None)], Some(version("a", 10, &["x"]))).unwrap();
    // Another collection whose name starts the same is not touched.
    let exec = execution("acme/events2/p");
    catalog
        .commit(&BatchCommit {
            collection: "acme/events2",
            publisher: "acme/events2/p",
            topic: "t",
            versions: vec![version("b", 1, &["x"])],
            ranges: &[range(0, 0, 0, None)],
            execution: &exec,
            dead_letters: &[],
            rerun: &[],
        })
        .unwrap();
    assert!(!catalog.delete_collection(&events).unwrap(), "publishers remain");
    catalog.delete_publisher(&catalog.publisher(&events, "p").unwrap().unwrap()).unwrap();
    assert!(catalog.delete_collection(&events).unwrap());
    assert!(catalog.collection(&acme, "events").unwrap().is_none());
    assert!(catalog.offsets("acme/events/p", "t").unwrap().is_empty());
    assert!(catalog.executions("acme/events/p").unwrap().is_empty());
    assert!(catalog.versions("acme/events", "t").unwrap().is_empty());
    assert_eq!(catalog.versions("acme/events2", "t").unwrap().len(), 1);
    assert_eq!(catalog.offsets("acme/events2/p", "t").unwrap(), BTreeMap::from([(0, 1)]));
    assert_eq!(catalog.collection(&acme, "events2").unwrap().unwrap().id, other.id);
}

/// A catalog whose schema a newer weir migrated is refused, not written to.
#[test]
fn sqlite_a_catalog_a_newer_weir_migrated_is_refused() {
    let place = Place::sqlite();
    drop(place.open());
    let db = rusqlite::Connection::open(place.dir.path().join("catalog.db")).unwrap();
    db.pragma_update(None, "user_version", 999).unwrap();
    drop(db);
    let (keyring, _) = Keyring::open(&default_key_file(place.dir.path()), false).unwrap();
    let err = Catalog::open_at(None, place.dir.path(), keyring).err().expect("refused");
    assert!(err.to_string().contains("at version 999, newer than this weir knows"), "{err}");
}

// PostgreSQL only: what a server brings.

/// The server restarts under a running catalog: the call in flight fails
/// with an error, the next ones reconnect, and nothing was half-committed.
#[test]
fn postgres_a_catalog_reconnects_after_the_server_restarts() {
    let server = Postgres::start();
    let port = server.port;
    let place = Place { url: Some(server.database("restart")), dir: tempfile::tempdir().unwrap() };
    let catalog = place.open();
    commit(&catalog, &[range(0, 0, 9, None)], Some(version("a", 10, &["x"]))).unwrap();
    // The restarted server is a fresh cluster: give it the same database, migrated by a new open.
    server.stop();
    let err = catalog.offsets("acme/events/p", "t").unwrap_err().to_string();
    assert!(err.contains("catalog"), "{err}");
    let server = Postgres::start_on(port);
    server.database("restart");
    drop(place.open());
    let mut reconnected = None;
    for _ in 0..50 {
        match catalog.offsets("acme/events/p", "t") {
            Ok(offsets) => {
                reconnected = Some(offsets);
                break;
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(100)),
        }
    }
    assert_eq!(reconnected, Some(BTreeMap::new()), "the catalog reconnected to the new server");
    commit(&catalog, &[range(0, 0, 9, None)], Some(version("a", 10, &["x"]))).unwrap();
    assert_eq!(catalog.offsets("acme/events/p", "t").unwrap(), BTreeMap::from([(0, 10)]));
}

#[test]
fn postgres_an_unreachable_or_malformed_catalog_url_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let open = |url: &str| {
        let (keyring, _) = Keyring::open(&default_key_file(dir.path()), true).unwrap();
        match Catalog::open_at(Some(url), dir.path(), keyring) {
            Ok(_) => panic!("opened {url}"),
            Err(e) => e.to_string(),
        }
    };
    let port = common::free_port();
    let err = open(&format!("postgres://weir:secret-pw@127.0.0.1:{port}/weir"));
    assert!(err.contains(&format!("cannot reach the catalog at postgres://weir@127.0.0.1:{port}/weir")), "{err}");
    assert!(err.contains("is PostgreSQL running"), "{err}");
    assert!(!err.contains("secret-pw"), "the password is never shown: {err}");
    let err = open("mysql://weir@127.0.0.1/weir");
    assert!(err.contains("not a catalog weir can open"), "{err}");
    let missing = Postgres::shared().url("no_such_database");
    let err = open(&missing);
    assert!(err.contains("no_such_database") && err.contains("does not exist"), "{err}");
}
