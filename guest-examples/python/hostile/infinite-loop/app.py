"""Hostile fixture: never returns. The CPU deadline must stop it."""
import weir


@weir.publisher
def publish(slots):
    n = 0
    while True:
        n += 1
