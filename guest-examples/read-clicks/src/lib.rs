//! The seed's publisher: every row of the batch, unchanged, as table `clicks`.
//! It streams: a record batch in, the same rows out, then the next, so it holds
//! one frame at a time whatever the batch's size.

use weir_guest::{Frames, Output, Result};

fn publish(slots: Vec<Frames>, output: &mut Output) -> Result<()> {
    for batch in slots.into_iter().flatten() {
        output.write("clicks", &batch?)?;
    }
    Ok(())
}

weir_guest::export_stream_publisher!(publish);
