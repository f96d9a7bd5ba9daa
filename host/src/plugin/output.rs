//! Where a plugin's output goes. Every piece is checked before anyone may
//! commit it (names, declared outputs, Arrow IPC that decodes, one schema per
//! table, the byte and row limits), then handed to the caller's
//! [`OutputSink`] as it arrives: under `weir:publisher@0.2` while the plugin
//! runs, under 0.1.0 once it returns.

use std::any::Any;
use std::collections::HashMap;

use arrow::datatypes::SchemaRef;

use crate::plugin::frames::{self, Frame};

use super::HostTime;
use super::error::{OutputError, RunError, Trap, TrapKind};
use super::limits::Limits;

/// Takes a call's checked output. What it was given counts only if the call
/// then succeeds: on failure the runtime drops the sink, which must then leave
/// nothing behind.
pub trait OutputSink: Any + Send {
    /// Rows for table `name`. Every frame of a table has the schema of its first.
    fn write(&mut self, name: &str, frame: Frame) -> anyhow::Result<()>;
}

/// One table a plugin returned, decoded.
#[derive(Debug, Clone)]
pub struct OutputTable {
    pub name: String,
    pub frame: Frame,
}

/// A sink that keeps every table in memory, each table's pieces as one frame,
/// in the order the tables were first written.
#[derive(Debug, Default)]
pub struct Collect(pub Vec<OutputTable>);

impl OutputSink for Collect {
    fn write(&mut self, name: &str, frame: Frame) -> anyhow::Result<()> {
        match self.0.iter_mut().find(|t| t.name == name) {
            Some(table) => table.frame.batches.extend(frame.batches),
            None => self.0.push(OutputTable { name: name.to_string(), frame }),
        }
        Ok(())
    }
}

/// Table names become file and catalog names, so they are kept simple.
pub fn valid_table_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.len() <= 128
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-' | '.'))
}

/// One call's output: its checks, its running totals, and the sink.
pub struct Output {
    declared: Option<Vec<String>>,
    byte_limit: usize,
    row_limit: u64,
    bytes: usize,
    rows: u64,
    schemas: HashMap<String, SchemaRef>,
    sink: Box<dyn OutputSink>,
    /// Why a write was refused; the call ends with this error.
    pub refused: Option<RunError>,
    /// Time spent checking and sinking output: host work, not the plugin's.
    pub host: HostTime,
}

impl Output {
    pub fn new(sink: Box<dyn OutputSink>, limits: &Limits, declared: Option<&[String]>) -> Self {
        Self {
            declared: declared.map(<[String]>::to_vec),
            byte_limit: limits.output_bytes,
            row_limit: limits.output_rows,
            bytes: 0,
            rows: 0,
            schemas: HashMap::new(),
            sink,
            refused: None,
            host: HostTime::default(),
        }
    }

    /// The tables the publisher declares, in order; none without a declaration.
    pub fn tables(&self) -> Vec<String> {
        self.declared.clone().unwrap_or_default()
    }

    /// Checks one piece of table `name` and hands it to the sink. A refusal is
    /// kept (the first one wins) and returned.
    pub fn write(&mut self, name: String, data: Vec<u8>) -> Result<(), &RunError> {
        if self.refused.is_none() {
            let mut host = self.host;
            let checked = host.count(|| self.check_and_sink(name, data));
            self.host = host;
            self.refused = checked.err();
        }
        self.refused.as_ref().map_or(Ok(()), Err)
    }

