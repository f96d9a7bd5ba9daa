//! Process-wide memory settings.

/// Allocations at least this large are mapped on their own and unmapped when
/// freed. Batches are built from allocations of a few MiB (decode runs, frames,
/// column buffers) that live for one batch.
const MMAP_THRESHOLD_BYTES: i32 = 1 << 20;

/// Tunes glibc's malloc for batches that are built, handed on and dropped.
///
/// * One arena for every thread. By default glibc gives each thread that
///   allocates its own arena and keeps what is freed there. weir's batches are
///   built and dropped on tokio's blocking-pool threads, so every pool thread
///   ended up holding a batch's worth of freed memory: the peak RSS of a
///   `weir stream` process at `kafka.size_rollover_mb = 16` fell from 190 MB
///   to 144 MB with one arena (`scripts/bench.sh`).
/// * A fixed mmap threshold of 1 MiB. By default glibc raises the threshold
///   to the size of each mapped block that is freed, up to 32 MiB, so after
///   the first batch, its buffers come from the heap, where freed blocks
///   between live ones cannot go back to the system. Measured on a local
///   broker: peak RSS 135 → 120 MB at a 16 MB rollover and 311 → 276 MB at
///   64 MB, with no change in throughput. 256 KiB saved a few MB more but cost
///   about a tenth of the throughput; 4 MiB saved half as much.
///
/// Call it first thing in `main`, before threads start.
pub fn tune_malloc() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator settings; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES);
    }
}
