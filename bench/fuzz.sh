#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/) with clang and runs each for a fixed time on a seed corpus made
# from the shipped files. Prints, per harness: executions, executions/s, corpus size, findings.
# Usage: bench/fuzz.sh [seconds per harness, default 600] [harness names..., default all]
# Harnesses: scenario platform platform_structure numbers calibration deepspeed units report (core readers), report_roundtrip plan (the
# report and plan readers: what they accept must survive a write and a second read), idx cifar image (dataset
# readers of real/src/data*.cpp, built without LibTorch). VITSIM_FUZZ_BUILD picks the build folder.
# A finding leaves its crash-*/leak-*/timeout-* input in build-fuzz/findings/<harness>/.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-600}
shift || true
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(scenario platform platform_structure numbers calibration deepspeed units report report_roundtrip plan idx cifar image)

if ! command -v clang++ >/dev/null || ! ls /usr/lib/llvm-14/lib/clang/14*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq clang-14 libclang-rt-14-dev >/dev/null
fi
b="${VITSIM_FUZZ_BUILD:-$here/build-fuzz}"
cmake -S "$here" -B "$b" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVITSIM_FUZZ=ON \
  -DVITSIM_WITH_TORCH=OFF -DVITSIM_BUILD_TESTS=OFF >/dev/null
targets=$(printf 'fuzz_%s ' "${names[@]}")
case " ${names[*]} " in *" idx "*|*" cifar "*|*" image "*) targets="$targets fuzz_seeds" ;; esac
cmake --build "$b" -j"$(nproc)" --target $targets >/dev/null

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
mkdir -p "$b/corpus/units"; printf '12GBps' >"$b/corpus/units/a"; printf '5us' >"$b/corpus/units/b"; printf '16GiB' >"$b/corpus/units/c"
mkdir -p "$b/corpus/calibration"
sed -n '/^```json$/,/^```$/p' "$here/docs/calibrate-validate.md" | sed '1d;$d' | head -n 30 >"$b/corpus/calibration/readme-example.json"
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
