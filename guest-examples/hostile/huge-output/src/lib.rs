//! Hostile fixture: returns a 1 GiB table.
//! Works on the raw bindings, so nothing of the SDK's comfort gets in the way.

use weir_guest::__private::{Guest, OutputTable, RawResult, Slots};

struct Plugin;

impl Guest for Plugin {
    fn publish(_slots: Slots) -> RawResult {
        Ok(vec![OutputTable { name: "clicks".into(), data: vec![0u8; 1 << 30] }])
    }
}

weir_guest::bindings::__export_stream_publisher!(Plugin with_types_in weir_guest::bindings);
