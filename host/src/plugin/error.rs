//! What can go wrong with a plugin, in a user's words.
//!
//! Three kinds are kept apart in the types, because they call for different
//! actions: the component could not be loaded ([`LoadError`], fix the upload);
//! the plugin itself said no ([`GuestError`], its own message); the sandbox
//! stopped the plugin ([`Trap`], which limit, with the raw trap as the source).

use std::time::Duration;

use super::limits::{Limits, human_bytes, human_duration};
use super::log::PluginLog;

/// The component was refused before it ever ran.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("the plugin is {size} bytes, over the {limit}-byte module size limit")]
    TooLarge { size: usize, limit: usize },
    #[error(
        "the file is not a WebAssembly component (it does not start with the `\\0asm` magic); build the plugin with `cargo build --release --target wasm32-wasip2`"
    )]
    NotWasm,
    #[error(
        "the file is a core WebAssembly module, not a component; build the plugin for the `wasm32-wasip2` target (not `wasm32-unknown-unknown` or `wasm32-wasip1`)"
    )]
    CoreModule,
    #[error("the component is malformed: {reason}")]
    Malformed { reason: String },
    #[error("the plugin imports `{import}`, which publishers may not use; allowed imports are `{host}` and the WASI 0.2 cli, clocks, io, random, filesystem and sockets interfaces (served with no files and no network)", host = super::bindings::HOST_INTERFACES.join("`, `"))]
    ForbiddenImport { import: String },
    #[error(
        "the plugin imports `{import}`, weir's columnar kernels, which are not served by the host but composed into the publisher's component when it is built: build it with `weir plugin build`"
    )]
    KernelsNotComposed { import: String },
    #[error(
        "the component does not implement the `weir:publisher/stream-publisher` world, version 0.2.x or 0.1.0: {reason}; generate its bindings from weir's `wit/` (the weir-guest SDK does)"
    )]
    WrongWorld { reason: String },
    #[error("compiled-artifact cache: {0:#}")]
    Cache(anyhow::Error),
}

/// The plugin ran to completion and returned `publish-error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuestError {
    #[error("the plugin rejected its input: {0}")]
    InvalidInput(String),
    #[error("the plugin failed: {0}")]
    Failed(String),
}

/// Which limit or fault stopped the plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrapKind {
    Deadline { limit: Duration },
    Memory { limit_bytes: u64 },
    StackOverflow,
    OutputTooLarge { limit_bytes: usize },
    Panicked { message: String },
    Aborted,
    Exited { code: i32 },
    Other,
}

/// The sandbox stopped the plugin. `raw` holds wasmtime's own error, its
/// wasm backtrace included: kept for the host's debug log, and not part of
/// the message (frames of an interpreter's internals tell an author nothing).
/// The message names the author's own function where the backtrace has one.
#[derive(Debug, thiserror::Error)]
#[error("{}", describe(&self.kind, &self.raw))]
pub struct Trap {
    pub kind: TrapKind,
    pub raw: anyhow::Error,
}

fn describe(kind: &TrapKind, raw: &anyhow::Error) -> String {
    let within = user_frame(raw).map(|f| format!(" in `{f}`")).unwrap_or_default();
    match kind {
        TrapKind::Deadline { limit } => format!(
            "the plugin exceeded its {} CPU deadline and was stopped{within}: make a batch's work lighter, or give it more time (`--deadline` for `weir run-plugin` and `weir stream`; on a server, the tenant's quota: `weir tenant quotas TENANT --deadline 30s`)",
            human_duration(*limit)
        ),
        TrapKind::Memory { limit_bytes } => format!(
            "the plugin exceeded its {} memory limit and was stopped{within}: hold less of the batch at once, or give it more (`--memory-limit` for `weir run-plugin` and `weir stream`; on a server, `weir tenant quotas TENANT --memory-limit 512MiB`)",
            human_bytes(*limit_bytes)
        ),
        TrapKind::StackOverflow => {
            "the plugin overflowed its stack (unbounded or too deep recursion) and was stopped".into()
        }
        TrapKind::OutputTooLarge { limit_bytes } => format!(
            "the plugin tried to return more than {} of output and was stopped",
            human_bytes(*limit_bytes as u64)
        ),
        TrapKind::Panicked { message } => format!("the plugin panicked: {message}"),
        TrapKind::Aborted => "the plugin aborted (it reached an `unreachable` instruction)".into(),
        // WASI 0.2 passes only success or failure, so any non-zero code arrives as 1.
        TrapKind::Exited { code } => format!("the plugin exited (status {code}) instead of returning"),
        TrapKind::Other => format!("the plugin trapped{within}: {}", raw.root_cause()),
    }
}

/// Module names of the runtimes other languages bring along (CPython and
/// componentize-py's glue, libc, the adapters): not an author's code.
const RUNTIME_MODULES: &[&str] = &["libpython", "componentize_py", "libc", "libdl", "libwasi", "wit-component"];

