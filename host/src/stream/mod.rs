//! What one stream worker runs, in data-flow order: the open batch and its
//! rollover (`buffer`), the table files it stages and writes (`stage`), and
//! the worker that drives them from a source to a committed version
//! (`worker`). `rerun` puts kept
//! dead letters through the same path once their cause is fixed.

pub mod buffer;
pub mod rerun;
pub mod stage;
pub mod worker;
