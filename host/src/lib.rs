//! weir: Kafka topics into versioned tables, each batch shaped by a sandboxed
//! WebAssembly publisher.
//!
//! Modules follow the data: `source` (what a publisher reads, and when a batch
//! closes), `consume` (Kafka), `buffer` (the open batch and rollover), `formats`
//! (messages to Arrow rows, one module per format), `stage` (parquet files), `dead_letters`, `plugin`
//! (the sandboxed publisher), `catalog` (versions and offsets, committed
//! together); `worker` runs them in that order. `frames` is the Arrow IPC form
//! tables take across the plugin boundary; `input` reads local table files for
//! `weir run-plugin`.
//!
//! The control plane sits on top: `serve` (`weir serve`: the HTTP API,
//! tenants, the workers of every registered publisher, metrics) uses the
//! catalog, the workers and the runtime; `tables` reads committed versions.

pub mod buffer;
pub mod catalog;
pub mod consume;
pub mod cpu_time;
pub mod crash;
pub mod dead_letters;
pub mod declaration;
pub mod embedded_broker;
pub mod embedded_registry;
pub mod files;
pub mod formats;
pub mod frames;
pub mod input;
pub mod memory;
pub mod plugin;
pub mod rerun;
pub mod secrets;
pub mod serve;
pub mod source;
pub mod stage;
pub mod store;
pub mod tables;
pub mod tls;
pub mod worker;
