//! Hostile plugins: each is stopped with an error that names what it did, and
//! the very next normal call on the same runtime succeeds.

mod common;

use std::time::{Duration, Instant};

use weir::plugin::{Limits, Run, RunError, Runtime, TrapKind};

use common::{clicks, frame, guest, js_guest, python_guest, runtime};

/// Runs a hostile fixture on a one-frame batch.
fn run_hostile(rt: &Runtime, name: &str, limits: &Limits) -> Run {
    run_component(rt, &guest(name), limits)
}

fn run_component(rt: &Runtime, component: &[u8], limits: &Limits) -> Run {
    let plugin = rt.load(component).unwrap_or_else(|e| panic!("loading a hostile fixture: {e}"));
    rt.publish(&plugin, vec![vec![frame(&[clicks(3, 1)])]], limits, None)
}

/// The same fixture in Rust, Python and JavaScript.
fn in_every_language(name: &str) -> [(&'static str, Vec<u8>); 3] {
    [
        ("rust", guest(&format!("hostile-{name}"))),
        ("python", python_guest(&format!("hostile/{name}"))),
        ("javascript", js_guest(&format!("hostile/{name}"))),
    ]
}

/// The runtime is unharmed: a normal plugin still runs on it.
fn assert_next_call_succeeds(rt: &Runtime) {
    let plugin = rt.load(&guest("read-clicks")).unwrap();
    let run = rt.publish(&plugin, vec![vec![frame(&[clicks(10, 2)])]], &Limits::default(), None);
    let tables = run.outcome.expect("a normal call after a hostile one succeeds");
    assert_eq!(tables[0].frame.rows(), 10);
}

fn trap_kind(run: &Run) -> &TrapKind {
    match &run.outcome {
        Err(RunError::Trap(trap)) => &trap.kind,
        other => panic!("expected a trap, got {other:?}"),
    }
}

fn message(run: &Run) -> String {
    run.outcome.as_ref().expect_err("the call fails").to_string()
}

#[test]
fn infinite_loop_hits_the_cpu_deadline_in_every_language() {
    let rt = runtime();
    let limits = Limits { deadline: Duration::from_millis(300), ..Limits::default() };
    for (language, component) in in_every_language("infinite-loop") {
        // Compiled first: on a busy machine, compiling an interpreter takes long itself.
        let plugin = rt.load(&component).unwrap_or_else(|e| panic!("loading a hostile fixture: {e}"));
        let started = Instant::now();
        let run = rt.publish(&plugin, vec![vec![frame(&[clicks(3, 1)])]], &limits, None);
        assert_eq!(trap_kind(&run), &TrapKind::Deadline { limit: Duration::from_millis(300) }, "{language}");
        let said = message(&run);
        assert!(said.starts_with("the plugin exceeded its 300 ms CPU deadline and was stopped: make a batch's work lighter, or give it more time (`--deadline`"), "{language}: {said}");
        // Not a timing assertion of speed: only that the call was stopped at all, long before a test timeout.
        assert!(started.elapsed() < Duration::from_secs(30), "{language}");
        assert_next_call_succeeds(&rt);
    }
}

/// The deadline is the CPU the plugin used, not the time it waited for a core:
/// four endless calls sharing one core each run for their whole deadline
/// before they are stopped (on the clock, each was stopped after about a
/// quarter of it: on a busy node, a tenant's plugin failed for its neighbours' work).
#[test]
fn the_cpu_deadline_counts_the_plugins_cpu_not_its_wait_for_a_core() {
    let rt = std::sync::Arc::new(runtime());
    let deadline = Duration::from_millis(400);
    let limits = Limits { deadline, ..Limits::default() };
    let plugin = rt.load(&guest("hostile-infinite-loop")).unwrap();
    let calls: Vec<_> = (0..4)
        .map(|_| {
            let (rt, plugin, limits) = (rt.clone(), plugin.clone(), limits.clone());
            std::thread::spawn(move || {
                on_the_first_core();
                rt.publish(&plugin, vec![vec![frame(&[clicks(3, 1)])]], &limits, None)
            })
        })
        .collect();
    for call in calls {
        let run = call.join().unwrap();
        assert_eq!(trap_kind(&run), &TrapKind::Deadline { limit: deadline });
        assert!(run.timing.cpu >= deadline * 9 / 10, "stopped after {:?} of its CPU", run.timing.cpu);
    }
    assert_next_call_succeeds(&rt);
}

/// Calls start a few at a time, but one that runs long gives its turn up: with
/// one turn, a plugin spinning towards a 3 s deadline holds up no other call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_call_gives_its_turn_to_the_next() {
    let config = weir::plugin::RuntimeConfig {
        cache_dir: Some(common::shared_cache()),
        calls_at_once: 1,
        ..weir::plugin::RuntimeConfig::default()
    };
    let rt = std::sync::Arc::new(Runtime::new(config).unwrap());
    let batch = || vec![vec![frame(&[clicks(3, 1)])]];
    let spin = rt.load(&guest("hostile-infinite-loop")).unwrap();
    let deadline = Duration::from_secs(3);
    let limits = Limits { deadline, ..Limits::default() };
    let long = tokio::spawn({
        let (rt, batch) = (rt.clone(), batch());
        async move { rt.publish_blocking(spin, batch, limits, None, weir::plugin::Collect::default()).await }
    });
    let normal = rt.load(&guest("read-clicks")).unwrap();
    // The long call has taken the one turn by now (and, past 50 ms, given it up).
    tokio::time::sleep(Duration::from_millis(100)).await;
    let run = rt.publish_blocking(normal, batch(), Limits::default(), None, weir::plugin::Collect::default()).await;
    if let Err(e) = &run.outcome {
        panic!("the normal call failed: {e}");
    }
    assert!(!long.is_finished(), "the normal call ran while the long one was still running");
    let long = long.await.unwrap();
    assert!(matches!(&long.outcome, Err(RunError::Trap(t)) if t.kind == TrapKind::Deadline { limit: deadline }));
}

