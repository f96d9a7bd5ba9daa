//! weir's columnar kernels (`weir:frames/kernels`), composed into a
//! publisher's component: what a filter, a derived column and a projection
//! make, in the real sandbox, equals arrow-rs's own answer; a kernel's error
//! names the expression and fails the batch as invalid input; and a publisher
//! that imports the kernels without having them composed in is refused with
//! what to do.

mod common;

use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::compute::{cast, concat_batches, filter_record_batch};
use arrow::datatypes::{DataType, Field, Schema};
use weir::plugin::compose;
use weir::plugin::{GuestError, Limits, LoadError, RunError, TrapKind};

use common::{clicks, declared, frame, js_guest, js_guest_uncomposed, python_guest, runtime};

fn roomy() -> Limits {
    Limits { deadline: Duration::from_secs(60), ..Limits::default() }
}

/// The kernels-filter example with the kernels composed in.
fn composed() -> Vec<u8> {
    js_guest("kernels-filter")
}

/// What kernels-filter makes of `input`, computed here with arrow-rs.
fn expected(input: &RecordBatch) -> RecordBatch {
    let duration = input.column_by_name("duration_ms").unwrap().as_any().downcast_ref::<Int64Array>().unwrap();
    let keep = arrow::compute::kernels::cmp::gt_eq(duration, &Int64Array::new_scalar(100)).unwrap();
    let kept = filter_record_batch(input, &keep).unwrap();
    let ms = cast(kept.column_by_name("duration_ms").unwrap(), &DataType::Float64).unwrap();
    let seconds: Float64Array =
        ms.as_any().downcast_ref::<Float64Array>().unwrap().iter().map(|v| v.map(|v| v / 1000.0)).collect();
    let field = |name: &str| kept.schema().field_with_name(name).unwrap().clone();
    let schema = Schema::new(vec![
        field("event_id"),
        field("url"),
        field("duration_ms"),
        Field::new("duration_s", DataType::Float64, true),
    ]);
    let column = |name: &str| kept.column_by_name(name).unwrap().clone();
    let columns: Vec<ArrayRef> = vec![column("event_id"), column("url"), column("duration_ms"), Arc::new(seconds)];
    RecordBatch::try_new(Arc::new(schema), columns).unwrap()
}

#[test]
fn the_kernels_filter_derive_and_select_in_the_publishers_sandbox_as_arrow_does() {
    let rt = runtime();
    let plugin = rt.load(&composed()).expect("the composed component loads: it imports nothing the host refuses");
    // Several frames, one of several record batches (the host frames 64 Ki rows per batch).
    let input = [clicks(70_000, 11), clicks(1, 12), clicks(500, 13)];
    let slot = input.iter().map(|f| frame(std::slice::from_ref(f))).collect();
    let run = rt.publish(&plugin, vec![slot], &roomy(), Some(&declared(&["clicks"])));
    let tables = run.outcome.unwrap_or_else(|e| panic!("the publisher fails: {e}\n{:?}", run.log));
    assert_eq!(tables.len(), 1);
    let written = concat_batches(&tables[0].frame.schema, &tables[0].frame.batches).unwrap();
    let want = concat_batches(&expected(&input[0]).schema(), &input.iter().map(expected).collect::<Vec<_>>()).unwrap();
    assert!(want.num_rows() > 60_000 && want.num_rows() < input.iter().map(|b| b.num_rows()).sum());
    assert_eq!(written, want);
    assert!(run.log.lines.iter().any(|l| l.message == format!("kept {} clicks", want.num_rows())), "{:?}", run.log);
}

#[test]
fn a_kernels_error_names_the_expression_and_fails_the_batch_as_invalid_input() {
    let rt = runtime();
    let plugin = rt.load(&composed()).unwrap();
    // `duration_ms` as text: `col("duration_ms") >= 100` does not fit.
    let clicks = clicks(3, 14);
    let schema = clicks.schema();
    let at = schema.index_of("duration_ms").unwrap();
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields[at] = Field::new("duration_ms", DataType::Utf8, true);
    let mut columns = clicks.columns().to_vec();
    columns[at] = Arc::new(StringArray::from(vec![Some("120"), None, Some("7")]));
    let texty = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
    let run = rt.publish(&plugin, vec![vec![frame(&[texty])]], &roomy(), Some(&declared(&["clicks"])));
    match run.outcome {
        Err(RunError::Guest(GuestError::InvalidInput(message))) => assert_eq!(
            message, "`col(\"duration_ms\") >= 100`: cannot compare Utf8 and Int64",
            "the kernel's own words, naming the expression"
        ),
        other => panic!("expected invalid input, got {:?}", other.map(|t| t.len())),
    }
}

