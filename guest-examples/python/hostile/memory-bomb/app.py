"""Hostile fixture: holds ever more memory, touched, until something stops it."""
import weir


@weir.publisher
def publish(slots):
    hoard = []
    while True:
        hoard.append(bytearray(b"\x01" * (16 << 20)))
