//! Hostile fixture: tries to start a thread, and reports what happened.
//! Works on the raw bindings, so nothing of the SDK's comfort gets in the way.

use weir_guest::__private::{Guest, PublishError, RawResult, Slots};

struct Plugin;

impl Guest for Plugin {
    fn publish(_slots: Slots) -> RawResult {
        let spawned = std::thread::Builder::new().spawn(|| 42).map(|h| h.join().ok());
        Err(PublishError::Failed(format!("spawn: {spawned:?}")))
    }
}

weir_guest::bindings::__export_stream_publisher!(Plugin with_types_in weir_guest::bindings);
