//! Oversized scenarios and links too slow for their run fail at once with a clear message
//! (`headroom sim run`), instead of aborting on an allocation failure or printing absurd results.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LINKS: &str = r#"
[[link]]
a = "s1"
b = "r1"
rate = "100Mbps"
delay = "1ms"
[[link]]
a = "r1"
b = "d1"
rate = "RATE"
delay = "10ms"
"#;

/// Runs `headroom sim run` on `toml` (killed after 20 s); returns exit code, stdout, stderr, time.
fn sim_run(tag: &str, toml: &str) -> (Option<i32>, String, String, Duration) {
    let path = std::env::temp_dir().join(format!("headroom-limits-{tag}-{}.toml", std::process::id()));
    std::fs::write(&path, toml).unwrap();
    let t0 = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(["sim", "run", path.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code();
        }
        if t0.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    let _ = std::fs::remove_file(&path);
    (code, String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into(), t0.elapsed())
}

fn assert_rejected(tag: &str, toml: &str, expect: &[&str]) {
    let (code, out, err, took) = sim_run(tag, toml);
    assert_eq!(code, Some(1), "{tag}: exit {code:?} after {took:?}; stdout {out}; stderr {err}");
    assert!(!err.contains("panicked") && !err.contains("memory allocation"), "{tag}: {err}");
    for e in expect {
        assert!(err.contains(e), "{tag}: the message does not say `{e}`: {err}");
    }
    assert!(took < Duration::from_secs(5), "{tag}: took {took:?} to refuse");
}

fn scenario(duration: &str, rate: &str, rest: &str) -> String {
    format!("duration = \"{duration}\"\n{}\n{rest}", LINKS.replace("RATE", rate))
}

#[test]
fn a_four_billion_flow_count_is_refused() {
    let s = scenario(
        "10s",
        "10Mbps",
        "[[udp]]\nfrom = \"s1\"\nto = \"d1\"\ncount = 4000000000\npattern = { kind = \"cbr\", rate = \"1Mbps\" }\n",
    );
    assert_rejected("count", &s, &["udp[0].count", "4000000000", "100000"]);
}

#[test]
fn flows_times_duration_and_trace_rows_are_bounded() {
    let tcp = "[[tcp]]\nfrom = \"s1\"\nto = \"d1\"\ncount = 50000\n";
    assert_rejected("flowsec", &scenario("10000s", "10Mbps", tcp), &["flow-seconds"]);
    let trace = "[[tcp]]\nfrom = \"s1\"\nto = \"d1\"\n[trace]\ninterval = \"1ns\"\n";
    assert_rejected("trace", &scenario("100s", "10Mbps", trace), &["trace.interval", "trace rows"]);
    assert_rejected("duration", &scenario("100000000s", "10Mbps", ""), &["duration", "longer than"]);
}

#[test]
fn a_long_chain_of_links_is_refused() {
    let mut s = String::from("duration = \"1s\"\n");
    for i in 0..5000 {
        s.push_str(&format!("[[link]]\na = \"n{i}\"\nb = \"n{}\"\nrate = \"10Mbps\"\ndelay = \"1ms\"\n", i + 1));
    }
    assert_rejected("chain", &s, &["5000 links", "4000"]);
}

#[test]
fn a_link_too_slow_for_one_packet_in_the_run_is_refused() {
    let tcp = "[[tcp]]\nfrom = \"s1\"\nto = \"d1\"\n";
    assert_rejected("slow", &scenario("10s", "1kbps", tcp), &["link[1].rate", "longer than the whole"]);
    // a slow link that does carry packets within the run is fine
    let (code, out, err, _) = sim_run("slow-ok", &scenario("10s", "100kbps", tcp));
    assert_eq!(code, Some(0), "{out}{err}");
}
