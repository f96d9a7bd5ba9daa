//! Hostile fixture: allocates (and touches) memory until something stops it.
//! Works on the raw bindings, so nothing of the SDK's comfort gets in the way.

use std::hint::black_box;

use weir_guest::__private::{Guest, RawResult, Slots};

struct Plugin;

impl Guest for Plugin {
    fn publish(_slots: Slots) -> RawResult {
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            hoard.push(vec![1u8; 16 << 20]);
            black_box(&hoard);
        }
    }
}

weir_guest::bindings::__export_stream_publisher!(Plugin with_types_in weir_guest::bindings);
