#!/usr/bin/env bash
# Fresh machine to green: installs what is missing (Debian packages), builds everything this machine can
# build (the simulator always; the real trainer where LibTorch + MPI are found) and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$jobs"
cd build
ctest --output-on-failure -j"$jobs" --timeout 900
