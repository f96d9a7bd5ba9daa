//! Publishers in Rust, Python and JavaScript side by side, printed as figures
//! (not asserted): each language's component size, cold compile, cached load,
//! instantiation, and call time for the passthrough, for clicks-enrich and
//! for clicks-by-section (a group-by) at 1k and 64k rows, with the ratio to
//! Rust's (Python and TypeScript over weir's kernels); then a burst, as a node meets
//! one message for each of many publishers: 999 one-row passthrough calls, a
//! third in each language, all queued at once through `publish_blocking`:
//! each call's CPU when the calls share the cores.
//!
//! Run with `cargo bench -p weir --bench languages` (`-- --quick` for fewer
//! rounds, `-- --burst` for the burst alone).
//! The Python and JavaScript components are built on first use (componentize-py,
//! componentize-js: scripts/setup.sh installs both).

#[path = "../../tests/common/mod.rs"]
mod common;
#[path = "support/figures.rs"]
mod figures;

use std::time::{Duration, Instant};

use figures::{fmt, median};

use weir::plugin::{Collect, Declared, Limits, Plugin, Runtime, RuntimeConfig};

struct Language {
    name: &'static str,
    passthrough: Vec<u8>,
    /// The passthrough over the kernels' frames (Rust's is its passthrough).
    frames: Vec<u8>,
    enrich: Vec<u8>,
    by_section: Vec<u8>,
}

/// Median instantiation and median call (the publish minus instantiation) over `rounds` calls.
/// `table` is the one output table the publisher declares.
fn calls(
    rt: &Runtime,
    plugin: &Plugin,
    table: &str,
    frame: &arrow::buffer::Buffer,
    rounds: usize,
) -> (Duration, Duration) {
    let limits = Limits { deadline: Duration::from_secs(120), ..Limits::default() };
    // As a publisher declares them: the passthroughs in Python and JavaScript write the table declared.
    let declared = Declared::new(vec!["clicks".into()], vec![table.into()]);
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
    let burst_only = std::env::args().any(|a| a == "--burst");
    let languages = [
        Language {
            name: "rust",
            passthrough: common::guest("read-clicks"),
            frames: common::guest("read-clicks"),
            enrich: common::guest("clicks-enrich"),
            by_section: common::guest("clicks-by-section"),
        },
        Language {
            name: "python",
            passthrough: common::python_guest("passthrough"),
            frames: common::python_guest("fixtures/frames-passthrough"),
            enrich: common::python_guest("clicks-enrich"),
            by_section: common::python_guest("clicks-by-section"),
        },
        Language {
            name: "javascript",
            passthrough: common::js_guest("passthrough"),
            frames: common::js_guest("fixtures/frames-passthrough"),
            enrich: common::js_guest("clicks-enrich"),
            by_section: common::js_guest("clicks-by-section"),
        },
    ];

    if !burst_only {
        loads_and_calls(&languages, quick);
    }
    println!("a burst: 999 one-row passthrough calls, ten at a time of each language in turn, queued at once");
    let burst = burst(&languages);
    println!(
        "{} wall, {:.2} cores; CPU a call: Rust {:.2} ms, Python {:.2} ms, JavaScript {:.2} ms; {:.0} page faults a call; {} MB RSS added",
        fmt(burst.wall),
        burst.cores,
        burst.cpu_ms[0],
        burst.cpu_ms[1],
        burst.cpu_ms[2],
        burst.faults,
        burst.rss_mb
    );
    println!();
    println!(
        "targets: at 64k rows, clicks-enrich and clicks-by-section ≤ 2x rust's in Python and TypeScript (≤ 5x at 1k); \
         passthrough ≤ 2x; instantiate ≤ 10 ms"
    );
}

