#!/usr/bin/env bash
# Installs everything headroom needs on Debian 12 (run as root), builds and installs the
# `headroom` binary, then runs the main job on the built-in scenario.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
command -v tc >/dev/null 2>&1 || need_apt+=(iproute2)
command -v nft >/dev/null 2>&1 || need_apt+=(nftables)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "install.sh: needs root to apt-get install: ${need_apt[*]}" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
fi

if ! command -v cargo >/dev/null 2>&1; then
    echo "install.sh: Rust (cargo) is required: https://rustup.rs" >&2
    exit 1
fi

cargo install --quiet --locked --path crates/cli --root "${HEADROOM_PREFIX:-$HOME/.cargo}"
bin="${HEADROOM_PREFIX:-$HOME/.cargo}/bin/headroom"
echo "installed $bin"
echo
echo "== headroom sim run (built-in dumbbell scenario) =="
"$bin" sim run --out "${HEADROOM_OUT:-out/dumbbell}"
