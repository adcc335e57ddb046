#!/usr/bin/env bash
# Benchmark (issue 20), not part of scripts/test.sh: one bulk TCP flow on the single-flow paths
# of crates/sim/tests/newreno.rs, in headroom's simulator and in ns-3 (Debian's libns3-dev, 3.37),
# printed side by side.
#
#   scripts/ns3-compare.sh [--quick] [--duration SECONDS] [--no-prr] [--no-sack] [--bin PATH]
#
# Paths: 1 Gbit/s, 0 ms access links around a RATE, DELAY (one way), DropTail QUEUE bottleneck;
# rates 10/50/100 Mbit/s, one-way delays 5/10/20/50 ms, buffers of half and one BDP (at least 10
# packets, deduplicated), plus the issue's path (50 Mbit/s, 10 ms, 100 packets): 24 paths.
# --quick runs 3 of them. Each path runs headroom's `newreno` and `reno` (`headroom sim run
# --json` on a generated scenario, the test's text) and ns-3's TcpNewReno with
# TcpClassicRecovery (RFC 6582's fast recovery, which headroom's `newreno` implements; ns-3's
# default is PRR) and, as references, with TcpPrrRecovery (unless --no-prr) and with SACK on and
# TcpClassicRecovery (unless --no-sack; ns-3's loss recovery without SACK emulates a SACK
# scoreboard from duplicate ACKs, see docs/results.md). The ns-3 program is
# scripts/ns3/newreno_path.cc; its header lists the ns-3 defaults changed to match headroom's.
#
# Needs: g++, and libns3-dev (installed with apt-get when missing and run as root). The headroom
# binary is built with `cargo build --release -p headroom-cli` unless --bin or $HEADROOM names one.
# Runtime (30 s per run, three ns-3 runs per path with the references on, 2 shared cores): the
# full grid took 701 s of wall time, --quick 75 s, besides building headroom.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
quick=0
duration=30
prr=1
sack=1
bin="${HEADROOM:-}"

usage() { echo "usage: scripts/ns3-compare.sh [--quick] [--duration SECONDS] [--no-prr] [--no-sack] [--bin PATH]" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=1 ;;
        --no-prr) prr=0 ;;
        --no-sack) sack=0 ;;
        --duration)
            [ $# -ge 2 ] || usage
            duration="$2"; shift ;;
        --bin)
            [ $# -ge 2 ] || usage
            bin="$2"; shift ;;
        -h|--help) usage ;;
        *) echo "ns3-compare: unknown argument '$1'" >&2; usage ;;
    esac
    shift
done
if ! [[ "$duration" =~ ^[0-9]+$ ]] || [ "$duration" -lt 1 ] || [ "$duration" -gt 600 ]; then
    echo "ns3-compare: --duration must be a whole number of seconds in 1..600" >&2
    exit 2
fi

