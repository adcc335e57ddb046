//! `headroom testbed run` stopped by SIGINT writes the CSV and summary of what it measured so far,
//! marked partial, tears the testbed down and exits 130 (root only; `SKIP: <reason>` otherwise).

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SCENARIO: &str = r#"
name = "interrupt"
[bottleneck]
rate = "20Mbps"
buffer = "50pkts"
delay = "5ms"
[[host]]
name = "s1"
side = "left"
[[host]]
name = "r1"
side = "right"
[run]
duration = "60s"
sample = "200ms"
[[flow]]
name = "bulk"
kind = "tcp"
from = "s1"
to = "r1"
cc = "reno"
[[flow]]
name = "cbr"
kind = "udp"
from = "s1"
to = "r1"
rate = "2Mbps"
"#;

/// Kills the child and removes whatever its state file records if the test ends early.
struct Guard {
    child: Option<Child>,
    dir: PathBuf,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            let pid = c.id();
            let _ = c.kill();
            let _ = c.wait();
            for r in headroom_testbed::list_runs().into_iter().filter(|r| r.pid == pid) {
                headroom_testbed::bed::remove_run(&r);
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn sigint_writes_partial_csv_and_summary_and_tears_down() {
    if let Some(why) = headroom_testbed::unsupported_reason() {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "SKIP: {why}");
        return;
    }
    let dir = std::env::temp_dir().join(format!("headroom-interrupt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("s.toml");
    let csv = dir.join("out.csv");
    std::fs::write(&file, SCENARIO).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(["testbed", "run", file.to_str().unwrap(), "-o", csv.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut g = Guard { child: Some(child), dir: dir.clone() };

    // wait for the child's testbed to be up, let it measure ~2 s, then Ctrl-C
    let t0 = Instant::now();
    let prefix = loop {
        if let Some(r) = headroom_testbed::list_runs().into_iter().find(|r| r.pid == pid) {
            break r.prefix;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "the child's testbed did not come up");
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_secs(3));
    // SAFETY: kill() has no memory arguments; `pid` is our own child, not yet reaped.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGINT) }, 0);
    let sent = Instant::now();
    let status = loop {
        if let Some(st) = g.child.as_mut().unwrap().try_wait().unwrap() {
            break st;
        }
        assert!(sent.elapsed() < Duration::from_secs(20), "still running 20 s after SIGINT");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    g.child.as_mut().unwrap().stderr.take().unwrap().read_to_string(&mut err).unwrap();
    g.child = None;

    assert_eq!(status.code(), Some(130), "exit {status:?}; stderr: {err}");
    let text = std::fs::read_to_string(&csv).unwrap_or_else(|e| panic!("no CSV after SIGINT ({e}); stderr: {err}"));
    assert!(text.starts_with("time_s,flow,metric,value\n"), "{text}");
    let rows: Vec<Vec<&str>> = text.lines().skip(1).map(|l| l.split(',').collect()).collect();
    let bulk_late =
        rows.iter().any(|r| r[1] == "bulk" && r[2] == "throughput_bps" && r[0].parse::<f64>().unwrap() > 1.0);
    assert!(bulk_late, "no bulk throughput rows after 1 s in the partial CSV:\n{text}");
    let mark: Vec<&Vec<&str>> = rows.iter().filter(|r| r[1] == "run" && r[2] == "interrupted_after_s").collect();
    assert_eq!(mark.len(), 1, "the CSV is not marked partial");
    let after: f64 = mark[0][3].parse().unwrap();
    assert!((2.0..20.0).contains(&after), "interrupted after {after} s");
    assert!(err.contains("PARTIAL") && err.contains("bulk") && err.contains("Mbit/s"), "summary: {err}");
    let list = String::from_utf8(Command::new("ip").args(["netns", "list"]).output().unwrap().stdout).unwrap();
    assert!(!list.contains(&prefix), "namespaces left after SIGINT: {list}");
    assert!(!std::path::Path::new(headroom_testbed::bed::STATE_ROOT).join(&prefix).exists());
}
