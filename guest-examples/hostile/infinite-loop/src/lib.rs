//! Hostile fixture: spins forever without returning.
//! Works on the raw bindings, so nothing of the SDK's comfort gets in the way.

use std::hint::black_box;

use weir_guest::__private::{Guest, RawResult, Slots};

struct Plugin;

impl Guest for Plugin {
    fn publish(_slots: Slots) -> RawResult {
        let mut i = 0u64;
        loop {
            i = black_box(i.wrapping_add(1));
        }
    }
}

weir_guest::bindings::__export_stream_publisher!(Plugin with_types_in weir_guest::bindings);
