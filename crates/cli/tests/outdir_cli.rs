//! Every subcommand that writes files refuses an unwritable output path at once, with a message
//! naming the option and the path, before any simulation or measurement starts.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A scratch directory holding a plain file `plain`: any path under it cannot be created, even by
/// root (who ignores permission bits).
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("headroom-outdir-cli-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("plain"), "not a directory").unwrap();
        Scratch(d)
    }
    fn under_file(&self, rest: &str) -> String {
        self.0.join("plain").join(rest).display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs headroom from the repository root, killing it after `limit`; returns exit code (None if it
/// had to be killed), stdout, stderr and the wall time.
fn headroom(args: &[&str], limit: Duration) -> (Option<i32>, String, String, Duration) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let t0 = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(args)
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run headroom");
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code();
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    (code, String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into(), t0.elapsed())
}

fn assert_refused(args: &[&str], flag: &str, path: &str) {
    let (code, out, err, took) = headroom(args, Duration::from_secs(20));
    assert!(code.is_some(), "`headroom {}` still ran after {took:?} (killed)", args.join(" "));
    assert_eq!(code, Some(1), "`headroom {}`: stdout {out} stderr {err}", args.join(" "));
    assert!(out.is_empty(), "`headroom {}` worked before refusing its output path: {out}", args.join(" "));
    assert!(took < Duration::from_secs(5), "`headroom {}` took {took:?} to refuse", args.join(" "));
    assert!(err.contains(flag) && err.contains(path), "`headroom {}`: unclear message: {err}", args.join(" "));
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn sim_run_and_sweep_refuse_an_unwritable_out_before_simulating() {
    let s = Scratch::new("sim");
    let out = s.under_file("results");
    assert_refused(&["sim", "run", "scenarios/sim/dumbbell.toml", "--out", &out], "--out", &out);
    assert_refused(&["sim", "sweep", "scenarios/becc/fig2.toml", "--out", &out], "--out", &out);
}

#[test]
fn reproduce_refuses_an_unwritable_out_before_running() {
    let s = Scratch::new("reproduce");
    let out = s.under_file("out");
    assert_refused(&["reproduce", "all", "--out", &out], "--out", &out);
}

#[test]
fn testbed_run_and_probe_bench_refuse_an_unwritable_output_before_measuring() {
    let s = Scratch::new("testbed");
    let csv = s.under_file("run.csv");
    assert_refused(&["testbed", "run", "scenarios/testbed/rtt52.toml", "-o", &csv], "-o", &csv);
    assert_refused(&["probe-bench", "--trains", "1", "--csv", &csv], "--csv", &csv);
}
