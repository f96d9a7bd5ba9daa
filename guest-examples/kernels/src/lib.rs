//! weir's columnar kernels (`weir:frames/kernels@0.1.0`), composed into
//! publishers written in interpreted languages: a frame's columns stay here,
//! in arrow-rs arrays; the interpreter holds a handle and hands over whole
//! expressions, each evaluated over the frame in one call.

mod call;
mod expr;
mod group;
/// Frames in and out, as the Rust SDK reads and writes them: zero-copy, sized once.
#[path = "../../sdk/src/ipc.rs"]
mod ipc;

use arrow_array::RecordBatch;
use arrow_schema::{Field, Schema};

wit_bindgen::generate!({ path: "../../wit/frames", world: "kernels-lib", generate_all });

use exports::weir::frames::kernels::{Expr, Frame as FrameHandle, FrameBorrow, Guest, GuestFrame};
use weir::publisher::types::Frames;

/// Rows a write sends the host at a time, as the Rust SDK sends them.
const WRITE_ROWS: usize = 64 * 1024;

struct Kernels;

impl Guest for Kernels {
    type Frame = Frame;
}

/// A frame: its rows, in one record batch.
pub struct Frame(RecordBatch, Option<arrow_buffer::Buffer>);

impl Frame {
    /// A frame made here: written, it is encoded.
    fn made(batch: RecordBatch) -> FrameHandle {
        FrameHandle::new(Frame(batch, None))
    }
}

impl GuestFrame for Frame {
    fn from_ipc(bytes: Vec<u8>) -> Result<FrameHandle, String> {
        let not_ipc = |e: &dyn std::fmt::Display| format!("the frame is not an Arrow IPC stream: {e}");
        let (batches, whole) = ipc::decode_batches(bytes).map_err(|e| not_ipc(&e))?;
        if batches.len() == 1 {
            // Written back unchanged, it goes out as these bytes: a passthrough costs next to nothing.
            let batch = batches.into_iter().next().expect("one batch");
            return Ok(FrameHandle::new(Frame(batch, Some(whole))));
        }
        let batch = arrow_select::concat::concat_batches(&batches[0].schema(), &batches).map_err(|e| not_ipc(&e))?;
        Ok(Frame::made(batch))
    }

    fn read_next(slot: &Frames) -> Result<Option<FrameHandle>, String> {
        let Some(bytes) = slot.next() else { return Ok(None) };
        Self::from_ipc(bytes).map(Some)
    }

    fn num_rows(&self) -> u64 {
        self.0.num_rows() as u64
    }

    fn column_names(&self) -> Vec<String> {
        self.0.schema().fields().iter().map(|f| f.name().clone()).collect()
    }

    fn filter(&self, predicate: Expr) -> Result<FrameHandle, String> {
        let mask = expr::predicate(&predicate, &self.0)?;
        let kept = arrow_select::filter::filter_record_batch(&self.0, &mask).map_err(|e| e.to_string())?;
        Ok(Frame::made(kept))
    }

    fn with_columns(&self, columns: Vec<(String, Expr)>) -> Result<FrameHandle, String> {
        // Every value is of the frame as it came in, whatever the order.
        let values = columns
            .iter()
            .map(|(name, e)| expr::column(e, &self.0).map(|array| (name, array)))
            .collect::<Result<Vec<_>, _>>()?;
        let schema = self.0.schema();
        let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
        let mut arrays = self.0.columns().to_vec();
        for (name, array) in values {
            let field = Field::new(name.as_str(), array.data_type().clone(), true);
            match fields.iter().position(|f| f.name() == name) {
                Some(i) => (fields[i], arrays[i]) = (field, array),
                None => {
                    fields.push(field);
                    arrays.push(array);
                }
            }
        }
        let batch = RecordBatch::try_new(Schema::new(fields).into(), arrays).map_err(|e| e.to_string())?;
        Ok(Frame::made(batch))
    }

    fn select(&self, names: Vec<String>) -> Result<FrameHandle, String> {
        let schema = self.0.schema();
        let indices = names
            .iter()
            .map(|name| schema.index_of(name).map_err(|_| expr::no_column(name, &self.0)))
            .collect::<Result<Vec<_>, _>>()?;
        let batch = self.0.project(&indices).map_err(|e| e.to_string())?;
        Ok(Frame::made(batch))
    }