# ns-3 from Debian.
if ! [ -e /usr/include/ns3/core-module.h ] || ! ls /usr/lib/*/libns3-core.so >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "ns3-compare: libns3-dev is not installed; run as root to install it, or: apt-get install -y libns3-dev" >&2
        exit 1
    fi
    echo "ns3-compare: installing libns3-dev" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y libns3-dev >&2 || { apt-get update >&2 && apt-get install -y libns3-dev >&2; }
fi
command -v g++ >/dev/null || { echo "ns3-compare: g++ not found (apt-get install -y g++)" >&2; exit 1; }

work="${TMPDIR:-/tmp}/headroom-ns3-compare.$$"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT

# Debian's ns3-*.pc files carry a stray "-I/usr;" but their libraries are right; link the
# modules the program uses (their own dependencies come with the shared libraries).
ns3bin="$work/newreno_path"
g++ -std=c++17 -O2 -o "$ns3bin" "$here/ns3/newreno_path.cc" \
    -lns3-applications -lns3-internet -lns3-point-to-point -lns3-traffic-control -lns3-network -lns3-core

if [ -z "$bin" ]; then
    (cd "$root" && cargo build --release --quiet -p headroom-cli) >&2
    bin="${CARGO_TARGET_DIR:-$root/target}/release/headroom"
    # Keep a private copy: a shared target directory may be overwritten by another build meanwhile.
    cp "$bin" "$work/headroom"
    bin="$work/headroom"
fi
[ -x "$bin" ] || { echo "ns3-compare: no headroom binary at $bin" >&2; exit 1; }

# Paths as "rate_mbps one_way_ms queue_packets", the grid of crates/sim/tests/newreno.rs.
paths=()
if [ "$quick" = 1 ]; then
    paths=("50 10 100" "10 20 33" "100 5 41")
else
    paths=("50 10 100")
    for rate in 10 50 100; do
        for ow in 5 10 20 50; do
            bdp=$(awk -v r="$rate" -v d="$ow" 'BEGIN { printf "%d", int(r * 1e6 * 2 * d * 1e-3 / 8 / 1500 + 0.5) }')
            half=$((bdp / 2)); [ "$half" -ge 10 ] || half=10
            full=$bdp; [ "$full" -ge 10 ] || full=10
            paths+=("$rate $ow $half")
            [ "$full" = "$half" ] || paths+=("$rate $ow $full")
        done
    done
fi

# headroom: prints "Mbit/s timeouts retransmits" of the one flow.
headroom_run() { # cc rate ow queue
    local sc="$work/sc.toml"
    cat >"$sc" <<EOF
duration = "${duration}s"
seed = 1
[[link]]
a = "s"
b = "r1"
rate = "1Gbps"
delay = "0ms"
[[link]]
a = "r1"
b = "r2"
rate = "$2Mbps"
delay = "$3ms"
queue = $4
[[link]]
a = "r2"
b = "d"
rate = "1Gbps"
delay = "0ms"
[[tcp]]
name = "bulk"
from = "s"
to = "d"
cc = "$1"
EOF
    "$bin" sim run --json "$sc" | awk '
        /"flows"/ { inflows = 1 }
        inflows && /"throughput_mbps"/ && tp == "" { gsub(/[ ,]/, "", $2); tp = $2 }
        inflows && /"retransmits"/ && rx == "" { gsub(/[ ,]/, "", $2); rx = $2 }
        inflows && /"timeouts"/ && to == "" { gsub(/[ ,]/, "", $2); to = $2 }
        END { if (tp == "") exit 1; printf "%.2f %s %s\n", tp, to, rx }'
}

# ns-3: prints "Mbit/s timeouts retransmits(of which the receiver already had)".
ns3_run() { # recovery rate ow queue [extra ns-3 arguments]
    "$ns3bin" --rate="$2Mbps" --delay="$3ms" --queue="$4" --duration="$duration" \
        --cc=TcpNewReno --recovery="$1" "${@:5}" | awk '
        { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }
        END { if (!("goodput_mbps" in v)) exit 1; printf "%.2f %s %s(%s)\n", v["goodput_mbps"], v["timeouts"], v["retransmits"], v["duplicates"] }'
}

echo "# $("$bin" --version 2>/dev/null | head -1 || true) vs ns-3 3.37 (libns3-dev); ${duration} s per run, one bulk flow, seed 1"
echo "# headroom: newreno / reno, initial window 2, RTO min 200 ms (ns-2 preset), no SACK, timestamps, no delayed ACK"
echo "# ns-3: TcpNewReno, SACK off, classic = TcpClassicRecovery (RFC 6582)$([ "$prr" = 1 ] && echo '; PRR = TcpPrrRecovery (ns-3 default), SACK off')$([ "$sack" = 1 ] && echo '; SACK = SACK on, TcpClassicRecovery'); other settings aligned in scripts/ns3/newreno_path.cc"
header="| path (rate, one way, buffer) | headroom newreno Mbit/s | rto | retx | headroom reno Mbit/s | rto | ns-3 NewReno classic Mbit/s | rto | retx (duplicates) | headroom newreno / ns-3 |"
rule="|---|---|---|---|---|---|---|---|---|---|"
if [ "$prr" = 1 ]; then
    header="$header ns-3 NewReno PRR Mbit/s | rto |"
    rule="$rule---|---|"
fi
if [ "$sack" = 1 ]; then
    header="$header ns-3 NewReno SACK Mbit/s | rto |"
    rule="$rule---|---|"
fi
echo "$header"
echo "$rule"
start=$(date +%s)
for p in "${paths[@]}"; do
    read -r rate ow queue <<<"$p"
    read -r hn_tp hn_to hn_rx <<<"$(headroom_run newreno "$rate" "$ow" "$queue" || echo "failed - -")"
    read -r hr_tp hr_to _ <<<"$(headroom_run reno "$rate" "$ow" "$queue" || echo "failed - -")"
    read -r nc_tp nc_to nc_rx <<<"$(ns3_run TcpClassicRecovery "$rate" "$ow" "$queue" || echo "failed - -")"
    ratio=$(awk -v a="$hn_tp" -v b="$nc_tp" 'BEGIN { if (b + 0 > 0 && a + 0 > 0) printf "%.2f", a / b; else print "-" }')
    line="| $rate Mbit/s, $ow ms, $queue pkts | $hn_tp | $hn_to | $hn_rx | $hr_tp | $hr_to | $nc_tp | $nc_to | $nc_rx | $ratio |"
    if [ "$prr" = 1 ]; then
        read -r np_tp np_to _ <<<"$(ns3_run TcpPrrRecovery "$rate" "$ow" "$queue" || echo "failed - -")"
        line="$line $np_tp | $np_to |"
    fi
    if [ "$sack" = 1 ]; then
        read -r ns_tp ns_to _ <<<"$(ns3_run TcpClassicRecovery "$rate" "$ow" "$queue" --sack=true || echo "failed - -")"
        line="$line $ns_tp | $ns_to |"
    fi
    echo "$line"
done
echo "# ${#paths[@]} paths in $(( $(date +%s) - start )) s wall"
