//! The plugin runtime: loads publisher components and runs them, one sandboxed
//! call per batch. It knows nothing of Kafka, the catalog or HTTP, so
//! `weir run-plugin`, the stream workers and the tests all use it alike.
//!
//! One [`Runtime`] per process: one wasmtime engine with a pooling allocator,
//! one epoch ticker thread, one linker. Each [`Runtime::publish`] gets a fresh
//! `Store`, which is dropped when the call ends, trap or not.

mod bindings;
mod cache;
mod error;
mod limits;
mod load;
mod log;
mod output;
mod sandbox;
mod ticker;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::{Component, ComponentExportIndex, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};

pub use cache::{ArtifactCache, Origin, digest};
pub use error::{GuestError, LoadError, OutputError, RunError, Trap, TrapKind};
pub use limits::{Limits, MAX_MEMORY_BYTES, human_bytes, human_duration};
pub use log::{LogLevel, LogLine, LogSource, PluginLog};
pub use output::{OutputTable, valid_table_name};

use bindings::{RawOutputTable, RawPublishError, StreamPublisher, StreamPublisherPre};
use sandbox::Sandbox;
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
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self { cache_dir: None, max_module_bytes: 64 << 20, max_concurrent_calls: 64 }
    }
}

/// A loaded plugin, ready to be instantiated many times.
#[derive(Clone)]
pub struct Plugin {
    digest: String,
    origin: Origin,
    pre: StreamPublisherPre<Sandbox>,
    publish: ComponentExportIndex,
}

/// `publish`'s results, as the guest returns them.
type PublishResult = (Result<Vec<RawOutputTable>, RawPublishError>,);

impl Plugin {
    /// `sha256:<hex>` of the component's bytes.
    pub fn digest(&self) -> &str {
        &self.digest
    }
    /// Whether its machine code was compiled now or read from the cache.
    pub fn origin(&self) -> Origin {
        self.origin
    }
}

/// The result of one `publish` call. The log is there whatever happened.
#[derive(Debug)]
pub struct Run {
    pub outcome: Result<Vec<OutputTable>, RunError>,
    pub log: PluginLog,
    pub timing: Timing,
}

/// Where one call's time went.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Timing {
    /// Creating the store and instantiating the component.
    pub instantiate: Duration,
    /// Copying the input in, running `publish`, copying the output out.
    pub call: Duration,
    /// Decoding and checking the output.
    pub check: Duration,
    /// CPU time the calling thread spent on all of the above: what the call
    /// cost, whatever else ran beside it.
    pub cpu: Duration,
}

/// Most core instances a component may create (a Rust wasip2 plugin uses a handful).
const CORE_INSTANCES_PER_COMPONENT: u32 = 32;
const TABLES_PER_COMPONENT: u32 = 16;
const MEMORIES_PER_COMPONENT: u32 = 2;
/// Memory per pool slot kept resident between calls (see `engine_config`).
/// Every slot a call has used keeps this much, idle or not, and each tenant's
/// module gets its own slot. 1 MiB covers a small call's memory; a stream
/// batch touches tens of MiB anyway. Measured: 16 MiB cost 17 MB of peak RSS
/// at `kafka.size_rollover_mb = 16` and bought no end-to-end throughput on a
/// local broker (519k vs 524k msg/s over 5 runs each), though the call alone
/// is faster with it (`cargo bench --bench plugin`, a 65,536-row passthrough:
/// 4.6 ms with 16 MiB, 7.0 ms with 1 MiB, which pays the guest's page faults).
const KEEP_RESIDENT_BYTES: usize = 1 << 20;
/// Hostcall fuel beyond the output byte limit, for names and list headers.
const OUTPUT_FUEL_SLACK: usize = 64 << 10;

pub struct Runtime {
    engine: Engine,
    linker: Linker<Sandbox>,
    cache: Option<ArtifactCache>,
    max_module_bytes: usize,
    _ticker: EpochTicker,
}

