"""Hostile fixture: tries the network every way CPython can: a TCP connection,
a TCP listener, a UDP datagram, a name lookup. The sandbox grants none, so
each must fail with the OS's error, and never reach anything."""
import encodings.idna  # noqa: F401  (a name lookup encodes the name; componentize-py bundles only what is imported)
import socket

import weir


def attempt(action):
    try:
        action()
        return "allowed"
    except OSError as e:
        return type(e).__name__


def connect():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.connect(("127.0.0.1", 80))


def listen():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen()


def udp():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"x", ("127.0.0.1", 53))


def lookup():
    socket.getaddrinfo("localhost", 80)


@weir.publisher
def publish(slots):
    tried = {name: attempt(action) for name, action in [("connect", connect), ("listen", listen), ("udp", udp), ("lookup", lookup)]}
    raise RuntimeError("; ".join(f"{name}: {outcome}" for name, outcome in tried.items()))
