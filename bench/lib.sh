# Shared pieces of the bench/*.sh scripts; source it: . "$(dirname "$0")/lib.sh"

# Smoke mode: VITSIM_BENCH_SMOKE=1 makes every bench/*.sh run its smallest case once, in seconds, so that the test
# suite keeps each script working (ctest -R bench_smoke: tests/bench_smoke.sh). Its numbers mean nothing.
smoke=${VITSIM_BENCH_SMOKE:-0}
# smoke_note WHAT: one comment line saying what the smoke mode shrank.
smoke_note() {
  if [ "$smoke" = 1 ]; then echo "# smoke mode (VITSIM_BENCH_SMOKE=1): $*; the numbers mean nothing"; fi
  return 0
}

# median: the median of the numbers on stdin, one a line.
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# time_runs RUNS CMD...: runs CMD (its output discarded) RUNS times under /usr/bin/time; sets the arrays walls
# and cpus (seconds of wall and of user + system CPU per run) and rss (the largest peak RSS seen, KiB).
time_runs() {
  local runs=$1 t w u s m
  shift
  t=$(mktemp)
  walls=() cpus=() rss=0
  for _ in $(seq "$runs"); do
    /usr/bin/time -f "%e %U %S %M" -o "$t" "$@" >/dev/null
    read -r w u s m <"$t"
    walls+=("$w")
    cpus+=("$(echo "$u + $s" | bc)")
    if ((m > rss)); then rss=$m; fi
  done
  rm -f "$t"
}

# scale_point FILE NODES SAMPLES: the scaling benchmarks' point, ViT-B/16 at micro-batch 64 in fp32 with a ring
# all-reduce (VITSIM_BENCH_COLLECTIVE=auto: NCCL's choice) and 20 simulated steps (2 warm-up), on NODES nodes
# of 8 GPUs of the platform pNODES.xml next to FILE, a synthetic set of SAMPLES images (enough for 20 steps
# at the largest size).
scale_point() {
  cat >"$1" <<XML
<scenario name="scale-$2">
  <cluster platform="p$2.xml" nodes="$2" gpus_per_node="8"/>
  <model preset="vit_b_16"/>
  <dataset name="synthetic" train_samples="$3" image_size="224" channels="3"/>
  <training micro_batch="64" precision="fp32"/>
  <parallelism collective="${VITSIM_BENCH_COLLECTIVE:-ring}"/>
  <simulation steps="20" warmup="2"/>
</scenario>
XML
}

# Validation runs (bench/validate_*.sh) -------------------------------------------------------------------

# The ranks' nice level: NICE, default -20 as root (this machine's 2 cores are shared with builds).
nice_level=${NICE:-$([ "$(id -u)" = 0 ] && echo -20 || echo 0)}

# own_session "$0" "$@": re-runs the script in a session of its own whose scheduling group gets nice_level.
# With autogroup scheduling (kernel.sched_autogroup_enabled = 1) a process's nice value only ranks it inside
# its session; across sessions the groups share the cores equally, whatever their members' nice. Measured:
# under a load of ~6 on 2 cores, plain nice -20 left the compute spread at 15-100% (p75-p25 over the median)
# and made ranks 2-5x slower; the session's group at -20 brought it to 7-10%. Root only.
own_session() {
  if [ "$nice_level" != 0 ] && [ -w /proc/self/autogroup ] && [ -z "${VITSIM_OWN_SESSION:-}" ]; then
    VITSIM_OWN_SESSION=1 exec setsid -w "$@"
  fi
  if [ -n "${VITSIM_OWN_SESSION:-}" ]; then echo "$nice_level" >/proc/self/autogroup; fi
  return 0
}

# mpirun_flags FLAGS...: FLAGS, with --allow-run-as-root first when running as root.
mpirun_flags() {
  if [ "$(id -u)" = 0 ]; then echo "--allow-run-as-root $*"; else echo "$*"; fi
}

# run_header: the first line of a validation's output (date, host, cores, CPU, load, nice, scheduling group).
run_header() {
  echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(hostname) cores=$(nproc) $(lscpu | sed -n 's/^Model name: *//p'); load: $(cut -d' ' -f1-3 /proc/loadavg); nice $nice_level; $(cat /proc/self/autogroup 2>/dev/null)"
}

# calibration_summary LOG [PATTERN]: the calibration's per-micro-batch lines, then the lines starting with
# PATTERN (default: the fits and the occupancy), as comments.
calibration_summary() {
  grep -E "^ +[0-9]+ +[0-9]+ " "$1" | sed 's/^/# calibrate: /'
  grep -E "${2:-^fit|^occupancy}" "$1" | sed 's/^/# /'
}
