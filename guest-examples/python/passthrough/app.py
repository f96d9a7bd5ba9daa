"""A passthrough publisher in Python, built with componentize-py: every input
frame goes out unchanged as the table `clicks`. It also tries the network, and
logs how the sandbox refused it.

    componentize-py -d ../../../wit -w stream-publisher componentize app -o passthrough.wasm
"""
import socket

import wit_world
from wit_world.imports import host, output
from wit_world.imports.host import Level


class WitWorld(wit_world.WitWorld):
    def publish(self, slots):
        try:
            socket.socket(socket.AF_INET, socket.SOCK_STREAM).connect(("127.0.0.1", 80))
            host.log(Level.ERROR, "network: connected")
        except OSError as e:
            host.log(Level.INFO, f"network refused: {e}")
        frames = 0
        for slot in slots:
            while (frame := slot.next()) is not None:
                output.write("clicks", frame)
                frames += 1
        print(f"passed {frames} frames through")
