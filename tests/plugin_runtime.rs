//! The plugin runtime with real guests: tables go in and come back as they
//! should, and the example plugins do what they say, row by row.

mod common;

use std::sync::Arc;

use arrow::array::{Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow::compute::concat_batches;
use weir::plugin::frames::Unframed;
use weir::plugin::{Collect, Declared, GuestError, Limits, LogLevel, LogSource, OutputError, RunError};

use common::{clicks, declared, frame, guest, mixed, runtime};

fn all_rows(batches: &[RecordBatch]) -> RecordBatch {
    concat_batches(&batches[0].schema(), batches).expect("concat")
}

#[test]
fn passthrough_returns_every_frame_unchanged() {
    let rt = runtime();
    let plugin = rt.load(&guest("read-clicks")).unwrap();
    // Many frames in one slot: several sizes, one frame of two batches, one empty batch.
    let inputs: Vec<Vec<RecordBatch>> = vec![
        vec![mixed(1, 1)],
        vec![mixed(1000, 2)],
        vec![mixed(0, 3)],
        vec![mixed(17, 4), mixed(33, 5)],
        vec![mixed(4096, 6)],
    ];
    let slot: Vec<Vec<u8>> = inputs.iter().map(|batches| frame(batches)).collect();
    let started = std::time::Instant::now();
    let run = rt.publish(&plugin, vec![slot], &Limits::default(), None);
    let wall = started.elapsed();
    // The call's CPU time is its own thread's: some, and never more than the wall time around it.
    assert!(run.timing.cpu > std::time::Duration::ZERO && run.timing.cpu <= wall, "{:?} vs {wall:?}", run.timing);
    let tables = run.outcome.expect("passthrough succeeds");
    assert_eq!(tables.len(), 1);
    assert_eq!(tables[0].name, "clicks");
    let expected: Vec<RecordBatch> = inputs.into_iter().flatten().collect();
    assert_eq!(all_rows(&tables[0].frame.batches), all_rows(&expected));
    assert_eq!(tables[0].frame.schema, mixed(0, 0).schema());
}

/// Publishers of one component share its compiled code while any of them
/// lives, each call still in an instance of its own; once none holds it, the
/// code is let go and the next load makes it anew.
#[test]
fn loads_of_one_component_share_its_code_while_it_is_in_use() {
    let rt = runtime();
    let bytes = guest("read-clicks");
    let (a, b) = (rt.load(&bytes).unwrap(), rt.load(&bytes).unwrap());
    assert!(a.shares_code_with(&b));
    assert!(rt.loaded(a.digest()).unwrap().shares_code_with(&a));
    let other = rt.load(&guest("passthrough")).unwrap();
    assert!(!other.shares_code_with(&a));
    // Two calls at once on the shared code, each with its own input and output.
    let slot = |rows| vec![frame(&[mixed(rows, rows as u64)])];
    let (run_a, run_b) = std::thread::scope(|s| {
        let run_a = s.spawn(|| rt.publish(&a, vec![slot(10)], &Limits::default(), None));
        let run_b = s.spawn(|| rt.publish(&b, vec![slot(20)], &Limits::default(), None));
        (run_a.join().unwrap(), run_b.join().unwrap())
    });
    let rows =
        |run: weir::plugin::Run| run.outcome.unwrap()[0].frame.batches.iter().map(|b| b.num_rows()).sum::<usize>();
    assert_eq!((rows(run_a), rows(run_b)), (10, 20));
    let digest = a.digest().to_string();
    drop((a, b));
    assert!(rt.loaded(&digest).is_none(), "nothing holds it: its code is let go");
    assert!(rt.load(&bytes).is_ok());
}

#[test]
fn tables_framed_as_the_plugin_reads_them_arrive_whole_and_their_framing_is_the_hosts_time() {
    // How the worker hands a batch over: each partition as the runs it was decoded in.
    let rt = runtime();
    let runs = |seed: u64| vec![clicks(700, seed), clicks(1, seed + 1), clicks(300, seed + 2)];
    for name in ["read-clicks", "fixture-v0-1-passthrough"] {
        let plugin = rt.load(&guest(name)).unwrap();
        let slot: Vec<Unframed> =
            [1, 10].map(|seed| Unframed { schema: clicks(0, 0).schema(), batches: runs(seed) }).into();
        let run = rt.publish(&plugin, vec![slot], &Limits::default(), None);
        let tables = run.outcome.expect("the passthrough succeeds");
        let expected = if name == "read-clicks" { [runs(1), runs(10)].concat() } else { runs(1) };
        assert_eq!(all_rows(&tables[0].frame.batches), all_rows(&expected), "{name}");
        // Framing is counted apart from the call's own time and CPU.
        assert!(run.timing.input > std::time::Duration::ZERO, "{name}: {:?}", run.timing);
    }
}

#[test]
fn a_passthrough_needs_little_more_than_its_input_and_output() {
    // A ~30 MB frame of 8 columns in 96 MiB of guest memory: input, output and
    // working space. (The SDK once sized its output buffer by each column's view
    // of the shared frame allocation: 8 × the frame, and a 256 MiB limit was not enough.)
    let rt = runtime();
    let plugin = rt.load(&guest("read-clicks")).unwrap();
    let input = clicks(400_000, 9);
    let bytes = frame(std::slice::from_ref(&input));
    assert!(bytes.len() > 25 << 20, "frame of {} bytes", bytes.len());
    let limits = Limits { memory_bytes: 96 << 20, ..Limits::default() };
    let run = rt.publish(&plugin, vec![vec![bytes]], &limits, None);
    let tables = run.outcome.expect("a passthrough fits");
    assert_eq!(all_rows(&tables[0].frame.batches), input);
}

#[test]
fn the_sdk_writes_an_unchanged_batch_as_the_frame_it_came_in() {
    // Frames of one batch as the worker makes them (up to 65,536 rows), 16 MB
    // each, through 24 MiB of guest memory: a frame fits once, not twice, so
    // the plugin may neither encode a copy to write it back nor keep the frame
    // before beside the next.
    let rt = runtime();
    let plugin = rt.load(&guest("read-clicks")).unwrap();
    let schema = Arc::new(arrow::datatypes::Schema::new(vec![
        arrow::datatypes::Field::new("id", arrow::datatypes::DataType::Int64, false),
        arrow::datatypes::Field::new("payload", arrow::datatypes::DataType::Utf8, false),
    ]));
    let input = |seed: i64| {
        let rows = 60_000;
        let payload = StringArray::from_iter_values((0..rows).map(|i| format!("{seed}{i:0>250}")));
        let ids = Int64Array::from_iter_values((0..rows).map(|i| seed * 1_000_000 + i));
        RecordBatch::try_new(schema.clone(), vec![Arc::new(ids), Arc::new(payload)]).unwrap()
    };
    let inputs: Vec<RecordBatch> = (1..=3).map(input).collect();
    let slot: Vec<Vec<u8>> = inputs.iter().map(|b| frame(std::slice::from_ref(b))).collect();
    let limits = Limits { memory_bytes: 24 << 20, ..Limits::default() };
    assert!(slot[0].len() as u64 > limits.memory_bytes / 2, "frames of {} bytes", slot[0].len());
    let run = rt.publish(&plugin, vec![slot], &limits, None);
    let tables = run.outcome.expect("each unchanged batch goes back without a copy");
    assert_eq!(tables[0].frame.batches, inputs);
}

#[test]
fn a_streaming_passthrough_holds_one_frame_at_a_time() {
    // What a stream batch looks like, one frame per partition, but fourteen of
    // them: about 60 MB in all, through 32 MiB of guest memory. Under 0.1.0 the
    // plugin held every frame in and every table out at once (120 MB); under
    // 0.2.0 it reads a frame, writes its rows, and lets go of both.
    let rt = runtime();
    let plugin = rt.load(&guest("read-clicks")).unwrap();
    assert_eq!(plugin.contract(), "0.2.1");
    let inputs: Vec<RecordBatch> = (0..14).map(|p| clicks(60_000, 20 + p)).collect();
    let slot: Vec<Vec<u8>> = inputs.iter().map(|b| frame(std::slice::from_ref(b))).collect();
    let total: usize = slot.iter().map(Vec::len).sum();
    let limits = Limits { memory_bytes: 32 << 20, ..Limits::default() };
    assert!(total as u64 > limits.memory_bytes * 3 / 2, "frames of {total} bytes");
    let run = rt.publish(&plugin, vec![slot], &limits, None);
    let tables = run.outcome.expect("a streaming passthrough fits");
    assert_eq!(tables.len(), 1);
    assert_eq!(tables[0].frame.batches.len(), 14, "one write per frame, appended in order");
    assert_eq!(all_rows(&tables[0].frame.batches), all_rows(&inputs));
}

#[test]
fn the_sdk_writes_a_large_batch_in_pieces() {
    // A partition of a big batch: the SDK sends it 65,536 rows at a time, so
    // neither the plugin's encoded copy nor the host's is more than a piece.
    let rt = runtime();
    let plugin = rt.load(&guest("read-clicks")).unwrap();
    let input = clicks(150_000, 5);
    let run = rt.publish(&plugin, vec![vec![frame(std::slice::from_ref(&input))]], &Limits::default(), None);
    let tables = run.outcome.expect("a passthrough succeeds");
    let pieces: Vec<usize> = tables[0].frame.batches.iter().map(RecordBatch::num_rows).collect();
    assert_eq!(pieces, [65_536, 65_536, 18_928]);
    assert_eq!(all_rows(&tables[0].frame.batches), input);
}

#[test]
fn a_generic_publisher_learns_its_source_and_table_through_the_contract() {
    // One build, two publishers: each run names its own topic and table.
    let rt = runtime();
    let plugin = rt.load(&guest("passthrough")).unwrap();
    let input = clicks(20, 3);
    for topic in ["clicks", "orders.v2"] {
        let names = Declared::new(vec![topic.into()], vec![format!("{topic}-table")]);
        let run =
            rt.publish(&plugin, vec![vec![frame(std::slice::from_ref(&input))]], &Limits::default(), Some(&names));
        let tables = run.outcome.unwrap_or_else(|e| panic!("{topic}: {e}"));
        assert_eq!((tables.len(), tables[0].name.clone()), (1, format!("{topic}-table")));
        assert_eq!(all_rows(&tables[0].frame.batches), input);
        let said: Vec<&str> = run.log.lines.iter().map(|l| l.message.as_str()).collect();
        assert_eq!(said, [format!("20 rows from {topic} into {topic}-table")]);
    }
    // Without a declaration there is no table to learn, and the SDK says what to do.
    let run = rt.publish(&plugin, vec![vec![frame(std::slice::from_ref(&input))]], &Limits::default(), None);
    let error = run.outcome.expect_err("no declared table").to_string();
    assert!(
        error.contains("this run declares no output tables: give `weir run-plugin` the publisher's declaration"),
        "{error}"
    );
}

#[test]
fn a_component_built_against_0_2_0_still_runs() {
    // Built with its own bindings from the frozen `wit/v0.2.0/`, no SDK: it
    // links against 0.2.1's host, which only adds to 0.2.0.
    let rt = runtime();
    let plugin = rt.load(&guest("fixture-v0-2-passthrough")).unwrap();
    assert_eq!(plugin.contract(), "0.2.0");
    let (first, second) = (clicks(300, 1), clicks(5, 2));
    let slot = vec![frame(std::slice::from_ref(&first)), frame(std::slice::from_ref(&second))];
    let run = rt.publish(&plugin, vec![slot], &Limits::default(), Some(&declared(&["clicks"])));
    let tables = run.outcome.expect("a 0.2.0 passthrough succeeds");
    assert_eq!((tables.len(), tables[0].name.as_str()), (1, "clicks"));
    assert_eq!(all_rows(&tables[0].frame.batches), all_rows(&[first, second]));
    assert_eq!(run.log.lines.iter().map(|l| l.message.as_str()).collect::<Vec<_>>(), ["2 frames"]);
}

#[test]
fn a_component_built_against_0_1_0_still_runs() {
    // Built with its own bindings from the frozen `wit/v0.1.0/`, no SDK.
    let rt = runtime();
    let plugin = rt.load(&guest("fixture-v0-1-passthrough")).unwrap();
    assert_eq!(plugin.contract(), "0.1.0");
    let (first, second) = (clicks(300, 1), clicks(5, 2));
    let slot = vec![frame(std::slice::from_ref(&first)), frame(std::slice::from_ref(&second))];
    let run = rt.publish(&plugin, vec![slot], &Limits::default(), Some(&declared(&["clicks"])));
    let tables = run.outcome.expect("a 0.1.0 passthrough succeeds");
    assert_eq!((tables.len(), tables[0].name.as_str()), (1, "clicks"));
    assert_eq!(all_rows(&tables[0].frame.batches), first);
    assert_eq!(run.log.lines.iter().map(|l| l.message.as_str()).collect::<Vec<_>>(), ["2 frames"]);

    // Its output goes through the same checks as a 0.2.0 plugin's writes.
    let run = rt.publish(&plugin, vec![vec![frame(&[clicks(1, 1)])]], &Limits::default(), Some(&declared(&["events"])));
    assert!(matches!(run.outcome, Err(RunError::Output(OutputError::Undeclared { .. }))), "{:?}", run.outcome);
}

#[test]
fn passthrough_of_random_batches_round_trips() {
    let rt = runtime();
    let plugin = rt.load(&guest("read-clicks")).unwrap();
    for seed in 0..20u64 {
        let rows = [0, 1, 2, 63, 64, 65, 1000][seed as usize % 7];
        let batch = mixed(rows, seed);
        let run = rt.publish(&plugin, vec![vec![frame(&[batch.clone()])]], &Limits::default(), None);
        let tables = run.outcome.unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(tables[0].frame.rows(), rows as u64, "seed {seed}");
        if rows > 0 {
            assert_eq!(all_rows(&tables[0].frame.batches), batch, "seed {seed}");
        }
    }
}

#[test]
fn the_sdk_reads_dictionaries_and_every_batch_of_a_frame() {
    // Two batches in one frame, each with its own dictionary: the stream carries
    // a dictionary message before each, which the SDK must read in order.
    use arrow::array::{DictionaryArray, Int32Array};
    use arrow::datatypes::{DataType, Field, Int32Type, Schema};
    let rt = runtime();
    let plugin = rt.load(&guest("read-clicks")).unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("n", DataType::Int32, false),
        Field::new("device", DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)), true),
    ]));
    let batch = |values: Vec<&str>, keys: Vec<Option<i32>>| {
        let n = Int32Array::from_iter_values(0..keys.len() as i32);
        let device = DictionaryArray::<Int32Type>::try_new(Int32Array::from(keys), Arc::new(StringArray::from(values)));
        RecordBatch::try_new(schema.clone(), vec![Arc::new(n), Arc::new(device.unwrap())]).unwrap()
    };
    let inputs = vec![
        batch(vec!["desktop", "mobile"], vec![Some(0), Some(1), None, Some(1)]),
        batch(vec!["tablet", "tv", "watch"], vec![Some(2), Some(0), Some(1)]),
    ];
    let run = rt.publish(&plugin, vec![vec![frame(&inputs)]], &Limits::default(), None);
    let tables = run.outcome.expect("a passthrough of dictionaries succeeds");
    assert_eq!(tables[0].frame.batches, inputs);
}