    fn rename(&self, names: Vec<(String, String)>) -> Result<FrameHandle, String> {
        let schema = self.0.schema();
        for (from, _) in &names {
            schema.index_of(from).map_err(|_| expr::no_column(from, &self.0))?;
        }
        let fields: Vec<Field> = schema
            .fields()
            .iter()
            .map(|f| match names.iter().find(|(from, _)| from == f.name()) {
                Some((_, to)) => f.as_ref().clone().with_name(to),
                None => f.as_ref().clone(),
            })
            .collect();
        let batch =
            RecordBatch::try_new(Schema::new(fields).into(), self.0.columns().to_vec()).map_err(|e| e.to_string())?;
        Ok(Frame::made(batch))
    }

    fn drop(&self, names: Vec<String>) -> Result<FrameHandle, String> {
        let schema = self.0.schema();
        for name in &names {
            schema.index_of(name).map_err(|_| expr::no_column(name, &self.0))?;
        }
        let kept: Vec<usize> =
            (0..schema.fields().len()).filter(|&i| !names.contains(schema.field(i).name())).collect();
        let batch = self.0.project(&kept).map_err(|e| e.to_string())?;
        Ok(Frame::made(batch))
    }

    fn slice(&self, offset: u64, length: u64) -> FrameHandle {
        let rows = self.0.num_rows();
        let offset = usize::try_from(offset).unwrap_or(usize::MAX).min(rows);
        let length = usize::try_from(length).unwrap_or(usize::MAX).min(rows - offset);
        Frame::made(self.0.slice(offset, length))
    }

    fn unique(&self, subset: Vec<String>) -> Result<FrameHandle, String> {
        group::unique(&self.0, &subset).map(Frame::made)
    }

    fn with_row_index(&self, name: String, offset: u32) -> Result<FrameHandle, String> {
        let schema = self.0.schema();
        if schema.index_of(&name).is_ok() {
            return Err(format!("the frame already has a column `{name}`: name the index otherwise"));
        }
        let rows = u32::try_from(self.0.num_rows()).ok().filter(|n| n.checked_add(offset).is_some());
        let rows =
            rows.ok_or_else(|| format!("a row index from {offset} over {} rows overflows uint32", self.0.num_rows()))?;
        let index: arrow_array::ArrayRef =
            std::sync::Arc::new(arrow_array::UInt32Array::from_iter_values(offset..offset + rows));
        let fields = std::iter::once(Field::new(name, arrow_schema::DataType::UInt32, false))
            .chain(schema.fields().iter().map(|f| f.as_ref().clone()));
        let columns = std::iter::once(index).chain(self.0.columns().iter().cloned()).collect();
        let batch =
            RecordBatch::try_new(Schema::new(fields.collect::<Vec<_>>()).into(), columns).map_err(|e| e.to_string())?;
        Ok(Frame::made(batch))
    }

    fn concat(frames: Vec<FrameBorrow<'_>>) -> Result<FrameHandle, String> {
        let batches: Vec<&RecordBatch> = frames.iter().map(|f| &f.get::<Frame>().0).collect();
        group::concat(&batches).map(Frame::made)
    }

    fn sort(&self, by: Vec<(Expr, bool)>) -> Result<FrameHandle, String> {
        group::sort(&self.0, &by).map(Frame::made)
    }

    fn group_by(&self, keys: Vec<(String, Expr)>, aggregations: Vec<(String, Expr)>) -> Result<FrameHandle, String> {
        group::group_by(&self.0, &keys, &aggregations).map(Frame::made)
    }

    fn write(&self, table: String) {
        if let Some(bytes) = self.1.as_ref().filter(|_| self.0.num_rows() <= WRITE_ROWS) {
            weir::publisher::output::write(&table, bytes.as_slice());
            return;
        }
        let mut at = 0;
        loop {
            let piece = self.0.slice(at, WRITE_ROWS.min(self.0.num_rows() - at));
            weir::publisher::output::write(
                &table,
                &ipc::encode(&piece.schema(), std::slice::from_ref(&piece)).expect("arrow-rs writes what it made"),
            );
            at += piece.num_rows();
            if at == self.0.num_rows() {
                return;
            }
        }
    }

    fn to_ipc(&self) -> Vec<u8> {
        if let Some(bytes) = &self.1 {
            return bytes.to_vec();
        }
        ipc::encode(&self.0.schema(), std::slice::from_ref(&self.0)).expect("arrow-rs writes what it made")
    }
}

export!(Kernels);
