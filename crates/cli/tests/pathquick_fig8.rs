//! `headroom reproduce pathquick-fig8` on a small case (root only; prints `SKIP: <reason>`
//! otherwise, fails under CI): two cross-traffic levels, three trains each. The files are
//! written, the CSV holds every train judged three ways, and the summary's share of PathQuick
//! estimates within ±20 Mb/s is the one the CSV gives. The cross traffic comes from the delay
//! box's in-link source (`HEADROOM_FIG8_CROSS`), and a source that does not exist is refused.

use std::process::Command;

#[test]
fn fig8_on_the_testbed_writes_its_files_and_a_summary_computed_from_them() {
    if !headroom_testbed::testbed_available_for_test() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("headroom-fig8-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(["reproduce", "pathquick-fig8", "--out"])
        .arg(&dir)
        .env("HEADROOM_FIG8_LEVELS", "0,50")
        .env("HEADROOM_FIG8_TRAINS", "3")
        .env("HEADROOM_FIG8_CROSS", "in-link")
        .output()
        .expect("run headroom reproduce");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "reproduce failed: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    let fig = dir.join("pathquick-fig8");
    let csv = std::fs::read_to_string(fig.join("fig8.csv")).unwrap();
    let svg = std::fs::read_to_string(fig.join("fig8.svg")).unwrap();
    let summary = std::fs::read_to_string(fig.join("summary.txt")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(svg.starts_with("<svg") || svg.contains("<svg"), "not an SVG");
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let rows: Vec<Vec<&str>> = csv.lines().skip(1).map(|l| l.split(',').collect()).collect();
    // 2 levels × 3 trains × 2 methods × 3 judges
    assert_eq!(rows.len(), 36, "{csv}");
    let (cross, method, judge, value) = (col("cross_mbps"), col("method"), col("judge"), col("estimate_mbps"));
    let quick: Vec<&Vec<&str>> = rows.iter().filter(|r| r[method] == "pathquick" && r[judge] == "F=1.5").collect();
    let within = quick
        .iter()
        .filter(|r| {
            let truth = 100.0 - r[cross].parse::<f64>().unwrap();
            r[value].parse::<f64>().is_ok_and(|v| (v - truth).abs() <= 20.0)
        })
        .count();
    let share = format!("{:.0}%", 100.0 * within as f64 / quick.len() as f64);
    let line = summary.lines().find(|l| l.starts_with("PathQuick estimates within ±20")).expect("claim line");
    assert!(line.trim_end().ends_with(&share), "summary says `{line}`, the CSV gives {share}\n{summary}");
    // The cross traffic came from the source asked for, and the summary says so.
    let source = col("cross_source");
    assert!(rows.iter().all(|r| r[source] == "in-link"), "{csv}");
    assert!(summary.contains("from the in-link source"), "{summary}");
    eprintln!("{summary}");

    // A source that does not exist is refused before any testbed is built.
    let bad = Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(["reproduce", "pathquick-fig8", "--out"])
        .arg(&dir)
        .env("HEADROOM_FIG8_CROSS", "fast")
        .output()
        .expect("run headroom reproduce");
    let _ = std::fs::remove_dir_all(&dir);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && err.contains("HEADROOM_FIG8_CROSS") && err.contains("`fast`"), "{err}");
}
