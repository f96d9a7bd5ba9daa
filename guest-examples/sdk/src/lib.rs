//! Write a weir publisher as an ordinary Rust function over Arrow
//! [`RecordBatch`]es, and export it with one macro line:
//!
//! ```ignore
//! use weir_guest::{RecordBatch, Table, Result};
//!
//! fn publish(slots: Vec<Vec<RecordBatch>>) -> Result<Vec<Table>> {
//!     let frames = slots.into_iter().next().unwrap_or_default();
//!     Ok(match frames.first() {
//!         Some(first) => vec![Table::from_batches("clicks", first.schema(), frames)?],
//!         None => vec![],
//!     })
//! }
//!
//! weir_guest::export_publisher!(publish);
//! ```
//!
//! That shape holds the whole batch, in and out, in the plugin's memory. A
//! publisher that works frame by frame can stream instead, and hold one frame
//! at a time:
//!
//! ```ignore
//! use weir_guest::{Frames, Output, Result};
//!
//! fn publish(slots: Vec<Frames>, output: &mut Output) -> Result<()> {
//!     for batch in slots.into_iter().flatten() {
//!         output.write("clicks", &batch?)?;
//!     }
//!     Ok(())
//! }
//!
//! weir_guest::export_stream_publisher!(publish);
//! ```
//!
//! A publisher need not name its table: [`tables`] gives the ones its
//! publisher declares (a stream publisher's one table, named after its topic),
//! so one component serves any topic:
//!
//! ```ignore
//! let table = &weir_guest::tables()?[0];
//! output.write(table, &batch)?;
//! ```
//!
//! Build with `cargo build --release --target wasm32-wasip2` (`crate-type =
//! ["cdylib"]`). The component implements `weir:publisher@0.2.1`. The SDK
//! decodes the input frames (Arrow IPC) into `RecordBatch`es without copying
//! them, and encodes the output; no plugin writes IPC by hand. A batch written
//! back unchanged goes out as the bytes it came in.

pub use arrow_array::{self, RecordBatch};
pub use arrow_schema::{self, ArrowError, DataType, Field, Schema, SchemaRef};
pub use arrow_select;

#[doc(hidden)]
mod ipc;

pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "stream-publisher",
        pub_export_macro: true,
        export_macro_name: "__export_stream_publisher",
        default_bindings_module: "weir_guest::bindings",
    });
}

use bindings::weir::publisher::types::Frames as RawFrames;

/// Why a publisher returns no output. Either way the batch is not committed and
/// its offsets do not advance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The input is not something this publisher can handle; retrying the
    /// same batch will fail the same way.
    InvalidInput(String),
    /// Anything else.
    Failed(String),
}

