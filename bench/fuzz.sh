#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/) with clang and runs each for a fixed time on a seed corpus made
# from the shipped files. Prints, per harness: executions, executions/s, corpus size, findings.
# Usage: bench/fuzz.sh [seconds per harness, default 600] [harness names..., default all]
# Harnesses: scenario platform platform_structure numbers calibration deepspeed units report (core readers), measured (fit's
# and --runs' measured times, CSV or JSON, with a round trip), report_roundtrip plan (the
# report and plan readers: what they accept must survive a write and a second read), idx cifar image (dataset
# readers of real/src/data*.cpp, built without LibTorch), plan_flags (the one-line plan's and the interval's
# flags as vitsim plan parses them, its platform and scenario written and read back), collective (vitsim
# collective's sizes and names, its table read back by calibrate's nccl-tests reader; fuzz/fuzz_surfaces.cpp).
# VITSIM_FUZZ_BUILD picks the build folder.
# A finding leaves its crash-*/leak-*/timeout-* input in build-fuzz/findings/<harness>/.
# VITSIM_BENCH_SMOKE=1 (bench/lib.sh): builds and runs nothing (a sanitized clang build of the core takes
# minutes): configures the fuzz build in a temporary folder (VITSIM_FUZZ_BUILD to name one), checks that every
# harness named here is a target of fuzz/CMakeLists.txt and that each harness's source compiles against
# today's headers with the exact command CMake gives it (-fsyntax-only), and seeds the corpora.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/bench/lib.sh"
secs=${1:-600}
shift || true
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(scenario platform platform_structure numbers calibration deepspeed units report measured report_roundtrip plan plan_flags collective idx cifar image)

if [ "$smoke" = 1 ]; then
  command -v clang++ >/dev/null || { echo "fuzz.sh smoke: no clang++ (bench/fuzz.sh installs clang-14): skipped"; exit 0; }
  b="${VITSIM_FUZZ_BUILD:-$(mktemp -d)}"
elif ! command -v clang++ >/dev/null || ! ls /usr/lib/llvm-14/lib/clang/14*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq clang-14 libclang-rt-14-dev >/dev/null
fi
b="${b:-${VITSIM_FUZZ_BUILD:-$here/build-fuzz}}"
cmake -S "$here" -B "$b" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVITSIM_FUZZ=ON \
  -DVITSIM_WITH_TORCH=OFF -DVITSIM_BUILD_TESTS=OFF >/dev/null
targets=$(printf 'fuzz_%s ' "${names[@]}")
case " ${names[*]} " in *" idx "*|*" cifar "*|*" image "*) targets="$targets fuzz_seeds" ;; esac
if [ "$smoke" = 1 ]; then
  smoke_note "every harness's compile command with -fsyntax-only, the corpora seeded, nothing built or run"
  /usr/bin/python3 - "$b/compile_commands.json" $targets <<'PY'
import json, os, shlex, subprocess, sys
from concurrent.futures import ThreadPoolExecutor
commands = {}
for c in json.load(open(sys.argv[1])):
    args = shlex.split(c["command"])
    out = args[args.index("-o") + 1]
    if out.startswith("CMakeFiles/fuzz_"):
        commands[out.split("/")[1][: -len(".dir")]] = (c["directory"], args)
def check(target):
    if target not in commands:
        return f"{target}: not a target of fuzz/CMakeLists.txt", False
    d, args = commands[target]
    i = args.index("-o")
    args = [a for a in args[:i] + args[i + 2:] if a != "-c"] + ["-fsyntax-only"]
    r = subprocess.run(args, cwd=d, capture_output=True, text=True)
    if r.returncode:
        return f"{target}: does not compile\n{r.stderr[-4000:]}", False
    return f"{target}: compiles (syntax only)", True
with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
    results = list(pool.map(check, sys.argv[2:]))
for line, _ in results: print(line)
sys.exit(0 if all(ok for _, ok in results) else 1)
PY
else
  cmake --build "$b" -j"$(nproc)" --target $targets >/dev/null
fi

