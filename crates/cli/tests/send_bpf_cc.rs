//! Root test (issue 18): `headroom send --cc NAME` selects each of headroom's BPF congestion
//! controllers (BECC, TCP-LP, LEDBAT) on the namespace testbed. Each is registered under a
//! unique per-run name ([`headroom_bpf::unique_name`]) and held by a [`headroom_bpf::Registered`],
//! which unregisters it when dropped, also when an assertion fails. Prints `SKIP: reason`
//! without root or BTF, fails under `CI=true`.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use headroom_bpf::{available, load, unique_name, Controller, LoadOptions};
use headroom_core::{Dur, Rate};
use headroom_testbed::{Bottleneck, Testbed, Topology};

fn can_run() -> bool {
    let why = if unsafe { libc::geteuid() } != 0 {
        Some("needs root for the testbed and to load BPF struct_ops".to_string())
    } else if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        Some("kernel without BTF".to_string())
    } else {
        headroom_testbed::unsupported_reason()
    };
    headroom_testbed::available_for_test(why)
}

/// The receiver process, killed (by its own pid) when dropped.
struct Recv(Child);

impl Drop for Recv {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn headroom() -> Command {
    Command::new(env!("CARGO_BIN_EXE_headroom"))
}

/// `headroom send ARGS` from host s1 (the child inherits the thread's namespace).
fn send_from_s1(tb: &Testbed, args: Vec<String>) -> Output {
    tb.run_in("s1", move || Ok(headroom().arg("send").args(&args).stderr(Stdio::piped()).output()?)).unwrap()
}

#[test]
fn send_cc_selects_headroom_bpf_controllers_on_the_testbed() {
    if !can_run() {
        return;
    }
    let tb = Testbed::up(&Topology::dumbbell(1, Bottleneck::new(Some(Rate::from_mbps(50)), Dur::from_millis(5))))
        .expect("testbed up");
    let _rx = Recv(
        tb.run_in("r1", || {
            Ok(headroom()
                .args(["recv", "--listen", "0.0.0.0:5301"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?)
        })
        .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(300));
    let dst = format!("{}:5301", tb.host("r1").unwrap().addr);
    for c in [Controller::Becc, Controller::Lp, Controller::Ledbat] {
        let name = unique_name(c);
        let reg = load(c, &LoadOptions { name: Some(name.clone()), ..Default::default() })
            .unwrap_or_else(|e| panic!("load {c}: {e}"));
        let args = |extra: &[&str]| {
            let mut v: Vec<String> =
                [dst.as_str(), "--cc", name.as_str(), "--time", "1s", "--json"].iter().map(|s| s.to_string()).collect();
            v.extend(extra.iter().map(|s| s.to_string()));
            v
        };
        let out = send_from_s1(&tb, args(&["--verify"]));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "send --cc {name}: {}\n{text}", String::from_utf8_lossy(&out.stderr));
        let j: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        // The socket's TCP_CONGESTION at the end of the transfer (getsockopt).
        assert_eq!(j["cc"], name.as_str(), "{text}");
        let bytes = j["bytes"].as_u64().unwrap();
        assert!(bytes > 100_000, "{c} moved only {bytes} bytes in 1 s: {text}");
        assert_eq!(j["received_bytes"].as_u64(), Some(bytes), "{text}");
        assert_eq!(j["mismatched_bytes"].as_u64(), Some(0), "{text}");
        drop(reg);
        let t = Instant::now();
        while available().unwrap().contains(&name) && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        // Once unregistered, the name is refused with a clear error and exit status 1.
        let out = send_from_s1(&tb, args(&[]));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "send --cc {name} after unload: {err}");
        assert!(err.contains(&name), "the error names the controller: {err}");
    }
}
