//! Publishers in Rust, Python and TypeScript/JavaScript: the same examples give
//! the same tables, row for row, through the runtime and through a real stream
//! worker; the Python SDK's Arrow reader and writer, and the JavaScript SDK's
//! row selection, agree with pyarrow.

mod common;

use std::time::Duration;

use arrow::array::{RecordBatch, StringArray};
use arrow::compute::{concat_batches, sort_to_indices, take_record_batch};
use serde_json::json;
use weir::plugin::{Declared, Limits, RunError};
use weir::stream::WorkerOptions;

use common::stream::Harness;
use common::{clicks, declared, frame, guest, js_guest, mixed, python_guest, runtime};

/// Generous limits: these tests are about what comes out, not how fast.
fn roomy() -> Limits {
    Limits { deadline: Duration::from_secs(60), ..Limits::default() }
}

/// `actual` equals `expected`; where not, which column differs, not a screenful of both.
fn assert_same(actual: &RecordBatch, expected: &RecordBatch, language: &str) {
    assert_eq!(actual.schema(), expected.schema(), "{language}: the schemas differ");
    assert_eq!(actual.num_rows(), expected.num_rows(), "{language}: the row counts differ");
    for (field, (a, e)) in expected.schema().fields().iter().zip(actual.columns().iter().zip(expected.columns())) {
        if a != e {
            let first = (0..a.len()).find(|&i| a.slice(i, 1) != e.slice(i, 1)).unwrap_or(0);
            panic!(
                "{language}: column {} differs first at row {first}: {:?} instead of {:?}",
                field.name(),
                a.slice(first, 1),
                e.slice(first, 1)
            );
        }
    }
}

fn all_rows(batches: &[RecordBatch]) -> RecordBatch {
    concat_batches(&batches[0].schema(), batches).unwrap()
}

/// Runs `component` on one slot of `frames`, returning the one table it wrote.
fn run(component: &[u8], frames: &[RecordBatch]) -> RecordBatch {
    run_into("clicks", component, frames)
}

/// What a publisher writes to the one table `table` it declares, given `frames`.
fn run_into(table: &str, component: &[u8], frames: &[RecordBatch]) -> RecordBatch {
    let rt = runtime();
    let plugin = rt.load(component).expect("the component loads");
    let slot = frames.iter().map(|f| frame(std::slice::from_ref(f))).collect();
    let run = rt.publish(&plugin, vec![slot], &roomy(), Some(&declared(&[table])));
    let tables = run.outcome.unwrap_or_else(|e| panic!("the publisher fails: {e}\n{:?}", run.log));
    assert_eq!(tables.len(), 1);
    assert_eq!(tables[0].name, table);
    all_rows(&tables[0].frame.batches)
}