seed() {  # seed NAME FILES...: copy the files that exist into the harness's corpus
  local d="$b/corpus/$1"; shift
  mkdir -p "$d"
  for f in "$@"; do [ -f "$f" ] && cp "$f" "$d/$(basename "$f" | tr '/' '_')-$(cksum <"$f" | cut -d' ' -f1)"; done
  return 0
}
seed scenario "$here"/scenarios/*/*.xml
seed platform "$here"/platforms/nebula.xml "$here"/platforms/tesla.xml "$here"/platforms/local/*.xml
mkdir -p "$b/corpus/platform_structure"; printf '\x00\x02\x01\x02\x0a\x03\x00\x04\x09' >"$b/corpus/platform_structure/a"
mkdir -p "$b/corpus/numbers"; printf '0.5' >"$b/corpus/numbers/a"; printf '12GBps' >"$b/corpus/numbers/b"; printf 'nan' >"$b/corpus/numbers/c"
seed deepspeed "$here"/scenarios/*/*.json
# Measured times: the first byte picks the name (.csv even, .json odd); docs/fit.md's example, a quoted one.
mkdir -p "$b/corpus/measured"
printf '\x00# runs\ncluster.nodes,training.micro_batch,step_time_s\n1,32,0.1412\n2,32,0.1438\n' >"$b/corpus/measured/a"
printf '\x00"training.micro_batch","step_time_s"\n"4", 0.01\n"8" ,"0.02"\n' >"$b/corpus/measured/b"
printf '\x01[]' >"$b/corpus/measured/c"
mkdir -p "$b/corpus/units"; printf '12GBps' >"$b/corpus/units/a"; printf '5us' >"$b/corpus/units/b"; printf '16GiB' >"$b/corpus/units/c"
mkdir -p "$b/corpus/calibration"
sed -n '/^```json$/,/^```$/p' "$here/docs/calibrate-validate.md" | sed '1d;$d' | head -n 30 >"$b/corpus/calibration/readme-example.json"
# Issue 39: the shipped calibrations, and one with spans and an occupancy factor at the plausible ends, so the
# harness starts next to the bounds its invariant checks (fuzz_inputs.cpp, target 3).
seed calibration "$here"/platforms/local/*.json
python3 - "$here/platforms/local/calibrated.json" "$b/corpus/calibration/spans-at-bounds.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
for d in c["devices"]:
    d["spans"] = {"compute": {"low": 0.001, "high": 100, "why": "seed"}}
    d["occupancy"] = {"busy_ranks": 2, "alone_factor": 10}
json.dump(c, open(sys.argv[2], "w"))
PY
# The new surfaces (issue 39): command-line tokens, one a line. plan_flags: the one-line forms of docs/plan.md
# and the interval flags of docs/predict.md; collective: -b -e -f -i -d -o --func NCCL_ALGO NCCL_PROTO.
mkdir -p "$b/corpus/plan_flags" "$b/corpus/collective"
printf -- '--gpu\nt4\n--gpus-per-node\n2\n--model\nvit_cifar_tiny\n--dataset\ncifar10' >"$b/corpus/plan_flags/a"
printf -- '--gpu\nh100-sxm\n--nodes\n2\n--nic\nndr:8\n--model\nvit_l_16\n--dataset\nimagenet1k\n--set\ntraining.micro_batch=8,16' >"$b/corpus/plan_flags/b"
printf -- '--interval\n--samples\n8\n--p-low\n0.05\n--p-high\n0.95\n--interval-seed\n5' >"$b/corpus/plan_flags/c"
printf '8\n8G\n2\n\nfloat\nsum\nall_reduce\n^tree\nLL128' >"$b/corpus/collective/a"
printf '1K\n1M\n\n64K\nbfloat16\navg\nreduce_scatter\nring;allreduce:tree\n^LL' >"$b/corpus/collective/b"
# Dataset readers: small valid IDX (plain, gzip), CIFAR-10/100, PNG and JPEG files from fuzz_seeds.
[ -x "$b/fuzz/fuzz_seeds" ] && "$b/fuzz/fuzz_seeds" "$b/corpus"
mkdir -p "$b/corpus/report"
for v in "$here/build/app/vitsim" "$here/build-sim/app/vitsim"; do
  if [ -x "$v" ]; then
    "$v" predict "$here/scenarios/study/tesla-strong-b16.xml" --format json -q --out "$b/corpus/report/tesla.json" && break
  fi
done

mkdir -p "$b/corpus/report_roundtrip" "$b/corpus/plan"
cp "$b/corpus/report/"* "$b/corpus/report_roundtrip/" 2>/dev/null || true
for v in "$here/build/app/vitsim" "$here/build-sim/app/vitsim"; do
  if [ -x "$v" ]; then
    for i in 0 1; do
      "$v" plan "$here/scenarios/study/tesla-strong-b16.xml" --shard $i/2 --format json -q --out "$b/corpus/plan/shard$i.json"
    done && break
  fi
done
if [ "$smoke" = 1 ]; then
  for n in "${names[@]}"; do echo "$n: corpus $(ls "$b/corpus/$n" 2>/dev/null | wc -l) files"; done
  exit 0
fi
echo "vitsim fuzzing: $(date -u +%Y-%m-%dT%H:%MZ) on $(hostname), $(nproc) cores, ${secs} s per harness, $(clang++ --version | head -1)"
for n in "${names[@]}"; do
  mkdir -p "$b/findings/$n"
  log="$b/findings/$n.log"
  set +e
  (cd "$b/findings/$n" && "$b/fuzz/fuzz_$n" -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 "$b/corpus/$n" >"$log" 2>&1)
  rc=$?
  set -e
  execs=$(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}')
  rate=$(grep -m1 'stat::average_exec_per_sec' "$log" | awk '{print $2}')
  corpus=$(ls "$b/corpus/$n" | wc -l)
  found=$(ls "$b/findings/$n" | grep -cE '^(crash|leak|timeout|oom|slow-unit)-' || true)
  printf '%-12s executions %10s  (%6s/s)  corpus %5s  findings %s  exit %s\n' "$n" "${execs:-?}" "${rate:-?}" "$corpus" "$found" "$rc"
done
