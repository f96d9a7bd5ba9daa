//! PostgreSQL's change log read by weir's `postgres` source, against Debian's
//! PostgreSQL started with `wal_level = logical` (one server for the binary,
//! a database per test): the snapshot hands over to the stream exactly at the
//! slot's consistent point with a writer running throughout; every type
//! weir maps; TOASTed values a change did not touch; deletes, truncates;
//! what the server lacks, named; a table whose columns change stops the
//! stream; a restart resumes exactly after what was acknowledged.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;
use std::time::Duration;

use arrow::array::{
    Array, AsArray, BinaryArray, Decimal128Array, Int32Array, Int64Array, ListArray, RecordBatch, StringArray,
    StructArray, TimestampMicrosecondArray,
};
use arrow::datatypes::Int32Type;
use common::postgres::Postgres;
use weir::sources::postgres::{self, ChangeLog, ChangeStream, Event, Plan, PostgresConnection, Readiness};

fn server() -> &'static Postgres {
    static SERVER: OnceLock<Postgres> = OnceLock::new();
    SERVER.get_or_init(Postgres::start_logical)
}

fn connection(pg: &Postgres, database: &str) -> PostgresConnection {
    pg.connection(database)
}

/// Reads `tables`, through a slot named after the database (slots are the server's, not a database's).
fn plan(conn: &PostgresConnection, tables: &[&str], snapshot: bool) -> Plan {
    Plan {
        tables: tables.iter().map(|t| t.to_string()).collect(),
        publication: "weir_pub".into(),
        slot: format!("weir_{}", conn.database),
        snapshot,
        chunk: 1000,
    }
}

/// Opens the change log; returns the snapshot's batches per table beside it.
async fn open(
    conn: &PostgresConnection,
    plan: &Plan,
    resume: u64,
) -> (postgres::Opened, Vec<Vec<RecordBatch>>, Vec<ChangeLog>) {
    let (rows, mut chunks) = tokio::sync::mpsc::channel::<(usize, RecordBatch)>(4);
    let tables = plan.tables.len();
    let collect = tokio::spawn(async move {
        let mut snapshot = vec![Vec::new(); tables];
        while let Some((i, rows)) = chunks.recv().await {
            snapshot[i].push(rows);
        }
        snapshot
    });
    let opened = postgres::open(conn, plan, resume, rows).await.unwrap();
    let snapshot = collect.await.unwrap();
    let logs = opened.tables.iter().map(|t| ChangeLog::new(t.clone())).collect();
    (opened, snapshot, logs)
}

/// Reads whole transactions until one that committed at or after `lsn`;
/// returns the commits' end positions.
async fn read_until(stream: &mut ChangeStream, logs: &mut [ChangeLog], lsn: u64) -> Vec<u64> {
    let mut ends = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(60), stream.next(logs))
            .await
            .expect("the stream reaches the position within a minute")
            .unwrap();
        match event {
            Event::Committed { commit_lsn, end_lsn, bad, .. } => {
                assert!(bad.is_empty(), "{bad:?}");
                ends.push(end_lsn);
                if commit_lsn >= lsn {
                    return ends;
                }
            }
            Event::Idle { .. } => {}
            other => panic!("the stream ended or changed: {other:?}"),
        }
    }
}

async fn sql(conn: &PostgresConnection) -> tokio_postgres::Client {
    conn.connect().await.unwrap()
}

/// The server's WAL position now.
async fn wal_now(client: &tokio_postgres::Client) -> u64 {
    let lsn: String = client.query_one("SELECT pg_current_wal_lsn()::text", &[]).await.unwrap().get(0);
    postgres::parse_lsn(&lsn).unwrap()
}

