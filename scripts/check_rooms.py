#!/usr/bin/env python3
"""core's rooms point one way (issue 24 item 4): base <- model <- platform <- formats.

A file in core/include/vitsim/core/<room>/ or core/src/<room>/ may include headers of its own room and of the
rooms before it, never of a room after it, and nothing outside core (sim, real, calibrate, validate, plot, app).
Prints each upward include as FILE:LINE; exit 1 if any.  python3 scripts/check_rooms.py
"""
import os
import re
import sys

ROOMS = ["base", "model", "platform", "formats"]
LAYERS_ABOVE = ["sim", "real", "calibrate", "validate", "plot", "app"]
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def room_of_include(path):
    m = re.match(r"vitsim/core/(\w+)/", path) or re.match(r"(\w+)/[\w.]+$", path)
    return m.group(1) if m and m.group(1) in ROOMS else None


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    bad = 0
    for base in ["core/include/vitsim/core", "core/src"]:
        for room in ROOMS:
            folder = os.path.join(root, base, room)
            if not os.path.isdir(folder):
                print(f"{base}/{room}: missing room")
                bad += 1
                continue
            for name in sorted(os.listdir(folder)):
                rel = f"{base}/{room}/{name}"
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    for n, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        inc = m.group(1)
                        if any(inc.startswith(f"vitsim/{layer}/") for layer in LAYERS_ABOVE):
                            print(f"{rel}:{n}: core includes a layer above it: {inc}")
                            bad += 1
                        target = room_of_include(inc)
                        if target and ROOMS.index(target) > ROOMS.index(room):
                            print(f"{rel}:{n}: room '{room}' includes '{target}' after it: {inc}")
                            bad += 1
        for name in os.listdir(os.path.join(root, base)):
            if os.path.isfile(os.path.join(root, base, name)):
                print(f"{base}/{name}: outside the rooms ({', '.join(ROOMS)})")
                bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
