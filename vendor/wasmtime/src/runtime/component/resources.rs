mod any;
mod host;
mod host_dynamic;
mod host_static;
mod host_tables;
mod ty;

pub use any::*;
pub use host_dynamic::*;
pub use host_static::*;
pub use host_tables::*;
pub use ty::*;