#[test]
fn a_frame_that_is_not_arrow_ipc_is_refused_as_invalid_input() {
    let rt = runtime();
    let plugin = rt.load(&guest("read-clicks")).unwrap();
    let whole = frame(&[clicks(10, 1)]);
    let negative = [[0xff; 4], (-8i32).to_le_bytes()].concat();
    let cases = [
        (b"not an arrow stream".to_vec(), "ends inside its message"),
        (whole[..whole.len() / 2].to_vec(), "ends inside its message"),
        (negative, "negative length"),
    ];
    for (bad, why) in cases {
        let run = rt.publish(&plugin, vec![vec![bad]], &Limits::default(), None);
        match run.outcome {
            Err(RunError::Guest(GuestError::InvalidInput(reason))) => assert!(reason.contains(why), "{reason}"),
            other => panic!("expected invalid input ({why}), got {other:?}"),
        }
    }
}

#[test]
fn an_empty_slot_yields_no_tables() {
    let rt = runtime();
    let plugin = rt.load(&guest("read-clicks")).unwrap();
    let run = rt.publish(&plugin, vec![Vec::<Vec<u8>>::new()], &Limits::default(), None);
    assert!(run.outcome.unwrap().is_empty());
}

#[test]
fn clicks_enrich_filters_derives_and_renames_row_by_row() {
    let rt = runtime();
    let plugin = rt.load(&guest("clicks-enrich")).unwrap();
    let input = clicks(500, 42);
    let run =
        rt.publish(&plugin, vec![vec![frame(&[input.clone()])]], &Limits::default(), Some(&declared(&["clicks"])));
    let tables = run.outcome.expect("enrich succeeds");
    let out = all_rows(&tables[0].frame.batches);

    let schema = out.schema();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(
        names,
        ["event_id", "user_id", "url", "section", "referrer", "clicked_at", "duration_ms", "country", "device"]
    );

    // Recompute the expectation row by row from the input.
    let col = |b: &RecordBatch, name: &str| b.column_by_name(name).unwrap().clone();
    let durations = col(&input, "duration_ms");
    let durations = durations.as_any().downcast_ref::<Int64Array>().unwrap();
    let urls = col(&input, "url");
    let urls = urls.as_any().downcast_ref::<StringArray>().unwrap();
    let ids = col(&input, "event_id");
    let ids = ids.as_any().downcast_ref::<StringArray>().unwrap();
    let ts = col(&input, "ts");
    let ts = ts.as_any().downcast_ref::<TimestampMicrosecondArray>().unwrap();
    let kept: Vec<usize> =
        (0..input.num_rows()).filter(|&i| durations.is_valid(i) && durations.value(i) >= 100).collect();
    assert!(kept.len() < input.num_rows() && !kept.is_empty(), "the data must exercise the filter");
    assert_eq!(out.num_rows(), kept.len());

    let out_ids = col(&out, "event_id");
    let out_ids = out_ids.as_any().downcast_ref::<StringArray>().unwrap();
    let sections = col(&out, "section");
    let sections = sections.as_any().downcast_ref::<StringArray>().unwrap();
    let clicked_at = col(&out, "clicked_at");
    let clicked_at = clicked_at.as_any().downcast_ref::<TimestampMicrosecondArray>().unwrap();
    for (row, &i) in kept.iter().enumerate() {
        assert_eq!(out_ids.value(row), ids.value(i));
        let expected_section = match urls.value(i) {
            "/" => "home",
            "/docs" | "/docs/quickstart" => "docs",
            "/pricing" => "pricing",
            "/blog/weir" => "blog",
            "/signup?plan=pro" => "signup",
            other => panic!("unexpected url {other}"),
        };
        assert_eq!(sections.value(row), expected_section, "row {row}");
        assert_eq!(clicked_at.value(row), ts.value(i));
    }

    let line = &run.log.lines[0];
    assert_eq!((line.level, line.source), (LogLevel::Info, LogSource::Log));
    assert_eq!(line.message, format!("kept {} of 500 clicks ({} bounces dropped)", kept.len(), 500 - kept.len()));
}