/// The kernels' own tests of their expressions' semantics (Kleene logic,
/// literals taking a column's type, true division, what errors say), run
/// natively: `cargo test -p kernels` in the guests' workspace.
#[test]
fn the_kernels_own_tests_pass() {
    let guests = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-examples/Cargo.toml");
    let out = std::process::Command::new(env!("CARGO"))
        .args(["test", "--release", "--lib", "-p", "kernels", "--manifest-path"])
        .arg(guests)
        .env("CARGO_TARGET_DIR", common::guests_dir().ancestors().nth(2).unwrap())
        .output()
        .expect("cargo");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && said.contains("test result: ok"), "{said}");
}

#[test]
fn a_publisher_importing_the_kernels_without_them_composed_in_is_refused_saying_how_to_build_it() {
    let rt = runtime();
    let uncomposed = js_guest_uncomposed("kernels-filter");
    assert!(compose::imports_kernels(&uncomposed).unwrap());
    assert!(!compose::imports_kernels(&composed()).unwrap(), "composing satisfies the import");
    match rt.load(&uncomposed) {
        Err(e @ LoadError::KernelsNotComposed { .. }) => {
            let message = e.to_string();
            assert!(message.contains("`weir:frames/kernels@0.1.0`"), "{message}");
            assert!(message.contains("weir plugin build"), "{message}");
        }
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(_) => panic!("a component whose kernels import nothing serves loaded"),
    }
}

/// `array` as text, to compare answers whose types differ only in width
/// (Polars' `dt.day` is an int8, the kernels' an int32); timestamps without
/// their zone's name (the same instants: Polars names UTC by name).
fn as_text(array: &ArrayRef) -> ArrayRef {
    let array = match array.data_type() {
        DataType::Timestamp(unit, Some(_)) => cast(array, &DataType::Timestamp(*unit, None)).unwrap(),
        _ => array.clone(),
    };
    cast(&array, &DataType::Utf8).unwrap()
}

/// What Polars makes of guest-examples/python/fixtures/frame-expressions/expressions.py
/// (or with `mode` `["group-by"]`, of fixtures/frame-group-by/aggregations.py)
/// over `input`, natively (its time zone named: UTC, the same instants).
fn polars_answers(input: &RecordBatch, mode: &[&str]) -> RecordBatch {
    let dir = tempfile::tempdir().unwrap();
    let (given, answered) = (dir.path().join("input.arrows"), dir.path().join("polars.arrows"));
    let at = input.schema().index_of("ts").unwrap();
    let mut fields: Vec<Field> = input.schema().fields().iter().map(|f| f.as_ref().clone()).collect();
    let utc = DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, Some("UTC".into()));
    fields[at] = Field::new("ts", utc.clone(), false);
    let mut columns = input.columns().to_vec();
    columns[at] = cast(&columns[at], &utc).unwrap();
    std::fs::write(&given, frame(&[RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()])).unwrap();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-examples/python/polars_expressions.py");
    let out = std::process::Command::new("python3").arg(script).arg(&given).arg(&answered).args(mode).output().unwrap();
    assert!(out.status.success(), "polars: {}", String::from_utf8_lossy(&out.stderr));
    let reader = arrow::ipc::reader::StreamReader::try_new(std::fs::File::open(&answered).unwrap(), None).unwrap();
    let schema = reader.schema();
    concat_batches(&schema, &reader.collect::<Result<Vec<_>, _>>().unwrap()).unwrap()
}

#[test]
fn the_dataframe_apis_answer_as_polars_does() {
    // 41 expressions, through weir.frame / weir/frame and the kernels in the sandbox,
    // against the same written for Polars and run natively.
    let input = clicks(5_000, 31);
    let polars = polars_answers(&input, &[]);
    assert_eq!(polars.num_columns(), 41);
    assert_eq!(polars.num_rows(), input.num_rows());
    assert_every_language_answers_as_polars("fixtures/frame-expressions", &input, &polars);
}

