//! A generic publisher: every row of the batch, unchanged, into the table its
//! publisher declares. It names no table and no topic, so one build serves
//! any topic: registered for `clicks` it writes table `clicks`, for `orders`
//! table `orders`. It logs where each slot's rows came from.

use weir_guest::{Frames, Output, Result, log};

fn publish(slots: Vec<Frames>, output: &mut Output) -> Result<()> {
    let table = &weir_guest::tables()?[0];
    for frames in slots {
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
