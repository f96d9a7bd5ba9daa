//! The seed's publisher: every frame of the batch, unchanged, as table `clicks`.

use weir_guest::{RecordBatch, Result, Table};

fn publish(slots: Vec<Vec<RecordBatch>>) -> Result<Vec<Table>> {
    let frames = slots.into_iter().next().unwrap_or_default();
    let Some(first) = frames.first() else {
        return Ok(vec![]);
    };
    let schema = first.schema();
    Ok(vec![Table::from_batches("clicks", schema, frames)?])
}

weir_guest::export_publisher!(publish);
