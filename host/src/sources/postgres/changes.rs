//! A source table's change log, built a row at a time into Arrow: the row's
//! own columns (the new image; a delete's key, or whole old row under REPLICA
//! IDENTITY FULL), then
//!
//! | column | |
//! |---|---|
//! | `_op` | `r` snapshot read, `c` insert, `u` update, `d` delete, `t` truncate |
//! | `_lsn` | the commit's position in the WAL (the snapshot's consistent point for `r`) |
//! | `_tx` | the transaction's id (null for `r`) |
//! | `_ordinal` | the change's place in its transaction, from 0 (a snapshot's row number) |
//! | `_commit_ts` | when the transaction committed (null for `r`) |
//! | `_before` | the old image the server sent (an update of the key, or REPLICA IDENTITY FULL), else null |
//! | `_unchanged` | columns whose stored (TOASTed) value the change did not touch, so did not send: they are null here, never a placeholder |
//!
//! A TRUNCATE is a row of its own (`_op = 't'`, every column null), never dropped.

use std::sync::Arc;

use arrow::array::builder::NullBufferBuilder;
use arrow::array::{
    ArrayRef, Int64Builder, ListBuilder, RecordBatch, StringBuilder, StructArray, TimestampMicrosecondBuilder,
};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};

use super::columns::{Builder, Column, Value};
use super::pgoutput::Datum;

/// A table the source reads, as the catalog describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceTable {
    pub schema: String,
    pub name: String,
    /// Its oid, which the stream's messages name it by.
    pub oid: u32,
    pub columns: Vec<Column>,
    /// `d` (the primary key), `n`, `f` (full) or `i` (an index).
    pub replica_identity: char,
}

impl SourceTable {
    /// `schema.name`, as a declaration names it.
    pub fn qualified(&self) -> String {
        format!("{}.{}", self.schema, self.name)
    }

    /// The change log's schema.
    pub fn change_schema(&self) -> SchemaRef {
        let own: Fields = self.columns.iter().map(|c| Field::new(&c.name, c.ty.arrow(), true)).collect();
        let mut fields: Vec<Field> = own.iter().map(|f| f.as_ref().clone()).collect();
        fields.extend([
            Field::new("_op", DataType::Utf8, false),
            Field::new("_lsn", DataType::Int64, false),
            Field::new("_tx", DataType::Int64, true),
            Field::new("_ordinal", DataType::Int64, false),
            Field::new("_commit_ts", DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), true),
            Field::new("_before", DataType::Struct(own), true),
            Field::new("_unchanged", DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))), true),
        ]);
        Arc::new(Schema::new(fields))
    }
}

/// What a change is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Read,
    Insert,
    Update,
    Delete,
    Truncate,
}

impl Op {
    pub fn code(self) -> &'static str {
        match self {
            Self::Read => "r",
            Self::Insert => "c",
            Self::Update => "u",
            Self::Delete => "d",
            Self::Truncate => "t",
        }
    }
}

/// Where a change sits in the log.
#[derive(Debug, Clone, Copy)]
pub struct Position {
    pub lsn: u64,
    pub tx: Option<u32>,
    pub ordinal: i64,
    /// Microseconds since the epoch.
    pub commit_ts: Option<i64>,
}

/// A change that cannot be written: a value the table's column cannot hold.
#[derive(Debug, thiserror::Error)]
#[error("{table}.{column}: {problem}")]
pub struct BadValue {
    pub table: String,
    pub column: String,
    pub problem: String,
    /// Where the change was: its commit position (the snapshot's, for a
    /// snapshot row) and its place in the transaction (or the snapshot).
    pub lsn: u64,
    pub ordinal: i64,
    /// The row as it came, a JSON object of each column's text (null: none).
    pub row: String,
}

impl BadValue {
    fn at(mut self, at: Position, row: String) -> Self {
        (self.lsn, self.ordinal, self.row) = (at.lsn, at.ordinal, row);
        self
    }
}

