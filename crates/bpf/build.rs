//! Compiles `bpf/*.bpf.c` (at the workspace root) with clang into BPF objects in `OUT_DIR`,
//! which `src/lib.rs` embeds.
//!
//! `vmlinux.h` is generated from the running kernel's BTF with
//! `bpftool btf dump file /sys/kernel/btf/vmlinux format c`. Fallback: set `HEADROOM_VMLINUX_H`
//! to a `vmlinux.h` made elsewhere (the programs use CO-RE relocations, so a header from another
//! kernel with the same structure names works). The libbpf headers (`bpf/bpf_helpers.h`) come
//! from Debian's `libbpf-dev`, or from `HEADROOM_BPF_INCLUDE`. `CLANG` overrides the compiler.
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const CONTROLLERS: [&str; 3] = ["becc", "tcp_lp", "ledbat"];

fn fail(msg: &str) -> ! {
    eprintln!("error: headroom-bpf: {msg}");
    panic!("headroom-bpf: {msg}");
}

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let src = manifest.join("../../bpf");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    println!("cargo:rerun-if-changed={}", src.display());
    for f in ["hr_tcp.h"].iter().map(|s| s.to_string()).chain(CONTROLLERS.iter().map(|c| format!("{c}.bpf.c"))) {
        println!("cargo:rerun-if-changed={}", src.join(f).display());
    }
    for v in ["CLANG", "HEADROOM_VMLINUX_H", "HEADROOM_BPF_INCLUDE"] {
        println!("cargo:rerun-if-env-changed={v}");
    }

    let vmlinux_dir = out.join("vmlinux");
    std::fs::create_dir_all(&vmlinux_dir).unwrap();
    let vmlinux_h = vmlinux_dir.join("vmlinux.h");
    if let Ok(given) = env::var("HEADROOM_VMLINUX_H") {
        std::fs::copy(&given, &vmlinux_h).unwrap_or_else(|e| fail(&format!("HEADROOM_VMLINUX_H={given}: {e}")));
    } else {
        generate_vmlinux_h(&vmlinux_h);
    }

    let clang = env::var("CLANG").unwrap_or_else(|_| "clang".into());
    let include = env::var("HEADROOM_BPF_INCLUDE").unwrap_or_else(|_| "/usr/include".into());
    if !Path::new(&include).join("bpf/bpf_helpers.h").exists() {
        fail(&format!(
            "{include}/bpf/bpf_helpers.h not found: install libbpf-dev (apt-get install libbpf-dev) \
             or set HEADROOM_BPF_INCLUDE to a directory holding bpf/bpf_helpers.h"
        ));
    }
    let arch = match env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") => "x86",
        Ok("aarch64") => "arm64",
        Ok(other) => fail(&format!("unsupported target architecture {other} for the BPF programs")),
        Err(_) => "x86",
    };
    for c in CONTROLLERS {
        let obj = out.join(format!("{c}.bpf.o"));
        let result = Command::new(&clang)
            .args(["-g", "-O2", "-target", "bpf", "-Wall", "-Werror"])
            .arg(format!("-D__TARGET_ARCH_{arch}"))
            .arg("-I")
            .arg(&vmlinux_dir)
            .arg("-I")
            .arg(&include)
            .arg("-c")
            .arg(src.join(format!("{c}.bpf.c")))
            .arg("-o")
            .arg(&obj)
            .output();
        match result {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => fail(&format!(
                "`{clang}` not found: the BPF congestion controllers (bpf/*.bpf.c) are compiled with \
                 clang at build time; install it (apt-get install clang, or ./scripts/install.sh) or \
                 set CLANG to a clang binary"
            )),
            Err(e) => fail(&format!("running {clang}: {e}")),
            Ok(o) if !o.status.success() => {
                fail(&format!("{clang} failed on bpf/{c}.bpf.c:\n{}", String::from_utf8_lossy(&o.stderr)))
            }
            Ok(_) => {}
        }
    }
}

fn generate_vmlinux_h(dest: &Path) {
    let btf = "/sys/kernel/btf/vmlinux";
    if !Path::new(btf).exists() {
        fail(&format!(
            "{btf} is missing (kernel built without CONFIG_DEBUG_INFO_BTF): set HEADROOM_VMLINUX_H \
             to a vmlinux.h generated on a kernel with BTF"
        ));
    }
    let bpftool = ["bpftool", "/usr/sbin/bpftool", "/sbin/bpftool"];
    for tool in bpftool {
        match Command::new(tool).args(["btf", "dump", "file", btf, "format", "c"]).output() {
            Ok(o) if o.status.success() => {
                std::fs::write(dest, &o.stdout).unwrap();
                return;
            }
            Ok(o) => fail(&format!("{tool} btf dump failed: {}", String::from_utf8_lossy(&o.stderr))),
            Err(_) => continue,
        }
    }
    fail(
        "bpftool not found: it generates vmlinux.h from the kernel's BTF at build time; install it \
         (apt-get install bpftool, or ./scripts/install.sh) or set HEADROOM_VMLINUX_H to a vmlinux.h",
    );
}
