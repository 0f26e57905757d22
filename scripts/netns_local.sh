#!/usr/bin/env bash
# Two "nodes" on this machine for the namespaced-network validation (scenarios/local/validate-netns.xml):
# network namespaces vitsim-a (10.77.0.1) and vitsim-b (10.77.0.2), each joined by a veth pair to a
# bridge in the root namespace (vitsim-br, 10.77.0.254, where mpirun's PMIx server listens), every
# namespace's egress shaped by a token bucket (tbf) to RATE (default 1gbit) and, when the kernel has
# sch_netem, delayed by DELAY (default 0.2ms). Only loopback/namespace traffic; nothing leaves the host.
# usage: scripts/netns_local.sh up|down|status      (root; "up" exits 3 with a reason when it cannot)
set -uo pipefail
rate=${RATE:-1gbit}
delay=${DELAY:-0.2ms}
cmd=${1:-status}

down() {
  for n in a b; do ip netns del vitsim-$n 2>/dev/null; done
  ip link del vitsim-br 2>/dev/null
  return 0
}

skip() { echo "netns_local: cannot build the namespaced network here: $*; skipped" >&2; down; exit 3; }

case "$cmd" in
up)
  [ "$(id -u)" = 0 ] || skip "needs root"
  command -v ip >/dev/null && command -v tc >/dev/null || skip "needs iproute2 (ip, tc)"
  down
  ip link add vitsim-br type bridge 2>/dev/null || skip "cannot create a bridge"
  ip addr add 10.77.0.254/24 dev vitsim-br && ip link set vitsim-br up || skip "cannot configure the bridge"
  i=1
  for n in a b; do
    ip netns add vitsim-$n 2>/dev/null || skip "cannot create network namespaces (ip netns add)"
    ip link add vitsim-$n-ns type veth peer name vitsim-$n-br 2>/dev/null || skip "cannot create veth pairs"
    ip link set vitsim-$n-ns netns vitsim-$n && ip link set vitsim-$n-br master vitsim-br && ip link set vitsim-$n-br up
    ip -n vitsim-$n link set lo up && ip -n vitsim-$n link set vitsim-$n-ns up
    ip -n vitsim-$n addr add 10.77.0.$i/24 dev vitsim-$n-ns
    if tc -n vitsim-$n qdisc add dev vitsim-$n-ns root netem delay "$delay" rate "$rate" 2>/dev/null; then
      shaping="netem delay $delay rate $rate"
    else
      # No sch_netem in this kernel: the rate alone, by a token bucket; no added delay.
      tc -n vitsim-$n qdisc add dev vitsim-$n-ns root tbf rate "$rate" burst 64kb latency 50ms 2>/dev/null ||
        skip "neither netem nor tbf queueing disciplines are available"
      shaping="tbf rate $rate (no sch_netem in this kernel: no delay added)"
    fi
    i=$((i + 1))
  done
  echo "netns_local: up: vitsim-a 10.77.0.1, vitsim-b 10.77.0.2, bridge 10.77.0.254; each namespace's egress: $shaping"
  ;;
down) down && echo "netns_local: down" ;;
status) ip netns list | grep vitsim- || echo "netns_local: not up" ;;
*) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
