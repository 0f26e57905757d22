#!/usr/bin/env bash
# Predicted nccl-tests tables beside public all_reduce_perf results (issue 25, Tests: "BENCHMARKS.md").
# For each case: writes the platform from the catalogue with `vitsim platform` (defaults only: nothing here is
# tuned to the measured numbers), runs `vitsim collective` over the measured sweep with the NCCL release of the
# measurement (or the closest table vitsim has) and the run's NCCL_ALGO where it set one, and prints the
# comparison per size with its error (bench/nccl_tests_compare.py). The measured tables, with their source URL,
# hardware and command, are bench/data/nccl_tests/*.txt. Results: docs/benchmarks.md, "Predicted nccl-tests
# tables against public all_reduce_perf results".
# Usage: bench/nccl_tests_public.sh [path/to/vitsim]
# VITSIM_BENCH_SMOKE=1 (bench/lib.sh): the same four cases (they take about a second).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
vitsim=$(realpath -m "${1:-$here/build/app/vitsim}")
if [ ! -x "$vitsim" ]; then
  echo "nccl_tests_public.sh: no vitsim binary at $vitsim: build it (README, Build) or pass its path" >&2
  exit 2
fi
. "$here/bench/lib.sh"
data=$here/bench/data/nccl_tests
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run_case NAME DATA "PLATFORM FLAGS" "COLLECTIVE FLAGS": one comparison.
run_case() {
  local name=$1 file=$2 pflags=$3 cflags=$4
  # shellcheck disable=SC2086 # the flag strings are word lists on purpose
  "$vitsim" platform --id "$name" $pflags --out "$tmp/$name.xml"
  # shellcheck disable=SC2086
  "$vitsim" collective "$tmp/$name.xml" $cflags -q --format json --out "$tmp/$name.json"
  python3 "$here/bench/nccl_tests_compare.py" "$name" "$data/$file" "$tmp/$name.json" \
    "\`vitsim platform $pflags\`, then \`vitsim collective PLATFORM $cflags\`"
}

echo "nccl-tests against public results: $(date -u +%Y-%m-%dT%H:%MZ) on $(hostname), $(nproc) cores"
echo "binary: $vitsim ($("$vitsim" --version))"
echo

# 1. One ND H100 v5 node: 8 H100 SXM on NVSwitch, NCCL 2.18.5 with NCCL_ALGO=NVLS (Azure AI-benchmarking-guide).
run_case h100-1x8-nvls azure_nd_h100_v5_1x8_nvls.txt \
  "--nodes 1 --gpus-per-node 8 --gpu h100-sxm" \
  "-b 1K -e 8G -f 2 --nccl-version 2.18 --nccl-algo nvls"

# 2. Two ND96amsr_A100_v4 nodes: 8 A100-SXM4-80GB on NVSwitch and 8 x HDR InfiniBand each, NCCL 2.17 (NGC 23.03;
#    vitsim's oldest table is 2.18), NCCL's own choice.
run_case a100-2x8-hdr azure_ndm_a100_v4_2x8_hdr.txt \
  "--nodes 2 --gpus-per-node 8 --gpu a100-sxm-80gb --nics 8 --nic-speed hdr" \
  "-b 8 -e 8G -f 2 --nccl-version 2.18"

# 3. One NC96ads_A100_v4: 4 A100-PCIe-80GB, two NVLink-bridged pairs joined over PCIe through the host. The
#    platform flags have no mixed layout: all four on PCIe peer-to-peer (the ring's two cross-pair hops are PCIe,
#    and a ring runs at its slowest hop). NCCL version not stated: vitsim's 2.18.
run_case a100pcie-1x4 azure_nc96ads_a100_v4_1x4_pcie.txt \
  "--nodes 1 --gpus-per-node 4 --gpu a100-pcie-80gb --intranode pcie_p2p" \
  "-b 8 -e 8G -f 2 --nccl-version 2.18"

# 4. One NC48ads_A100_v4: 2 A100-PCIe-80GB on an NVLink bridge. NCCL version not stated: vitsim's 2.18.
run_case a100pcie-1x2-bridge azure_nc48ads_a100_v4_1x2_nvlink_bridge.txt \
  "--nodes 1 --gpus-per-node 2 --gpu a100-pcie-80gb --intranode nvlink_bridge" \
  "-b 8 -e 8G -f 2 --nccl-version 2.18"
