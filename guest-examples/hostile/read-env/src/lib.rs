//! Hostile fixture: looks for environment variables and arguments, and reports what it saw.
//! Works on the raw bindings, so nothing of the SDK's comfort gets in the way.

use weir_guest::__private::{Guest, PublishError, RawResult, Slots};

struct Plugin;

impl Guest for Plugin {
    fn publish(_slots: Slots) -> RawResult {
        let vars: Vec<String> = std::env::vars().map(|(k, _)| k).collect();
        let args: Vec<String> = std::env::args().collect();
        Err(PublishError::Failed(format!("saw {} env vars {vars:?}, {} args {args:?}", vars.len(), args.len())))
    }
}

weir_guest::bindings::__export_stream_publisher!(Plugin with_types_in weir_guest::bindings);