fn column<'a, T: 'static>(batch: &'a RecordBatch, name: &str) -> &'a T {
    batch.column_by_name(name).unwrap_or_else(|| panic!("no column {name}")).as_any().downcast_ref::<T>().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_snapshot_hands_over_to_the_stream_exactly_with_writes_running_throughout() {
    let pg = server();
    pg.database("handover");
    let conn = connection(pg, "handover");
    let admin = sql(&conn).await;
    admin
        .batch_execute(
            "CREATE TABLE orders (id bigserial PRIMARY KEY, n int NOT NULL, note text);
             INSERT INTO orders (n, note) SELECT g, 'first' FROM generate_series(1, 20000) g;",
        )
        .await
        .unwrap();

    // A writer inserts, updates and deletes, one transaction after another (some
    // of several statements), before, during and after the snapshot.
    let writer_conn = conn.clone();
    let writer = tokio::spawn(async move {
        let client = sql(&writer_conn).await;
        for i in 0..1500i64 {
            let statement = match i % 5 {
                0 | 1 => format!("INSERT INTO orders (n, note) VALUES ({i}, 'new')"),
                2 => format!("UPDATE orders SET n = n + 1, note = 'updated {i}' WHERE id = {}", (i * 7919) % 20000 + 1),
                3 => format!("DELETE FROM orders WHERE id = {}", (i * 104_729) % 20000 + 1),
                _ => format!(
                    "BEGIN; INSERT INTO orders (n, note) VALUES ({i}, 'pair'); UPDATE orders SET note = NULL WHERE id = {}; COMMIT",
                    (i * 31) % 20000 + 1
                ),
            };
            client.batch_execute(&statement).await.unwrap();
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (mut opened, snapshot, mut logs) = open(&conn, &plan(&conn, &["orders"], true), 0).await;
    let consistent = opened.created_at.expect("the slot was created");
    writer.await.unwrap();
    let marker_at = wal_now(&admin).await;
    admin.batch_execute("INSERT INTO orders (n, note) VALUES (-1, 'marker')").await.unwrap();
    read_until(&mut opened.stream, &mut logs, marker_at).await;
    let stream = logs[0].finish();

    // Replay: the snapshot's rows, then each change in commit order.
    let mut state: BTreeMap<i64, (i32, Option<String>)> = BTreeMap::new();
    let mut created: HashMap<i64, usize> = HashMap::new();
    for batch in &snapshot[0] {
        let (id, n, note) =
            (column::<Int64Array>(batch, "id"), column::<Int32Array>(batch, "n"), column::<StringArray>(batch, "note"));
        for row in 0..batch.num_rows() {
            assert_eq!(column::<StringArray>(batch, "_op").value(row), "r");
            assert_eq!(column::<Int64Array>(batch, "_lsn").value(row) as u64, consistent);
            state.insert(id.value(row), (n.value(row), note.is_valid(row).then(|| note.value(row).to_string())));
            *created.entry(id.value(row)).or_default() += 1;
        }
    }
    let snapshot_rows = state.len();
    let (id, n, note, op) = (
        column::<Int64Array>(&stream, "id"),
        column::<Int32Array>(&stream, "n"),
        column::<StringArray>(&stream, "note"),
        column::<StringArray>(&stream, "_op"),
    );
    let lsn = column::<Int64Array>(&stream, "_lsn");
    let mut ops: HashMap<&str, usize> = HashMap::new();
    for row in 0..stream.num_rows() {
        assert!(lsn.value(row) as u64 >= consistent, "a change from before the snapshot's point");
        *ops.entry(op.value(row)).or_default() += 1;
        let value = (n.value(row), note.is_valid(row).then(|| note.value(row).to_string()));
        match op.value(row) {
            "c" => {
                *created.entry(id.value(row)).or_default() += 1;
                state.insert(id.value(row), value);
            }
            "u" => {
                assert!(state.contains_key(&id.value(row)), "an update of a row never seen: {}", id.value(row));
                state.insert(id.value(row), value);
            }
            "d" => {
                assert!(state.remove(&id.value(row)).is_some(), "a delete of a row never seen");
            }
            other => panic!("unexpected op {other}"),
        }
    }
    // Every row was created exactly once: in the snapshot or in the stream, never both.
    let twice: Vec<_> = created.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "rows read twice across the handover: {twice:?}");
    let rows = admin.query("SELECT id, n, note FROM orders ORDER BY id", &[]).await.unwrap();
    let expected: BTreeMap<i64, (i32, Option<String>)> =
        rows.iter().map(|r| (r.get(0), (r.get(1), r.get(2)))).collect();
    assert_eq!(state.len(), expected.len());
    assert!(state == expected, "the change log replayed differs from the table");
    eprintln!("snapshot rows {snapshot_rows}, stream {ops:?}");
    assert!(snapshot_rows >= 20000 - 300 && ops["c"] > 0 && ops["u"] > 0 && ops["d"] > 0, "{snapshot_rows} {ops:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mapped_type_reads_the_same_from_the_snapshot_and_the_stream() {
    let pg = server();
    pg.database("types");
    let conn = connection(pg, "types");
    let admin = sql(&conn).await;
    admin
        .batch_execute(
            "CREATE TYPE mood AS ENUM ('sad', 'happy');
             CREATE DOMAIN positive AS int CHECK (VALUE > 0);
             CREATE TABLE kinds (
                id int PRIMARY KEY, b bool, s smallint, big bigint, r real, d double precision,
                num numeric(12,3), free numeric, txt text, vc varchar(5), bin bytea, day date,
                ts timestamp, tstz timestamptz, js jsonb, u uuid, feeling mood, tags text[], nums int[],
                pos positive, iv interval, tm time);",
        )
        .await
        .unwrap();
    let values = "true, -7, 9007199254740993, 1.5, -0.1, 1234.5, 3.14159265358979323846264338327950288,
        E'tab\\there', 'abc', '\\x0001ff', '2026-12-07', '2026-12-07 10:00:00.123456', '2026-12-07 10:00:00+02',
        '{\"a\": [1, 2]}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'happy', ARRAY['a', 'b c', NULL, 'd\"e'],
        '{1,2,3}', 5, '1 day 2 hours', '13:14:15'";
    admin.batch_execute(&format!("INSERT INTO kinds VALUES (1, {values})")).await.unwrap();
    let (mut opened, snapshot, mut logs) = open(&conn, &plan(&conn, &["public.kinds"], true), 0).await;
    let at = wal_now(&admin).await;
    admin.batch_execute(&format!("INSERT INTO kinds VALUES (2, {values})")).await.unwrap();
    read_until(&mut opened.stream, &mut logs, at).await;
    let (read, streamed) = (&snapshot[0][0], logs[0].finish());
    assert_eq!(read.num_rows(), 1);
    assert_eq!(streamed.num_rows(), 1);
    assert_eq!(read.schema(), streamed.schema());
    for (i, field) in read.schema().fields().iter().enumerate() {
        if !field.name().starts_with('_') && field.name() != "id" {
            assert_eq!(read.column(i).as_ref(), streamed.column(i).as_ref(), "column {}", field.name());
        }
    }
    let b = &streamed;
    assert_eq!(column::<Decimal128Array>(b, "num").value(0), 1_234_500);
    assert_eq!(column::<StringArray>(b, "free").value(0), "3.14159265358979323846264338327950288");
    assert_eq!(column::<StringArray>(b, "txt").value(0), "tab\there");
    assert_eq!(column::<BinaryArray>(b, "bin").value(0), &[0, 1, 255]);
    assert_eq!(column::<Int64Array>(b, "big").value(0), 9_007_199_254_740_993);
    let tstz = column::<TimestampMicrosecondArray>(b, "tstz");
    assert_eq!(tstz.value(0), 1_796_630_400_000_000, "10:00 at +02 is 08:00 UTC");
    assert_eq!(tstz.timezone(), Some("UTC"));
    assert_eq!(column::<TimestampMicrosecondArray>(b, "ts").value(0) % 1_000_000, 123_456);
    assert_eq!(column::<StringArray>(b, "js").value(0), r#"{"a": [1, 2]}"#);
    assert_eq!(column::<StringArray>(b, "u").value(0), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
    assert_eq!(column::<StringArray>(b, "feeling").value(0), "happy");
    assert_eq!(column::<Int32Array>(b, "pos").value(0), 5, "a domain reads as its base type");
    assert_eq!(column::<StringArray>(b, "iv").value(0), "P1DT2H");
    assert_eq!(column::<StringArray>(b, "tm").value(0), "13:14:15");
    let tags = column::<ListArray>(b, "tags").value(0);
    let tags = tags.as_string::<i32>();
    assert_eq!(tags.iter().collect::<Vec<_>>(), [Some("a"), Some("b c"), None, Some("d\"e")]);
    let nums = column::<ListArray>(b, "nums").value(0);
    assert_eq!(nums.as_primitive::<Int32Type>().values().to_vec(), [1, 2, 3]);
    assert_eq!(column::<StringArray>(b, "_op").value(0), "c");
    assert!(
        column::<Int64Array>(b, "_tx").is_valid(0) && column::<TimestampMicrosecondArray>(b, "_commit_ts").is_valid(0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untouched_toasted_values_deletes_and_truncates_are_said_as_they_are() {
    let pg = server();
    pg.database("toast");
    let conn = connection(pg, "toast");
    let admin = sql(&conn).await;
    admin
        .batch_execute(
            "CREATE TABLE docs (id int PRIMARY KEY, big text, n int);
             CREATE TABLE full_docs (id int PRIMARY KEY, big text, n int);
             ALTER TABLE full_docs REPLICA IDENTITY FULL;",
        )
        .await
        .unwrap();
    let (mut opened, _, mut logs) = open(&conn, &plan(&conn, &["docs", "full_docs"], false), 0).await;
    let at = wal_now(&admin).await;
    // 128 kB that does not compress: stored out of line (TOAST).
    let big = "(SELECT string_agg(md5(g::text), '') FROM generate_series(1, 4000) g)";
    admin
        .batch_execute(&format!(
            "INSERT INTO docs VALUES (1, {big}, 1); INSERT INTO full_docs VALUES (1, {big}, 1);
             UPDATE docs SET n = 2 WHERE id = 1; UPDATE full_docs SET n = 2 WHERE id = 1;
             DELETE FROM docs WHERE id = 1; DELETE FROM full_docs WHERE id = 1;
             INSERT INTO docs VALUES (2, 'small', 3); TRUNCATE docs;"
        ))
        .await
        .unwrap();
    read_until(&mut opened.stream, &mut logs, at).await;
    // Each statement above is a transaction of its own; read until the truncate's.
    while logs[0].rows() < 5 {
        let next = tokio::time::timeout(Duration::from_secs(60), opened.stream.next(&mut logs)).await.unwrap().unwrap();
        assert!(!matches!(next, Event::Ended));
    }
    let docs = logs[0].finish();
    let ops: Vec<&str> = column::<StringArray>(&docs, "_op").iter().map(Option::unwrap).collect();
    assert_eq!(ops, ["c", "u", "d", "c", "t"]);
    let (big_col, n, unchanged) = (
        column::<StringArray>(&docs, "big"),
        column::<Int32Array>(&docs, "n"),
        column::<ListArray>(&docs, "_unchanged"),
    );
    assert_eq!(big_col.value(0).len(), 128_000);
    // The update did not touch `big`: null, and named, never a placeholder.
    assert!(big_col.is_null(1) && n.value(1) == 2);
    assert_eq!(unchanged.value(1).as_string::<i32>().value(0), "big");
    assert!(unchanged.is_null(0));
    // The delete carries the key (the default replica identity), the rest null.
    assert_eq!(column::<Int32Array>(&docs, "id").value(2), 1);
    assert!(big_col.is_null(2) && n.is_null(2));
    let before = column::<StructArray>(&docs, "_before");
    assert!(before.is_valid(2) && before.column_by_name("id").unwrap().as_primitive::<Int32Type>().value(2) == 1);
    assert!(before.is_null(0), "an insert has no old image");
    // The truncate is a row of its own.
    assert!(column::<Int32Array>(&docs, "id").is_null(4));
    let ordinals = column::<Int64Array>(&docs, "_ordinal");
    assert_eq!(ordinals.value(0), 0);

    // REPLICA IDENTITY FULL: the old row is whole, so the untouched value is there.
    let full = logs[1].finish();
    let ops: Vec<&str> = column::<StringArray>(&full, "_op").iter().map(Option::unwrap).collect();
    assert_eq!(ops, ["c", "u", "d"]);
    let big_col = column::<StringArray>(&full, "big");
    assert_eq!(big_col.value(1).len(), 128_000, "the full old image fills the untouched value");
    assert!(column::<ListArray>(&full, "_unchanged").is_null(1));
    assert_eq!(big_col.value(2).len(), 128_000, "a delete under FULL carries the whole row");
    let before = column::<StructArray>(&full, "_before");
    assert_eq!(before.column_by_name("n").unwrap().as_primitive::<Int32Type>().value(1), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_server_lacks_is_named_with_how_to_fix_it() {
    // A server as installed: wal_level = replica.
    let plain = Postgres::start();
    let client = connection(&plain, "postgres").connect().await.unwrap();
    let readiness = Readiness::check(&client, "postgres", "s").await.unwrap();
    assert_eq!(readiness.problems.len(), 1, "{readiness:?}");
    assert!(readiness.problems[0].contains("wal_level is `replica`"), "{readiness:?}");
    assert!(readiness.problems[0].contains("ALTER SYSTEM SET wal_level = logical"));
    drop(client);
    plain.stop();

    let pg = server();
    pg.database("lacking");
    let admin = sql(&connection(pg, "lacking")).await;
    admin
        .batch_execute(
            "CREATE ROLE plain LOGIN;
             CREATE TABLE keyless (a int, b text);
             CREATE TYPE pair AS (x int, y int);
             CREATE TABLE composite (id int PRIMARY KEY, p pair);
             CREATE TABLE parted (id int PRIMARY KEY) PARTITION BY RANGE (id);
             CREATE VIEW seen AS SELECT 1 AS one;",
        )
        .await
        .unwrap();
    let as_plain = PostgresConnection { user: "plain".into(), ..connection(pg, "lacking") };
    let client = as_plain.connect().await.unwrap();
    let readiness = Readiness::check(&client, "plain", "s").await.unwrap();
    assert_eq!(
        readiness.problems,
        [
            "the role `plain` lacks the REPLICATION attribute: run `ALTER ROLE \"plain\" WITH REPLICATION` as a superuser"
        ]
    );
    let err = postgres::open(&as_plain, &plan(&as_plain, &["keyless"], true), 0, tokio::sync::mpsc::channel(1).0)
        .await
        .err()
        .unwrap();
    assert!(format!("{err:#}").contains("lacks the REPLICATION attribute"), "{err:#}");

    let conn = connection(pg, "lacking");
    for (table, expected) in [
        ("keyless", "REPLICA IDENTITY FULL"),
        ("composite", "column `public.composite.p` is of type pair, which weir cannot read: composite types"),
        ("missing", "table public.missing does not exist"),
        ("parted", "public.parted is a partitioned table, which weir does not read yet: name its partitions"),
        ("seen", "public.seen is not a table (relkind v)"),
    ] {
        let err = postgres::open(&conn, &plan(&conn, &[table], true), 0, tokio::sync::mpsc::channel(1).0)
            .await
            .err()
            .unwrap();
        assert!(format!("{err:#}").contains(expected), "{table}: {err:#}");
    }
    // A publication weir did not create must already publish the tables.
    admin
        .batch_execute("CREATE TABLE other (id int PRIMARY KEY); CREATE PUBLICATION theirs FOR TABLE other")
        .await
        .unwrap();
    admin.batch_execute("CREATE TABLE mine (id int PRIMARY KEY)").await.unwrap();
    let theirs = Plan { publication: "theirs".into(), ..plan(&conn, &["mine"], true) };
    let err = postgres::open(&conn, &theirs, 0, tokio::sync::mpsc::channel(1).0).await.err().unwrap();
    assert!(format!("{err:#}").contains("ALTER PUBLICATION \"theirs\" ADD TABLE public.mine"), "{err:#}");
}

/// The next event that is not `Idle`, within a minute.
async fn next_event(stream: &mut ChangeStream, logs: &mut [ChangeLog]) -> anyhow::Result<Event> {
    loop {
        match tokio::time::timeout(Duration::from_secs(60), stream.next(logs)).await.expect("an event within a minute")
        {
            Ok(Event::Idle { .. }) => continue,
            other => return other,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_added_column_evolves_the_log_and_a_dropped_or_retyped_one_stops_it() {
    let pg = server();
    pg.database("columns");
    let conn = connection(pg, "columns");
    let admin = sql(&conn).await;
    admin.batch_execute("CREATE TABLE t (id int PRIMARY KEY, note text, n int)").await.unwrap();
    let (mut opened, _, mut logs) = open(&conn, &plan(&conn, &["t"], false), 0).await;
    let at = wal_now(&admin).await;
    admin.batch_execute("INSERT INTO t VALUES (1, 'a', 1)").await.unwrap();
    read_until(&mut opened.stream, &mut logs, at).await;
    // Added in the middle of a transaction: the rows before keep the old columns.
    admin
        .batch_execute(
            "BEGIN; INSERT INTO t VALUES (2, 'b', 2); ALTER TABLE t ADD COLUMN price numeric(8,2);
             INSERT INTO t VALUES (3, 'c', 3, 9.99); COMMIT",
        )
        .await
        .unwrap();
    let Event::Evolved { slot: 0, before: Some(before) } = next_event(&mut opened.stream, &mut logs).await.unwrap()
    else {
        panic!("the log did not follow the new column")
    };
    assert_eq!(before.num_rows(), 2, "the first transaction's row and the insert before the ALTER");
    assert!(before.column_by_name("price").is_none());
    let Event::Committed { changes: 2, .. } = next_event(&mut opened.stream, &mut logs).await.unwrap() else {
        panic!("the transaction goes on")
    };
    let after = logs[0].finish();
    assert_eq!(column::<Int32Array>(&after, "id").values().to_vec(), [3]);
    assert_eq!(column::<Decimal128Array>(&after, "price").value(0), 999);
    assert_eq!(column::<Int64Array>(&after, "_ordinal").value(0), 1, "its place in the transaction is kept");
    let before_image = column::<StructArray>(&after, "_before");
    assert!(before_image.column_by_name("price").is_some(), "the old image has the new column too");

    admin.batch_execute("ALTER TABLE t ALTER COLUMN n TYPE bigint; INSERT INTO t VALUES (4, 'd', 4, 1)").await.unwrap();
    let err = next_event(&mut opened.stream, &mut logs).await.unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        "the columns of public.t changed: column `n` was integer and is now another type (oid 20, modifier -1). weir stopped reading it, its position unmoved"
    );

    admin.batch_execute("CREATE TABLE u (id int PRIMARY KEY, note text, n int)").await.unwrap();
    let plan_u = Plan { slot: "columns_u".into(), publication: "pub_u".into(), ..plan(&conn, &["u"], false) };
    let (mut opened, _, mut logs) = open(&conn, &plan_u, 0).await;
    admin.batch_execute("ALTER TABLE u DROP COLUMN note; INSERT INTO u VALUES (2, 3)").await.unwrap();
    let err = next_event(&mut opened.stream, &mut logs).await.unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        "the columns of public.u changed: column `note` (text) was dropped. weir stopped reading it, its position unmoved"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_slot_still_advances_while_another_database_is_busy() {
    let pg = server();
    pg.database("quiet");
    pg.database("busy");
    let conn = connection(pg, "quiet");
    sql(&conn).await.batch_execute("CREATE TABLE t (id int PRIMARY KEY)").await.unwrap();
    let plan = plan(&conn, &["t"], false);
    let (mut opened, _, mut logs) = open(&conn, &plan, 0).await;
    let busy = sql(&connection(pg, "busy")).await;
    busy.batch_execute("CREATE TABLE w (id serial PRIMARY KEY, pad text)").await.unwrap();
    let admin = sql(&conn).await;
    let slot = || async { postgres::server::slot(&admin, &plan.slot).await.unwrap().unwrap() };
    let first = slot().await;
    let started = std::time::Instant::now();
    // Nothing is pending, so each keepalive's position may be acknowledged.
    let (mut acknowledged, mut checked) = (0, started);
    loop {
        busy.batch_execute("INSERT INTO w (pad) SELECT repeat('x', 1000) FROM generate_series(1, 200)").await.unwrap();
        if let Ok(event) = tokio::time::timeout(Duration::from_millis(200), opened.stream.next(&mut logs)).await {
            match event.unwrap() {
                Event::Idle { wal_end } => {
                    opened.stream.acknowledge(wal_end);
                    acknowledged = acknowledged.max(wal_end);
                }
                other => panic!("nothing happened in the quiet database: {other:?}"),
            }
        }
        if checked.elapsed() > Duration::from_secs(1) {
            checked = std::time::Instant::now();
            busy.batch_execute("CHECKPOINT").await.unwrap();
            let now = slot().await;
            if now.restart_lsn > first.restart_lsn && now.confirmed_flush_lsn > first.confirmed_flush_lsn {
                assert!(now.confirmed_flush_lsn <= Some(acknowledged), "never past what was acknowledged");
                break;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "the idle slot pinned the WAL: {first:?}, {:?}",
            slot().await
        );
    }
    assert_eq!(logs[0].rows(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_resumes_right_after_what_was_acknowledged() {
    let pg = server();
    pg.database("resume");
    let conn = connection(pg, "resume");
    let admin = sql(&conn).await;
    admin.batch_execute("CREATE TABLE t (id int PRIMARY KEY)").await.unwrap();
    let plan = Plan { slot: "resume_slot".into(), ..plan(&conn, &["t"], false) };
    let (mut opened, _, mut logs) = open(&conn, &plan, 0).await;
    admin.batch_execute("INSERT INTO t VALUES (1)").await.unwrap();
    let second = wal_now(&admin).await;
    admin.batch_execute("INSERT INTO t VALUES (2)").await.unwrap();
    let ends = read_until(&mut opened.stream, &mut logs, second).await;
    assert_eq!(logs[0].rows(), 2);
    // The first transaction is committed (as the catalog would have it): only it is acknowledged.
    let first_end = ends[0];
    opened.stream.acknowledge(first_end);
    let confirmed = || async {
        let state = postgres::server::slot(&admin, "resume_slot").await.unwrap().unwrap();
        (state.confirmed_flush_lsn.unwrap(), state.active)
    };
    let waited = std::time::Instant::now();
    while confirmed().await.0 < first_end {
        assert!(waited.elapsed() < Duration::from_secs(30), "the slot never heard of the acknowledgement");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(confirmed().await.0 < ends[1], "the slot heard no more than it was told");
    drop(opened);
    while confirmed().await.1 {
        assert!(waited.elapsed() < Duration::from_secs(30), "the slot stays held");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Restarted from the catalog's position: the second insert again, the first never.
    let (mut opened, _, mut logs) = open(&conn, &plan, first_end).await;
    assert_eq!(opened.created_at, None, "the slot is reused");
    read_until(&mut opened.stream, &mut logs, second).await;
    let batch = logs[0].finish();
    assert_eq!(column::<Int32Array>(&batch, "id").values().to_vec(), [2]);
}
