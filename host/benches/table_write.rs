//! The table's parquet settings, measured: for each codec, level, dictionary
//! and page-size choice, the CPU writing the benchmark's click events costs,
//! the file's size, and how long DuckDB takes to scan it; then the CPU of
//! weir's own writer on one-row files, as a burst of one message to each of
//! many publishers writes them (two at a time).
//! Then weir's table writer over the same events, unpartitioned and under
//! several `partition_by`s: the CPU a message and the files it makes. Last,
//! a table of 30 days of events, committed as weir commits (Delta log and
//! Iceberg metadata), and DuckDB's time for one day's rows from it.
//! `cargo bench -p weir --bench table_write` (needs `python3 -c 'import duckdb'`,
//! which `scripts/setup.sh` installs); `-- --one-row` for the one-row files
//! only, `-- --partitioned` for the partitioned writes only, `-- --days` for
//! DuckDB's one-day query on a 30-day table, partitioned by day and not.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use weir::formats::{DataFormat, Decoder, Format};

#[path = "../../tests/common/mod.rs"]
mod common;
#[path = "stream/dataset.rs"]
#[allow(dead_code)]
mod dataset;

const CLICKS_SCHEMA: &str = include_str!("../../guest-examples/data/clicks.json");
/// Four of the stream benchmark's 64k-message batches.
const MESSAGES: usize = 4 * 65_536;

fn main() {
    let rows = decoded();
    let dir = tempfile::tempdir().unwrap();
    if std::env::args().any(|a| a == "--one-row") {
        return one_row(dir.path(), &rows[0]);
    }
    if std::env::args().any(|a| a == "--partitioned") {
        return partitioned(dir.path(), &rows);
    }
    if std::env::args().any(|a| a == "--days") {
        return days(&rows[0]);
    }
    let settings: Vec<(&str, WriterProperties)> = vec![
        ("zstd(3), dictionary (parquet's default)", props(Compression::ZSTD(ZstdLevel::default()), true, None)),
        ("zstd(1), dictionary", props(Compression::ZSTD(ZstdLevel::try_new(1).unwrap()), true, None)),
        ("zstd(6), dictionary", props(Compression::ZSTD(ZstdLevel::try_new(6).unwrap()), true, None)),
        ("snappy, dictionary", props(Compression::SNAPPY, true, None)),
        ("lz4 (raw), dictionary", props(Compression::LZ4_RAW, true, None)),
        ("uncompressed, dictionary", props(Compression::UNCOMPRESSED, true, None)),
        ("zstd(3), no dictionary", props(Compression::ZSTD(ZstdLevel::default()), false, None)),
        ("zstd(3), dictionary pages up to 64 KiB (weir's)", dict_limit(64 << 10)),
        ("zstd(3), dictionary pages up to 16 KiB", dict_limit(16 << 10)),
        ("zstd(3), dictionary, 64 KiB pages", props(Compression::ZSTD(ZstdLevel::default()), true, Some(64 << 10))),
        ("zstd(3), dictionary, 4 MiB pages", props(Compression::ZSTD(ZstdLevel::default()), true, Some(4 << 20))),
    ];
    println!("{MESSAGES} click events, {} columns, written as 4 row groups on one thread", rows[0].num_columns());
    println!("{:<44} {:>12} {:>10} {:>16}", "settings", "CPU µs/msg", "MB", "DuckDB scan ms");
    // A write first, so the first setting measured does not pay for a cold start.
    write(&dir.path().join("warm.parquet"), &rows, settings[0].1.clone());
    for (i, (name, props)) in settings.into_iter().enumerate() {
        let path = dir.path().join(format!("{i}.parquet"));
        // The median of three writes.
        let mut cpu: Vec<Duration> = (0..3).map(|_| write(&path, &rows, props.clone())).collect();
        cpu.sort();
        let size = std::fs::metadata(&path).unwrap().len() as f64 / 1e6;
        let per_message = cpu[1].as_secs_f64() * 1e6 / MESSAGES as f64;
        println!("{name:<44} {per_message:>12.3} {size:>10.2} {:>16.1}", duckdb_scan(&path));
    }
    println!();
    one_row(dir.path(), &rows[0]);
    println!();
    partitioned(dir.path(), &rows);
}

