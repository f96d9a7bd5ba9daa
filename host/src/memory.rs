//! Process-wide memory settings.

/// Makes glibc's malloc use one arena for every thread.
///
/// By default glibc gives each thread that allocates its own arena and keeps
/// what is freed there. weir's batches are built and dropped on tokio's
/// blocking-pool threads, so every pool thread ends up holding a batch's
/// worth of freed memory: measured with `scripts/bench.sh`, the peak RSS of
/// a `weir stream` process at `kafka.size_rollover_mb = 16` fell from 190 MB
/// to 144 MB with one arena. Call it first thing in `main`, before threads start.
pub fn one_malloc_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes an allocator setting; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}
