//! Hostile fixture: recurses without end.
//! Works on the raw bindings, so nothing of the SDK's comfort gets in the way.

use std::hint::black_box;

use weir_guest::__private::{Guest, PublishError, RawResult, Slots};

#[allow(unconditional_recursion)]
fn dive(depth: u64) -> u64 {
    black_box(dive(black_box(depth + 1))).wrapping_add(1)
}

struct Plugin;

impl Guest for Plugin {
    fn publish(_slots: Slots) -> RawResult {
        Err(PublishError::Failed(format!("{}", dive(0))))
    }
}

weir_guest::bindings::__export_stream_publisher!(Plugin with_types_in weir_guest::bindings);
