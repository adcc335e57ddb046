//! `headroom send`/`recv` on loopback: SIGINT prints the partial report and exits 0; errors
//! exit 1 with a message; `--json-stream` is one JSON object per line.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_headroom"))
}

/// Starts `headroom recv` on a free loopback port; returns it and its address.
fn recv() -> (Child, String) {
    let mut child =
        bin().args(["recv", "--listen", "127.0.0.1:0"]).stderr(Stdio::piped()).stdout(Stdio::null()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.as_mut().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().strip_prefix("headroom recv: listening on ").unwrap().trim_end_matches(" (TCP)").to_string();
    (child, addr)
}

fn signal(c: &Child, sig: i32) {
    // SAFETY: signals a child this test started, by its id.
    unsafe { libc::kill(c.id() as libc::pid_t, sig) };
}

fn wait(mut c: Child, limit: Duration) -> std::process::Output {
    let t0 = Instant::now();
    while c.try_wait().unwrap().is_none() {
        if t0.elapsed() > limit {
            let _ = c.kill();
            panic!("process did not stop within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    c.wait_with_output().unwrap()
}

#[test]
fn sigint_prints_the_partial_report_and_exits_cleanly() {
    let (r, addr) = recv();
    let send = bin()
        .args(["send", &addr, "--time", "30s", "--interval", "200ms", "--json-stream", "--verify"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(900));
    signal(&send, libc::SIGINT);
    let out = wait(send, Duration::from_secs(10));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(lines.len() >= 3, "{text}");
    assert!(lines[..lines.len() - 1].iter().all(|l| l["type"] == "interval"));
    let end = lines.last().unwrap();
    assert_eq!(end["type"], "end");
    assert_eq!(end["interrupted"], true);
    assert_eq!(end["mismatched_bytes"], 0);
    assert_eq!(end["received_bytes"], end["bytes"]);
    assert!(end["seconds"].as_f64().unwrap() < 5.0);
    signal(&r, libc::SIGTERM);
    assert!(wait(r, Duration::from_secs(5)).status.success());
}

#[test]
fn refused_connection_and_congestion_control_exit_1_with_a_message() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let out = bin().args(["send", &format!("127.0.0.1:{port}"), "--bytes", "1MB"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("connection refused"), "{err}");
    let (r, addr) = recv();
    let out = bin().args(["send", &addr, "--bytes", "1MB", "--cc", "no-such-cc"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no-such-cc") && err.contains("not available"), "{err}");
    signal(&r, libc::SIGINT);
    assert!(wait(r, Duration::from_secs(5)).status.success());
}