/// weir's writer (`TableSink`, as a batch writes its table) over every event,
/// in one batch, under each partitioning: the process's CPU a message
/// (median of three) and the files written.
fn partitioned(dir: &Path, rows: &[RecordBatch]) {
    use weir::plugin::OutputSink;
    use weir::plugin::frames::Frame;
    use weir::stream::stage::TableSink;
    use weir::tables::partition::{PartitionSpec, Partitioning};
    let specs: [&[&str]; 5] =
        [&[], &["country"], &["country", "device"], &["bucket(16, user_id)"], &["country", "bucket(16, user_id)"]];
    let me = std::process::id();
    let cpu = || common::cpu_of(me).unwrap().as_secs_f64();
    println!("weir's table writer, {MESSAGES} click events in one batch");
    println!("{:<44} {:>12} {:>10}", "partition_by", "CPU µs/msg", "files");
    for (i, spec) in specs.into_iter().enumerate() {
        let entries: Vec<String> = spec.iter().map(|e| e.to_string()).collect();
        let partitioning = Partitioning { spec: PartitionSpec::parse(&entries).unwrap(), max_per_batch: 10_000 };
        let mut runs: Vec<(f64, usize)> = (0..3)
            .map(|run| {
                let key = format!("tables/c/t{i}-{run}/part.parquet");
                let before = cpu();
                let mut sink = TableSink::new(dir.join(&key), key, partitioning.clone());
                sink.write("t", Frame { schema: rows[0].schema(), batches: rows.to_vec() }).unwrap();
                let files = sink.finish().unwrap().unwrap().files.len();
                ((cpu() - before) * 1e6 / MESSAGES as f64, files)
            })
            .collect();
        runs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (per_message, files) = runs[1];
        let name = if spec.is_empty() { "none".to_string() } else { format!("{spec:?}") };
        println!("{name:<44} {per_message:>12.3} {files:>10}");
    }
}