    fn check_and_sink(&mut self, name: String, data: Vec<u8>) -> Result<(), RunError> {
        if !valid_table_name(&name) {
            return Err(OutputError::BadName { name }.into());
        }
        if let Some(declared) = &self.declared
            && !declared.contains(&name)
        {
            return Err(OutputError::Undeclared { name, declared: declared.clone() }.into());
        }
        self.bytes = self.bytes.saturating_add(data.len());
        if self.bytes > self.byte_limit {
            let kind = TrapKind::OutputTooLarge { limit_bytes: self.byte_limit };
            let source = anyhow::anyhow!("the plugin wrote {} bytes of Arrow IPC", self.bytes);
            return Err(Trap { kind, raw: source }.into());
        }
        let frame =
            frames::decode(data).map_err(|e| OutputError::BadIpc { name: name.clone(), reason: e.to_string() })?;
        self.rows += frame.rows();
        if self.rows > self.row_limit {
            return Err(OutputError::TooManyRows { rows: self.rows, limit: self.row_limit }.into());
        }
        match self.schemas.get(&name) {
            Some(first) if *first != frame.schema => {
                let (first, now) = (fields(first), fields(&frame.schema));
                return Err(OutputError::SchemaChanged { name, first, now }.into());
            }
            Some(_) => {}
            None => {
                self.schemas.insert(name.clone(), frame.schema.clone());
            }
        }
        self.sink.write(&name, frame).map_err(RunError::Sink)
    }

    /// The sink, once the call has succeeded.
    pub fn into_sink<S: OutputSink>(self) -> S {
        let sink: Box<dyn Any> = self.sink;
        *sink.downcast::<S>().expect("the sink the call was given")
    }
}

/// `name: Type, ...`, for a message.
fn fields(schema: &SchemaRef) -> String {
    let fields: Vec<String> = schema.fields().iter().map(|f| format!("{}: {}", f.name(), f.data_type())).collect();
    fields.join(", ")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    fn ipc(column: &str, rows: i64) -> Vec<u8> {
        let schema = Arc::new(Schema::new(vec![Field::new(column, DataType::Int64, false)]));
        let batch =
            RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from_iter_values(0..rows))]).unwrap();
        frames::encode(&schema, &[batch]).unwrap()
    }

    fn output(limits: Limits) -> Output {
        Output::new(Box::new(Collect::default()), &limits, Some(&["clicks".to_string()]))
    }

    #[test]
    fn names() {
        for ok in ["clicks", "a", "clicks.v2", "0day", "a_b-c"] {
            assert!(valid_table_name(ok), "{ok}");
        }
        for bad in ["", "Clicks", "../x", "a/b", "_x", ".hidden", "a b", &"x".repeat(129)] {
            assert!(!valid_table_name(bad), "{bad}");
        }
    }

    #[test]
    fn pieces_of_one_table_are_appended() {
        let mut out = output(Limits::default());
        out.write("clicks".into(), ipc("id", 3)).unwrap();
        out.write("clicks".into(), ipc("id", 4)).unwrap();
        let Collect(tables) = out.into_sink();
        assert_eq!(tables.len(), 1);
        assert_eq!(tables[0].frame.rows(), 7);
    }

    #[test]
    fn refuses_undeclared_bad_names_garbage_and_a_changed_schema() {
        let refusal = |name: &str, data: Vec<u8>| {
            let mut out = output(Limits::default());
            out.write("clicks".into(), ipc("id", 1)).unwrap();
            out.write(name.into(), data).unwrap_err().to_string()
        };
        assert!(refusal("other", ipc("id", 1)).contains("not one this publisher declares"));
        assert!(refusal("Bad", ipc("id", 1)).contains("is invalid"));
        assert!(refusal("clicks", b"junk".to_vec()).contains("not a valid Arrow IPC stream"));
        assert!(refusal("clicks", ipc("name", 1)).contains("schema"));
    }

    #[test]
    fn limits_count_every_write_and_the_first_refusal_stays() {
        let piece = ipc("id", 10);
        let mut out = output(Limits { output_bytes: piece.len() * 2, ..Limits::default() });
        out.write("clicks".into(), piece.clone()).unwrap();
        out.write("clicks".into(), piece.clone()).unwrap();
        let err = out.write("clicks".into(), piece.clone()).unwrap_err().to_string();
        assert!(err.contains("more than"), "{err}");
        assert!(out.write("clicks".into(), ipc("id", 1)).is_err(), "a refused run takes nothing more");

        let mut out = output(Limits { output_rows: 15, ..Limits::default() });
        out.write("clicks".into(), ipc("id", 10)).unwrap();
        let err = out.write("clicks".into(), ipc("id", 10)).unwrap_err().to_string();
        assert!(err.contains("20 rows, over the 15-row"), "{err}");
    }
}
