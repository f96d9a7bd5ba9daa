//! What a stream worker reads from, one module per kind of source: `kafka`
//! (its consumer group, message queue and offsets) today.

pub mod kafka;
