#!/usr/bin/env bash
# Installs everything headroom needs on Debian 12 (run as root), builds and installs the
# `headroom` binary, then runs the main job: `headroom demo` (simulated, no root, under a minute).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
command -v tc >/dev/null 2>&1 || need_apt+=(iproute2)
command -v nft >/dev/null 2>&1 || need_apt+=(nftables)
command -v ethtool >/dev/null 2>&1 || [ -x /usr/sbin/ethtool ] || need_apt+=(ethtool)   # headroom crosscheck --kernel-offloads-off
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
# The kernel congestion controllers (bpf/, crates/bpf) are compiled with clang against a vmlinux.h
# made by bpftool from the kernel's BTF, and loaded with libbpf-rs (vendored libbpf: libelf, zlib).
command -v clang >/dev/null 2>&1 || need_apt+=(clang)
command -v bpftool >/dev/null 2>&1 || [ -x /usr/sbin/bpftool ] || need_apt+=(bpftool)
[ -f /usr/include/bpf/bpf_helpers.h ] || need_apt+=(libbpf-dev)
[ -f /usr/include/libelf.h ] || need_apt+=(libelf-dev)
[ -f /usr/include/zlib.h ] || need_apt+=(zlib1g-dev)
command -v make >/dev/null 2>&1 || need_apt+=(make)
# `reproduce --report` writes report.html; its test opens it headless in Chromium.
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
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
echo "== headroom demo (simulated paths: available-bandwidth estimates and a background transfer) =="
"$bin" demo --out "${HEADROOM_OUT:-out/demo}"
