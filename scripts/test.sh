#!/usr/bin/env bash
# Runs headroom's whole test suite. Installs the system packages the tests need first (as root,
# on Debian 12), then checks style (rustfmt, clippy with warnings denied) and runs the tests. Tests that
# need root or network namespaces skip with a printed reason without them, and fail under CI.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
command -v tc >/dev/null 2>&1 || need_apt+=(iproute2)
command -v nft >/dev/null 2>&1 || need_apt+=(nftables)
# The kernel congestion controllers (bpf/, crates/bpf) are compiled with clang against a vmlinux.h
# made by bpftool from the kernel's BTF, and loaded with libbpf-rs (vendored libbpf: libelf, zlib).
command -v clang >/dev/null 2>&1 || need_apt+=(clang)
command -v bpftool >/dev/null 2>&1 || [ -x /usr/sbin/bpftool ] || need_apt+=(bpftool)
[ -f /usr/include/bpf/bpf_helpers.h ] || need_apt+=(libbpf-dev)
[ -f /usr/include/libelf.h ] || need_apt+=(libelf-dev)
[ -f /usr/include/zlib.h ] || need_apt+=(zlib1g-dev)
command -v make >/dev/null 2>&1 || need_apt+=(make)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
# The report test opens `reproduce --report`'s report.html headless in Chromium; the crosscheck
# can turn the namespaces' offloads off with ethtool.
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v ethtool >/dev/null 2>&1 || [ -x /usr/sbin/ethtool ] || need_apt+=(ethtool)
if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ]; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
    else
        echo "test.sh: not root, cannot install ${need_apt[*]}; tests that need them will skip" >&2
    fi
fi

command -v rustfmt >/dev/null 2>&1 || rustup component add rustfmt 2>/dev/null || true
command -v cargo-clippy >/dev/null 2>&1 || rustup component add clippy 2>/dev/null || true

echo "== cargo fmt --check =="
cargo fmt --all --check
echo "== cargo clippy (warnings denied) =="
cargo clippy --workspace --all-targets --release --locked -- -D warnings
echo "== cargo doc (warnings denied: every intra-doc link resolves) =="
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked
echo "== cargo test =="
# Release profile: the simulator tests run paper-scale scenarios. Under CI (CI=true, root) a
# root-only test that cannot run fails instead of printing SKIP. --no-fail-fast: a failing test
# binary does not hide the ones after it (the exit status still fails).
cargo test --workspace --release --locked --no-fail-fast -- --test-threads="${TEST_THREADS:-2}"
