//! The table's parquet settings, measured: for each codec, level, dictionary
//! and page-size choice, the CPU writing the benchmark's click events costs,
//! the file's size, and how long DuckDB takes to scan it; then the CPU of
//! weir's own writer on one-row files, as a burst of one message to each of
//! many publishers writes them (two at a time).
//! Then weir's table writer over the same events, unpartitioned and under
//! several `partition_by`s: the CPU a message and the files it makes.
//! `cargo bench -p weir --bench table_write` (needs `python3 -c 'import duckdb'`,
//! which `scripts/setup.sh` installs); `-- --one-row` for the one-row files
//! only, `-- --partitioned` for the partitioned writes only.

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
