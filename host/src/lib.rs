//! weir: Kafka topics into versioned tables, each batch shaped by a sandboxed
//! WebAssembly publisher.
//!
//! Modules follow the data. `publisher` is what an owner declares (the
//! declaration, its source's settings); `sources` is what a worker reads from,
//! behind one interface (`kafka` today); `stream` is what one worker runs, in
//! order, knowing no source kind: the open batch and its rollover, decoding
//! through `formats` (messages to Arrow rows, one module per format), dead
//! letters, staging, the `plugin` call (the sandboxed publisher, and the
//! Arrow IPC `frames` tables cross it in), and the commit to the `catalog`
//! (versions and offsets together), whose versions `tables` writes into each
//! table's Delta log in the `store`.
//!
//! The control plane sits on top: `serve` (`weir serve`: the HTTP API,
//! tenants, the workers of every registered publisher, metrics) and `cli`
//! (in the binary). `embedded` holds the in-process broker and registry the
//! demo and tests use; `input` reads local table files for `weir run-plugin`;
//! the rest are small helpers (`cpu_time`, `crash`, `files`, `memory`,
//! `secrets`, `tls`).

/// `weir --version`: this release, and the plugin contracts it serves (the
/// WIT packages in `wit/`; see `CHANGELOG.md`).
pub const VERSION: &str =
    concat!(env!("CARGO_PKG_VERSION"), " (plugins: weir:publisher 0.2.1, and 0.2.0 and 0.1.0 as built against them)");

pub mod catalog;
pub mod cpu_time;
pub mod crash;
pub mod embedded;
pub mod files;
pub mod formats;
pub mod input;
pub mod memory;
pub mod parallel;
pub mod plugin;
pub mod publisher;
pub mod secrets;
pub mod serve;
pub mod sources;
pub mod store;
pub mod stream;
pub mod tables;
pub mod tls;
