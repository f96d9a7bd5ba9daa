//! Hostile fixture: tries to read and write host files, and reports what happened.
//! Works on the raw bindings, so nothing of the SDK's comfort gets in the way.

use weir_guest::__private::{Guest, PublishError, RawResult, Slots};

struct Plugin;

impl Guest for Plugin {
    fn publish(_slots: Slots) -> RawResult {
        let read = std::fs::read("/etc/passwd").map(|b| b.len());
        let write = std::fs::write("escape.txt", b"out");
        let list = std::fs::read_dir(".").map(|d| d.count());
        Err(PublishError::Failed(format!("read: {read:?}; write: {write:?}; list: {list:?}")))
    }
}

weir_guest::bindings::__export_stream_publisher!(Plugin with_types_in weir_guest::bindings);