/// One table's changes so far, in Arrow builders.
pub struct ChangeLog {
    table: Arc<SourceTable>,
    schema: SchemaRef,
    own: Vec<Builder>,
    before: Vec<Builder>,
    before_valid: NullBufferBuilder,
    op: StringBuilder,
    lsn: Int64Builder,
    tx: Int64Builder,
    ordinal: Int64Builder,
    commit_ts: TimestampMicrosecondBuilder,
    unchanged: ListBuilder<StringBuilder>,
    rows: usize,
    /// The bytes of text the rows were read from: what the rollover's size counts.
    bytes: u64,
}

impl ChangeLog {
    pub fn new(table: Arc<SourceTable>) -> Self {
        let builders = || table.columns.iter().map(|c| Builder::new(&c.ty)).collect();
        Self {
            schema: table.change_schema(),
            own: builders(),
            before: builders(),
            before_valid: NullBufferBuilder::new(0),
            op: StringBuilder::new(),
            lsn: Int64Builder::new(),
            tx: Int64Builder::new(),
            ordinal: Int64Builder::new(),
            commit_ts: TimestampMicrosecondBuilder::new().with_timezone("UTC"),
            unchanged: ListBuilder::new(StringBuilder::new()),
            rows: 0,
            bytes: 0,
            table,
        }
    }

    pub fn table(&self) -> &Arc<SourceTable> {
        &self.table
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Adds a change from the stream: `new` for inserts and updates, `old` the
    /// old image or key the server sent.
    pub fn change(
        &mut self,
        op: Op,
        new: Option<&[Datum<'_>]>,
        old: Option<&[Datum<'_>]>,
        at: Position,
    ) -> Result<(), BadValue> {
        self.change_at(op, new, old, at).map_err(|bad| {
            let tuple = new.or(old).unwrap_or_default();
            let texts = tuple.iter().map(|d| match d {
                Datum::Text(text) => Some(*text),
                Datum::Null | Datum::Unchanged => None,
            });
            bad.at(at, self.row_text(texts))
        })
    }

    /// A row's values as a JSON object of text, for a dead letter.
    fn row_text<'a>(&self, values: impl Iterator<Item = Option<&'a str>>) -> String {
        let names = self.table.columns.iter().map(|c| c.name.clone());
        serde_json::Value::Object(names.zip(values.map(|v| v.into())).collect()).to_string()
    }

    fn change_at(
        &mut self,
        op: Op,
        new: Option<&[Datum<'_>]>,
        old: Option<&[Datum<'_>]>,
        at: Position,
    ) -> Result<(), BadValue> {
        let table = self.table.clone();
        let mut unchanged = Vec::new();
        // The row's own columns: the new image, or what a delete names.
        let own = match (new, old) {
            (Some(new), old) => {
                let mut values = self.values(new)?;
                for (i, datum) in new.iter().enumerate() {
                    if *datum == Datum::Unchanged {
                        // The full old row has it (REPLICA IDENTITY FULL); otherwise it was not sent.
                        match old.and_then(|old| old.get(i)) {
                            Some(Datum::Text(text)) => values[i] = self.parse(i, text)?,
                            _ => unchanged.push(table.columns[i].name.as_str()),
                        }
                    }
                }
                values
            }
            (None, Some(old)) => self.values(old)?,
            (None, None) => vec![Value::Null; self.table.columns.len()],
        };
        let before = old.map(|old| self.values(old)).transpose()?;
        self.append(op, &own, before.as_deref(), &unchanged, at);
        let sent: usize = new
            .iter()
            .chain(old.iter())
            .flat_map(|t| t.iter())
            .map(|d| if let Datum::Text(t) = d { t.len() } else { 1 })
            .sum();
        self.bytes += sent as u64;
        Ok(())
    }

    /// Adds a row of the snapshot, its values in text (`None`: null).
    pub fn read(&mut self, row: &[Option<&str>], at: Position) -> Result<(), BadValue> {
        let values = row
            .iter()
            .enumerate()
            .map(|(i, v)| v.map_or(Ok(Value::Null), |text| self.parse(i, text)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|bad| bad.at(at, self.row_text(row.iter().copied())))?;
        self.append(Op::Read, &values, None, &[], at);
        self.bytes += row.iter().map(|v| v.map_or(1, str::len)).sum::<usize>() as u64;
        Ok(())
    }

    fn values<'a>(&self, tuple: &[Datum<'a>]) -> Result<Vec<Value<'a>>, BadValue> {
        if tuple.len() != self.table.columns.len() {
            return Err(BadValue {
                table: self.table.qualified(),
                column: "(row)".into(),
                problem: format!("{} values where the table has {} columns", tuple.len(), self.table.columns.len()),
                lsn: 0,
                ordinal: 0,
                row: String::new(),
            });
        }
        tuple
            .iter()
            .enumerate()
            .map(|(i, datum)| match datum {
                Datum::Null | Datum::Unchanged => Ok(Value::Null),
                Datum::Text(text) => self.parse(i, text),
            })
            .collect()
    }

    fn parse<'a>(&self, i: usize, text: &'a str) -> Result<Value<'a>, BadValue> {
        let column = &self.table.columns[i];
        column.ty.parse(text).map_err(|problem| BadValue {
            table: self.table.qualified(),
            column: column.name.clone(),
            problem: format!("{problem} ({})", column.pg_type),
            lsn: 0,
            ordinal: 0,
            row: String::new(),
        })
    }