#[test]
fn a_group_by_answers_as_polars_does() {
    // Clicks by country and device (nulls a group of their own): len, sum, mean,
    // min, max, count, first, last, sorted by the keys, against Polars'
    // `group_by(maintain_order=True).agg(…).sort(…)` on the same rows.
    let input = clicks(5_000, 32);
    let polars = polars_answers(&input, &["group-by"]);
    assert!(polars.num_rows() > 10, "the data must make many groups");
    assert_every_language_answers_as_polars("fixtures/frame-group-by", &input, &polars);
}

#[test]
fn frames_are_cut_joined_deduplicated_and_turned_into_rows_and_back_as_polars_does() {
    // head, tail, slice, concat, with_row_index, unique, rows out to the
    // interpreter's values and back in, str.split's lists: against Polars.
    let input = clicks(5_000, 33);
    let polars = polars_answers(&input, &["shape"]);
    assert!(polars.num_rows() > 10, "the data must make many distinct keys");
    assert_every_language_answers_as_polars("fixtures/frame-shape", &input, &polars);
}

/// A random batch of the columns fixtures/frame-random/cases.py reads: each
/// column's nulls as dense as the seed decides (none, some, most, all).
fn random_batch(rows: usize, seed: u64) -> RecordBatch {
    use arrow::array::{BooleanArray, Date32Array, DictionaryArray, Int32Array, TimestampMicrosecondArray};
    use arrow::datatypes::Int32Type;
    use rand::{Rng, SeedableRng, rngs::StdRng};
    let mut rng = StdRng::seed_from_u64(seed);
    let present = |rng: &mut StdRng| {
        let density = [1.0, 0.9, 0.5, 0.0][rng.random_range(0..4)];
        (0..rows).map(|_| rng.random_bool(density)).collect::<Vec<bool>>()
    };
    let letters = ["a", "b", "c", "x", "z", "é", "Ω", "0", "1", "7", " ", "/"];
    let word = |rng: &mut StdRng| {
        (0..rng.random_range(0..6)).map(|_| letters[rng.random_range(0..letters.len())]).collect::<String>()
    };
    let (pi, pf, ps, pd, pb, pday) = (
        present(&mut rng),
        present(&mut rng),
        present(&mut rng),
        present(&mut rng),
        present(&mut rng),
        present(&mut rng),
    );
    // Never 0, so that f / i is a number.
    let i: Int32Array =
        pi.iter().map(|&p| p.then(|| rng.random_range(1..500) * if rng.random_bool(0.5) { 1 } else { -1 })).collect();
    let f: Float64Array = pf.iter().map(|&p| p.then(|| rng.random_range(-1e4..1e4))).collect();
    let s: StringArray = ps.iter().map(|&p| p.then(|| word(&mut rng))).collect();
    let names = ["x", "y", "Ωz", ""];
    let d: DictionaryArray<Int32Type> =
        pd.iter().map(|&p| p.then(|| names[rng.random_range(0..names.len())])).collect();
    let b: BooleanArray = pb.iter().map(|&p| p.then(|| rng.random_bool(0.5))).collect();
    let t =
        TimestampMicrosecondArray::from_iter_values((0..rows).map(|_| rng.random_range(0..4_000_000_000_000_000i64)))
            .with_timezone("+02:00");
    let day: Date32Array = pday.iter().map(|&p| p.then(|| rng.random_range(-20_000..40_000))).collect();
    let mut tags = arrow::array::ListBuilder::new(arrow::array::StringBuilder::new());
    for &p in &present(&mut rng) {
        for _ in 0..if p { rng.random_range(1..4) } else { 0 } {
            tags.values().append_value(word(&mut rng));
        }
        tags.append(p);
    }
    let tags = tags.finish();
    let ids: Int64Array = present(&mut rng).iter().map(|&p| p.then(|| rng.random_range(-1000..1000))).collect();
    let handles: StringArray = present(&mut rng).iter().map(|&p| p.then(|| word(&mut rng))).collect();
    let user = arrow::array::StructArray::try_new(
        vec![Field::new("id", DataType::Int64, true), Field::new("name", DataType::Utf8, true)].into(),
        vec![Arc::new(ids) as ArrayRef, Arc::new(handles)],
        Some(present(&mut rng).into()),
    )
    .unwrap();
    let schema = Schema::new(vec![
        Field::new("i", DataType::Int32, true),
        Field::new("f", DataType::Float64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("d", d.data_type().clone(), true),
        Field::new("b", DataType::Boolean, true),
        Field::new("t", t.data_type().clone(), false),
        Field::new("day", DataType::Date32, true),
        Field::new("tags", tags.data_type().clone(), true),
        Field::new("user", user.data_type().clone(), true),
    ]);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(i),
        Arc::new(f),
        Arc::new(s),
        Arc::new(d),
        Arc::new(b),
        Arc::new(t),
        Arc::new(day),
        Arc::new(tags),
        Arc::new(user),
    ];
    RecordBatch::try_new(Arc::new(schema), columns).unwrap()
}

