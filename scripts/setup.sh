#!/usr/bin/env bash
# Installs, from Debian's archive only, every package vitsim's build and tests need.
# Idempotent: packages already present are not fetched again.
set -euo pipefail
want_torch=${VITSIM_WITH_TORCH:-1}
want_bench=${VITSIM_BENCH:-0}  # 1: also what the benchmarks compare against (bench/train_vs_ddp.sh)
pkgs=(build-essential cmake pkg-config ccache
      libsimgrid-dev libfmt-dev libpugixml-dev nlohmann-json3-dev libcli11-dev catch2 zlib1g-dev
      gnuplot-nox iproute2 python3 clang-format)
if [ "$want_torch" = 1 ]; then
  pkgs+=(libtorch-dev libopenblas0-pthread libopenmpi-dev openmpi-bin dataset-fashion-mnist libjpeg62-turbo-dev libpng-dev)
  # python3-torch: tests/calibrate/test_gemm_script.cpp runs bench/gpu/gemm_shapes.py on the CPU (it fails
  # without); not in the simulator-only set-up (README's first command), which runs no test.
  pkgs+=(python3-torch)
  # clang: the fuzz harnesses' smoke in ctest compiles each against today's headers (bench/fuzz.sh); without
  # it that test could only say "no clang++: skipped" and pass on CI without checking anything.
  pkgs+=(clang)
fi
if [ "$want_bench" = 1 ]; then
  pkgs+=(python3-torch)  # the PyTorch DDP side of bench/train_vs_ddp.sh (in the list already with Torch)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
