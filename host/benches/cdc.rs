//! What reading PostgreSQL's change log costs weir's `postgres` source, beside
//! the limits the server sets: the snapshot (rows/s into Arrow change logs)
//! against `COPY … TO STDOUT` alone, and the stream (change events/s, into
//! Arrow) against `pg_recvlogical` reading the same WAL through pgoutput to
//! /dev/null, for inserts alone and for half updates, half inserts; and the
//! same WAL through a whole `postgres_cdc` publisher, plugin and commits included.
//! `cargo bench -p weir --bench cdc` (needs Debian's `postgresql`, which
//! `scripts/setup.sh` installs).

use std::process::Command;
use std::time::{Duration, Instant};

use futures::StreamExt;
use weir::sources::postgres::{self, ChangeLog, Event, Plan, PostgresConnection};

#[path = "../../tests/common/postgres.rs"]
#[allow(dead_code)]
mod postgres_server;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

const SNAPSHOT_ROWS: i64 = 1_000_000;
const CHANGES: i64 = 500_000;
const PER_TRANSACTION: i64 = 1_000;

const TABLE: &str = "CREATE TABLE events (id bigint PRIMARY KEY, user_id int NOT NULL, kind text NOT NULL,
    amount numeric(12,2), at timestamptz NOT NULL, payload jsonb)";
const ROW: &str =
    "g, g % 1000, 'click', (g % 10000) / 100.0, '2026-12-07 10:00:00+00'::timestamptz + g * interval '1 ms',
    jsonb_build_object('page', '/p/' || (g % 50))";

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let server = postgres_server::Postgres::start_logical();
    println!(
        "PostgreSQL change log → Arrow change logs (a table of 6 columns: bigint, int, text, numeric, timestamptz, jsonb)\n"
    );
    println!("{:<58} {:>10} {:>12}", "", "seconds", "rows/s");
    snapshot(&server).await;
    for (name, updates) in [("inserts", false), ("50/50 updates and inserts", true)] {
        stream(&server, name, updates).await;
    }
}

fn connection(server: &postgres_server::Postgres, database: &str) -> PostgresConnection {
    PostgresConnection {
        host: "127.0.0.1".into(),
        port: server.port,
        database: database.into(),
        user: "postgres".into(),
        password: None,
    }
}

fn line(what: &str, took: Duration, rows: i64) {
    println!("{what:<58} {:>10.2} {:>12.0}", took.as_secs_f64(), rows as f64 / took.as_secs_f64());
}

async fn snapshot(server: &postgres_server::Postgres) {
    server.database("snapshot");
    let conn = connection(server, "snapshot");
    let client = conn.connect().await.unwrap();
    client.batch_execute(TABLE).await.unwrap();
    client
        .batch_execute(&format!("INSERT INTO events SELECT {ROW} FROM generate_series(1, {SNAPSHOT_ROWS}) g"))
        .await
        .unwrap();
    client.batch_execute("VACUUM ANALYZE events").await.unwrap();

    let started = Instant::now();
    let copy = client.copy_out("COPY events TO STDOUT").await.unwrap();
    futures::pin_mut!(copy);
    let mut bytes = 0;
    while let Some(chunk) = copy.next().await {
        bytes += chunk.unwrap().len();
    }
    line(&format!("snapshot: COPY … TO STDOUT alone ({} MB)", bytes / 1_000_000), started.elapsed(), SNAPSHOT_ROWS);

    let plan = Plan {
        tables: vec!["events".into()],
        publication: "bench".into(),
        slot: "bench_snapshot".into(),
        snapshot: true,
        chunk: 64 * 1024,
    };
    let started = Instant::now();
    let (chunks, mut received) = tokio::sync::mpsc::channel::<(usize, arrow::array::RecordBatch)>(2);
    let count = tokio::spawn(async move {
        let mut rows = 0;
        while let Some((_, batch)) = received.recv().await {
            rows += batch.num_rows() as i64;
        }
        rows
    });
    let opened = postgres::open(&conn, &plan, 0, chunks).await.unwrap();
    let rows = count.await.unwrap();
    let took = started.elapsed();
    assert_eq!(rows, SNAPSHOT_ROWS);
    line("snapshot: weir (slot, exported snapshot, COPY → Arrow)", took, rows);
    drop(opened);
}