/// Keeps the calling thread on the machine's first core.
fn on_the_first_core() {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes within it; 0 is this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        assert_eq!(libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set), 0, "pinning to core 0");
    }
}

#[test]
fn memory_bomb_hits_the_memory_limit_in_every_language() {
    let rt = runtime();
    let limits = Limits { memory_bytes: 64 << 20, ..Limits::default() };
    for (language, component) in in_every_language("memory-bomb") {
        let run = run_component(&rt, &component, &limits);
        assert_eq!(trap_kind(&run), &TrapKind::Memory { limit_bytes: 64 << 20 }, "{language}");
        let said = message(&run);
        assert!(
            said.starts_with(
                "the plugin exceeded its 64 MiB memory limit and was stopped: hold less of the batch at once"
            ),
            "{language}: {said}"
        );
        assert_next_call_succeeds(&rt);
    }
}

#[test]
fn deep_recursion_overflows_the_stack() {
    let rt = runtime();
    let run = run_hostile(&rt, "hostile-deep-recursion", &Limits::default());
    assert_eq!(trap_kind(&run), &TrapKind::StackOverflow);
    assert_eq!(message(&run), "the plugin overflowed its stack (unbounded or too deep recursion) and was stopped");
    assert_next_call_succeeds(&rt);
}

#[test]
fn returning_a_gibibyte_is_output_too_large() {
    let rt = runtime();
    // Memory and time enough to build the 1 GiB answer (zeroing it takes a while on a
    // busy machine), so the output limit is what stops it.
    let limits = Limits {
        memory_bytes: 2 << 30,
        output_bytes: 64 << 20,
        deadline: Duration::from_secs(120),
        ..Limits::default()
    };
    let run = run_hostile(&rt, "hostile-huge-output", &limits);
    assert_eq!(trap_kind(&run), &TrapKind::OutputTooLarge { limit_bytes: 64 << 20 });
    assert_eq!(message(&run), "the plugin tried to return more than 64 MiB of output and was stopped");
    assert_next_call_succeeds(&rt);
}

#[test]
fn a_gibibyte_answer_within_the_default_memory_limit_is_a_memory_error() {
    let rt = runtime();
    let limits = Limits { deadline: Duration::from_secs(120), ..Limits::default() };
    let run = run_hostile(&rt, "hostile-huge-output", &limits);
    assert_eq!(trap_kind(&run), &TrapKind::Memory { limit_bytes: 256 << 20 });
    assert_next_call_succeeds(&rt);
}

#[test]
fn panic_reports_its_message() {
    let rt = runtime();
    let run = run_hostile(&rt, "hostile-panic", &Limits::default());
    let TrapKind::Panicked { message } = trap_kind(&run) else { panic!("{:?}", run.outcome) };
    assert!(message.starts_with("cannot handle a batch of 1 slots (at "), "{message}");
    assert!(message.ends_with("src/lib.rs:10:9)"), "{message}");
    // The raw panic text is kept in the plugin's log too.
    assert!(run.log.stderr().contains("cannot handle a batch of 1 slots"));
    assert_next_call_succeeds(&rt);
}

#[test]
fn abort_is_reported_as_an_abort() {
    let rt = runtime();
    let run = run_hostile(&rt, "hostile-abort", &Limits::default());
    assert_eq!(trap_kind(&run), &TrapKind::Aborted);
    assert_eq!(message(&run), "the plugin aborted (it reached an `unreachable` instruction)");
    assert_next_call_succeeds(&rt);
}

