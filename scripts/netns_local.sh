#!/usr/bin/env bash
# Two "nodes" on this machine for the namespaced-network validation (scenarios/local/validate-netns.xml):
# network namespaces vitsim-a (10.77.0.1) and vitsim-b (10.77.0.2), each joined by a veth pair to a
# bridge in the root namespace ($p-br, $net.254, where mpirun's PMIx server listens), every
# namespace's egress shaped by a token bucket (tbf) to RATE (default 1gbit) and, when the kernel has
# sch_netem, delayed by DELAY (default 0.2ms). Only loopback/namespace traffic; nothing leaves the host.
# usage: scripts/netns_local.sh up|down|status      (root; "up" exits 3 with a reason when it cannot)
# NETNS_PREFIX (default vitsim, at most 9 characters) and NETNS_SUBNET (default 10.77.0) name another
# such network, so that a test can build its own beside a running validation.
set -uo pipefail
rate=${RATE:-1gbit}
delay=${DELAY:-0.2ms}
p=${NETNS_PREFIX:-vitsim}
net=${NETNS_SUBNET:-10.77.0}
cmd=${1:-status}

down() {
  for n in a b; do ip netns del $p-$n 2>/dev/null; done
  ip link del $p-br 2>/dev/null
  return 0
}

skip() { echo "netns_local: cannot build the namespaced network here: $*; skipped" >&2; down; exit 3; }

case "$cmd" in
up)
  [ "$(id -u)" = 0 ] || skip "needs root"
  command -v ip >/dev/null && command -v tc >/dev/null || skip "needs iproute2 (ip, tc)"
  down
  ip link add $p-br type bridge 2>/dev/null || skip "cannot create a bridge"
  ip addr add $net.254/24 dev $p-br && ip link set $p-br up || skip "cannot configure the bridge"
  i=1
  for n in a b; do
    ip netns add $p-$n 2>/dev/null || skip "cannot create network namespaces (ip netns add)"
    ip link add $p-$n-ns type veth peer name $p-$n-br 2>/dev/null || skip "cannot create veth pairs"
    ip link set $p-$n-ns netns $p-$n && ip link set $p-$n-br master $p-br && ip link set $p-$n-br up
    ip -n $p-$n link set lo up && ip -n $p-$n link set $p-$n-ns up
    ip -n $p-$n addr add $net.$i/24 dev $p-$n-ns
    if tc -n $p-$n qdisc add dev $p-$n-ns root netem delay "$delay" rate "$rate" 2>/dev/null; then
      shaping="netem delay $delay rate $rate"
    else
      # No sch_netem in this kernel: the rate alone, by a token bucket; no added delay.
      tc -n $p-$n qdisc add dev $p-$n-ns root tbf rate "$rate" burst 64kb latency 50ms 2>/dev/null ||
        skip "neither netem nor tbf queueing disciplines are available"
      shaping="tbf rate $rate (no sch_netem in this kernel: no delay added)"
    fi
    i=$((i + 1))
  done
  echo "netns_local: up: $p-a $net.1, $p-b $net.2, bridge $net.254; each namespace's egress: $shaping"
  ;;
down) down && echo "netns_local: down" ;;
status) ip netns list | grep "^$p-" || echo "netns_local: not up" ;;
*) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