    fn append(&mut self, op: Op, own: &[Value<'_>], before: Option<&[Value<'_>]>, unchanged: &[&str], at: Position) {
        for (builder, value) in self.own.iter_mut().zip(own) {
            builder.append(value);
        }
        match before {
            Some(before) => {
                self.before.iter_mut().zip(before).for_each(|(b, v)| b.append(v));
                self.before_valid.append_non_null();
            }
            None => {
                self.before.iter_mut().for_each(|b| b.append(&Value::Null));
                self.before_valid.append_null();
            }
        }
        self.op.append_value(op.code());
        self.lsn.append_value(at.lsn as i64);
        self.tx.append_option(at.tx.map(i64::from));
        self.ordinal.append_value(at.ordinal);
        self.commit_ts.append_option(at.commit_ts);
        if unchanged.is_empty() {
            self.unchanged.append_null();
        } else {
            unchanged.iter().for_each(|name| self.unchanged.values().append_value(name));
            self.unchanged.append(true);
        }
        self.rows += 1;
    }

    /// Follows the table to its new columns: the changes so far are finished
    /// under the columns they were read with (returned, if there are any),
    /// and the log goes on under the new ones.
    pub fn evolve(&mut self, table: Arc<SourceTable>) -> Option<RecordBatch> {
        let done = (self.rows > 0).then(|| self.finish());
        *self = Self::new(table);
        done
    }

    /// The changes so far, as one batch; the log starts empty again.
    pub fn finish(&mut self) -> RecordBatch {
        let mut columns: Vec<ArrayRef> = self.own.iter_mut().map(Builder::finish).collect();
        let before: Vec<ArrayRef> = self.before.iter_mut().map(Builder::finish).collect();
        let DataType::Struct(before_fields) =
            self.schema.field_with_name("_before").expect("a _before column").data_type()
        else {
            unreachable!("_before is a struct")
        };
        let before = StructArray::new(before_fields.clone(), before, self.before_valid.finish());
        columns.extend::<[ArrayRef; 7]>([
            Arc::new(self.op.finish()),
            Arc::new(self.lsn.finish()),
            Arc::new(self.tx.finish()),
            Arc::new(self.ordinal.finish()),
            Arc::new(self.commit_ts.finish()),
            Arc::new(before),
            Arc::new(self.unchanged.finish()),
        ]);
        self.rows = 0;
        self.bytes = 0;
        RecordBatch::try_new(self.schema.clone(), columns).expect("the builders follow the schema")
    }
}
