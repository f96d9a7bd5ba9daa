//! What a batch's catalog commit costs on each database: SQLite in the data
//! directory (WAL, synchronous=FULL) and PostgreSQL (a server on loopback
//! started here, fsync on, as a real one runs). One node committing batches
//! of three partitions back to back, then two nodes racing for the same
//! partitions (one wins each round, the other is refused).
//! `cargo bench -p weir --bench catalog` (needs Debian's `postgresql`, which
//! `scripts/setup.sh` installs).

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use weir::catalog::{BatchCommit, Catalog, DataFile, Execution, NewVersion, PartitionRange, Timings, Txn};
use weir::secrets::{Keyring, default_key_file};

#[path = "../../tests/common/postgres.rs"]
#[allow(dead_code)]
mod postgres;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

const COMMITS: i64 = 500;
const PARTITIONS: i32 = 3;

fn main() {
    let server = postgres::Postgres::start_durable();
    println!("catalog commit: one batch (3 partitions, a table version, its execution), {COMMITS} in a row\n");
    println!("{:<44} {:>9} {:>9} {:>9} {:>11}", "database", "mean ms", "p50 ms", "p99 ms", "commits/s");
    for (name, url) in [
        ("SQLite (WAL, synchronous=FULL)", None),
        ("PostgreSQL 15, loopback, fsync on", Some(server.database("bench"))),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let catalog = open(url.as_deref(), dir.path());
        let mut took = Vec::with_capacity(COMMITS as usize);
        for round in 0..COMMITS {
            let started = Instant::now();
            commit(&catalog, round).expect("commit");
            took.push(started.elapsed());
        }
        report(name, &mut took);
    }

    println!("\ntwo nodes racing for the same partitions, {COMMITS} rounds (one commit wins each round)\n");
    println!("{:<44} {:>9} {:>9} {:>9} {:>11}", "database", "mean ms", "p50 ms", "p99 ms", "rounds/s");
    for (name, url) in
        [("SQLite (two catalogs, one file)", None), ("PostgreSQL (two connections)", Some(server.database("race")))]
    {
        let dir = tempfile::tempdir().unwrap();
        let nodes = [Arc::new(open(url.as_deref(), dir.path())), Arc::new(open(url.as_deref(), dir.path()))];
        let barrier = Arc::new(Barrier::new(2));
        let threads: Vec<_> = nodes
            .iter()
            .map(|catalog| {
                let (catalog, barrier) = (catalog.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let mut took = Vec::new();
                    for round in 0..COMMITS {
                        barrier.wait();
                        let started = Instant::now();
                        let _ = commit(&catalog, round);
                        took.push(started.elapsed());
                        barrier.wait();
                    }
                    took
                })
            })
            .collect();
        let lists: Vec<Vec<Duration>> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        // A round lasts as long as its slower node.
        let mut rounds: Vec<Duration> = (0..COMMITS as usize).map(|i| lists[0][i].max(lists[1][i])).collect();
        let versions = nodes[0].versions("acme/events", "t").unwrap().len() as i64;
        assert_eq!(versions, COMMITS, "one commit a round");
        report(name, &mut rounds);
    }
}

fn open(url: Option<&str>, dir: &std::path::Path) -> Catalog {
    let (keyring, _) = Keyring::open(&default_key_file(dir), true).unwrap();
    Catalog::open_at(url, dir, keyring).unwrap()
}

fn commit(catalog: &Catalog, round: i64) -> Result<(i64, Option<i64>), weir::catalog::CatalogError> {
    let ranges: Vec<PartitionRange> = (0..PARTITIONS)
        .map(|partition| PartitionRange {
            partition,
            first: round * 1000,
            last: round * 1000 + 999,
            expected: (round > 0).then_some(round * 1000),
        })
        .collect();
    let execution = Execution {
        id: 0,
        publisher: "acme/events/p".into(),
        status: "committed".into(),
        rollover_reason: "messages".into(),
        rows_in: 3000,
        rows_out: 3000,
        dead_letters: 0,
        offsets: ranges.clone(),
        table_version: None,
        started_at_ms: 0,
        timings_ms: Timings::default(),
        plugin_log: serde_json::json!([]),
        error: None,
    };
    let schema = serde_json::json!({ "type": "struct", "fields": [
        { "name": "event_id", "type": "string", "nullable": true, "metadata": {} }
    ] });
    catalog.commit(&BatchCommit {
        collection: "acme/events",
        publisher: "acme/events/p",
        topic: "t",
        versions: vec![NewVersion {
            table: "t".into(),
            files: vec![DataFile {
                path: format!("t/{round}.parquet"),
                size: 1 << 20,
                rows: 3000,
                stats: None,
                ..Default::default()
            }],
            rows: 3000,
            schema,
            txns: (0..PARTITIONS).map(|p| Txn { app_id: format!("p-t-{p}"), version: round * 1000 + 1000 }).collect(),
            partition_by: vec![],
            iceberg: None,
        }],
        ranges: &ranges,
        execution: &execution,
        dead_letters: &[],
        rerun: &[],
    })
}

fn report(name: &str, took: &mut [Duration]) {
    took.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mean = took.iter().map(|d| ms(*d)).sum::<f64>() / took.len() as f64;
    let at = |q: f64| ms(took[((took.len() - 1) as f64 * q) as usize]);
    println!("{name:<44} {mean:>9.2} {:>9.2} {:>9.2} {:>11.0}", at(0.5), at(0.99), 1e3 / mean);
}
