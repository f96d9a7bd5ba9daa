//! weir: Kafka topics into versioned tables, each batch shaped by a sandboxed
//! WebAssembly publisher.
//!
//! Modules follow the data: `input` reads local table files, `frames` is the
//! Arrow IPC form tables take across the plugin boundary, `plugin` runs the
//! sandboxed publisher.

pub mod frames;
pub mod input;
pub mod plugin;
pub mod schema;
