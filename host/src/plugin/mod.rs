//! The plugin runtime: loads publisher components and runs them, one sandboxed
//! call per batch. It knows nothing of Kafka, the catalog or HTTP, so
//! `weir run-plugin`, the stream workers and the tests all use it alike.
//!
//! One [`Runtime`] per process: one wasmtime engine with a pooling allocator,
//! one epoch ticker thread, one linker. Each [`Runtime::publish`] gets a fresh
//! `Store`, which is dropped when the call ends, trap or not.

mod bindings;
mod cache;
pub mod compose;
mod error;
pub mod frames;
mod language;
mod limits;
mod load;
mod log;
mod output;
mod sandbox;
mod slots;
mod ticker;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use wasmtime::component::{Component, ComponentExportIndex, HasSelf, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, UpdateDeadline};

pub use cache::{ArtifactCache, Origin, digest};
pub use error::{GuestError, LoadError, OutputError, RunError, Trap, TrapKind};
pub use language::language;
pub use limits::{Limits, MAX_MEMORY_BYTES, human_bytes, human_duration};
pub use load::import_allowed;
pub use log::{LogLevel, LogLine, LogSource, PluginLog};
pub use output::{Collect, OutputSink, OutputTable, valid_table_name};

use bindings::{v0_1, v0_2};
use load::Linked;
use output::Output;
use sandbox::Sandbox;
pub use slots::FrameBytes;
use slots::SlotFrames;
use ticker::{EpochTicker, TICK};

/// Process-wide settings of the runtime.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Where compiled artifacts are cached; `None` compiles every load.
    pub cache_dir: Option<PathBuf>,
    /// The largest component accepted, in bytes.
    pub max_module_bytes: usize,
    /// How many calls may run at once (sizes the instance pool).
    pub max_concurrent_calls: u32,
    /// How many calls start at once (see [`Runtime::publish_blocking`]): the
    /// cores, by default.
    pub calls_at_once: u32,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        Self { cache_dir: None, max_module_bytes: 64 << 20, max_concurrent_calls: 64, calls_at_once: cores }
    }
}

/// What a run's publisher declares: the plugin reads these names through the
/// contract (0.2.1's `frames.source` and `output.tables`), and may write only
/// the tables named here.
#[derive(Debug, Clone, Default)]
pub struct Declared {
    /// Each slot's source, in slot order (a Kafka source's topic).
    pub sources: Vec<String>,
    /// The output tables, in declaration order.
    pub tables: Vec<String>,
}

impl Declared {
    pub fn new(sources: Vec<String>, tables: Vec<String>) -> Self {
        Self { sources, tables }
    }
}

/// A loaded plugin, ready to be instantiated many times. Clones, and every
/// load of the same bytes while one is alive, share one compiled component
/// (its machine code and type information); each call still runs in a store
/// and instance of its own.
#[derive(Clone)]
pub struct Plugin(Arc<Loaded>);

struct Loaded {
    digest: String,
    origin: Origin,
    linked: Linked,
}

/// A 0.1.0 `publish`'s results, as the guest returns them.
type PublishResultV0_1 = (Result<Vec<v0_1::OutputTable>, v0_1::PublishError>,);

impl Plugin {
    /// `sha256:<hex>` of the component's bytes.
    pub fn digest(&self) -> &str {
        &self.0.digest
    }
    /// Whether its machine code was compiled or read from the cache when it was first loaded.
    pub fn origin(&self) -> Origin {
        self.0.origin
    }
    /// Whether the two share one compiled component.
    pub fn shares_code_with(&self, other: &Plugin) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
    /// The `weir:publisher` version the component implements.
    pub fn contract(&self) -> &'static str {
        match self.0.linked {
            Linked::V0_2(_, version) => version,
            Linked::V0_1(..) => "0.1.0",
        }
    }
}

