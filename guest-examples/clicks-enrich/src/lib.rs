//! Shapes raw clicks into what analysts query:
//!
//! * drops bounces: clicks with no `duration_ms` or under 100 ms;
//! * derives `section`, the first path segment of `url` (`/docs/quickstart` → `docs`, `/` → `home`);
//! * renames `ts` to `clicked_at`.
//!
//! The output is table `clicks`, with every other column as it came in.

mod clicks;

use std::sync::Arc;

use clicks::{column, section_of};

use weir_guest::arrow_array::{ArrayRef, BooleanArray, Int64Array, StringArray};
use weir_guest::arrow_select::filter::filter_record_batch;
use weir_guest::{DataType, Field, RecordBatch, Result, Schema, Table, log};

const MIN_DURATION_MS: i64 = 100;

fn publish(slots: Vec<Vec<RecordBatch>>) -> Result<Vec<Table>> {
    let frames = slots.into_iter().next().unwrap_or_default();
    if frames.is_empty() {
        return Ok(vec![]);
    }
    let (rows_in, mut batches) = (frames.iter().map(RecordBatch::num_rows).sum::<usize>(), Vec::new());
    for frame in &frames {
        batches.push(enrich(frame)?);
    }
    let schema = batches[0].schema();
    let rows_out: usize = batches.iter().map(RecordBatch::num_rows).sum();
    log::info(&format!("kept {rows_out} of {rows_in} clicks ({} bounces dropped)", rows_in - rows_out));
    Ok(vec![Table::from_batches("clicks", schema, batches)?])
}

fn enrich(batch: &RecordBatch) -> Result<RecordBatch> {
    let duration = column::<Int64Array>(batch, "duration_ms", &DataType::Int64)?;
    let keep: BooleanArray = duration.iter().map(|d| Some(d.is_some_and(|ms| ms >= MIN_DURATION_MS))).collect();
    let batch = filter_record_batch(batch, &keep)?;

    let url = column::<StringArray>(&batch, "url", &DataType::Utf8)?;
    let section: StringArray = url.iter().map(|u| u.map(section_of)).collect();

    let mut fields = Vec::with_capacity(batch.num_columns() + 1);
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(batch.num_columns() + 1);
    for (field, array) in batch.schema().fields().iter().zip(batch.columns()) {
        let field =
            if field.name() == "ts" { field.as_ref().clone().with_name("clicked_at") } else { field.as_ref().clone() };
        fields.push(field);
        columns.push(array.clone());
        if fields.last().is_some_and(|f| f.name() == "url") {
            // Nullable, as every derived column is (in Polars, and in weir's kernels).
            fields.push(Field::new("section", DataType::Utf8, true));
            columns.push(Arc::new(section.clone()));
        }
    }
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?)
}

weir_guest::export_publisher!(publish);