#[test]
fn the_kernels_answer_as_pyarrow_compute_on_random_batches() {
    // Every case of cases.py (comparisons, Kleene logic, arithmetic, nulls,
    // text, dictionary-encoded text, times in a zone, dates, casts, a
    // conditional; a group-by with nulls among its keys) over batches of
    // random values and random null densities, against pyarrow.compute.
    let rt = runtime();
    let plugin = rt.load(&python_guest("fixtures/frame-random")).unwrap();
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-examples/python/fixtures/frame-random");
    for seed in 0..12 {
        let input = random_batch(if seed % 3 == 0 { 1 } else { 2_000 }, seed);
        let dir = tempfile::tempdir().unwrap();
        let paths = ["input", "values", "groups"].map(|name| dir.path().join(format!("{name}.arrows")));
        std::fs::write(&paths[0], frame(std::slice::from_ref(&input))).unwrap();
        let out = std::process::Command::new("python3")
            .arg(fixture.join("pyarrow_cases.py"))
            .args(&paths)
            .current_dir(&fixture)
            .output()
            .unwrap();
        assert!(out.status.success(), "pyarrow: {}", String::from_utf8_lossy(&out.stderr));
        let read = |path: &std::path::Path| {
            let reader = arrow::ipc::reader::StreamReader::try_new(std::fs::File::open(path).unwrap(), None).unwrap();
            let schema = reader.schema();
            concat_batches(&schema, &reader.collect::<Result<Vec<_>, _>>().unwrap()).unwrap()
        };
        let run = rt.publish(
            &plugin,
            vec![vec![frame(std::slice::from_ref(&input))]],
            &roomy(),
            Some(&declared(&["values", "groups"])),
        );
        let tables = run.outcome.unwrap_or_else(|e| panic!("seed {seed}: the publisher fails: {e}\n{:?}", run.log));
        for (table, expected) in tables.iter().zip([read(&paths[1]), read(&paths[2])]) {
            let ours = concat_batches(&table.frame.schema, &table.frame.batches).unwrap();
            assert_eq!(ours.num_rows(), expected.num_rows(), "seed {seed}: {}", table.name);
            for field in expected.schema().fields() {
                let column =
                    ours.column_by_name(field.name()).unwrap_or_else(|| panic!("seed {seed}: no {}", field.name()));
                let what = format!("seed {seed}: {} `{}`", table.name, field.name());
                assert_same_answers(column, expected.column_by_name(field.name()).unwrap(), &what);
            }
        }
    }
}

/// The Python and the TypeScript fixture `fixture`, run in the sandbox on
/// `input`, write the table `polars` is: the same columns, in order, the same
/// rows, the same values.
fn assert_every_language_answers_as_polars(fixture: &str, input: &RecordBatch, polars: &RecordBatch) {
    let rt = runtime();
    let names: Vec<&String> = polars.schema_ref().fields().iter().map(|f| f.name()).collect();
    for (language, component) in [("python", python_guest(fixture)), ("typescript", js_guest(fixture))] {
        let plugin = rt.load(&component).unwrap();
        let slot = vec![frame(std::slice::from_ref(input))];
        let run = rt.publish(&plugin, vec![slot], &roomy(), Some(&declared(&["clicks"])));
        let tables = run.outcome.unwrap_or_else(|e| panic!("{language}: the publisher fails: {e}\n{:?}", run.log));
        let ours = concat_batches(&tables[0].frame.schema, &tables[0].frame.batches).unwrap();
        assert_eq!(ours.num_rows(), polars.num_rows(), "{language}");
        assert_eq!(ours.schema().fields().iter().map(|f| f.name()).collect::<Vec<_>>(), names, "{language}");
        for name in &names {
            let (a, b) = (ours.column_by_name(name).unwrap(), polars.column_by_name(name).unwrap());
            assert_same_answers(a, b, &format!("{language}: `{name}`"));
        }
    }
}

