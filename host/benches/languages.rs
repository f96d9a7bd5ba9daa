//! Publishers in Rust, Python and JavaScript side by side, printed as figures
//! (not asserted): each language's component size, cold compile, cached load,
//! instantiation, and call time for the passthrough and for clicks-enrich at
//! 1k and 64k rows, with the ratio to Rust's.
//!
//! Run with `cargo bench -p weir --bench languages` (`-- --quick` for fewer rounds).
//! The Python and JavaScript components are built on first use (componentize-py,
//! componentize-js: scripts/setup.sh installs both).

#[path = "../../tests/common/mod.rs"]
mod common;
#[path = "support/figures.rs"]
mod figures;

use std::time::{Duration, Instant};

use figures::{fmt, median};

use weir::plugin::{Declared, Limits, Plugin, Runtime, RuntimeConfig};

struct Language {
    name: &'static str,
    passthrough: Vec<u8>,
    enrich: Vec<u8>,
}

/// Median instantiation and median call (the publish minus instantiation) over `rounds` calls.
fn calls(rt: &Runtime, plugin: &Plugin, frame: &arrow::buffer::Buffer, rounds: usize) -> (Duration, Duration) {
    let limits = Limits { deadline: Duration::from_secs(120), ..Limits::default() };
    // As a publisher declares them: the passthroughs in Python and JavaScript write the table declared.
    let declared = Declared::new(vec!["clicks".into()], vec!["clicks".into()]);
    let (mut instantiate, mut call) = (Vec::new(), Vec::new());
    for round in 0..=rounds {
        let started = Instant::now();
        let run = rt.publish(plugin, vec![vec![frame.clone()]], &limits, Some(&declared));
        let elapsed = started.elapsed();
        if let Err(e) = run.outcome {
            panic!("the publisher failed: {e}");
        }
        // The first call warms the caches up.
        if round > 0 {
            instantiate.push(run.timing.instantiate);
            call.push(elapsed.saturating_sub(run.timing.instantiate));
        }
    }
    (median(instantiate), median(call))
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let languages = [
        Language { name: "rust", passthrough: common::guest("read-clicks"), enrich: common::guest("clicks-enrich") },
        Language {
            name: "python",
            passthrough: common::python_guest("passthrough"),
            enrich: common::python_guest("clicks-enrich"),
        },
        Language {
            name: "javascript",
            passthrough: common::js_guest("passthrough"),
            enrich: common::js_guest("clicks-enrich"),
        },
    ];

    println!("loading the passthrough component");
    println!("{:>11} {:>10} {:>13} {:>12}", "language", "size", "cold compile", "cached load");
    let cache = tempfile::tempdir().expect("tempdir");
    let cached_rt =
        Runtime::new(RuntimeConfig { cache_dir: Some(cache.path().to_path_buf()), ..RuntimeConfig::default() })
            .expect("runtime");
    for language in &languages {
        let fresh = Runtime::new(RuntimeConfig::default()).expect("runtime");
        let started = Instant::now();
        fresh.load(&language.passthrough).expect("compile");
        let cold = started.elapsed();
        cached_rt.load(&language.passthrough).expect("fill the cache");
        let cached = median(
            (0..if quick { 3 } else { 10 })
                .map(|_| {
                    let started = Instant::now();
                    cached_rt.load(&language.passthrough).expect("cached load");
                    started.elapsed()
                })
                .collect(),
        );
        println!(
            "{:>11} {:>10} {:>13} {:>12}",
            language.name,
            weir::plugin::human_bytes(language.passthrough.len() as u64),
            fmt(cold),
            fmt(cached)
        );
    }

    let rt = common::runtime();
    for (what, pick) in [("passthrough", 0), ("clicks-enrich", 1)] {
        println!();
        println!("{what}, median of N calls (call = the publish, less instantiation)");
        println!("{:>8} {:>11} {:>12} {:>11} {:>9} {:>4}", "rows", "language", "instantiate", "call", "vs rust", "N");
        for (rows, rounds) in [(1_000usize, 40usize), (64 * 1024, 10)] {
            let rounds = if quick { rounds.div_ceil(4) } else { rounds };
            let frame = arrow::buffer::Buffer::from_vec(common::frame(&[common::clicks(rows, 7)]));
            let mut rust_call = None;
            for language in &languages {
                let component = if pick == 0 { &language.passthrough } else { &language.enrich };
                let plugin = rt.load(component).expect("load");
                let (instantiate, call) = calls(&rt, &plugin, &frame, rounds);
                let base = *rust_call.get_or_insert(call);
                println!(
                    "{:>8} {:>11} {:>12} {:>11} {:>8.2}x {:>4}",
                    rows,
                    language.name,
                    fmt(instantiate),
                    fmt(call),
                    call.as_secs_f64() / base.as_secs_f64(),
                    rounds
                );
            }
        }
    }
    println!();
    println!("targets: passthrough call ≤ 2x rust's at 64k rows in every language; instantiate ≤ 10 ms");
}