#[test]
fn clicks_enrich_rejects_input_without_its_columns() {
    let rt = runtime();
    let plugin = rt.load(&guest("clicks-enrich")).unwrap();
    let run = rt.publish(&plugin, vec![vec![frame(&[mixed(10, 1)])]], &Limits::default(), None);
    let err = run.outcome.unwrap_err();
    assert!(matches!(err, RunError::Guest(_)), "{err:?}");
    assert_eq!(err.to_string(), "the plugin rejected its input: clicks need a `duration_ms` column of type Int64");
}

#[test]
fn undeclared_output_tables_are_refused() {
    let rt = runtime();
    let plugin = rt.load(&guest("read-clicks")).unwrap();
    let run = rt.publish(&plugin, vec![vec![frame(&[clicks(5, 1)])]], &Limits::default(), Some(&declared(&["events"])));
    let err = run.outcome.unwrap_err();
    assert!(matches!(err, RunError::Output(OutputError::Undeclared { .. })), "{err:?}");
    assert_eq!(
        err.to_string(),
        "the plugin's output was refused: output table `clicks` is not one this publisher declares (declared: events)"
    );
}

#[test]
fn the_row_limit_is_enforced_per_call() {
    let rt = runtime();
    let plugin = rt.load(&guest("read-clicks")).unwrap();
    let limits = Limits { output_rows: 99, ..Limits::default() };
    let run = rt.publish(&plugin, vec![vec![frame(&[clicks(100, 1)])]], &limits, None);
    let err = run.outcome.unwrap_err();
    assert_eq!(
        err.to_string(),
        "the plugin's output was refused: the plugin returned 100 rows, over the 99-row output limit"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_each_get_their_own_answer() {
    concurrent_calls_succeed_on(runtime(), 256).await;
}

/// More calls at once than the instance pool holds wait for a free instance:
/// none fails to instantiate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_beyond_the_instance_pool_wait_for_a_free_instance() {
    let config = weir::plugin::RuntimeConfig {
        cache_dir: Some(common::shared_cache()),
        max_concurrent_calls: 2,
        ..weir::plugin::RuntimeConfig::default()
    };
    // Calls long enough (50k rows each) that they overlap.
    concurrent_calls_succeed_on(weir::plugin::Runtime::new(config).unwrap(), 50_000).await;
}

/// Eight calls at once on `rt`, each with its own input of `rows`: each gets its own answer.
async fn concurrent_calls_succeed_on(rt: weir::plugin::Runtime, rows: usize) {
    let rt = Arc::new(rt);
    let plugin = rt.load(&guest("read-clicks")).unwrap();
    // Every input made first, so that the calls start together.
    let inputs: Vec<_> = (0..8).map(|seed| vec![vec![frame(&[clicks(rows, seed)])]]).collect();
    let mut calls = Vec::new();
    for slots in inputs {
        calls.push(tokio::spawn({
            let (rt, plugin) = (rt.clone(), plugin.clone());
            async move { rt.publish_blocking(plugin, slots, Limits::default(), None, Collect::default()).await }
        }));
    }
    for (seed, call) in calls.into_iter().enumerate() {
        let run = call.await.unwrap();
        let Collect(tables) = run.outcome.unwrap();
        assert_eq!(all_rows(&tables[0].frame.batches), clicks(rows, seed as u64));
    }
}

#[test]
fn a_running_plugin_does_not_block_the_reactor() {
    // One thread only: the timer can tick while the plugin spins only if the call runs elsewhere.
    let reactor = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let rt = Arc::new(runtime());
    let plugin = rt.load(&guest("hostile-infinite-loop")).unwrap();
    let limits = Limits { deadline: std::time::Duration::from_millis(500), ..Limits::default() };
    reactor.block_on(async {
        let call = rt.publish_blocking(plugin, vec![vec![frame(&[clicks(1, 1)])]], limits, None, Collect::default());
        tokio::pin!(call);
        let mut interval = tokio::time::interval(std::time::Duration::from_millis(10));
        let mut ticks = 0;
        let run = loop {
            tokio::select! {
                run = &mut call => break run,
                _ = interval.tick() => ticks += 1,
            }
        };
        assert!(matches!(run.outcome, Err(RunError::Trap(_))), "{:?}", run.outcome);
        assert!(ticks >= 10, "the reactor was blocked while the plugin ran: {ticks} ticks");
    });
}
