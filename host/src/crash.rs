//! Crash points, for the crash-safety tests: when `WEIR_CRASH_AT` names a
//! point the worker passes, the process aborts right there: no destructor,
//! no flush, as if killed with SIGKILL. Unset, a point costs one comparison.

use std::sync::OnceLock;
use std::time::Duration;

fn armed() -> Option<&'static str> {
    static AT: OnceLock<Option<String>> = OnceLock::new();
    AT.get_or_init(|| std::env::var("WEIR_CRASH_AT").ok()).as_deref()
}

/// Aborts the process if `WEIR_CRASH_AT` is `name`.
pub fn point(name: &str) {
    if armed() == Some(name) {
        eprintln!("weir: crashing at `{name}` (WEIR_CRASH_AT)");
        std::process::abort();
    }
}

/// Aborts the process a moment after this call if `WEIR_CRASH_AT` is `name`,
/// from another thread: for crashing in the middle of work (a plugin call).
pub fn soon(name: &str, after: Duration) {
    if armed() == Some(name) {
        let name = name.to_string();
        std::thread::spawn(move || {
            std::thread::sleep(after);
            eprintln!("weir: crashing during `{name}` (WEIR_CRASH_AT)");
            std::process::abort();
        });
    }
}
