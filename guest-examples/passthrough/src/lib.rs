//! A generic publisher: every row of the batch, unchanged, into the table its
//! publisher declares. It names no table and no topic, so one build serves
//! any topic: registered for `clicks` it writes table `clicks`, for `orders`
//! table `orders`. With as many tables as input slots (a change log's, one a
//! source table), each slot goes to its own table. It logs where each slot's
//! rows came from.

use weir_guest::{Frames, Output, Result, log};

fn publish(slots: Vec<Frames>, output: &mut Output) -> Result<()> {
    let tables = weir_guest::tables()?;
    let one_each = tables.len() == slots.len();
    for (i, frames) in slots.into_iter().enumerate() {
        let table = &tables[if one_each { i } else { 0 }];
        let (source, mut rows) = (frames.source(), 0);
        for batch in frames {
            let batch = batch?;
            rows += batch.num_rows();
            output.write(table, &batch)?;
        }
        log::info(&format!("{rows} rows from {source} into {table}"));
    }
    Ok(())
}

weir_guest::export_stream_publisher!(publish);
