//! Hostile fixture: grows its linear memory by 8 MiB and reads the new pages,
//! which WebAssembly says are zero. A call that finds anything else there has
//! seen what an earlier call (this plugin's or another tenant's) left in a
//! reused slot, and fails saying how much. Either way it then fills those
//! pages with a mark, for the next call to look for.

use core::arch::wasm32::memory_grow;

use weir_guest::{Error, Frames, Output, Result};

const PAGE: usize = 64 * 1024;
const PAGES: usize = 128;
const MARK: u8 = 0xA5;

fn publish(_slots: Vec<Frames>, _output: &mut Output) -> Result<()> {
    let first = memory_grow::<0>(PAGES);
    if first == usize::MAX {
        return Err(Error::failed("memory.grow refused 8 MiB"));
    }
    // SAFETY: the pages from `first` on were just added to this memory and
    // nothing else in the module knows of them.
    let fresh = unsafe { core::slice::from_raw_parts_mut((first * PAGE) as *mut u8, PAGES * PAGE) };
    let seen = fresh.iter().filter(|b| **b != 0).count();
    fresh.fill(MARK);
    if seen > 0 {
        return Err(Error::failed(format!("{seen} bytes of fresh memory were not zero")));
    }
    Ok(())
}

weir_guest::export_stream_publisher!(publish);