/// The result of one `publish` call. The log is there whatever happened.
/// `T` is where the output went: by default, the tables in memory.
#[derive(Debug)]
pub struct Run<T = Vec<OutputTable>> {
    pub outcome: Result<T, RunError>,
    pub log: PluginLog,
    pub timing: Timing,
}

/// Where one call's time went.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Timing {
    /// Creating the store and instantiating the component.
    pub instantiate: Duration,
    /// Copying the input in, running `publish`, copying the output out;
    /// `input` and `output` excluded.
    pub call: Duration,
    /// Making the frames the plugin reads, as it asks for them: the host's
    /// work, which the CPU deadline does not count.
    pub input: Duration,
    /// Checking the output and handing it to the sink, inside the call or
    /// after it: the host's work too.
    pub output: Duration,
    /// CPU time the calling thread spent on the plugin, the host's work on
    /// input and output excluded: what the call cost, whatever else ran beside it.
    pub cpu: Duration,
}

/// Wall and CPU time the host spends on its own work inside a call.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostTime {
    pub wall: Duration,
    pub cpu: Duration,
}

impl HostTime {
    /// Runs `work`, counting its time.
    pub fn count<T>(&mut self, work: impl FnOnce() -> T) -> T {
        let (started, started_cpu) = (Instant::now(), crate::cpu_time::thread());
        let done = work();
        self.wall += started.elapsed();
        self.cpu += crate::cpu_time::thread().saturating_sub(started_cpu);
        done
    }
}

/// Most core instances a component may create (a Rust wasip2 plugin uses a
/// handful, a componentize-py one 38: CPython, its libc, and the adapters).
const CORE_INSTANCES_PER_COMPONENT: u32 = 64;
const TABLES_PER_COMPONENT: u32 = 16;
const MEMORIES_PER_COMPONENT: u32 = 2;
/// Memory per pool slot kept resident between calls (see `engine_config`):
/// the pages a call touched below this are zeroed in place (only those, found
/// with Linux's `PAGEMAP_SCAN`) instead of handed back to the kernel, so the
/// next call in the slot takes no page fault on them. A streaming call touches
/// little more than one partition's frame: 4 MiB covers a 65,536-message
/// batch's. Only the slots in use and up to [`WARM_SLOTS`] unused ones hold
/// this (calls start a few at a time, so few are in use). Measured on Tansu,
/// 2M messages, three interleaved pairs: the plugin calls' CPU 156–166 ms a
/// run with 1 MiB and no scan, 89–117 ms with this; peak RSS at
/// `kafka.size_rollover_mb = 64` 196–215 MB against 189–196 MB. (16 MiB
/// without the scan, measured before: 17 MB more peak RSS at 16 MB.) The scan
/// goes on past its first 32 regions of written pages since weir's fix to
/// wasmtime (vendor/wasmtime/WEIR.md): a Python or JavaScript call writes in
/// many more places, and every page after the 32nd was faulted in again by
/// the next call.
const KEEP_RESIDENT_BYTES: usize = 4 << 20;
/// A call that runs longer than this gives its turn to the next (see
/// [`Runtime::publish_blocking`]).
const SHORT_CALL: Duration = Duration::from_millis(50);
/// Unused pool slots kept for the module that last ran in each: a call of a
/// component takes a slot its own last call left, when one is free, and a
/// never-used slot rather than another module's while fewer than this are
/// kept. A slot another module had gets this one's memory image mapped
/// afresh, and every page of it the call touches faulted in again: about 260
/// faults a call, each a copy-on-write that on this virtual machine
/// interrupts the other core. Measured with the `languages` bench's
/// burst (999 one-row calls, ten of a language after ten of the next, two at
/// a time): 1.44–1.71 s, 54–83 faults a call, with none kept; 0.94 s, 4
/// faults a call, with 16; RSS 161 → 207 MB. Past this, the slot unused the
/// longest goes to whichever module needs one.
const WARM_SLOTS: u32 = 16;
/// Hostcall fuel beyond the output byte limit, for names and list headers.
const OUTPUT_FUEL_SLACK: usize = 64 << 10;

