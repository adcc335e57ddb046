//! Root tests: registering and unregistering headroom's kernel controllers, and sockets
//! selecting them by name over loopback. Unique per-run names; a [`Registered`] unregisters in
//! its Drop, also when an assertion fails.
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use headroom_bpf::{available, load, unique_name, Controller, LoadError, LoadOptions};

fn can_run() -> bool {
    let why = if unsafe { libc::geteuid() } != 0 {
        Some("needs root to load BPF struct_ops".to_string())
    } else if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        Some("kernel without BTF".to_string())
    } else {
        None
    };
    match headroom_testbed::skip_verdict(why, std::env::var("CI").ok().as_deref()) {
        headroom_testbed::SkipVerdict::Run => true,
        headroom_testbed::SkipVerdict::Skip(w) => {
            eprintln!("SKIP: {w}");
            false
        }
        headroom_testbed::SkipVerdict::Fail(w) => panic!("{w}"),
    }
}

fn sysctl_available() -> String {
    std::fs::read_to_string(headroom_bpf::AVAILABLE_SYSCTL).unwrap()
}

/// The kernel unregisters when the link's last reference goes; allow it a moment.
fn wait_until_gone(name: &str) -> bool {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(5) {
        if !available().unwrap().iter().any(|n| n == name) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

fn congestion_of(s: &TcpStream) -> String {
    let mut buf = [0u8; 16];
    let mut len = buf.len() as libc::socklen_t;
    let r = unsafe {
        libc::getsockopt(s.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_CONGESTION, buf.as_mut_ptr().cast(), &mut len)
    };
    assert_eq!(r, 0, "getsockopt TCP_CONGESTION: {}", std::io::Error::last_os_error());
    String::from_utf8_lossy(&buf[..len as usize]).trim_end_matches('\0').to_string()
}

fn set_congestion(s: &TcpStream, name: &str) -> std::io::Result<()> {
    let r = unsafe {
        libc::setsockopt(s.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_CONGESTION, name.as_ptr().cast(), name.len() as _)
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Sends `bytes` over loopback from a socket using `cc`; returns the bytes received.
fn loopback_transfer(cc: &str, bytes: usize) -> usize {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let rx = std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let mut n = 0;
        loop {
            match c.read(&mut buf) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) => panic!("receive: {e}"),
            }
        }
        n
    });
    let s = TcpStream::connect(addr).unwrap();
    set_congestion(&s, cc).unwrap();
    assert_eq!(congestion_of(&s), cc);
    let chunk = vec![7u8; 1 << 16];
    let mut left = bytes;
    let mut s = s;
    while left > 0 {
        let k = left.min(chunk.len());
        s.write_all(&chunk[..k]).unwrap();
        left -= k;
    }
    drop(s);
    rx.join().unwrap()
}

/// Both tests compare the kernel's list of congestion controls before and after; run in
/// parallel, one saw the other's controller registered (CI-style run, session 6).
static KERNEL_LIST: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn kernel_list_lock() -> std::sync::MutexGuard<'static, ()> {
    KERNEL_LIST.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[test]
fn load_unload_leaves_available_list_unchanged_and_sockets_select_each_by_name() {
    if !can_run() {
        return;
    }
    let _serial = kernel_list_lock();
    let before = sysctl_available();
    let default_before = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").unwrap();
    let mut names = Vec::new();
    {
        let mut held = Vec::new();
        for c in Controller::ALL {
            let name = unique_name(c);
            let r = load(c, &LoadOptions { name: Some(name.clone()), ..Default::default() })
                .unwrap_or_else(|e| panic!("loading {c}: {e}"));
            assert_eq!(r.name(), name);
            assert!(available().unwrap().contains(&name), "{name} registered");
            held.push(r);
            names.push(name);
        }
        // A second registration under a taken name is refused with a clear error.
        let e =
            load(Controller::Becc, &LoadOptions { name: Some(names[0].clone()), ..Default::default() }).unwrap_err();
        assert!(matches!(e, LoadError::AlreadyRegistered(_)), "{e}");
        for name in &names {
            assert_eq!(loopback_transfer(name, 20 << 20), 20 << 20, "{name}");
        }
    }
    for name in &names {
        assert!(wait_until_gone(name), "{name} still registered after drop");
    }
    assert_eq!(sysctl_available(), before);
    assert_eq!(std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").unwrap(), default_before);
}

/// `bpf/tests/rejected.bpf.c` compiled with clang as build.rs compiles the controllers (the
/// build script's `vmlinux.h`, libbpf's headers).
fn rejected_object() -> Vec<u8> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = std::env::temp_dir().join(format!("headroom-rejected-{}.bpf.o", std::process::id()));
    let include = std::env::var("HEADROOM_BPF_INCLUDE").unwrap_or_else(|_| "/usr/include".into());
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    let o = std::process::Command::new(&clang)
        .args(["-g", "-O2", "-target", "bpf", "-D__TARGET_ARCH_x86", "-I"])
        .arg(concat!(env!("OUT_DIR"), "/vmlinux"))
        .arg("-I")
        .arg(&include)
        .arg("-I")
        .arg(root.join("bpf"))
        .arg("-c")
        .arg(root.join("bpf/tests/rejected.bpf.c"))
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap_or_else(|e| panic!("running {clang}: {e}"));
    assert!(o.status.success(), "clang: {}", String::from_utf8_lossy(&o.stderr));
    let bytes = std::fs::read(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    bytes
}

#[test]
fn a_verifier_rejection_is_reported_with_the_verifiers_log_and_registers_nothing() {
    if !can_run() {
        return;
    }
    let _serial = kernel_list_lock();
    let before = sysctl_available();
    let name = unique_name(Controller::Becc);
    let opts = LoadOptions { name: Some(name.clone()), ..LoadOptions::default() };
    let e = headroom_bpf::load_object(Controller::Becc, &rejected_object(), "hr_rejected", &opts)
        .expect_err("the verifier must refuse a write to tcp_sock.srtt_us");
    let LoadError::Verifier { ref log, .. } = e else { panic!("expected a verifier rejection, got: {e}") };
    assert!(log.contains("PROG LOAD LOG"), "the verifier's log is missing:\n{log}");
    assert!(log.contains("hr_rejected_cong_avoid"), "the log names the refused program:\n{log}");
    assert!(log.contains("no write support to tcp_sock"), "the log says why:\n{log}");
    assert!(e.to_string().contains("verifier rejected"), "{e}");
    assert!(!available().unwrap().contains(&name), "{name} registered despite the rejection");
    assert_eq!(sysctl_available(), before, "the kernel's list changed");
}
