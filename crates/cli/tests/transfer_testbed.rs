//! `headroom send` on the namespace testbed (root only; prints `SKIP: <reason>` otherwise, fails
//! under CI): the measured path and the background sender, short versions of
//! `headroom send-bench`.

use std::process::Command;

/// The two tests share the 2 cores with nothing else of theirs: a measured sender next to
/// another testbed run loses its timing.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn bench(args: &[&str]) -> String {
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let out =
        Command::new(env!("CARGO_BIN_EXE_headroom")).arg("send-bench").args(args).output().expect("run send-bench");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "send-bench failed: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    stdout
}

/// 50 Mbit/s, 15 Mbit/s of Poisson cross traffic, 4 s of `send --measure`: the median estimate
/// within 15 % of the 35 Mbit/s available and the first estimate within 2 s.
#[test]
fn measured_send_estimates_the_available_bandwidth_on_the_testbed() {
    if !headroom_testbed::testbed_available_for_test() {
        return;
    }
    let out = bench(&["--parts", "measure", "--levels", "15Mbps", "--seconds", "4", "--no-sim"]);
    assert!(out.contains("first estimate within 2 s at every level: met"), "{out}");
}

/// A foreground kernel-CUBIC bulk flow keeps more of its throughput beside `send --background`
/// than beside a kernel-CUBIC background flow (the harm baseline), and the background limit is
/// in force (Eq. 4 reductions happened).
#[test]
fn background_send_harms_the_foreground_less_than_kernel_cubic() {
    if !headroom_testbed::testbed_available_for_test() {
        return;
    }
    let out = bench(&["--parts", "background", "--seconds", "3"]);
    let kept = |prefix: &str| -> f64 {
        let line = out.lines().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("no row {prefix}: {out}"));
        let t: Vec<&str> = line[42..].split_whitespace().collect();
        t[3].trim_end_matches('%').parse().unwrap()
    };
    let ours = kept("send --background");
    let cubic = kept("kernel cubic");
    assert!(
        ours > cubic + 10.0,
        "foreground kept {ours} % beside send --background, {cubic} % beside kernel cubic\n{out}"
    );
    assert!(out.contains("Eq. 4 reductions") && !out.contains(" 0 Eq. 4 reductions"), "{out}");
}