pub struct Runtime {
    engine: Engine,
    linker: Linker<Sandbox>,
    cache: Option<ArtifactCache>,
    /// The plugins loaded and still in use, by digest: a node's publishers
    /// running the same component share its compiled code (measured: 100
    /// publishers of one plugin held 100 copies, about 4 MB each).
    loaded: Mutex<HashMap<String, Weak<Loaded>>>,
    max_module_bytes: usize,
    /// One permit per instance the pool holds: a call waits for one, as a
    /// call beyond the pool would fail to instantiate (a burst of batches
    /// across many publishers spent attempts on that).
    calls: Arc<tokio::sync::Semaphore>,
    /// Turns to start a call: see [`Runtime::publish_blocking`].
    turns: Arc<tokio::sync::Semaphore>,
    _ticker: EpochTicker,
}

impl Runtime {
    pub fn new(config: RuntimeConfig) -> anyhow::Result<Self> {
        let engine = Engine::new(&engine_config(config.max_concurrent_calls)).map_err(anyhow::Error::from)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(anyhow::Error::from)?;
        v0_2::StreamPublisher::add_to_linker::<Sandbox, HasSelf<Sandbox>>(&mut linker, |s| s)
            .map_err(anyhow::Error::from)?;
        v0_1::StreamPublisher::add_to_linker::<Sandbox, HasSelf<Sandbox>>(&mut linker, |s| s)
            .map_err(anyhow::Error::from)?;
        let cache = config.cache_dir.map(|dir| ArtifactCache::new(&engine, dir));
        let ticker = EpochTicker::start(engine.clone());
        Ok(Self {
            engine,
            linker,
            cache,
            loaded: Mutex::default(),
            max_module_bytes: config.max_module_bytes,
            calls: Arc::new(tokio::sync::Semaphore::new(config.max_concurrent_calls.max(1) as usize)),
            turns: Arc::new(tokio::sync::Semaphore::new(config.calls_at_once.max(1) as usize)),
            _ticker: ticker,
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The plugin with `digest` (`sha256:<hex>`), if one is loaded and in use.
    pub fn loaded(&self, digest: &str) -> Option<Plugin> {
        let loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        loaded.get(digest).and_then(Weak::upgrade).map(Plugin)
    }

    /// Checks, compiles (or reads from the cache) and links a component; the
    /// one already loaded when these bytes are in use.
    pub fn load(&self, bytes: &[u8]) -> Result<Plugin, LoadError> {
        load::check_bytes(bytes, self.max_module_bytes)?;
        let digest = digest(bytes);
        if let Some(plugin) = self.loaded(&digest) {
            return Ok(plugin);
        }
        let compile =
            || Component::new(&self.engine, bytes).map_err(|e| LoadError::Malformed { reason: format!("{e:#}") });
        let (component, origin) = match &self.cache {
            Some(cache) => cache.load_or_compile(&self.engine, &digest, compile)?,
            None => (compile()?, Origin::Compiled),
        };
        let linked = load::link(&self.engine, &self.linker, &component)?;
        let plugin = Arc::new(Loaded { digest: digest.clone(), origin, linked });
        let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        loaded.retain(|_, p| p.strong_count() > 0);
        // Two loads of the same bytes at once: the first to get here is the one kept.
        if let Some(first) = loaded.get(&digest).and_then(Weak::upgrade) {
            return Ok(Plugin(first));
        }
        loaded.insert(digest, Arc::downgrade(&plugin));
        Ok(Plugin(plugin))
    }

    /// Runs `publish` once on a fresh instance, on the calling thread, and
    /// returns the output tables in memory. See [`Runtime::publish_into`].
    pub fn publish<F: FrameBytes>(
        &self,
        plugin: &Plugin,
        slots: Vec<Vec<F>>,
        limits: &Limits,
        declared: Option<&Declared>,
    ) -> Run {
        let run = self.publish_into(plugin, slots, limits, declared, Collect::default());
        Run { outcome: run.outcome.map(|Collect(tables)| tables), log: run.log, timing: run.timing }
    }

    /// Runs `publish` once on a fresh instance, on the calling thread, and hands
    /// every piece of output, checked, to `sink`; on success the sink comes back.
    ///
    /// `slots` is the batch in array mode: one entry per source, each the list of
    /// that source's table frames (Arrow IPC streams). A frame is whatever holds
    /// its bytes (a `Vec`, an Arrow buffer the host reads too). When `declared`
    /// is given, the plugin can read its names, and every output table must be
    /// one it declares; without it, the plugin may write any valid name.
    ///
    /// A 0.2 plugin reads its frames one at a time and writes its output
    /// while it runs, so neither the plugin nor the host holds the batch's
    /// output whole. A 0.1.0 plugin gets every frame at once and returns every
    /// table; they reach the sink after the call.
    pub fn publish_into<F: FrameBytes, S: OutputSink>(
        &self,
        plugin: &Plugin,
        slots: Vec<Vec<F>>,
        limits: &Limits,
        declared: Option<&Declared>,
        sink: S,
    ) -> Run<S> {
        let started = Instant::now();
        let started_cpu = crate::cpu_time::thread();
        let memory_bytes = limits.memory_bytes.min(MAX_MEMORY_BYTES) as usize;
        let log = log::LogSink::new(limits.log_bytes);
        let output = Output::new(Box::new(sink), limits, declared.map(|d| d.tables.as_slice()));
        let mut store = Store::new(&self.engine, Sandbox::new(log.clone(), memory_bytes, output));
        store.limiter(|s| &mut s.limiter);
        // The deadline is the plugin's CPU time on the thread that runs it: waiting
        // for a core (other calls, a busy node) does not count, nor does the host's
        // own work on the input and output inside the call. Looked at each tick it
        // could have run out at: CPU time never passes faster than the clock.
        let deadline = limits.deadline;
        store.epoch_deadline_callback(move |store| {
            let used = plugin_cpu(started_cpu, store.data().host_cpu());
            Ok(match deadline.checked_sub(used) {
                Some(left) if !left.is_zero() => UpdateDeadline::Continue(deadline_ticks(left)),
                _ => UpdateDeadline::Interrupt,
            })
        });
        store.set_epoch_deadline(deadline_ticks(limits.deadline));
        store.set_hostcall_fuel(limits.output_bytes.saturating_add(OUTPUT_FUEL_SLACK));

        let mut timing = Timing::default();
        let result = match &plugin.0.linked {
            Linked::V0_2(pre, _) => {
                let sources = declared.map(|d| d.sources.as_slice()).unwrap_or_default();
                call_v0_2(&mut store, pre, slots, sources, &mut timing).map(|r| r.map(|()| None))
            }
            Linked::V0_1(pre, publish) => call_v0_1(&mut store, pre, *publish, slots, &mut timing).map(|r| r.map(Some)),
        };
        let memory_cap_hit = store.data().limiter.memory_cap_hit;
        let mut output = store.data_mut().output.take().expect("the output stays in the store until now");
        let input = store.data().input;
        timing.call = started.elapsed().saturating_sub(timing.instantiate + input.wall + output.host.wall);
        // The store (and any trapped instance in it) goes now, before anything else
        // runs, and the host's hold on the input with it.
        drop(store);
        let log = log.finish();

        let outcome = match result {
            // A refused write stopped the plugin: the refusal is the outcome.
            _ if output.refused.is_some() => Err(output.refused.take().expect("checked")),
            Ok(Ok(None)) => Ok(()),
            Ok(Ok(Some(tables))) => returned_v0_1(&mut output, tables),
            Ok(Err(e)) => Err(e.into()),
            Err(Failed { error, instantiated }) => {
                let kind = error::classify(&error, memory_cap_hit, limits, &log);
                if !instantiated && kind == TrapKind::Other {
                    Err(RunError::Instantiate(error.into()))
                } else {
                    Err(Trap { kind, raw: error.into() }.into())
                }
            }
        };
        (timing.input, timing.output) = (input.wall, output.host.wall);
        timing.cpu = plugin_cpu(started_cpu, input.cpu + output.host.cpu);
        Run { outcome: outcome.map(|()| output.into_sink()), log, timing }
    }

    /// [`Runtime::publish_into`] on tokio's blocking pool, so the CPU-bound
    /// call never stalls the async reactor, once an instance of the pool is
    /// free and it is the call's turn (the waits are not the plugin's time).
    ///
    /// Calls start a few at a time ([`RuntimeConfig::calls_at_once`], the
    /// cores): a burst of small batches across many publishers runs through a
    /// few warm pool slots one after another, instead of all at once in as
    /// many slots, each of which then keeps the memory its call wrote resident
    /// (up to `KEEP_RESIDENT_BYTES` a memory). A call still running after
    /// [`SHORT_CALL`] gives its turn to the next, so a long call (or a plugin
    /// spending its whole deadline) holds up no other publisher's: those share
    /// the cores as before, up to the pool's size.
    pub async fn publish_blocking<F: FrameBytes, S: OutputSink>(
        self: &Arc<Self>,
        plugin: Plugin,
        slots: Vec<Vec<F>>,
        limits: Limits,
        declared: Option<Declared>,
        sink: S,
    ) -> Run<S> {
        let runtime = self.clone();
        let instance = self.calls.clone().acquire_owned().await.expect("the semaphore is never closed");
        let turn = self.turns.clone().acquire_owned().await.expect("the semaphore is never closed");
        let mut task = tokio::task::spawn_blocking(move || {
            let _instance = instance;
            runtime.publish_into(&plugin, slots, &limits, declared.as_ref(), sink)
        });
        let joined = match tokio::time::timeout(SHORT_CALL, &mut task).await {
            Ok(joined) => joined,
            Err(_) => {
                drop(turn);
                task.await
            }
        };
        match joined {
            Ok(run) => run,
            // `publish` catches every guest fault; a panic here is a host bug, so keep it loud.
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
}

/// A call that did not return: wasmtime's error, and whether the component had
/// been instantiated when it came.
struct Failed {
    error: wasmtime::Error,
    instantiated: bool,
}

type Called<T> = Result<Result<T, GuestError>, Failed>;

fn call_v0_2<F: FrameBytes>(
    store: &mut Store<Sandbox>,
    pre: &v0_2::StreamPublisherPre<Sandbox>,
    slots: Vec<Vec<F>>,
    sources: &[String],
    timing: &mut Timing,
) -> Called<()> {
    let started = Instant::now();
    let publisher = pre.instantiate(&mut *store).map_err(|error| Failed { error, instantiated: false })?;
    timing.instantiate = started.elapsed();
    let failed = |error| Failed { error, instantiated: true };
    let source = |i: usize| sources.get(i).cloned().unwrap_or_default();
    let slots = slots
        .into_iter()
        .enumerate()
        .map(|(i, slot)| store.data_mut().table.push(SlotFrames::new(slot, source(i))))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| failed(e.into()))?;
    let result = publisher.call_publish(&mut *store, &slots).map_err(failed)?;
    Ok(result.map_err(|e| match e {
        v0_2::PublishError::InvalidInput(m) => GuestError::InvalidInput(m),
        v0_2::PublishError::Failed(m) => GuestError::Failed(m),
    }))
}

fn call_v0_1<F: FrameBytes>(
    store: &mut Store<Sandbox>,
    pre: &v0_1::StreamPublisherPre<Sandbox>,
    publish: ComponentExportIndex,
    slots: Vec<Vec<F>>,
    timing: &mut Timing,
) -> Called<Vec<v0_1::OutputTable>> {
    // 0.1.0 takes every frame at once: all are made before the call.
    let framed: Result<Vec<Vec<Vec<u8>>>, _> = store
        .data_mut()
        .input
        .count(|| slots.into_iter().map(|slot| slot.into_iter().map(|f| Box::new(f).into_bytes()).collect()).collect());
    let framed =
        framed.map_err(|e| Failed { error: wasmtime::format_err!("framing the input: {e}"), instantiated: false })?;
    let started = Instant::now();
    let slots: Vec<Vec<&[u8]>> = framed.iter().map(|slot| slot.iter().map(Vec::as_slice).collect()).collect();
    let call = pre
        .instance_pre()
        .instantiate(&mut *store)
        .and_then(|instance| instance.get_typed_func::<(&[Vec<&[u8]>],), PublishResultV0_1>(&mut *store, &publish));
    let publish = call.map_err(|error| Failed { error, instantiated: false })?;
    timing.instantiate = started.elapsed();
    let (result,) = publish.call(&mut *store, (&slots,)).map_err(|error| Failed { error, instantiated: true })?;
    Ok(result.map_err(|e| match e {
        v0_1::PublishError::InvalidInput(m) => GuestError::InvalidInput(m),
        v0_1::PublishError::Failed(m) => GuestError::Failed(m),
    }))
}

/// What a 0.1.0 plugin returned, through the same checks as a 0.2.0 plugin's
/// writes; under 0.1.0 each table is returned once. (The byte limit was
/// enforced while wasmtime copied the tables out, by hostcall fuel.)
fn returned_v0_1(output: &mut Output, tables: Vec<v0_1::OutputTable>) -> Result<(), RunError> {
    let mut seen = std::collections::HashSet::new();
    for table in tables {
        if !seen.insert(table.name.clone()) {
            return Err(OutputError::Duplicate { name: table.name }.into());
        }
        if output.write(table.name, table.data).is_err() {
            return Err(output.refused.take().expect("a refusal is kept"));
        }
    }
    Ok(())
}

/// The CPU time this thread spent since `started_cpu`, less `host`'s: what
/// the plugin used of it.
fn plugin_cpu(started_cpu: Duration, host: Duration) -> Duration {
    crate::cpu_time::thread().saturating_sub(started_cpu).saturating_sub(host)
}

fn deadline_ticks(deadline: Duration) -> u64 {
    (deadline.as_nanos().div_ceil(TICK.as_nanos()) as u64).max(1)
}

fn engine_config(max_concurrent_calls: u32) -> Config {
    let mut pool = PoolingAllocationConfig::new();
    let calls = max_concurrent_calls.max(1);
    pool.total_component_instances(calls)
        .total_core_instances(calls * CORE_INSTANCES_PER_COMPONENT)
        .total_memories(calls * MEMORIES_PER_COMPONENT)
        .total_tables(calls * TABLES_PER_COMPONENT)
        .max_core_instances_per_component(CORE_INSTANCES_PER_COMPONENT)
        .max_memories_per_component(MEMORIES_PER_COMPONENT)
        .max_tables_per_component(TABLES_PER_COMPONENT)
        .max_memory_size(MAX_MEMORY_BYTES as usize)
        // Zero reused memory with memset instead of returning it to the kernel,
        // so the next call does not pay a page fault per page it touches; only
        // the pages a call dirtied (where the kernel can say which), in the
        // slots in use and up to WARM_SLOTS others.
        .linear_memory_keep_resident(KEEP_RESIDENT_BYTES)
        .table_keep_resident(KEEP_RESIDENT_BYTES)
        .pagemap_scan(wasmtime::Enabled::Auto)
        .max_unused_warm_slots(WARM_SLOTS);
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    // For `perf`: name the plugins' compiled functions in /tmp/perf-PID.map.
    if std::env::var_os("WEIR_PERF_MAP").is_some() {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    config
}
