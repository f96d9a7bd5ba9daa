//! A 0.2.0 call's input: each slot of the batch (array mode) reaches the guest
//! as a `frames` resource, which hands its frames (Arrow IPC streams) over one
//! at a time and lets go of each as it does, so the host's copy of the batch
//! shrinks while the plugin reads it.

use std::collections::VecDeque;

/// One frame's bytes, whatever holds them (a `Vec`, an Arrow buffer the host
/// reads too).
type FrameBytes = Box<dyn AsRef<[u8]> + Send + Sync>;

/// One slot's frames not yet read.
pub struct SlotFrames {
    unread: VecDeque<FrameBytes>,
    count: u32,
}

impl SlotFrames {
    pub fn new<F: AsRef<[u8]> + Send + Sync + 'static>(slot: Vec<F>) -> Self {
        let count = slot.len() as u32;
        Self { unread: slot.into_iter().map(|f| Box::new(f) as FrameBytes).collect(), count }
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    /// The next frame's bytes, copied out for the guest, or `None` after the
    /// last. The host's own hold on the frame ends here.
    pub fn next(&mut self) -> Option<Vec<u8>> {
        self.unread.pop_front().map(|frame| (*frame).as_ref().to_vec())
    }
}
