//! Hostile fixture: tries the network every way the standard library can:
//! a TCP connection, a TCP listener, a UDP socket, a name lookup. The sockets
//! interfaces are linked (CPython's libc needs them), and each of these must
//! be refused by the sandbox itself, not fail for want of a peer.
//! Works on the raw bindings, so nothing of the SDK's comfort gets in the way.

use std::net::{TcpListener, TcpStream, ToSocketAddrs, UdpSocket};

use weir_guest::__private::{Guest, PublishError, RawResult, Slots};

struct Plugin;

fn kind<T>(result: std::io::Result<T>) -> String {
    match result {
        Ok(_) => "allowed".into(),
        Err(e) => format!("{:?}", e.kind()),
    }
}

impl Guest for Plugin {
    fn publish(_slots: Slots) -> RawResult {
        let connect = kind(TcpStream::connect(("127.0.0.1", 80)));
        let listen = kind(TcpListener::bind(("127.0.0.1", 0)));
        let udp = kind(UdpSocket::bind(("0.0.0.0", 0)).and_then(|s| s.send_to(b"x", ("127.0.0.1", 53))));
        // A refused lookup has no error kind of its own in Rust's std: its message says.
        let lookup = match ("localhost", 80).to_socket_addrs() {
            Ok(_) => "allowed".into(),
            Err(e) => e.to_string(),
        };
        Err(PublishError::Failed(format!("connect: {connect}; listen: {listen}; udp: {udp}; lookup: {lookup}")))
    }
}

weir_guest::bindings::__export_stream_publisher!(Plugin with_types_in weir_guest::bindings);
