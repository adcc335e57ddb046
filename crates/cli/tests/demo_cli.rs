//! `headroom demo`: it writes a report with every section's figure, the numbers it prints are
//! those of its CSV files (recomputed here independently of the demo's code), and two runs give
//! byte-identical files and output (whatever the number of threads).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn demo(out: &Path, threads: &str) -> String {
    common::headroom(&["demo", "--out", out.to_str().unwrap()], threads)
}

mod common;

/// Every file below `dir` (relative path -> bytes).
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    common::files(dir, |_| true)
}

/// A CSV's rows as maps from column name to field.
fn rows(csv: &str) -> Vec<BTreeMap<&str, &str>> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines.map(|l| header.iter().copied().zip(l.split(',')).collect()).collect()
}

fn num(row: &BTreeMap<&str, &str>, col: &str) -> f64 {
    row[col].parse().unwrap_or_else(|_| panic!("{col} = {:?}", row[col]))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// The numbers of the printed table line that starts with `first` (after trimming).
fn printed(stdout: &str, first: &str) -> Vec<f64> {
    let line = stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(first))
        .unwrap_or_else(|| panic!("no line starting with {first} in\n{stdout}"));
    line.split_whitespace().filter_map(|w| w.trim_end_matches(['%', 'x']).parse().ok()).collect()
}

/// `shown` equals `value` rounded to `decimals`.
fn same(shown: f64, value: f64, decimals: i32) -> bool {
    (shown - value).abs() <= 0.5 * 10f64.powi(-decimals) + 1e-9
}

fn check_numbers(dir: &Path, stdout: &str) {
    // 1. PathQuick and pathChirp: the median estimate per level.
    let csv = std::fs::read_to_string(dir.join("estimate/estimates.csv")).unwrap();
    let est = rows(&csv);
    for a in ["9", "6", "3"] {
        let med = |method: &str| {
            median(
                est.iter()
                    .filter(|r| r["method"] == method && r["available_mbps"] == a && !r["estimate_mbps"].is_empty())
                    .map(|r| num(r, "estimate_mbps"))
                    .collect(),
            )
        };
        let line = printed(stdout, &format!("{a}.0"));
        assert!(same(line[1], med("pathquick"), 2), "A = {a}: printed {line:?}, CSV median {}", med("pathquick"));
        assert!(same(line[3], med("pathchirp"), 2), "A = {a}: printed {line:?}, CSV median {}", med("pathchirp"));
    }
    // 2. ImTCP: the median estimate per phase (5 s after each change left out).
    let csv = std::fs::read_to_string(dir.join("inline/estimates.csv")).unwrap();
    let est = rows(&csv);
    for (phase, a, b) in [("0-20", 0.0, 20.0), ("20-40", 20.0, 40.0), ("40-60", 40.0, 60.0)] {
        let v: Vec<f64> = est
            .iter()
            .filter(|r| num(r, "time_s") >= a + 5.0 && num(r, "time_s") < b)
            .map(|r| num(r, "estimate_mbps"))
            .collect();
        let line = printed(stdout, phase);
        // [true A, estimates, median, error %, transfer Mb/s] (the phase's name is not a number)
        assert_eq!(line[1] as usize, v.len(), "{phase}: {line:?}");
        assert!(same(line[2], median(v.clone()), 2), "{phase}: printed {line:?}, CSV median {}", median(v));
    }
    // 3. Background: throughput and page time, means over the seeds.
    let csv = std::fs::read_to_string(dir.join("background/runs.csv")).unwrap();
    let runs = rows(&csv);
    for bg in ["none", "reno", "imtcp-bg"] {
        let of: Vec<&BTreeMap<&str, &str>> = runs.iter().filter(|r| r["background"] == bg).collect();
        assert!(of.len() >= 2, "{bg}: one row per seed");
        let tput = mean(&of.iter().map(|r| num(r, "background_mbps")).collect::<Vec<_>>());
        let page = mean(&of.iter().map(|r| num(r, "mean_page_time_s")).collect::<Vec<_>>());
        let line = printed(stdout, bg);
        assert!(same(line[0], tput, 1), "{bg}: printed {line:?}, CSV {tput}");
        assert!(same(line[2], page, 3), "{bg}: printed {line:?}, CSV {page}");
    }
}

#[test]
fn the_demo_writes_its_report_prints_its_csv_numbers_and_repeats_byte_for_byte() {
    let tmp = std::env::temp_dir().join(format!("headroom-demo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let (a, b) = (tmp.join("a"), tmp.join("b"));
    let out_a = demo(&a, "2");
    let out_b = demo(&b, "1");
    // The last line is the report's path, and the report is there.
    let last = out_a.lines().last().unwrap();
    let report = a.join("report.html");
    assert!(last.ends_with(&report.display().to_string()), "{last}");
    let html = std::fs::read_to_string(&report).unwrap();
    // Byte-identical files and output (the output names its own directory on the last line).
    let (fa, fb) = (files(&a), files(&b));
    assert_eq!(fa.keys().collect::<Vec<_>>(), fb.keys().collect::<Vec<_>>());
    for (k, v) in &fa {
        assert!(fb[k] == *v, "{} differs between two runs", k.display());
    }
    let body = |o: &str| o.lines().take(o.lines().count() - 1).collect::<Vec<_>>().join("\n");
    assert_eq!(body(&out_a), body(&out_b));
    // Every section's figure is inlined in the report, and each section's conclusion is printed.
    let svgs: Vec<&PathBuf> = fa.keys().filter(|p| p.extension().is_some_and(|e| e == "svg")).collect();
    assert_eq!(svgs.len(), 3, "{svgs:?}");
    for p in svgs {
        let id = p.to_string_lossy().replace('\\', "/");
        assert!(html.contains(&format!("<figure id=\"{id}\">")), "{id} not in report.html");
        assert!(html.contains(std::str::from_utf8(&fa[p]).unwrap()), "{id}'s SVG not inlined");
    }
    assert_eq!(out_a.lines().filter(|l| l.starts_with("=> ")).count(), 3, "{out_a}");
    check_numbers(&a, &out_a);
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn a_bad_output_directory_is_a_clear_error() {
    let file = std::env::temp_dir().join(format!("headroom-demo-file-{}", std::process::id()));
    std::fs::write(&file, "not a directory").unwrap();
    let o =
        Command::new(env!("CARGO_BIN_EXE_headroom")).args(["demo", "--out", file.to_str().unwrap()]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--out"), "{}", String::from_utf8_lossy(&o.stderr));
    let _ = std::fs::remove_file(&file);
}
