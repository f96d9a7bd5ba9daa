//! The plugin runtime's cost, printed as figures (not asserted):
//!
//! * passthrough (`read-clicks`) at 1k, 64k and 1M rows: instantiation, the
//!   whole call, and the ratio to the same work done natively (decode the
//!   frame, re-encode it, decode the result as the host's check does);
//! * loading a plugin from the artifact cache vs compiling it cold.
//!
//! Run with `cargo bench -p weir --bench plugin` (`-- --quick` for fewer rounds).

#[path = "../../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use weir::frames;
use weir::plugin::{Limits, Runtime, RuntimeConfig};

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

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

/// What the passthrough plugin does, natively, plus the host's output check.
fn native_passthrough(frame: &[u8]) -> usize {
    let input = frames::decode_owned(frame.to_vec()).expect("decode");
    let output = frames::encode(&input.schema, &input.batches).expect("encode");
    frames::decode_owned(output).expect("check").rows() as usize
}

fn fmt(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1000.0 { format!("{us:.1} µs") } else if us < 1e6 { format!("{:.2} ms", us / 1e3) } else { format!("{:.2} s", us / 1e6) }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let rt = Runtime::new(RuntimeConfig::default()).expect("runtime");
    let wasm = common::guest("read-clicks");
    let plugin = rt.load(&wasm).expect("load read-clicks");
    let limits = Limits { memory_bytes: 2 << 30, output_bytes: 1 << 30, deadline: Duration::from_secs(60), ..Limits::default() };

    println!("passthrough (read-clicks), median of N calls");
    println!("{:>9} {:>10} {:>12} {:>12} {:>12} {:>8} {:>5}", "rows", "frame", "instantiate", "wasm call", "native", "ratio", "N");
    for (rows, rounds) in [(1_000usize, 300usize), (64 * 1024, 40), (1_000_000, 5)] {
        let rounds = if quick { rounds.div_ceil(10).max(3) } else { rounds };
        let batch: RecordBatch = common::clicks(rows, 7);
        let frame = common::frame(&[batch]);
        let slots = [vec![frame.clone()]];
        // Warm up both paths once.
        assert_eq!(rt.publish(&plugin, &slots, &limits, None).outcome.expect("passthrough")[0].frame.rows(), rows as u64);
        native_passthrough(&frame);

        let mut instantiate = Vec::new();
        let wasm_total = time(rounds, || {
            let run = rt.publish(&plugin, &slots, &limits, None);
            instantiate.push(run.timing.instantiate);
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
    }

    println!();
    println!("loading read-clicks ({})", weir::plugin::human_bytes(wasm.len() as u64));
    let cache = tempfile::tempdir().expect("tempdir");
    let config = RuntimeConfig { cache_dir: Some(cache.path().to_path_buf()), ..RuntimeConfig::default() };
    let cached_rt = Runtime::new(config).expect("runtime");
    let cold = time(if quick { 1 } else { 3 }, || rt.load(&wasm).expect("compile"));
    cached_rt.load(&wasm).expect("fill the cache");
    let cached = time(if quick { 5 } else { 20 }, || cached_rt.load(&wasm).expect("cached load"));
    println!("  cold compile   {:>10}", fmt(cold));
    println!("  cached load    {:>10}  ({:.0}x faster)", fmt(cached), cold.as_secs_f64() / cached.as_secs_f64());
}
