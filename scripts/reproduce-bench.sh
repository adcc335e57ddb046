#!/bin/sh
# Before/after wall time of `headroom reproduce all` on this machine, in the same run.
#
#   scripts/reproduce-bench.sh [BASE_REV] [PAIRS]
#
# Builds `headroom` at BASE_REV (default 39d749f, main before the simulator speed-ups of
# issue 17) in its own git worktree and target directory, and the working tree's `headroom`,
# then runs `reproduce all` with each, alternately (old, new, old, new, ...), PAIRS times
# (default 2), each under /usr/bin/time. Prints, per run: wall and user seconds and the load
# average before it; then the median old/new wall-time ratio, and whether the two binaries'
# output trees are identical (`diff -r`; summaries and files carry no wall time).
# Environment: RAYON_NUM_THREADS is passed through (default: one thread per core);
# OLD_BIN / NEW_BIN use binaries already built instead of building; EXPERIMENTS (default
# "all") names the experiments to run instead; BENCH_DIR is the scratch directory.
set -eu
BASE_REV=${1:-39d749f}
PAIRS=${2:-2}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${BENCH_DIR:-/tmp/headroom-reproduce-bench}
mkdir -p "$WORK"
if [ -z "${OLD_BIN:-}" ]; then
    OLD_SRC=$WORK/src-$BASE_REV
    if [ ! -d "$OLD_SRC" ]; then
        git -C "$ROOT" worktree add --detach "$OLD_SRC" "$BASE_REV" >/dev/null
    fi
    echo "building $BASE_REV (release)" >&2
    (cd "$OLD_SRC" && CARGO_TARGET_DIR=$WORK/target-old cargo build --release --locked -q -p headroom-cli --bin headroom)
    OLD_BIN=$WORK/target-old/release/headroom
fi
if [ -z "${NEW_BIN:-}" ]; then
    echo "building the working tree (release)" >&2
    (cd "$ROOT" && cargo build --release --locked -q -p headroom-cli --bin headroom)
    NEW_BIN=$(cd "$ROOT" && cargo metadata --format-version 1 --no-deps | sed 's/.*"target_directory":"\([^"]*\)".*/\1/')/release/headroom
fi
EXPERIMENTS=${EXPERIMENTS:-all}

run() { # TAG BIN K
    out=$WORK/out-$1-$3
    rm -rf "$out"
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    /usr/bin/time -f "%e %U" -o "$WORK/time-$1-$3" "$2" reproduce $EXPERIMENTS --out "$out" >"$WORK/stdout-$1-$3"
    set -- "$1" "$2" "$3" $(cat "$WORK/time-$1-$3")
    echo "$1 run $3: wall $4 s, user $5 s, load average before: $load"
    echo "$4" >>"$WORK/walls-$1"
}
rm -f "$WORK/walls-old" "$WORK/walls-new"
k=1
while [ "$k" -le "$PAIRS" ]; do
    run old "$OLD_BIN" "$k"
    run new "$NEW_BIN" "$k"
    k=$((k + 1))
done
median() { sort -n "$1" | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
old=$(median "$WORK/walls-old")
new=$(median "$WORK/walls-new")
echo "median wall: old $old s, new $new s, old/new $(echo "$old $new" | awk '{printf "%.2f", $1/$2}')"
if diff -r "$WORK/out-old-1" "$WORK/out-new-1" >/dev/null; then
    echo "outputs: identical (diff -r)"
else
    echo "outputs: DIFFER (diff -r $WORK/out-old-1 $WORK/out-new-1)"
    exit 1
fi
