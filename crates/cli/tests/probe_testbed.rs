//! PathQuick on the namespace testbed (root only; prints `SKIP: <reason>` otherwise, fails under CI): the
//! issue-4 goal at one level of `headroom probe-bench` with the issue-4 fixed range (`--bmax
//! 12Mbps`). A 12 Mbit/s bottleneck (the testbed's exact link since issue 19), 26 ms each way,
//! 6 Mbit/s of Poisson UDP cross traffic (1000-byte packets): PathQuick's median estimate
//! within ±1.5 Mbit/s of the 6 Mbit/s available, and its median time per estimate within
//! train length + RTT + 20 ms. With the client's defaults, shaper detection included (it must
//! not read a shaper on this plain path).

use std::process::Command;

#[test]
fn pathquick_meets_its_accuracy_and_time_goal_on_the_testbed() {
    if !headroom_testbed::testbed_available_for_test() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("headroom-probe-testbed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("bench.csv");
    let out = Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(["probe-bench", "--levels", "6Mbps", "--trains", "9", "--bmax", "12Mbps", "--csv"])
        .arg(&csv)
        .output()
        .expect("run headroom probe-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "probe-bench failed: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&csv).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (method, f, value, time, length, shaper) = (
        col("method"),
        col("client_default"),
        col("estimate_mbps"),
        col("train_time_ms"),
        col("train_length_ms"),
        col("shaper_rate_mbps"),
    );
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|r| r[method] == "pathquick" && r[f] == "true")
        .collect();
    assert_eq!(rows.len(), 9, "{text}");
    // No shaper on this path (detection is on by default).
    assert!(rows.iter().all(|r| r[shaper].is_empty()), "a false shaper: {text}");
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let estimates: Vec<f64> = rows.iter().filter_map(|r| r[value].parse().ok()).collect();
    assert!(estimates.len() >= 8, "too few estimates: {text}");
    let error = median(estimates) - 6.0;
    let times: Vec<f64> = rows.iter().map(|r| r[time].parse().unwrap()).collect();
    let budget = rows[0][length].parse::<f64>().unwrap() + 52.0 + 20.0;
    let t = median(times);
    eprintln!("PathQuick at A = 6 Mbit/s: median error {error:+.2} Mbit/s, median time {t:.1} ms (budget {budget:.0} ms)\n{stdout}");
    assert!(error.abs() <= 1.5, "median error {error:+.2} Mbit/s\n{stdout}");
    assert!(t <= budget, "median time {t:.1} ms over the {budget:.0} ms budget\n{stdout}");
}
