#!/usr/bin/env bash
# Fresh machine to green: installs what is missing (Debian packages), checks the tree's habits, builds every
# configuration the project relies on and runs every test.
#   1. habits: clang-format (the tree is formatted: scripts/format.sh --check), room sizes
#      (scripts/check_sizes.py: no production file over 600 lines, no function over 120) and core's rooms
#      pointing one way (scripts/check_rooms.py);
#   2. build/: everything this machine can build (the simulator always; the real trainer and calibration
#      where LibTorch + MPI are found), with the tests;
#   3. build-sim/: the simulator without Torch (the README's first command), so no Torch include creeps in;
#   4. build-trainer/: the trainer-only configuration (VITSIM_TRAINER_ONLY: core, real, a vitsim that trains;
#      what a bare GPU image builds), where LibTorch is installed;
#   5. ctest over build/.
# Builds 3 and 4 compile the same sources as build 2 with the same flags: ccache (installed by setup.sh) serves
# them from its cache (CCACHE_BASEDIR and CCACHE_NOHASHDIR make the build folder's name not matter).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs=$(nproc)
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
echo "test.sh: habits (clang-format, room sizes, core's rooms)" >&2
bash scripts/format.sh --check
python3 scripts/check_sizes.py
python3 scripts/check_rooms.py
echo "test.sh: build/ (everything this machine can build)" >&2
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$jobs"
echo "test.sh: build-sim/ (the simulator without Torch)" >&2
cmake -S . -B build-sim -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVITSIM_WITH_TORCH=OFF -DVITSIM_BUILD_TESTS=OFF >/dev/null
cmake --build build-sim -j"$jobs" --target vitsim
if [ "${VITSIM_WITH_TORCH:-1}" = 1 ]; then
  echo "test.sh: build-trainer/ (the trainer-only configuration)" >&2
  cmake -S . -B build-trainer -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVITSIM_TRAINER_ONLY=ON >/dev/null
  cmake --build build-trainer -j"$jobs" --target vitsim
fi
cd build
ctest --output-on-failure -j"$jobs" --timeout 900