/// 30 days of events in 30 batches of 20,000, committed to four tables (in
/// time order: a batch a day, as a stream writes them; out of order: each
/// batch holding every day, as late events or a backfill do; each
/// unpartitioned and by `day(ts)`), each a Delta and an Iceberg table; then
/// DuckDB counting one day's rows (`ts` in the day) through each, median of
/// five, with the files its plan read.
fn days(rows: &RecordBatch) {
    use arrow::array::{ArrayRef, TimestampMicrosecondArray};
    use common::delta::stage;
    use weir::catalog::Catalog;
    const DAYS: i64 = 30;
    const ROWS: usize = 21_000;
    const DAY_US: i64 = 86_400_000_000;
    let start = 1_793_836_800_000_000; // 2026-11-05T00:00:00Z
    let ts_index = rows.schema().index_of("ts").unwrap();
    let zone = match rows.schema().field(ts_index).data_type() {
        arrow::datatypes::DataType::Timestamp(_, zone) => zone.clone(),
        other => panic!("ts is {other}"),
    };
    // Batch `b`'s row `i`: in time order, day b; out of order, day i mod 30.
    let batch = |b: i64, ordered: bool| {
        let ts = (0..ROWS as i64).map(|i| {
            let (day, in_day) = if ordered { (b, i) } else { (i % DAYS, i / DAYS * DAYS) };
            start + day * DAY_US + in_day * (DAY_US / ROWS as i64)
        });
        let ts: ArrayRef = Arc::new(TimestampMicrosecondArray::from_iter_values(ts).with_timezone_opt(zone.clone()));
        let mut columns = rows.slice(0, ROWS).columns().to_vec();
        columns[ts_index] = ts;
        RecordBatch::try_new(rows.schema(), columns).unwrap()
    };
    println!(
        "{DAYS} days of click events, {ROWS} a batch, a batch committed a day; DuckDB counting one day's rows (by ts)"
    );
    println!(
        "{:<44} {:>7} {:>12} {:>12} {:>12} {:>12}",
        "table", "files", "Delta ms", "files read", "Iceberg ms", "files read"
    );
    for ordered in [true, false] {
        for partition_by in [vec![], vec!["day(ts)".to_string()]] {
            let dir = tempfile::tempdir().unwrap();
            let catalog = Catalog::open(dir.path()).unwrap();
            for b in 0..DAYS {
                let staged = stage(&catalog, "clicks", batch(b, ordered), b * ROWS as i64, &partition_by);
                staged.commit(&catalog, true).unwrap();
            }
            weir::tables::delta::sync(&catalog, "events", "clicks").unwrap();
            let files: usize = catalog.versions("events", "clicks").unwrap().iter().map(|v| v.files.len()).sum();
            let table = dir.path().join(weir::tables::file::table_dir("events", "clicks"));
            let metadata = catalog.iceberg_location("events", "clicks").unwrap().unwrap();
            let read = duckdb_day(&table, &metadata, !partition_by.is_empty());
            let (delta, iceberg) = (read[0], read[1]);
            let name = format!(
                "{}, {}",
                if ordered { "in time order" } else { "out of order" },
                if partition_by.is_empty() { "unpartitioned" } else { "by day(ts)" }
            );
            println!("{name:<44} {files:>7} {:>12.1} {:>12} {:>12.1} {:>12}", delta.0, delta.1, iceberg.0, iceberg.1);
            if let Some((ms, files)) = read.get(2) {
                println!("{:<44} {:>7} {ms:>12.1} {files:>12}", "  the same, Delta by ts_day", "");
            }
        }
    }
}

/// DuckDB's median ms over five runs counting one day's rows (the 15th) of
/// the Delta table at `table` and of the Iceberg table at `metadata` by
/// `ts`, and of a partitioned Delta table by its `ts_day`, with the files
/// each plan read.
fn duckdb_day(table: &Path, metadata: &str, partitioned: bool) -> Vec<(f64, u64)> {
    let script = r#"
import json, statistics, sys, time
from duckdb_wheels import duckdb_connection
con = duckdb_connection("avro", "delta", "iceberg")
day = "ts >= TIMESTAMPTZ '2026-11-19 00:00:00+00' AND ts < TIMESTAMPTZ '2026-11-20 00:00:00+00'"
def files_read(node):
    read = node.get("extra_info", {}).get("Total Files Read")
    return int(read) if read is not None else sum(files_read(c) for c in node.get("children", []))
out = []
queries = [f"delta_scan('{sys.argv[1]}') WHERE {day}", f"iceberg_scan('{sys.argv[2]}') WHERE {day}"]
if sys.argv[3] == "partitioned":
    # Delta has no transforms: its readers prune by the derived column.
    queries.append(f"delta_scan('{sys.argv[1]}') WHERE ts_day = DATE '2026-11-19'")
for scan in queries:
    q = f"SELECT count(*) FROM {scan}"
    (rows,), = con.execute(q).fetchall()
    assert rows == 21000, (q, rows)
    times = []
    for _ in range(5):
        t = time.perf_counter(); con.execute(q).fetchall(); times.append(time.perf_counter() - t)
    con.execute("PRAGMA enable_profiling = 'json'")
    (_, profile), = con.execute("EXPLAIN ANALYZE " + q).fetchall()
    con.execute("PRAGMA disable_profiling")
    out.append([statistics.median(times) * 1e3, files_read(json.loads(profile))])
print(json.dumps(out))
"#;
    let partitioned = if partitioned { "partitioned" } else { "not" };
    let peers = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/peers");
    let mut python = Command::new("python3");
    python.env("PYTHONPATH", peers).args(["-c", script]).arg(table).arg(metadata).arg(partitioned);
    let out = python.output().expect("python3 runs");
    assert!(out.status.success(), "DuckDB failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn one_row(dir: &Path, rows: &RecordBatch) {
    let (files, cpu) = one_row_files(dir, &rows.slice(0, 1));
    println!("{files} one-row table files by weir's writer, two at a time: {cpu:.0} µs of the process's CPU a file");
}

/// Writes 2,000 one-row table files, two threads at once; returns
/// how many, and the process's CPU a file in µs (the writer's own threads included).
fn one_row_files(dir: &Path, row: &RecordBatch) -> (usize, f64) {
    use weir::tables::file::{Kind, write_parquet};
    const FILES: usize = 2000;
    let me = std::process::id();
    let cpu = |pid| common::cpu_of(pid).unwrap().as_secs_f64();
    let before = cpu(me);
    std::thread::scope(|scope| {
        for t in 0..2 {
            scope.spawn(move || {
                for i in (t..FILES).step_by(2) {
                    write_parquet(&dir.join(format!("one-{i}.parquet")), row.schema_ref(), &[row.clone()], Kind::Table)
                        .unwrap();
                }
            });
        }
    });
    (FILES, (cpu(me) - before) * 1e6 / FILES as f64)
}

fn props(compression: Compression, dictionary: bool, page_bytes: Option<usize>) -> WriterProperties {
    let mut builder = WriterProperties::builder().set_compression(compression).set_dictionary_enabled(dictionary);
    if let Some(bytes) = page_bytes {
        builder = builder.set_data_page_size_limit(bytes);
    }
    builder.build()
}

/// weir's default with a smaller dictionary page, past which a column falls back to plain encoding.
fn dict_limit(bytes: usize) -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_dictionary_page_size_limit(bytes)
        .build()
}