async fn stream(server: &postgres_server::Postgres, name: &str, updates: bool) {
    let database = if updates { "updates" } else { "inserts" };
    server.database(database);
    let conn = connection(server, database);
    let client = conn.connect().await.unwrap();
    client.batch_execute(TABLE).await.unwrap();
    if updates {
        let half = CHANGES / 2;
        client
            .batch_execute(&format!("INSERT INTO events SELECT {ROW} FROM generate_series(1, {half}) g"))
            .await
            .unwrap();
    }
    let plan = Plan {
        tables: vec!["events".into()],
        publication: "bench".into(),
        slot: format!("weir_{database}"),
        snapshot: false,
        chunk: 64 * 1024,
    };
    // Both slots are created before the changes, so both read the same WAL.
    drop(postgres::open(&conn, &plan, 0, tokio::sync::mpsc::channel(1).0).await.unwrap());
    client
        .batch_execute(&format!(
            "SELECT pg_create_logical_replication_slot('raw_{database}', 'pgoutput');
             SELECT pg_create_logical_replication_slot('pub_{database}', 'pgoutput')"
        ))
        .await
        .unwrap();
    let transactions = CHANGES / PER_TRANSACTION;
    for t in 0..transactions {
        let first = if updates { CHANGES / 2 + t * PER_TRANSACTION / 2 } else { t * PER_TRANSACTION } + 1;
        let sql = if updates {
            let inserted = PER_TRANSACTION / 2;
            let updated = (t * inserted) % (CHANGES / 2) + 1;
            format!(
                "BEGIN; INSERT INTO events SELECT {ROW} FROM generate_series({first}, {}) g;
                 UPDATE events SET amount = amount + 1, kind = 'view' WHERE id BETWEEN {updated} AND {}; COMMIT",
                first + inserted - 1,
                updated + inserted - 1
            )
        } else {
            format!("INSERT INTO events SELECT {ROW} FROM generate_series({first}, {}) g", first + PER_TRANSACTION - 1)
        };
        client.batch_execute(&sql).await.unwrap();
    }
    let end: String = client.query_one("SELECT pg_current_wal_lsn()::text", &[]).await.unwrap().get(0);
    let end_lsn = postgres::parse_lsn(&end).unwrap();

    let started = Instant::now();
    let status = Command::new(server.program("pg_recvlogical"))
        .args(["-h", "127.0.0.1", "-p", &server.port.to_string(), "-U", "postgres", "-d", database])
        .args(["--slot", &format!("raw_{database}"), "--start", "--endpos", &end, "-f", "/dev/null"])
        .args(["-o", "proto_version=1", "-o", "publication_names=bench", "--no-loop"])
        .status()
        .unwrap();
    assert!(status.success());
    line(&format!("stream, {name}: pg_recvlogical → /dev/null (the limit)"), started.elapsed(), CHANGES);

    let started = Instant::now();
    let (mut opened, mut changes) =
        (postgres::open(&conn, &plan, 0, tokio::sync::mpsc::channel(1).0).await.unwrap(), 0);
    let mut logs: Vec<ChangeLog> = opened.tables.iter().map(|t| ChangeLog::new(t.clone())).collect();
    loop {
        match opened.stream.next(&mut logs).await.unwrap() {
            Event::Committed { end_lsn: at, changes: n, .. } => {
                changes += n as i64;
                if logs[0].rows() >= 64 * 1024 {
                    std::hint::black_box(logs[0].finish());
                }
                if at >= end_lsn || changes >= CHANGES {
                    break;
                }
            }
            Event::Idle { wal_end } if wal_end >= end_lsn => break,
            Event::Idle { .. } => {}
            other => panic!("the stream ended or changed: {other:?}"),
        }
    }
    std::hint::black_box(logs[0].finish());
    let took = started.elapsed();
    assert_eq!(changes, CHANGES);
    line(&format!("stream, {name}: weir (pgoutput → Arrow)"), took, changes);

    publisher(&conn, name, &format!("pub_{database}")).await;
}

/// The same WAL through a whole publisher: its batches (64 MiB or 100,000
/// changes) through the passthrough plugin in the sandbox, written as the
/// output table's files and committed with their positions, the Delta log
/// written, the slot acknowledged; until every change is committed.
async fn publisher(conn: &PostgresConnection, name: &str, slot: &str) {
    use std::sync::Arc;
    use weir::publisher::change_log::{PostgresCdcSource, Snapshot, StartFrom};
    use weir::sources::postgres::publisher::{self, ChangeLogPublisher};

    let dir = tempfile::tempdir().unwrap();
    let catalog = Arc::new(weir::catalog::Catalog::open(dir.path()).unwrap());
    let runtime = Arc::new(weir::plugin::Runtime::new(Default::default()).unwrap());
    let guest = std::path::Path::new(env!("WEIR_GUESTS_DIR")).join("passthrough.wasm");
    let plugin = runtime.load(&std::fs::read(guest).unwrap()).unwrap();
    let budget = Arc::new(weir::stream::buffer::MemoryBudget::new(1 << 30));
    let node = weir::stream::Node { catalog: catalog.clone(), runtime, budget, sources: Default::default() };
    let source = PostgresCdcSource {
        tables: vec!["events".into()],
        publication: "bench".into(),
        slot: slot.into(),
        snapshot: Snapshot::None,
        start_from: StartFrom::Tail,
        time_rollover_seconds: 60,
        size_rollover_mb: Some(64.0),
        changes_rollover: Some(100_000),
    };
    let publisher = ChangeLogPublisher {
        collection: "bench".into(),
        name: "log".into(),
        connection: conn.clone(),
        source,
        output_tables: vec!["events".into()],
        flush_interval_mins: 1,
        plugin,
        limits: Default::default(),
    };
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let started = Instant::now();
    let run = tokio::spawn(publisher::run(publisher, node, Default::default(), None, shutdown));
    let committed = || catalog.versions("bench", "events").unwrap().iter().map(|v| v.rows).sum::<u64>();
    while committed() < CHANGES as u64 {
        assert!(!run.is_finished(), "the publisher stopped");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = started.elapsed();
    stop.send(true).unwrap();
    run.await.unwrap().unwrap();
    assert_eq!(committed(), CHANGES as u64);
    line(&format!("stream, {name}: weir publisher (plugin, commit)"), took, CHANGES);
}