/// Each language's load and call figures: the tables before the burst.
fn loads_and_calls(languages: &[Language], quick: bool) {
    println!("loading the passthrough component");
    println!("{:>11} {:>10} {:>13} {:>12}", "language", "size", "cold compile", "cached load");
    let cache = tempfile::tempdir().expect("tempdir");
    let cached_rt =
        Runtime::new(RuntimeConfig { cache_dir: Some(cache.path().to_path_buf()), ..RuntimeConfig::default() })
            .expect("runtime");
    for language in languages {
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
    for (what, table) in [
        ("passthrough", "clicks"),
        ("passthrough over frames", "clicks"),
        ("clicks-enrich", "clicks"),
        ("clicks-by-section", "sections"),
    ] {
        println!();
        println!("{what}, median of N calls (call = the publish, less instantiation)");
        println!("{:>8} {:>11} {:>12} {:>11} {:>9} {:>4}", "rows", "language", "instantiate", "call", "vs rust", "N");
        for (rows, rounds) in [(1_000usize, 40usize), (64 * 1024, 10)] {
            let rounds = if quick { rounds.div_ceil(4) } else { rounds };
            let frame = arrow::buffer::Buffer::from_vec(common::frame(&[common::clicks(rows, 7)]));
            let mut rust_call = None;
            for language in languages {
                let component = match what {
                    "passthrough" => &language.passthrough,
                    "passthrough over frames" => &language.frames,
                    "clicks-enrich" => &language.enrich,
                    _ => &language.by_section,
                };
                let plugin = rt.load(component).expect("load");
                let (instantiate, call) = calls(&rt, &plugin, table, &frame, rounds);
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
}

struct Burst {
    wall: Duration,
    /// The process's CPU over the burst, in cores.
    cores: f64,
    /// The plugin's CPU a call, by language.
    cpu_ms: [f64; 3],
    /// Page faults a call, the process's.
    faults: f64,
    /// Resident memory the burst added, loading the plugins included.
    rss_mb: i64,
}

/// 999 one-row calls of the passthroughs (ten of a language, then ten of the
/// next), all queued at once, on a runtime of its own.
fn burst(languages: &[Language]) -> Burst {
    const CALLS: usize = 999;
    let rt = std::sync::Arc::new(Runtime::new(RuntimeConfig::default()).expect("runtime"));
    let rss_before = rss_mb();
    let plugins: Vec<Plugin> = languages.iter().map(|l| rt.load(&l.passthrough).expect("load")).collect();
    let frame = arrow::buffer::Buffer::from_vec(common::frame(&[common::clicks(1, 7)]));
    let tokio = tokio::runtime::Runtime::new().expect("tokio");
    let me = std::process::id();
    let (before, faults_before, started) = (common::cpu_of(me).unwrap(), faults(), Instant::now());
    let cpu = tokio.block_on(async {
        let calls: Vec<_> = (0..CALLS)
            .map(|i| {
                let language = (i / 10) % plugins.len();
                let (rt, plugin, frame) = (rt.clone(), plugins[language].clone(), frame.clone());
                tokio::spawn(async move {
                    let limits = Limits { deadline: Duration::from_secs(120), ..Limits::default() };
                    let declared = Declared::new(vec!["clicks".into()], vec!["clicks".into()]);
                    let run =
                        rt.publish_blocking(plugin, vec![vec![frame]], limits, Some(declared), Collect::default());
                    let run = run.await;
                    if let Err(e) = run.outcome {
                        panic!("the publisher failed: {e}");
                    }
                    (language, run.timing.cpu)
                })
            })
            .collect();
        let mut cpu = [(Duration::ZERO, 0u32); 3];
        for call in calls {
            let (language, spent) = call.await.expect("the call's task");
            cpu[language].0 += spent;
            cpu[language].1 += 1;
        }
        cpu
    });
    let wall = started.elapsed();
    Burst {
        wall,
        cores: (common::cpu_of(me).unwrap() - before).as_secs_f64() / wall.as_secs_f64(),
        cpu_ms: cpu.map(|(spent, n)| spent.as_secs_f64() * 1e3 / n as f64),
        faults: (faults() - faults_before) as f64 / CALLS as f64,
        rss_mb: rss_mb() - rss_before,
    }
}

/// This process's minor page faults so far.
fn faults() -> i64 {
    // SAFETY: getrusage fills the zeroed struct it is given.
    unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage.ru_minflt
    }
}

/// This process's resident memory, in MB.
fn rss_mb() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb =
        status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.trim().split(' ').next()?.parse().ok());
    kb.unwrap_or(0i64) / 1024
}