/// Runs one of the SDKs' own test scripts (`guest-examples/<path>`, against pyarrow).
fn sdk_tests(path: &str) {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-examples").join(path);
    let out = std::process::Command::new("python3")
        .arg(script)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python3");
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

#[test]
fn the_python_sdk_reads_and_writes_arrow_as_pyarrow_does() {
    sdk_tests("python/test_sdk.py");
}

#[test]
fn the_sdk_references_python_examples_run() {
    sdk_tests("python/test_docs.py");
}

#[test]
fn the_javascript_sdks_helpers_select_rows_as_pyarrow_does() {
    sdk_tests("js/test_sdk.py");
}

#[test]
fn a_passthrough_returns_its_input_in_every_language() {
    // Several frames, one of several record batches (the host frames 64 Ki rows per batch).
    let input = [clicks(150_000, 5), clicks(10, 6), clicks(1, 7)];
    let expected = all_rows(&input);
    for (language, component) in [
        ("rust", guest("passthrough")),
        ("python", python_guest("passthrough")),
        ("javascript", js_guest("passthrough")),
        ("python over frames", python_guest("fixtures/frames-passthrough")),
        ("javascript over frames", js_guest("fixtures/frames-passthrough")),
    ] {
        assert_same(&run(&component, &input), &expected, language);
    }
}

/// A call in a pool slot its component ran in before finds the memory it
/// used still mapped: the slot was reset in place, every page the call wrote
/// (in however many places) copied back from the module's image, not handed
/// back to the kernel to be faulted in again (vendor/wasmtime/WEIR.md).
/// Counted on this thread, whose calls run one at a time, so each reuses the
/// slot the last one left.
#[test]
fn a_call_in_a_reused_slot_faults_few_pages_in_again() {
    let rt = runtime();
    let frame = arrow::buffer::Buffer::from_vec(frame(&[clicks(1, 1)]));
    let declared = Declared::new(vec!["clicks".into()], vec!["clicks".into()]);
    for (language, component) in [("python", python_guest("passthrough")), ("javascript", js_guest("passthrough"))] {
        let plugin = rt.load(&component).unwrap();
        let call = || rt.publish(&plugin, vec![vec![frame.clone()]], &roomy(), Some(&declared)).outcome.unwrap();
        for _ in 0..3 {
            call();
        }
        let before = thread_faults();
        const CALLS: i64 = 10;
        for _ in 0..CALLS {
            call();
        }
        let faults = (thread_faults() - before) / CALLS;
        // About 2 a Python call and none a JavaScript one; 370 a Python call
        // when the reset stopped at the 32nd place the call wrote.
        assert!(faults < 50, "{language}: {faults} page faults a call");
    }
}

/// Calls of several components by turns, as a node's publishers make them,
/// each find a slot their own component's last call left, not another's:
/// wasmtime keeps unused slots affine to the module that ran in them (up to
/// `WARM_SLOTS`), where a slot another module had gets the memory image
/// mapped afresh, and every page of it the call touches faulted in again.
#[test]
fn calls_of_several_plugins_by_turns_each_reuse_a_slot_of_their_own() {
    let rt = runtime();
    let frame = arrow::buffer::Buffer::from_vec(frame(&[clicks(1, 1)]));
    let declared = Declared::new(vec!["clicks".into()], vec!["clicks".into()]);
    let plugins = [python_guest("passthrough"), js_guest("passthrough"), guest("passthrough")]
        .map(|component| rt.load(&component).unwrap());
    let round = || {
        for plugin in &plugins {
            rt.publish(plugin, vec![vec![frame.clone()]], &roomy(), Some(&declared)).outcome.unwrap();
        }
    };
    round();
    let before = thread_faults();
    const ROUNDS: i64 = 5;
    for _ in 0..ROUNDS {
        round();
    }
    let faults = (thread_faults() - before) / (ROUNDS * plugins.len() as i64);
    // About 1 a call; about 260 when each call took the slot the one before left.
    assert!(faults < 50, "{faults} page faults a call");
}

/// This thread's minor page faults so far.
fn thread_faults() -> i64 {
    // SAFETY: getrusage fills the zeroed struct it is given.
    unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut usage);
        usage.ru_minflt
    }
}

#[test]
fn a_generic_publisher_serves_any_topic_in_every_language() {
    // Each passthrough writes `tables()[0]`, and says which source it read.
    for (language, component) in [
        ("rust", guest("passthrough")),
        ("python", python_guest("passthrough")),
        ("javascript", js_guest("passthrough")),
    ] {
        let rt = runtime();
        let plugin = rt.load(&component).unwrap();
        let names = Declared::new(vec!["orders".into()], vec!["orders_table".into()]);
        let run = rt.publish(&plugin, vec![vec![frame(&[clicks(7, 1)])]], &roomy(), Some(&names));
        let tables = run.outcome.unwrap_or_else(|e| panic!("{language}: {e}\n{:?}", run.log));
        assert_eq!(tables[0].name, "orders_table", "{language}");
        let log: Vec<&str> = run.log.lines.iter().map(|l| l.message.as_str()).collect();
        assert!(log.iter().any(|l| l.contains("from orders into orders_table")), "{language}: {log:?}");
        // Without a declaration, the SDK says how to give one.
        let run = rt.publish(&plugin, vec![vec![frame(&[clicks(7, 1)])]], &roomy(), None);
        let error = run.outcome.expect_err("no table declared").to_string();
        assert!(error.contains("this run declares no output tables: give `weir run-plugin`"), "{language}: {error}");
    }
}

#[test]
fn the_python_sdk_reads_and_writes_every_type_the_host_sends() {
    // Every value of every column into Python objects and back out of them.
    let input = [mixed(3_000, 11), mixed(1, 12)];
    assert_same(&run(&python_guest("fixtures/reencode"), &input), &all_rows(&input), "python");
}