impl Runtime {
    pub fn new(config: RuntimeConfig) -> anyhow::Result<Self> {
        let engine = Engine::new(&engine_config(config.max_concurrent_calls)).map_err(anyhow::Error::from)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(anyhow::Error::from)?;
        StreamPublisher::add_to_linker::<Sandbox, wasmtime::component::HasSelf<Sandbox>>(&mut linker, |s| s)
            .map_err(anyhow::Error::from)?;
        let cache = config.cache_dir.map(|dir| ArtifactCache::new(&engine, dir));
        let ticker = EpochTicker::start(engine.clone());
        Ok(Self { engine, linker, cache, max_module_bytes: config.max_module_bytes, _ticker: ticker })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Checks, compiles (or reads from the cache) and links a component.
    pub fn load(&self, bytes: &[u8]) -> Result<Plugin, LoadError> {
        load::check_bytes(bytes, self.max_module_bytes)?;
        let digest = digest(bytes);
        let compile =
            || Component::new(&self.engine, bytes).map_err(|e| LoadError::Malformed { reason: format!("{e:#}") });
        let (component, origin) = match &self.cache {
            Some(cache) => cache.load_or_compile(&self.engine, &digest, compile)?,
            None => (compile()?, Origin::Compiled),
        };
        let (pre, publish) = load::link(&self.engine, &self.linker, &component)?;
        Ok(Plugin { digest, origin, pre, publish })
    }

    /// Runs `publish` once on a fresh instance, on the calling thread.
    ///
    /// `slots` is the batch in array mode: one entry per source, each the list of
    /// that source's table frames (Arrow IPC streams). A frame is whatever holds
    /// its bytes (a `Vec`, an Arrow buffer the host reads too): they are copied
    /// straight into the guest. When `declared` is given, every output table
    /// must be one of those names.
    pub fn publish<F: AsRef<[u8]>>(
        &self,
        plugin: &Plugin,
        slots: &[Vec<F>],
        limits: &Limits,
        declared: Option<&[String]>,
    ) -> Run {
        let slots: Vec<Vec<&[u8]>> = slots.iter().map(|slot| slot.iter().map(AsRef::as_ref).collect()).collect();
        let started = Instant::now();
        let started_cpu = crate::cpu_time::thread();
        let memory_bytes = limits.memory_bytes.min(MAX_MEMORY_BYTES) as usize;
        let log = log::LogSink::new(limits.log_bytes);
        let mut store = Store::new(&self.engine, Sandbox::new(log.clone(), memory_bytes));
        store.limiter(|s| &mut s.limiter);
        store.epoch_deadline_trap();
        store.set_epoch_deadline(deadline_ticks(limits.deadline));
        store.set_hostcall_fuel(limits.output_bytes.saturating_add(OUTPUT_FUEL_SLACK));

        let mut timing = Timing::default();
        // `publish` is called through its typed export rather than the generated
        // `call_publish`, whose parameter type would make every frame a `Vec` of its own.
        let instance = plugin.pre.instance_pre().instantiate(&mut store).and_then(|instance| {
            instance.get_typed_func::<(&[Vec<&[u8]>],), PublishResult>(&mut store, &plugin.publish)
        });
        timing.instantiate = started.elapsed();
        let result = match instance {
            Ok(publish) => {
                let called = Instant::now();
                let result = publish.call(&mut store, (&slots,)).map(|(result,)| result);
                timing.call = called.elapsed();
                result.map_err(|e| (e, true))
            }
            Err(e) => Err((e, false)),
        };
        let memory_cap_hit = store.data().limiter.memory_cap_hit;
        // The store (and any trapped instance in it) goes now, before anything else runs.
        drop(store);
        let log = log.finish();

        let checked = Instant::now();
        let outcome = match result {
            Ok(Ok(tables)) => check_outputs(tables, limits, declared),
            Ok(Err(RawPublishError::InvalidInput(m))) => Err(GuestError::InvalidInput(m).into()),
            Ok(Err(RawPublishError::Failed(m))) => Err(GuestError::Failed(m).into()),
            Err((e, called)) => {
                let kind = error::classify(&e, memory_cap_hit, limits, &log);
                if !called && kind == TrapKind::Other {
                    Err(RunError::Instantiate(e.into()))
                } else {
                    Err(Trap { kind, source: e.into() }.into())
                }
            }
        };
        timing.check = checked.elapsed();
        timing.cpu = crate::cpu_time::thread().saturating_sub(started_cpu);
        Run { outcome, log, timing }
    }

    /// [`Runtime::publish`] on tokio's blocking pool, so the CPU-bound call
    /// never stalls the async reactor.
    pub async fn publish_blocking<F: AsRef<[u8]> + Send + Sync + 'static>(
        self: &Arc<Self>,
        plugin: Plugin,
        slots: Arc<Vec<Vec<F>>>,
        limits: Limits,
        declared: Option<Vec<String>>,
    ) -> Run {
        let runtime = self.clone();
        let task = tokio::task::spawn_blocking(move || runtime.publish(&plugin, &slots, &limits, declared.as_deref()));
        match task.await {
            Ok(run) => run,
            // `publish` catches every guest fault; a panic here is a host bug, so keep it loud.
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
}

fn check_outputs(
    tables: Vec<bindings::RawOutputTable>,
    limits: &Limits,
    declared: Option<&[String]>,
) -> Result<Vec<OutputTable>, RunError> {
    let bytes: usize = tables.iter().map(|t| t.data.len()).sum();
    if bytes > limits.output_bytes {
        let kind = TrapKind::OutputTooLarge { limit_bytes: limits.output_bytes };
        let source = anyhow::anyhow!("the plugin returned {bytes} bytes of Arrow IPC");
        return Err(Trap { kind, source }.into());
    }
    Ok(output::check(tables, declared, limits.output_rows)?)
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
        // so the next call does not pay a page fault per page it touches.
        .linear_memory_keep_resident(KEEP_RESIDENT_BYTES)
        .table_keep_resident(KEEP_RESIDENT_BYTES);
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    config
}