/// The innermost frame of wasmtime's backtrace that is the author's own
/// function (where the component keeps names: a Rust plugin built without
/// `strip`), or `None`.
fn user_frame(error: &anyhow::Error) -> Option<String> {
    let trace = error.downcast_ref::<wasmtime::WasmBacktrace>()?;
    trace.frames().iter().find_map(|frame| {
        let module = frame.module().name()?;
        let name = format!("{:#}", rustc_demangle::demangle(frame.func_name()?));
        let runtime = RUNTIME_MODULES.iter().any(|r| module.starts_with(r));
        let path = name.trim_start_matches('<');
        let library = ["std::", "core::", "alloc::", "wit_bindgen", "weir_guest::", "wasm function", "__", "dlmalloc"]
            .iter()
            .any(|p| path.starts_with(p));
        (!runtime && !library && name != "publish").then_some(name)
    })
}

/// The plugin returned, but what it returned cannot be committed.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error(
        "output table name {name:?} is invalid: use lowercase letters, digits, `_`, `-` and `.`, starting with a letter or digit, at most 128 characters"
    )]
    BadName { name: String },
    #[error("output table `{name}` is not one this publisher declares (declared: {})", declared.join(", "))]
    Undeclared { name: String, declared: Vec<String> },
    #[error("output table `{name}` is returned more than once")]
    Duplicate { name: String },
    #[error(
        "output table `{name}` changed its schema between writes: first ({first}), now ({now}); every write to a table must carry its first schema"
    )]
    SchemaChanged { name: String, first: String, now: String },
    #[error("output table `{name}` is not a valid Arrow IPC stream: {reason}")]
    BadIpc { name: String, reason: String },
    #[error("the plugin returned {rows} rows, over the {limit}-row output limit")]
    TooManyRows { rows: u64, limit: u64 },
}

/// Why a `publish` call produced no committable output.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Guest(#[from] GuestError),
    #[error(transparent)]
    Trap(#[from] Trap),
    // Not the error's source as well: said once, in the message.
    #[error("the plugin's output was refused: {0}")]
    Output(OutputError),
    #[error("could not start the plugin: {0:#}")]
    Instantiate(anyhow::Error),
    /// The host could not take output it had accepted (a full disk, say): not
    /// the plugin's fault, and worth a retry.
    #[error("storing the plugin's output: {0:#}")]
    Sink(anyhow::Error),
}

impl From<OutputError> for RunError {
    fn from(e: OutputError) -> Self {
        Self::Output(e)
    }
}

impl RunError {
    /// Whether the same call on the same batch would fail the same way: the
    /// plugin refused its input, or returned output weir cannot take. Not a
    /// trap (a deadline may pass on a quieter machine) nor a plain failure
    /// (a plugin may fail on something outside it, and be right later).
    pub fn is_definite(&self) -> bool {
        matches!(self, Self::Guest(GuestError::InvalidInput(_)) | Self::Output(_))
    }
}

/// Names the limit or fault behind a failed call, from wasmtime's error, the
/// limiter's note, and (for panics) what the plugin wrote to stderr.
pub(super) fn classify(err: &wasmtime::Error, memory_cap_hit: bool, limits: &Limits, log: &PluginLog) -> TrapKind {
    if memory_cap_hit {
        return TrapKind::Memory { limit_bytes: limits.memory_bytes };
    }
    if let Some(exit) = err.downcast_ref::<wasmtime_wasi::I32Exit>() {
        return TrapKind::Exited { code: exit.0 };
    }
    if let Some(trap) = err.downcast_ref::<wasmtime::Trap>() {
        return match trap {
            wasmtime::Trap::Interrupt => TrapKind::Deadline { limit: limits.deadline },
            wasmtime::Trap::StackOverflow => TrapKind::StackOverflow,
            wasmtime::Trap::UnreachableCodeReached => match panic_message(&log.stderr()) {
                Some(message) => TrapKind::Panicked { message },
                None => TrapKind::Aborted,
            },
            _ => TrapKind::Other,
        };
    }
    // wasmtime's hostcall-fuel error type is private; its text is pinned with the version.
    if err.chain().any(|e| e.to_string().contains("fuel allocated for hostcalls has been exhausted")) {
        return TrapKind::OutputTooLarge { limit_bytes: limits.output_bytes };
    }
    TrapKind::Other
}

/// The message of the last Rust panic in `stderr`, with its location:
/// std prints `thread '<name>' panicked at <file>:<line>:<col>:\n<message>`.
fn panic_message(stderr: &str) -> Option<String> {
    let start = stderr.rfind("panicked at ")? + "panicked at ".len();
    let rest = &stderr[start..];
    let (location, message) = rest.split_once(":\n").unwrap_or((rest, ""));
    let message = message.split("\nnote: ").next().unwrap_or("").trim();
    Some(if message.is_empty() { format!("at {location}") } else { format!("{message} (at {location})") })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_message_from_std_output() {
        let stderr = "thread '<unnamed>' panicked at src/lib.rs:7:5:\nboom: 42\nnote: run with `RUST_BACKTRACE=1`";
        assert_eq!(panic_message(stderr).as_deref(), Some("boom: 42 (at src/lib.rs:7:5)"));
        assert_eq!(panic_message("nothing here"), None);
    }
}