#[test]
fn exit_is_reported_with_its_code() {
    let rt = runtime();
    let run = run_hostile(&rt, "hostile-exit", &Limits::default());
    // WASI 0.2 carries only success or failure: exit(3) arrives as status 1.
    assert_eq!(trap_kind(&run), &TrapKind::Exited { code: 1 });
    assert_eq!(message(&run), "the plugin exited (status 1) instead of returning");
    assert_next_call_succeeds(&rt);
}

#[test]
fn environment_and_arguments_are_empty() {
    assert!(std::env::vars().count() > 0, "the host itself has an environment");
    let rt = runtime();
    let run = run_hostile(&rt, "hostile-read-env", &Limits::default());
    assert_eq!(message(&run), "the plugin failed: saw 0 env vars [], 0 args []");
    assert_next_call_succeeds(&rt);
}

#[test]
fn files_can_be_neither_read_nor_written() {
    let rt = runtime();
    let cwd = std::env::current_dir().unwrap();
    let run = run_hostile(&rt, "hostile-open-file", &Limits::default());
    let message = message(&run);
    assert!(message.starts_with("the plugin failed: read: Err("), "{message}");
    assert!(message.contains("; write: Err("), "{message}");
    assert!(message.contains("; list: Err("), "{message}");
    assert!(!cwd.join("escape.txt").exists());
    assert_next_call_succeeds(&rt);
}

#[test]
fn a_plugin_cannot_reach_the_network_in_any_way() {
    // Something listens, so a refusal is the sandbox's, not the want of a peer.
    let listener = std::net::TcpListener::bind("127.0.0.1:80").ok();
    let rt = runtime();
    let run = run_hostile(&rt, "hostile-open-socket", &Limits::default());
    assert_eq!(
        message(&run),
        "the plugin failed: connect: PermissionDenied; listen: PermissionDenied; udp: PermissionDenied; lookup: failed to lookup address information: Non-recoverable error"
    );
    // CPython's own sockets, through its WASI libc: each refused with the OS's error.
    let run = run_component(&rt, &python_guest("hostile/open-socket"), &Limits::default());
    assert_eq!(
        message(&run),
        "the plugin failed: RuntimeError: connect: PermissionError; listen: PermissionError; udp: PermissionError; lookup: gaierror (at app.py:41, in publish)"
    );
    assert!(run.log.stderr().contains("Traceback (most recent call last)"), "the traceback is in the plugin's log");
    if let Some(listener) = listener {
        listener.set_nonblocking(true).unwrap();
        assert!(listener.accept().is_err(), "the plugin reached the listener");
    }
    assert_next_call_succeeds(&rt);
}

#[test]
fn threads_cannot_be_spawned() {
    let rt = runtime();
    let run = run_hostile(&rt, "hostile-spawn-thread", &Limits::default());
    let message = message(&run);
    assert!(message.starts_with("the plugin failed: spawn: Err("), "{message}");
    assert!(message.contains("Unsupported"), "{message}");
    assert_next_call_succeeds(&rt);
}

#[test]
fn a_call_never_sees_what_an_earlier_call_left_in_memory() {
    // Slots are reused, whichever module had them, and their memory is kept
    // resident and reset in place. The fixture fills 8 MiB of fresh pages with
    // a mark and fails if a call finds anything but zeros there.
    let rt = runtime();
    let snoop = rt.load(&guest("hostile-snoop-memory")).unwrap();
    let other = rt.load(&guest("read-clicks")).unwrap();
    for round in 0..4 {
        let run = rt.publish(&snoop, vec![vec![frame(&[clicks(3, 1)])]], &Limits::default(), None);
        assert!(run.outcome.is_ok(), "round {round}: {}", message(&run));
        // Another tenant's module between two calls: it may get the slot next.
        let run = rt.publish(&other, vec![vec![frame(&[clicks(3, 1)])]], &Limits::default(), None);
        assert!(run.outcome.is_ok(), "round {round}: {}", message(&run));
    }
}

#[test]
fn the_log_cap_drops_lines_without_failing_the_call() {
    // The log cap is a limit of its own: a tiny cap still lets a normal plugin succeed.
    let rt = runtime();
    let plugin = rt.load(&guest("clicks-enrich")).unwrap();
    let limits = Limits { log_bytes: 8, ..Limits::default() };
    let run = rt.publish(&plugin, vec![vec![frame(&[clicks(50, 1)])]], &limits, None);
    assert!(run.outcome.is_ok());
    assert!(run.log.lines.is_empty());
    assert!(run.log.dropped_bytes > 0);
}