impl Error {
    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::InvalidInput(message.into())
    }
    pub fn failed(message: impl Into<String>) -> Self {
        Self::Failed(message.into())
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::InvalidInput(m) => write!(f, "invalid input: {m}"),
            Self::Failed(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

impl From<ArrowError> for Error {
    fn from(e: ArrowError) -> Self {
        Self::Failed(e.to_string())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One output table: a name and its rows, as one or more batches of one schema.
#[derive(Debug, Clone)]
pub struct Table {
    name: String,
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
}

impl Table {
    /// A table of one batch.
    pub fn new(name: impl Into<String>, batch: RecordBatch) -> Self {
        Self { name: name.into(), schema: batch.schema(), batches: vec![batch] }
    }

    /// A table of several batches, which must all have `schema`. Nothing is
    /// copied: the batches are written one after another.
    pub fn from_batches(name: impl Into<String>, schema: SchemaRef, batches: Vec<RecordBatch>) -> Result<Self> {
        let name = name.into();
        if let Some(i) = batches.iter().position(|b| b.schema() != schema) {
            return Err(Error::Failed(format!("table `{name}`: batch {i} has a different schema than the table")));
        }
        Ok(Self { name, schema, batches })
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }
    pub fn batches(&self) -> &[RecordBatch] {
        &self.batches
    }
}

/// The output tables this run's publisher declares, in declaration order: a
/// stream publisher's one table, named after its topic. A publisher that
/// writes `tables()?[0]` serves any topic unchanged.
///
/// Fails when the run declares none: a local `weir run-plugin` without
/// `--declaration publisher.toml`.
pub fn tables() -> Result<Vec<String>> {
    let tables = bindings::weir::publisher::output::tables();
    if tables.is_empty() {
        return Err(Error::failed(NO_TABLES));
    }
    Ok(tables)
}

/// Why [`tables`] fails, the same words in every SDK.
const NO_TABLES: &str = "this run declares no output tables: give `weir run-plugin` the publisher's declaration \
     (--declaration publisher.toml), or write to a table by name";

/// Lines for the run's log, kept with the execution.
pub mod log {
    use crate::bindings::weir::publisher::host::{Level, log};

    pub fn trace(message: &str) {
        log(Level::Trace, message)
    }
    pub fn debug(message: &str) {
        log(Level::Debug, message)
    }
    pub fn info(message: &str) {
        log(Level::Info, message)
    }
    pub fn warn(message: &str) {
        log(Level::Warn, message)
    }
    pub fn error(message: &str) {
        log(Level::Error, message)
    }
}

/// Decodes one frame (an Arrow IPC stream) into one batch: its record batches,
/// made one if there are several.
fn decode(frame: Vec<u8>) -> Result<RecordBatch> {
    let mut batches = decode_batches(frame)?;
    Ok(match batches.len() {
        1 => batches.pop().expect("one batch"),
        _ => arrow_select::concat::concat_batches(&batches[0].schema(), &batches)?,
    })
}

/// Decodes one frame into its record batches, zero-copy; a frame of one
/// batch is remembered with its bytes (see [`unchanged`]).
fn decode_batches(frame: Vec<u8>) -> Result<Vec<RecordBatch>> {
    let (batches, whole) = ipc::decode_batches(frame)?;
    if let [batch] = batches.as_slice() {
        unchanged::remember(batch, whole);
    }
    Ok(batches)
}

impl From<ipc::Error> for Error {
    fn from(e: ipc::Error) -> Self {
        match e {
            ipc::Error::Malformed(m) => Self::InvalidInput(m),
            ipc::Error::Arrow(e) => e.into(),
        }
    }
}

/// Batches read from a frame of one record batch, with that frame's bytes: a
/// batch written back unchanged goes out as those bytes, neither encoded again
/// nor copied (a passthrough then costs the plugin next to nothing).
mod unchanged {
    use std::cell::RefCell;
    use std::sync::Arc;

    use arrow_buffer::Buffer;

    use crate::RecordBatch;

    thread_local! {
        static READ: RefCell<Vec<(RecordBatch, Buffer)>> = const { RefCell::new(Vec::new()) };
    }

    /// Keeps `batch`'s frame, until [`forget_dropped`] finds the author let go of it.
    pub fn remember(batch: &RecordBatch, frame: Buffer) {
        if batch.num_columns() > 0 {
            READ.with_borrow_mut(|read| read.push((batch.clone(), frame)));
        }
    }

    /// Forgets the frames whose batches the author no longer holds any column
    /// of, so their memory goes (before the next frame comes in, which can then
    /// take its place).
    pub fn forget_dropped() {
        READ.with_borrow_mut(|read| read.retain(|(kept, _)| kept.columns().iter().any(|c| Arc::strong_count(c) > 1)))
    }

    /// The frame `batch` was read from, if it is that frame's batch unchanged:
    /// the same schema and the very same columns (arrays never change).
    pub fn frame_of(batch: &RecordBatch) -> Option<Buffer> {
        READ.with_borrow(|read| {
            read.iter().find_map(|(kept, frame)| {
                let same = kept.num_rows() == batch.num_rows()
                    && kept.num_columns() == batch.num_columns()
                    && kept.columns().iter().zip(batch.columns()).all(|(a, b)| Arc::ptr_eq(a, b))
                    && kept.schema() == batch.schema();
                same.then(|| frame.clone())
            })
        })
    }

    /// Forgets every frame, at the end of a call.
    pub fn forget() {
        READ.with_borrow_mut(Vec::clear)
    }
}

/// Rows a write sends the host at a time: a large batch goes in pieces, so
/// neither the plugin's encoded copy nor the host's is ever more than one
/// piece (a partition of a 256 MB batch is about 240,000 rows).
const WRITE_ROWS: usize = 64 * 1024;

/// One source's rows in this batch, as the record batches of its frames, in
/// order (for Kafka, a frame per partition, each in batches of up to 65,536
/// rows). Frames are read from the host one at a time, when the iterator
/// reaches them, and decoded without a copy.
pub struct Frames {
    raw: RawFrames,
    pending: std::collections::VecDeque<RecordBatch>,
}

impl Frames {
    /// How many frames the source has in this batch, read or not.
    pub fn count(&self) -> usize {
        self.raw.count() as usize
    }

    /// The source these frames came from: a Kafka source's topic. Empty when
    /// the run declares no sources (`weir run-plugin` without `--declaration`).
    pub fn source(&self) -> String {
        self.raw.source()
    }
}

impl Iterator for Frames {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(batch) = self.pending.pop_front() {
                return Some(Ok(batch));
            }
            unchanged::forget_dropped();
            match decode_batches(self.raw.next()?) {
                Ok(batches) => self.pending = batches.into(),
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// Where a publisher's output goes, as it makes it. What is written is
/// committed only if the publisher then returns `Ok`.
pub struct Output {
    _private: (),
}

impl Output {
    /// Appends `batch` to table `name`. Every write to a table must have the
    /// schema of its first. A write the host refuses (an undeclared name, a
    /// changed schema, over a limit) stops the plugin there, with that reason
    /// as the run's error.
    pub fn write(&mut self, name: &str, batch: &RecordBatch) -> Result<()> {
        // Unchanged, and no larger than a piece: its frame's bytes, as they came.
        if let Some(frame) = unchanged::frame_of(batch).filter(|_| batch.num_rows() <= WRITE_ROWS) {
            bindings::weir::publisher::output::write(name, frame.as_slice());
            return Ok(());
        }
        let mut at = 0;
        loop {
            let piece = [batch.slice(at, WRITE_ROWS.min(batch.num_rows() - at))];
            let data = ipc::encode(&batch.schema(), &piece)?;
            bindings::weir::publisher::output::write(name, &data);
            at += piece[0].num_rows();
            if at == batch.num_rows() {
                return Ok(());
            }
        }
    }

    /// Appends every batch of `table` to the table of its name. A table of no
    /// batches still sends its schema.
    pub fn write_table(&mut self, table: &Table) -> Result<()> {
        if table.batches.is_empty() {
            return self.write(&table.name, &RecordBatch::new_empty(table.schema.clone()));
        }
        table.batches.iter().try_for_each(|batch| self.write(&table.name, batch))
    }
}

#[doc(hidden)]
pub mod __private {
    use super::*;

    pub use crate::bindings::Guest;
    pub use crate::bindings::weir::publisher::types::{Frames as RawFrames, PublishError};

    pub type Slots = Vec<RawFrames>;
    pub type RawResult = std::result::Result<(), PublishError>;

    /// The body of the exported `publish` for a streaming publisher.
    pub fn stream(slots: Slots, publish: impl FnOnce(Vec<Frames>, &mut Output) -> Result<()>) -> RawResult {
        let slots = slots.into_iter().map(|raw| Frames { raw, pending: Default::default() }).collect();
        let published = publish(slots, &mut Output { _private: () });
        unchanged::forget();
        published.map_err(|e| match e {
            Error::InvalidInput(m) => PublishError::InvalidInput(m),
            Error::Failed(m) => PublishError::Failed(m),
        })
    }

    /// The body of the exported `publish` for a whole-batch publisher: read
    /// every frame, call the author's function, write every table.
    pub fn run(slots: Slots, publish: impl FnOnce(Vec<Vec<RecordBatch>>) -> Result<Vec<Table>>) -> RawResult {
        stream(slots, |slots, output| {
            let each_frame = |frames: Frames| std::iter::from_fn(|| frames.raw.next()).map(decode).collect();
            let slots = slots.into_iter().map(each_frame).collect::<Result<_>>()?;
            for table in publish(slots)? {
                output.write_table(&table)?;
            }
            Ok(())
        })
    }
}

/// Exports `fn(Vec<Vec<RecordBatch>>) -> weir_guest::Result<Vec<Table>>` as this
/// component's `publish`: the whole batch in, every table out.
#[macro_export]
macro_rules! export_publisher {
    ($publish:path) => {
        $crate::__export_with!($crate::__private::run, $publish);
    };
}

/// Exports `fn(Vec<Frames>, &mut Output) -> weir_guest::Result<()>` as this
/// component's `publish`: frames read one at a time, output written as made.
#[macro_export]
macro_rules! export_stream_publisher {
    ($publish:path) => {
        $crate::__export_with!($crate::__private::stream, $publish);
    };
}

/// The export both shapes share: `publish` runs `$body` on the author's function.
#[doc(hidden)]
#[macro_export]
macro_rules! __export_with {
    ($body:path, $publish:path) => {
        struct __WeirPublisher;

        impl $crate::__private::Guest for __WeirPublisher {
            fn publish(slots: $crate::__private::Slots) -> $crate::__private::RawResult {
                $body(slots, $publish)
            }
        }

        $crate::bindings::__export_stream_publisher!(__WeirPublisher with_types_in $crate::bindings);
    };
}
