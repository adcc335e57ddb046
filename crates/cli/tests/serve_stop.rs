//! `headroom serve` on loopback: nonsensical caps fail at start; SIGTERM prints the statistics.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn zero_caps_fail_at_start() {
    for args in [["--max-rate", "0bps"], ["--max-clients", "0"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_headroom"))
            .args(["serve", "--listen", "127.0.0.1:0", "--duration", "1s"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        // Refused when parsing the arguments (clap's usage error, 2) or when checking the
        // configuration (1): either way at once, naming the option.
        assert!(matches!(out.status.code(), Some(1 | 2)), "{args:?}: {err}");
        assert!(err.contains(args[0]), "{args:?}: {err}");
    }
}

#[test]
fn sigterm_prints_statistics() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(["serve", "--listen", "127.0.0.1:0", "--duration", "20s"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: signals the child this test started, by its id.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(5), "serve did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(status.success(), "{err}");
    assert!(err.contains("stopping (SIGTERM)") && err.contains("datagrams"), "{err}");
}

#[test]
fn verbose_serve_logs_one_line_per_session() {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(["serve", "-v", "--listen", "127.0.0.1:0", "--duration", "20s"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().expect("a first line").unwrap();
    let addr = first.split("listening on ").nth(1).and_then(|r| r.split_whitespace().next()).expect(&first).to_string();
    let probe = Command::new(env!("CARGO_BIN_EXE_headroom")).args(["probe", &addr]).output().unwrap();
    // SAFETY: signals the child this test started, by its id.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let _ = child.wait();
    let probe_err = String::from_utf8_lossy(&probe.stderr);
    let session = rest
        .iter()
        .find(|l| l.starts_with("session 127.0.0.1:"))
        .unwrap_or_else(|| panic!("no session line; serve said {rest:?}; probe said {probe_err}"));
    assert!(session.contains("pathquick") && session.contains("packets sent"), "{session}");
}
