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

/// Runs of the measured-send case at most.
const MEASURE_RUNS: usize = 3;

/// The delay box's mean release lateness (forward) above which a missed run is run again: a
/// quarter of the 240 µs a 1,500-byte packet takes at 50 Mbit/s.
const MEASURE_BOX_LAG_US: f64 = 60.0;

/// 50 Mbit/s, 15 Mbit/s of Poisson cross traffic, 4 s of `send --measure`: the median estimate
/// within 15 % of the 35 Mbit/s available and the first estimate within 2 s.
///
/// The delay box is part of the path the sender measures: when it releases packets late (the
/// VM stalls its real-time threads), ACKs bunch and the estimates rise. Of six runs here (issue
/// 19 session 13), five read +7.8 to +11.4 % with the box 41–151 µs late on average and one
/// +23.0 % with it 244 µs late. A run that misses while the box lagged more than
/// [`MEASURE_BOX_LAG_US`] runs again, up to [`MEASURE_RUNS`] runs; the last is judged whatever
/// its box did, and a miss says how late the box was.
#[test]
fn measured_send_estimates_the_available_bandwidth_on_the_testbed() {
    if !headroom_testbed::testbed_available_for_test() {
        return;
    }
    let mut lags = Vec::new();
    for run in 1..=MEASURE_RUNS {
        let out = bench(&["--parts", "measure", "--levels", "15Mbps", "--seconds", "4", "--no-sim"]);
        let lag: f64 = out
            .split("box release lateness mean ")
            .nth(1)
            .and_then(|t| t.split(' ').next())
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("no box lateness in the output:\n{out}"));
        lags.push(lag);
        println!("run {run}: box {lag:.1} us late on average\n{out}");
        let met = out.contains("first estimate within 2 s at every level: met");
        if met {
            return;
        }
        assert!(
            run < MEASURE_RUNS && lag > MEASURE_BOX_LAG_US,
            "missed in run {run} (box lateness per run, µs: {lags:?}; runs again only above {MEASURE_BOX_LAG_US})\n{out}"
        );
    }
}

/// A foreground kernel-CUBIC bulk flow keeps more of its throughput beside `send --background`
/// than beside a kernel-CUBIC background flow (the harm baseline), and the background limit is
/// in force (Eq. 4 reductions happened).
#[test]
fn background_send_harms_the_foreground_less_than_kernel_cubic() {
    if !headroom_testbed::testbed_available_for_test() {
        return;
    }
    let out = bench(&["--parts", "background", "--seconds", "3", "--senders", "headroom,cubic"]);
    let kept = |prefix: &str| -> f64 {
        let line = out.lines().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("no row {prefix}: {out}"));
        let t: Vec<&str> = line[62..].split_whitespace().collect();
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

/// The web-like foreground: pages finish with and without a background sender beside them, and
/// the page-time ratio is read from the run (no goal asserted in 3 s).
#[test]
fn web_foreground_pages_finish_beside_the_background_sender() {
    if !headroom_testbed::testbed_available_for_test() {
        return;
    }
    let out =
        bench(&["--parts", "web", "--seconds", "3", "--senders", "headroom", "--web-clients", "5", "--runs", "2"]);
    let alone = out.lines().find(|l| l.starts_with("web alone:")).unwrap_or_else(|| panic!("{out}"));
    let pages: u64 = alone.split(" over ").nth(1).and_then(|t| t.split(' ').next()).unwrap().parse().unwrap();
    assert!(pages >= 5, "{out}");
    let row = out.lines().find(|l| l.starts_with("send --background")).unwrap_or_else(|| panic!("{out}"));
    let t: Vec<&str> = row[62..].split_whitespace().collect();
    let (page_ms, n, ratio): (f64, u64, f64) = (t[0].parse().unwrap(), t[1].parse().unwrap(), t[2].parse().unwrap());
    assert!(page_ms > 0.0 && n >= 5 && ratio.is_finite() && ratio > 0.0, "{out}");
    // Two rounds: the web alone twice, and the sender's two per-round ratios under its row.
    assert!(
        alone.split("(rounds: ").nth(1).is_some_and(|r| r.split(')').next().unwrap().split(", ").count() == 2),
        "{out}"
    );
    let rounds = out.lines().find(|l| l.contains("rounds (page ratio/% leftover):")).unwrap_or_else(|| panic!("{out}"));
    assert_eq!(rounds.split(':').nth(1).unwrap().split_whitespace().count(), 2, "{out}");
}
