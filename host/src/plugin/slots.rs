//! A call's input: the batch in array mode, one slot per source, each a list of
//! frames (Arrow IPC streams). Under `weir:publisher@0.2.0` a slot reaches the
//! guest as a `frames` resource, which hands its frames over one at a time.

use std::sync::Arc;

/// The batch's frames, whatever holds their bytes (a `Vec`, an Arrow buffer
/// the host reads too). Shared, so every slot's resource can read it without a
/// copy of the batch.
pub trait Frames: Send + Sync {
    fn slots(&self) -> usize;
    fn len(&self, slot: usize) -> usize;
    fn frame(&self, slot: usize, index: usize) -> &[u8];
}

impl<F: AsRef<[u8]> + Send + Sync> Frames for Vec<Vec<F>> {
    fn slots(&self) -> usize {
        self.len()
    }
    fn len(&self, slot: usize) -> usize {
        self[slot].len()
    }
    fn frame(&self, slot: usize, index: usize) -> &[u8] {
        self[slot][index].as_ref()
    }
}

/// One slot's frames, as the guest reads them: a cursor over the slot.
pub struct SlotFrames {
    batch: Arc<dyn Frames>,
    slot: usize,
    next: usize,
}

impl SlotFrames {
    /// One cursor per slot of `batch`, each at its first frame.
    pub fn of(batch: &Arc<dyn Frames>) -> Vec<Self> {
        (0..batch.slots()).map(|slot| Self { batch: batch.clone(), slot, next: 0 }).collect()
    }

    pub fn count(&self) -> u32 {
        self.batch.len(self.slot) as u32
    }

    /// The next frame's bytes, copied out for the guest, or `None` after the last.
    pub fn next(&mut self) -> Option<Vec<u8>> {
        if self.next == self.batch.len(self.slot) {
            return None;
        }
        self.next += 1;
        Some(self.batch.frame(self.slot, self.next - 1).to_vec())
    }
}