/// `ours` and `polars` (or another reference's answer) hold the same values:
/// as text, or for floats to the last bits (Polars divides by a literal as a multiplication by its
/// reciprocal: 15322 / 1000 is 15.322000000000001 there).
fn assert_same_answers(ours: &ArrayRef, polars: &ArrayRef, what: &str) {
    if ours.data_type().is_floating() && polars.data_type().is_floating() {
        let (a, b) = (cast(ours, &DataType::Float64).unwrap(), cast(polars, &DataType::Float64).unwrap());
        let (a, b) =
            (a.as_any().downcast_ref::<Float64Array>().unwrap(), b.as_any().downcast_ref::<Float64Array>().unwrap());
        for (row, (x, y)) in a.iter().zip(b.iter()).enumerate() {
            let close = match (x, y) {
                (Some(x), Some(y)) => x == y || (x - y).abs() <= 1e-12 * x.abs().max(y.abs()),
                (x, y) => x.is_none() && y.is_none(),
            };
            assert!(close, "{what} differs at row {row}: the kernels say {x:?}, the reference {y:?}");
        }
        return;
    }
    let (a, b) = (as_text(ours), as_text(polars));
    if &a != &b {
        let row = (0..a.len()).find(|&i| a.slice(i, 1) != b.slice(i, 1)).unwrap_or(0);
        panic!(
            "{what} differs first at row {row}: the kernels say {:?}, the reference {:?}",
            a.slice(row, 1),
            b.slice(row, 1)
        );
    }
}

#[test]
fn kernels_that_grow_without_end_are_stopped_by_the_memory_cap_and_the_next_call_succeeds() {
    // URLs doubled, a frame joined to itself, a million distinct keys grouped:
    // the kernels' memory is the plugin's, and the cap stops each.
    let rt = runtime();
    let bomb = rt.load(&python_guest("hostile/kernels-bomb")).unwrap();
    let limits = Limits { memory_bytes: 64 << 20, ..roomy() };
    for how in ["urls", "concat", "keys"] {
        let run = rt.publish(&bomb, vec![vec![frame(&[clicks(100, 3)])]], &limits, Some(&declared(&[how])));
        match &run.outcome {
            Err(RunError::Trap(trap)) => assert_eq!(trap.kind, TrapKind::Memory { limit_bytes: 64 << 20 }, "{how}"),
            other => panic!("{how}: expected the memory cap to stop it, got {other:?}"),
        }
        if how == "keys" {
            // Stopped in the group-by itself, the frame it groups having been made.
            let grouping = run.log.lines.iter().any(|l| l.message == "grouping 1048576 rows by a key unique to each");
            assert!(grouping, "{:?}", run.log);
        }
        let said = run.outcome.unwrap_err().to_string();
        assert!(said.starts_with("the plugin exceeded its 64 MiB memory limit and was stopped"), "{how}: {said}");
        // The same runtime then runs a publisher over the kernels as ever.
        let enrich = rt.load(&python_guest("clicks-enrich")).unwrap();
        let run = rt.publish(&enrich, vec![vec![frame(&[clicks(500, 4)])]], &roomy(), Some(&declared(&["clicks"])));
        assert!(run.outcome.is_ok_and(|tables| tables[0].frame.rows() > 0), "{how}: {:?}", run.log);
    }
    // Under the default cap, the million groups fit: one row each, counted once.
    let run = rt.publish(&bomb, vec![vec![frame(&[clicks(100, 3)])]], &roomy(), Some(&declared(&["keys"])));
    let tables = run.outcome.unwrap_or_else(|e| panic!("a million keys under the default cap: {e}"));
    let groups = concat_batches(&tables[0].frame.schema, &tables[0].frame.batches).unwrap();
    assert_eq!(groups.num_rows(), 1 << 20);
    let counts = cast(groups.column_by_name("len").unwrap(), &DataType::Int64).unwrap();
    assert!(counts.as_any().downcast_ref::<Int64Array>().unwrap().iter().all(|n| n == Some(1)));
}
