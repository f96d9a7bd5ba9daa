//! weir's columnar kernels (`weir:frames/kernels@0.1.0`), composed into
//! publishers written in interpreted languages: a frame's columns stay here,
//! in arrow-rs arrays; the interpreter holds a handle and hands over whole
//! expressions, each evaluated over the frame in one call.

mod expr;

use std::io::Cursor;

use arrow_array::RecordBatch;
use arrow_schema::{Field, Schema};

wit_bindgen::generate!({ path: "../../wit/frames", world: "kernels-lib" });

use exports::weir::frames::kernels::{Expr, Frame as FrameHandle, Guest, GuestFrame};

struct Kernels;

impl Guest for Kernels {
    type Frame = Frame;
}

/// A frame: its rows, in one record batch.
pub struct Frame(RecordBatch);

impl GuestFrame for Frame {
    fn from_ipc(bytes: Vec<u8>) -> Result<FrameHandle, String> {
        let read = || -> Result<RecordBatch, arrow_schema::ArrowError> {
            let reader = arrow_ipc::reader::StreamReader::try_new(Cursor::new(bytes), None)?;
            let schema = reader.schema();
            let batches = reader.collect::<Result<Vec<_>, _>>()?;
            match batches.len() {
                1 => Ok(batches.into_iter().next().expect("one batch")),
                _ => arrow_select::concat::concat_batches(&schema, &batches),
            }
        };
        let batch = read().map_err(|e| format!("the frame is not an Arrow IPC stream: {e}"))?;
        Ok(FrameHandle::new(Frame(batch)))
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
        Ok(FrameHandle::new(Frame(kept)))
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
        Ok(FrameHandle::new(Frame(batch)))
    }

    fn select(&self, names: Vec<String>) -> Result<FrameHandle, String> {
        let schema = self.0.schema();
        let indices = names
            .iter()
            .map(|name| schema.index_of(name).map_err(|_| expr::no_column(name, &self.0)))
            .collect::<Result<Vec<_>, _>>()?;
        let batch = self.0.project(&indices).map_err(|e| e.to_string())?;
        Ok(FrameHandle::new(Frame(batch)))
    }

    fn to_ipc(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        let mut writer = arrow_ipc::writer::StreamWriter::try_new(&mut bytes, &self.0.schema())
            .expect("a schema arrow-rs made is one it writes");
        writer.write(&self.0).expect("writing to memory");
        writer.finish().expect("writing to memory");
        drop(writer);
        bytes
    }
}

export!(Kernels);
