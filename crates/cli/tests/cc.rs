//! `headroom cc`: load --pin, list, unload, hold until SIGTERM, and its errors (root tests use
//! a unique prefix per run and unpin in Drop).
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn headroom(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_headroom")).args(args).output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn available() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control").unwrap()
}

/// The root tests compare the kernel's global list: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn can_run() -> bool {
    let why = (unsafe { libc::geteuid() } != 0).then(|| "needs root to load BPF struct_ops".to_string());
    match headroom_testbed::skip_verdict(why, std::env::var("CI").ok().as_deref()) {
        headroom_testbed::SkipVerdict::Run => true,
        headroom_testbed::SkipVerdict::Skip(w) => {
            eprintln!("SKIP: {w}");
            false
        }
        headroom_testbed::SkipVerdict::Fail(w) => panic!("{w}"),
    }
}

/// Unpins whatever this test pinned (and headroom's emptied pin folders), also when it fails.
struct Unpin(Vec<String>);
impl Drop for Unpin {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = headroom_bpf::unpin(n);
        }
    }
}

#[test]
fn unknown_controller_is_a_clear_error() {
    let o = headroom(&["cc", "load", "vegas"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("unknown controller \"vegas\""), "{}", text(&o));
}

#[test]
fn load_pin_list_unload_round_trip() {
    if !can_run() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let before = available();
    let pin_root = std::path::Path::new(headroom_bpf::PIN_DIR).parent().unwrap().to_path_buf();
    let had_pin_root = pin_root.exists();
    let prefix = format!("c{:x}", std::process::id() & 0xffff);
    let names: Vec<String> = ["becc", "lp", "ledbat"].iter().map(|c| format!("{prefix}{c}")).collect();
    let _guard = Unpin(names.clone());
    let o = headroom(&["cc", "load", "becc", "lp", "ledbat", "--prefix", &prefix, "--pin", "--ledbat-target-ms", "25"]);
    assert!(o.status.success(), "{}", text(&o));
    for n in &names {
        assert!(available().split_whitespace().any(|a| a == n), "{n} registered");
    }
    let o = headroom(&["cc", "list"]);
    assert!(o.status.success());
    for n in &names {
        assert!(text(&o).contains(n.as_str()), "list shows {n}: {}", text(&o));
    }
    // The same names again: refused, saying why.
    let o = headroom(&["cc", "load", "becc", "--prefix", &prefix]);
    assert!(!o.status.success());
    assert!(text(&o).contains("already registered"), "{}", text(&o));
    for n in &names {
        let o = headroom(&["cc", "unload", n]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(text(&o).contains(&format!("unregistered {n}")), "{}", text(&o));
    }
    assert_eq!(available(), before);
    if !had_pin_root {
        assert!(!pin_root.exists(), "unload leaves nothing in bpffs: {} remains", pin_root.display());
    }
    let o = headroom(&["cc", "unload", &names[0]]);
    assert!(!o.status.success());
    assert!(text(&o).contains("not registered"), "{}", text(&o));
}

#[test]
fn load_holds_until_sigterm_then_unregisters() {
    if !can_run() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let before = available();
    let prefix = format!("s{:x}", std::process::id() & 0xffff);
    let name = format!("{prefix}becc");
    let mut child = Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(["cc", "load", "becc", "--prefix", &prefix])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !available().split_whitespace().any(|a| a == name) {
        assert!(t.elapsed() < Duration::from_secs(10), "{name} never registered");
        std::thread::sleep(Duration::from_millis(20));
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(available(), before);
}
