//! What one stream worker runs, in data-flow order: the open batch and its
//! rollover (`buffer`), the dead letters it sends to a topic (`dead_letters`),
//! the table files it stages and writes (`stage`), and the worker that drives
//! them from a source to a committed version (`worker`). `rerun` puts kept
//! dead letters through the same path once their cause is fixed.

pub mod buffer;
pub mod dead_letters;
pub mod rerun;
pub mod stage;
pub mod worker;
