//! The state a plugin's `Store` holds: an empty WASI context, the capped log,
//! the memory limiter, and where the output goes. Nothing here outlives one
//! call. The host side of both `weir:publisher` versions is here.

use std::time::Duration;

use wasmtime::component::Resource;
use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::{ResourceTable, WasiCtx, WasiCtxView, WasiView};

use super::HostTime;
use super::bindings::{v0_1, v0_2};
use super::log::LogSink;
use super::output::Output;
use super::slots::SlotFrames;

/// Per-call store data.
pub struct Sandbox {
    wasi: WasiCtx,
    pub(super) table: ResourceTable,
    pub(super) log: LogSink,
    pub(super) limiter: Limiter,
    /// Taken out when the call ends.
    pub(super) output: Option<Output>,
    /// Time spent making the frames the plugin reads.
    pub(super) input: HostTime,
}

impl Sandbox {
    /// A sandbox with nothing in it: no preopened directories, no environment
    /// variables, no arguments, no network, stdin closed; stdout and stderr go to
    /// the call's capped log.
    pub fn new(log: LogSink, memory_bytes: usize, output: Output) -> Self {
        let wasi = WasiCtx::builder()
            .stdout(log.stdout())
            .stderr(log.stderr())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        Self {
            wasi,
            table: ResourceTable::new(),
            log,
            limiter: Limiter::new(memory_bytes),
            output: Some(output),
            input: HostTime::default(),
        }
    }
}

impl Sandbox {
    /// The host's CPU time on the call's input and output so far.
    pub(super) fn host_cpu(&self) -> Duration {
        self.input.cpu + self.output.as_ref().expect("the output stays in the store until the call ends").host.cpu
    }
}

impl WasiView for Sandbox {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl v0_2::weir::publisher::host::Host for Sandbox {
    fn log(&mut self, level: v0_2::weir::publisher::host::Level, message: String) -> wasmtime::Result<()> {
        self.log.log(level.into(), &message);
        Ok(())
    }
}

impl v0_2::weir::publisher::types::Host for Sandbox {}

impl v0_2::weir::publisher::types::HostFrames for Sandbox {
    fn count(&mut self, frames: Resource<SlotFrames>) -> wasmtime::Result<u32> {
        Ok(self.table.get(&frames)?.count())
    }

    fn source(&mut self, frames: Resource<SlotFrames>) -> wasmtime::Result<String> {
        Ok(self.table.get(&frames)?.source().to_string())
    }

    fn next(&mut self, frames: Resource<SlotFrames>) -> wasmtime::Result<Option<Vec<u8>>> {
        let slot = self.table.get_mut(&frames)?;
        self.input.count(|| slot.next()).map_err(|e| wasmtime::format_err!("framing the plugin's input: {e}"))
    }

    fn drop(&mut self, frames: Resource<SlotFrames>) -> wasmtime::Result<()> {
        self.table.delete(frames)?;
        Ok(())
    }
}

impl v0_2::weir::publisher::output::Host for Sandbox {
    /// A refused write stops the plugin; the call's outcome is the refusal.
    fn write(&mut self, name: String, data: Vec<u8>) -> wasmtime::Result<()> {
        let output = self.output.as_mut().expect("the output stays in the store until the call ends");
        output.write(name, data).map_err(|refusal| wasmtime::format_err!("{refusal}"))
    }

    fn tables(&mut self) -> wasmtime::Result<Vec<String>> {
        Ok(self.output.as_ref().expect("the output stays in the store until the call ends").tables())
    }
}

impl v0_1::weir::publisher::host::Host for Sandbox {
    fn log(&mut self, level: v0_1::weir::publisher::host::Level, message: String) {
        self.log.log(level.into(), &message);
    }
}

impl v0_1::weir::publisher::types::Host for Sandbox {}

/// wasmtime's [`StoreLimits`] (memory cap, grow failures trap), plus a note of
/// whether the memory cap is what stopped the plugin, so the error can say so.
pub struct Limiter {
    inner: StoreLimits,
    memory_bytes: usize,
    pub(super) memory_cap_hit: bool,
}

/// Tables only hold function references; this is far above what real code uses.
const TABLE_ELEMENTS: usize = 1 << 20;

impl Limiter {
    fn new(memory_bytes: usize) -> Self {
        let inner = StoreLimitsBuilder::new()
            .memory_size(memory_bytes)
            .table_elements(TABLE_ELEMENTS)
            .trap_on_grow_failure(true)
            .build();
        Self { inner, memory_bytes, memory_cap_hit: false }
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            self.memory_cap_hit = true;
        }
        self.inner.memory_growing(current, desired, maximum)
    }

    fn table_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        self.inner.table_growing(current, desired, maximum)
    }

    fn instances(&self) -> usize {
        self.inner.instances()
    }
    fn tables(&self) -> usize {
        self.inner.tables()
    }
    fn memories(&self) -> usize {
        self.inner.memories()
    }
}
