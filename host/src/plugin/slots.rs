//! A 0.2 call's input: each slot of the batch (array mode) reaches the guest
//! as a `frames` resource, named for its source, which hands its frames (Arrow IPC streams) over one
//! at a time and lets go of each as it does, so the host's copy of the batch
//! shrinks while the plugin reads it.

use std::collections::VecDeque;

use arrow::error::ArrowError;

/// A frame, as the caller holds it: its bytes (a `Vec`, an Arrow buffer the
/// caller reads too), or a table framed only when it is handed over.
pub trait FrameBytes: Send + Sync + 'static {
    /// The bytes as a `Vec` for the guest: without a copy when nothing else
    /// holds them.
    fn into_bytes(self: Box<Self>) -> Result<Vec<u8>, ArrowError>;
}

impl FrameBytes for Vec<u8> {
    fn into_bytes(self: Box<Self>) -> Result<Vec<u8>, ArrowError> {
        Ok(*self)
    }
}

impl FrameBytes for arrow::buffer::Buffer {
    /// Copied only while something else holds the buffer too.
    fn into_bytes(self: Box<Self>) -> Result<Vec<u8>, ArrowError> {
        Ok((*self).into_vec::<u8>().unwrap_or_else(|shared| shared.to_vec()))
    }
}

impl FrameBytes for crate::plugin::frames::Unframed {
    /// Framed here, as the plugin asks for it.
    fn into_bytes(self: Box<Self>) -> Result<Vec<u8>, ArrowError> {
        self.encode()
    }
}

/// One slot's frames not yet read.
pub struct SlotFrames {
    unread: VecDeque<Box<dyn FrameBytes>>,
    count: u32,
    source: String,
}

impl SlotFrames {
    pub fn new<F: FrameBytes>(slot: Vec<F>, source: String) -> Self {
        let count = slot.len() as u32;
        Self { unread: slot.into_iter().map(|f| Box::new(f) as Box<dyn FrameBytes>).collect(), count, source }
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// The next frame's bytes, or `None` after the last. The host's own hold on
    /// the frame ends here.
    pub fn next(&mut self) -> Result<Option<Vec<u8>>, ArrowError> {
        self.unread.pop_front().map(FrameBytes::into_bytes).transpose()
    }
}

#[cfg(test)]
mod tests {
    use arrow::buffer::Buffer;

    use super::*;

    #[test]
    fn frames_come_out_in_order_once_and_unshared_ones_without_a_copy() {
        let (unshared, shared) = (Buffer::from_vec(b"first".to_vec()), Buffer::from_vec(b"second".to_vec()));
        let (unshared_at, kept) = (unshared.as_ptr(), shared.clone());
        let mut slot = SlotFrames::new(vec![unshared, shared], "clicks".into());
        assert_eq!(slot.count(), 2);
        let first = slot.next().unwrap().unwrap();
        assert_eq!((first.as_slice(), first.as_ptr()), (&b"first"[..], unshared_at), "handed over, not copied");
        let second = slot.next().unwrap().unwrap();
        assert_eq!(second, b"second");
        assert_ne!(second.as_ptr(), kept.as_ptr(), "still held elsewhere, so copied");
        assert_eq!((slot.next().unwrap(), slot.count(), slot.source()), (None, 2, "clicks"));
    }
}
