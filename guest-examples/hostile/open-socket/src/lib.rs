//! Hostile fixture: tries to open a TCP connection.
//! Works on the raw bindings, so nothing of the SDK's comfort gets in the way.

use weir_guest::__private::{Guest, PublishError, RawResult, Slots};

struct Plugin;

impl Guest for Plugin {
    fn publish(_slots: Slots) -> RawResult {
        let stream = std::net::TcpStream::connect(("127.0.0.1", 80));
        Err(PublishError::Failed(format!("connect: {:?}", stream.map(|_| "connected"))))
    }
}

weir_guest::bindings::__export_stream_publisher!(Plugin with_types_in weir_guest::bindings);