/// The dataset's JSON decoded by weir's own decoder, in four 64k-row batches.
fn decoded() -> Vec<RecordBatch> {
    let decoder = Decoder::plain(Format::parse(DataFormat::Json, CLICKS_SCHEMA, None).unwrap());
    let values: Vec<String> = (0..MESSAGES).map(|i| dataset::message(i).1).collect();
    let messages = values
        .iter()
        .enumerate()
        .map(|(i, v)| weir::formats::RawMessage::new(0, i as i64, None, None, Some(v.as_bytes()), vec![]));
    let decoded = decoder.decode(messages.collect());
    assert!(decoded.dead.is_empty(), "every message decodes");
    let batch = decoded.batch;
    (0..4).map(|i| batch.slice(i * 65_536, 65_536)).collect()
}

/// CPU time writing `rows` to `path` took on this thread.
fn write(path: &Path, rows: &[RecordBatch], props: WriterProperties) -> Duration {
    let started = weir::cpu_time::thread();
    let file = std::fs::File::create(path).unwrap();
    let mut writer = ArrowWriter::try_new(file, Arc::clone(rows[0].schema_ref()), Some(props)).unwrap();
    for batch in rows {
        writer.write(batch).unwrap();
        writer.flush().unwrap();
    }
    writer.close().unwrap();
    weir::cpu_time::thread() - started
}

/// DuckDB's wall time for a scan that reads every column, median of five.
fn duckdb_scan(path: &Path) -> f64 {
    let script = r#"
import duckdb, sys, time, statistics
con = duckdb.connect()
q = "select count(*), count(distinct event_id), sum(length(url)), max(ts)::varchar, count(referrer), sum(duration_ms), count(distinct country), count(distinct device), sum(user_id) from read_parquet(?)"
con.execute(q, [sys.argv[1]]).fetchall()
times = []
for _ in range(5):
    t = time.perf_counter(); con.execute(q, [sys.argv[1]]).fetchall(); times.append(time.perf_counter() - t)
print(statistics.median(times) * 1e3)
"#;
    let out = Command::new("python3").args(["-c", script]).arg(path).output().expect("python3 runs");
    assert!(out.status.success(), "DuckDB failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}
