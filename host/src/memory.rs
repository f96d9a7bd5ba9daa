//! The process's allocator: jemalloc, for Rust and for the C libraries linked
//! in (librdkafka, SQLite, zstd) alike.
//!
//! glibc's malloc serialised the pipeline. Its arenas are locked, and with
//! one arena for all threads (which weir used, because glibc keeps each
//! arena's freed memory and so grew a batch's worth of it per pool thread),
//! the consume loop, librdkafka's broker thread, the decoders and the table
//! writer took turns at one lock: off-CPU samples of a `weir stream` process
//! put most of the consume loop's waits, and most of the broker thread's, in
//! `__lll_lock_wait_private` under malloc and free, and the process used one
//! of two cores. jemalloc serves each thread from its own cache.
//!
//! [`CONFIG`] keeps its memory close to glibc's tuned for the same work; the
//! `MALLOC_CONF` environment variable overrides any of it.

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's settings, read when it starts.
///
/// * `narenas:1`: one arena; each thread still allocates from its own cache.
///   More arenas each keep their own freed pages.
/// * `oversize_threshold:0`: no separate arena for large allocations. jemalloc
///   gives allocations of 8 MiB or more (1 MiB here once) to an arena that
///   returns them to the system as soon as they are freed; but large buffers
///   are freed and allocated again all the time here (librdkafka's fetch
///   buffers, each batch's columns, frames and plugin output), and each came
///   back as fresh pages the kernel had to fault in and zero: page faults were
///   14 % of a `weir stream` process's CPU samples on the benchmark's JSON run.
///   Kept in the one arena, the next batch reuses them: 10–25 % less CPU per
///   message in interleaved runs, for about 10 MB more peak RSS at a 64 MB
///   rollover (170–174 → 181–184 MB, under its 196 MB target).
/// * `dirty_decay_ms:100`, `muzzy_decay_ms:0`, `background_thread:true`:
///   what is freed and not reused goes back to the system within about 100 ms, by a
///   background thread, not by the threads doing the work. jemalloc's default
///   keeps it for 10 s, which holds several batches' worth.
/// * `tcache_max:4096`: a thread caches only small sizes, so what a pool
///   thread frees does not stay in its cache while it idles.
pub const CONFIG: &std::ffi::CStr = c"narenas:1,oversize_threshold:0,dirty_decay_ms:100,muzzy_decay_ms:0,background_thread:true,tcache_max:4096";

/// jemalloc reads its settings from this symbol (declared weak on its side).
#[repr(transparent)]
struct ConfigPtr(*const std::ffi::c_char);

// SAFETY: it points at a constant string that is never written.
unsafe impl Sync for ConfigPtr {}

#[used]
#[unsafe(export_name = "malloc_conf")]
static MALLOC_CONF: ConfigPtr = ConfigPtr(CONFIG.as_ptr());
