//! CPU time used so far, read from the kernel's per-thread and per-process clocks.

use std::time::Duration;

/// CPU time the calling thread has used.
pub fn thread() -> Duration {
    read(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time this process has used, all threads together.
pub fn process() -> Duration {
    read(libc::CLOCK_PROCESS_CPUTIME_ID)
}

fn read(clock: libc::clockid_t) -> Duration {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid timespec to write to; both clocks exist on every Linux and macOS.
    let ok = unsafe { libc::clock_gettime(clock, &mut t) } == 0;
    if ok { Duration::new(t.tv_sec as u64, t.tv_nsec as u32) } else { Duration::ZERO }
}