#[test]
fn clicks_enrich_is_the_same_in_every_language() {
    let input = [clicks(70_000, 21), clicks(500, 22)];
    let rust = run(&guest("clicks-enrich"), &input);
    assert!(rust.num_rows() > 0 && rust.num_rows() < 70_500, "some clicks are bounces, some are not");
    assert_same(&run(&python_guest("clicks-enrich"), &input), &rust, "python");
    assert_same(&run(&js_guest("clicks-enrich"), &input), &rust, "typescript");
}

#[test]
fn a_group_by_of_clicks_is_the_same_in_every_language() {
    // Rust's hash map over arrow-rs arrays; Python's and TypeScript's
    // group_by over the kernels: the same sums, means and order.
    let input = [clicks(70_000, 23), clicks(500, 24)];
    let rust = run_into("sections", &guest("clicks-by-section"), &input);
    assert!(rust.num_rows() > 10, "many countries and sections");
    assert_same(&run_into("sections", &python_guest("clicks-by-section"), &input), &rust, "python");
    assert_same(&run_into("sections", &js_guest("clicks-by-section"), &input), &rust, "typescript");
}

const KERNELS_SAY: &str = "`col(\"duration_ms\") >= 100`: the frame has no column `duration_ms` (its columns: ";

#[test]
fn errors_are_mapped_to_the_contracts_errors_in_every_language() {
    // A batch without the columns clicks-enrich needs: invalid input, said in each language's words.
    let wrong = mixed(5, 1);
    for (language, component, says) in [
        ("rust", guest("clicks-enrich"), "clicks need a `duration_ms` column of type Int64"),
        // The dataframe API: the kernels' words, naming the expression.
        ("python", python_guest("clicks-enrich"), KERNELS_SAY),
        ("typescript", js_guest("clicks-enrich"), KERNELS_SAY),
    ] {
        let rt = runtime();
        let plugin = rt.load(&component).unwrap();
        let run = rt.publish(&plugin, vec![vec![frame(std::slice::from_ref(&wrong))]], &roomy(), None);
        match run.outcome {
            Err(RunError::Guest(e)) => {
                assert!(e.to_string().starts_with(&format!("the plugin rejected its input: {says}")), "{language}: {e}")
            }
            other => panic!("{language}: expected invalid input, got {other:?}"),
        }
    }
}

/// The rows a stream worker running `component` commits for 400 clicks, by event id,
/// without the Kafka timestamps.
async fn through_a_stream_worker(component: &[u8]) -> RecordBatch {
    let h = Harness::new(2);
    h.produce("clicks", &common::stream::clicks(0, 400)).await;
    let mut publisher =
        h.publisher("read-clicks", json!({"kafka.messages_rollover": 150, "kafka.time_rollover_seconds": 2}), None);
    publisher.plugin = h.runtime.load(component).expect("the component loads");
    publisher.limits = roomy();
    let mut worker = h.start(publisher, WorkerOptions::default());
    let mut read = 0;
    while read < 400 {
        read += worker.next_commit().await.rows_in;
    }
    worker.stop().await;
    let mut batches = Vec::new();
    for file in h.committed_files() {
        batches.extend(weir::input::read(&file, None).expect("a committed parquet file").batches);
    }
    let mut rows = all_rows(&batches);
    // When each run produced its messages is the one thing that differs between runs.
    rows.remove_column(rows.schema().index_of("_timestamp").unwrap());
    let ids = rows.column_by_name("event_id").unwrap().as_any().downcast_ref::<StringArray>().unwrap().clone();
    take_record_batch(&rows, &sort_to_indices(&ids, None, None).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clicks_enrich_commits_the_same_table_through_a_stream_worker_in_every_language() {
    let rust = through_a_stream_worker(&guest("clicks-enrich")).await;
    assert_eq!(rust.num_rows(), 300, "the 100 clicks under 100 ms are bounces");
    assert!(rust.column_by_name("section").is_some() && rust.column_by_name("clicked_at").is_some());
    assert_same(&through_a_stream_worker(&python_guest("clicks-enrich")).await, &rust, "python");
    assert_same(&through_a_stream_worker(&js_guest("clicks-enrich")).await, &rust, "typescript");
}
