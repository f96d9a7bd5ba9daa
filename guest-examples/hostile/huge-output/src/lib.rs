//! Hostile fixture: writes a 1 GiB table.
//! Works on the raw bindings, so nothing of the SDK's comfort gets in the way.

use weir_guest::__private::{Guest, RawResult, Slots};

struct Plugin;

impl Guest for Plugin {
    fn publish(_slots: Slots) -> RawResult {
        weir_guest::bindings::weir::publisher::output::write("clicks", &vec![0u8; 1 << 30]);
        Ok(())
    }
}

weir_guest::bindings::__export_stream_publisher!(Plugin with_types_in weir_guest::bindings);
