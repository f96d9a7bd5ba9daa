//! The plugin runtime's cost, printed as figures (not asserted):
//!
//! * passthrough (`read-clicks`) at 1k, 64k and 1M rows: instantiation, the
//!   whole call, and the ratio to the same work done natively (copy the frame
//!   in, copy the same bytes out, decode them as the host's check does; the
//!   SDK writes an unchanged batch as the bytes it came in);
//! * loading a plugin from the artifact cache vs compiling it cold.
//!
//! Run with `cargo bench -p weir --bench plugin` (`-- --quick` for fewer rounds,
//! `-- --rows N --rounds M` for one size only, e.g. under a profiler; `--wasm
//! FILE` to run another component that reads clicks and writes table `clicks`
//! in read-clicks' place, such as a Python or JavaScript one from the guests
//! directory; `--log` prints what its last call logged, such as its own timings).

#[path = "../../tests/common/mod.rs"]
mod common;
#[path = "support/figures.rs"]
mod figures;

use std::time::{Duration, Instant};

use figures::{fmt, median};

use arrow::array::RecordBatch;
use weir::plugin::frames;
use weir::plugin::{Declared, Limits, Runtime, RuntimeConfig};

fn time<T>(rounds: usize, mut f: impl FnMut() -> T) -> Duration {
    median(
        (0..rounds)
            .map(|_| {
                let started = Instant::now();
                std::hint::black_box(f());
                started.elapsed()
            })
            .collect(),
    )
}

/// What the passthrough plugin and the host do, natively: copy the frame in,
/// copy the same bytes out (the SDK writes an unchanged batch as the bytes it
/// came in; reading it unvalidated only builds the arrays' headers), and the
/// host's validating check of them.
fn native_passthrough(frame: &[u8]) -> usize {
    let copied_in = frame.to_vec();
    let copied_out = copied_in.clone();
    frames::decode(copied_out).expect("check").rows() as usize
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let flag = |name: &str| -> Option<usize> {
        args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)?.parse().ok())
    };
    let (only_rows, fixed_rounds) = (flag("--rows"), flag("--rounds"));
    let show_log = args.iter().any(|a| a == "--log");
    let rt = Runtime::new(RuntimeConfig::default()).expect("runtime");
    let (name, wasm) = match args.iter().position(|a| a == "--wasm") {
        Some(i) => {
            let path = args.get(i + 1).expect("--wasm takes a component's path");
            (path.clone(), std::fs::read(path).unwrap_or_else(|e| panic!("reading {path}: {e}")))
        }
        None => ("read-clicks".to_string(), common::guest("read-clicks")),
    };
    let plugin = rt.load(&wasm).unwrap_or_else(|e| panic!("loading {name}: {e:#}"));
    let limits =
        Limits { memory_bytes: 2 << 30, output_bytes: 1 << 30, deadline: Duration::from_secs(60), ..Limits::default() };

    println!("passthrough ({name}), median of N calls");
    println!(
        "{:>9} {:>10} {:>12} {:>12} {:>12} {:>8} {:>5}",
        "rows", "frame", "instantiate", "wasm call", "native", "ratio", "N"
    );
    // As a publisher declares them: a Python or JavaScript passthrough writes the table declared.
    let declared = Declared::new(vec!["clicks".into()], vec!["clicks".into()]);
    for (rows, rounds) in [(0usize, 300usize), (1_000, 300), (64 * 1024, 40), (1_000_000, 5)] {
        if only_rows.is_some_and(|only| only != rows) {
            continue;
        }
        let rounds = fixed_rounds.unwrap_or(if quick { rounds.div_ceil(10).max(3) } else { rounds });
        let batch: RecordBatch = common::clicks(rows, 7);
        let frame = common::frame(&[batch]);
        // Shared, so a call's input is not a fresh copy of the frame.
        let shared = arrow::buffer::Buffer::from_vec(frame.clone());
        let slots = || vec![vec![shared.clone()]];
        // Warm up both paths once (another component given may keep fewer rows).
        let out = rt.publish(&plugin, slots(), &limits, Some(&declared)).outcome.expect("the call");
        assert!(out[0].frame.rows() <= rows as u64);
        native_passthrough(&frame);

        let (mut instantiate, mut last_log) = (Vec::new(), None);
        let wasm_total = time(rounds, || {
            let run = rt.publish(&plugin, slots(), &limits, Some(&declared));
            instantiate.push(run.timing.instantiate);
            last_log = Some(run.log);
            run.outcome.is_ok()
        });
        let native = time(rounds, || native_passthrough(&frame));
        println!(
            "{:>9} {:>10} {:>12} {:>12} {:>12} {:>7.2}x {:>5}",
            rows,
            weir::plugin::human_bytes(frame.len() as u64),
            fmt(median(instantiate)),
            fmt(wasm_total),
            fmt(native),
            wasm_total.as_secs_f64() / native.as_secs_f64(),
            rounds
        );
        if show_log {
            for line in last_log.map(|log| log.lines).unwrap_or_default() {
                println!("          the last call's log: {}", line.message);
            }
        }
    }

    if only_rows.is_some() {
        return;
    }
    println!();
    println!("loading {name} ({})", weir::plugin::human_bytes(wasm.len() as u64));
    let cache = tempfile::tempdir().expect("tempdir");
    let config = RuntimeConfig { cache_dir: Some(cache.path().to_path_buf()), ..RuntimeConfig::default() };
    let cached_rt = Runtime::new(config).expect("runtime");
    let cold = time(if quick { 1 } else { 3 }, || rt.load(&wasm).expect("compile"));
    cached_rt.load(&wasm).expect("fill the cache");
    let cached = time(if quick { 5 } else { 20 }, || cached_rt.load(&wasm).expect("cached load"));
    println!("  cold compile   {:>10}", fmt(cold));
    println!("  cached load    {:>10}  ({:.0}x faster)", fmt(cached), cold.as_secs_f64() / cached.as_secs_f64());
}
