#!/usr/bin/env python3
"""Rooms point one way inside each layer (issue 24 item 4, issue 35 item 1).

Each layer's sources sit in rooms, folders of <layer>/src/ (and, where the layer has them per room, of
<layer>/include/vitsim/<layer>/). A file may include headers of its own room and of the rooms before it in its
layer's order, never of a room after it, and never a layer it must not use (CONTRIBUTING.md "Layers"). A
production folder holds at most MAX_FILES source files. Prints each offence as FILE:LINE; exit 1 if any.
  python3 scripts/check_rooms.py
"""
import os
import re
import sys

# layer -> its rooms in order (each may use the ones before it), the layers it must not include, and whether
# its public headers sit in rooms too (vitsim/<layer>/<room>/x.hpp) or flat (vitsim/<layer>/x.hpp: any room).
LAYERS = {
    "core": (["base", "model", "platform", "formats", "results"],
             ["sim", "real", "calibrate", "validate", "plot", "app"], True),
    "sim": (["fabric", "fluid", "collectives", "compute", "engine", "point", "predict", "fit"],
            ["real", "calibrate", "validate", "plot", "app"], True),
    "real": (["comm", "data", "model", "trainer"], ["sim", "calibrate", "validate", "plot", "app"], False),
    "calibrate": (["fits", "imports", "harness", "phases", "bench", "emit"], ["sim", "validate", "plot", "app"],
                  False),
}
MAX_FILES = 20
SOURCE = (".cpp", ".hpp", ".h", ".cc", ".cu", ".in")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def room_of_include(layer, rooms, path):
    m = re.match(rf"vitsim/{layer}/(\w+)/", path) or re.match(r"(\w+)/[\w.]+$", path)
    return m.group(1) if m and m.group(1) in rooms else None


def check_layer(root, layer, rooms, above, public_rooms):
    bad = 0
    bases = [f"{layer}/src"] + ([f"{layer}/include/vitsim/{layer}"] if public_rooms else [])
    for base in bases:
        for room in rooms:
            folder = os.path.join(root, base, room)
            if not os.path.isdir(folder):
                if base.endswith("/src") or layer == "core":
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
                        if any(inc.startswith(f"vitsim/{other}/") for other in above):
                            print(f"{rel}:{n}: {layer} includes a layer it must not use: {inc}")
                            bad += 1
                        target = room_of_include(layer, rooms, inc)
                        if target and rooms.index(target) > rooms.index(room):
                            print(f"{rel}:{n}: room '{room}' includes '{target}' after it: {inc}")
                            bad += 1
        for name in os.listdir(os.path.join(root, base)):
            path = os.path.join(root, base, name)
            if os.path.isfile(path) and (base.endswith("/src") or public_rooms):
                print(f"{base}/{name}: outside the rooms ({', '.join(rooms)})")
                bad += 1
            elif os.path.isdir(path) and name not in rooms:
                print(f"{base}/{name}: a folder that is no room of {layer} ({', '.join(rooms)})")
                bad += 1
    return bad


def check_folder_sizes(root):
    bad = 0
    for top in ["core", "sim", "real", "calibrate", "validate", "plot", "app"]:
        for folder, _, names in os.walk(os.path.join(root, top)):
            count = sum(1 for n in names if n.endswith(SOURCE))
            if count > MAX_FILES:
                print(f"{os.path.relpath(folder, root)}: {count} source files (at most {MAX_FILES}: split it into rooms)")
                bad += 1
    return bad


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    bad = sum(check_layer(root, layer, *spec) for layer, spec in LAYERS.items())
    bad += check_folder_sizes(root)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
