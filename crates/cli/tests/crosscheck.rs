//! `headroom crosscheck`: the simulator against the kernel on one scenario file.
//!
//! The root test runs `scenarios/crosscheck/small.toml` (one CUBIC flow, 10 Mbit/s, 20 ms RTT,
//! buffer 1 BDP, 12 s, figures over 5–12 s) on both sides and asserts the goal on it:
//! throughput within 10 % and mean queue within 25 %, plus mean RTT within 10 % (the RTT is the
//! base RTT plus the queue, so it follows from the queue; a mapping error in the delays would
//! show here first), and that the kernel flow filled the link; one retry when a run disagrees
//! (the kernel side measures the machine's load too). Whether the delay box kept up is printed
//! with the figures. It prints
//! `SKIP: reason` without root and fails under `CI=true`.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_headroom"))
}

fn scenario(name: &str) -> String {
    format!("{}/../../scenarios/crosscheck/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// One run of the small case on both sides: `Ok(report)` when they agree, `Err(why)` otherwise.
fn small_case_agrees() -> Result<String, String> {
    let out = bin().args(["crosscheck", "--json"]).arg(scenario("small.toml")).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "crosscheck failed: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let (sim, kernel) = (&v["sim"], &v["kernel"]);
    let f = |side: &serde_json::Value, key: &str| side["flows"][0][key].as_f64().unwrap();
    let pct = |s: f64, k: f64| 100.0 * (s - k) / k;
    let thr = pct(f(sim, "mbps"), f(kernel, "mbps"));
    let q = pct(sim["mean_queue_pkts"].as_f64().unwrap(), kernel["mean_queue_pkts"].as_f64().unwrap());
    let rtt = pct(f(sim, "rtt_mean_ms"), f(kernel, "rtt_mean_ms"));
    assert!((v["queue_diff_pct"].as_f64().unwrap() - q).abs() < 1e-9, "the JSON's own verdict is the same figure");
    let report = format!("throughput {thr:+.1} %, mean queue {q:+.1} %, mean RTT {rtt:+.1} %\n{v:#}");
    // A box that fell behind (the VM stopped its thread) explains a disagreement; it does not
    // undo an agreement: a CI run's box released packets 156–203 µs late on average in two runs
    // (one stall of 10–30 ms holds every packet behind it) while the figures agreed (throughput
    // +0.6 and +0.1 %, queue +11.1 and +6.9 %, RTT +3.7 and +2.7 %).
    let lagged = if v["delay_box"]["kept_up"] == true { "" } else { " (the delay box fell behind)" };
    if f(kernel, "mbps") <= 9.0 {
        return Err(format!("the kernel flow did not fill the 10 Mbit/s link (short of CPU?){lagged}: {report}"));
    }
    if thr.abs() > 10.0 || q.abs() > 25.0 || rtt.abs() > 10.0 {
        return Err(format!("outside 10 % / 25 % / 10 %{lagged}: {report}"));
    }
    Ok(format!("agree{lagged}: {report}"))
}

#[test]
fn the_simulator_and_the_kernel_agree_on_the_small_case() {
    if !headroom_testbed::testbed_available_for_test() {
        return;
    }
    // The kernel side measures the machine too: on this shared 2-core box a run at load average
    // 45 starved the sender (9.67 Mbit/s, queue 7.4 packets against 11.7) while the delay box
    // kept up. One retry (13 s) keeps that from failing the suite; a mapping or simulator error
    // fails both runs.
    let first = small_case_agrees();
    let result = first.clone().or_else(|why| {
        eprintln!("first run disagreed, retrying once: {why}");
        small_case_agrees()
    });
    match result {
        Ok(report) => eprintln!("{report}"),
        Err(why) => panic!("the simulator and the kernel disagree in two runs; the second: {why}"),
    }
}

#[test]
fn the_simulator_side_runs_without_root_and_is_deterministic() {
    let run = || {
        let out = bin().args(["crosscheck", "--sim-only", "--json"]).arg(scenario("small.toml")).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let a = run();
    assert_eq!(a, run());
    let v: serde_json::Value = serde_json::from_str(a.trim()).unwrap();
    assert!(v["kernel"].is_null());
    // one CUBIC flow fills the 10 Mbit/s link and keeps a standing queue behind a 17-packet buffer
    let mbps = v["sim"]["flows"][0]["mbps"].as_f64().unwrap();
    let q = v["sim"]["mean_queue_pkts"].as_f64().unwrap();
    assert!((9.5..=10.01).contains(&mbps), "{v}");
    assert!(q > 1.0 && q < 17.0, "{v}");
}

#[test]
fn what_one_side_cannot_do_is_refused_with_the_reason() {
    let dir = std::env::temp_dir().join(format!("headroom-crosscheck-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let base = std::fs::read_to_string(scenario("small.toml")).unwrap();
    let cases = [
        (base.replace("buffer = \"17pkts\"", "buffer = \"17pkts\"\nshaper = { rate = \"5Mbps\" }"), "shaper"),
        (base.replace("cc = \"cubic\"", "cc = \"becc\""), "cubic and reno only"),
        (
            format!(
                "{base}\n[[flow]]\nkind = \"udp\"\nfrom = \"c1\"\nto = \"c2\"\npattern = \"onoff\"\nrate = \"1Mbps\"\n"
            ),
            "onoff",
        ),
        (format!("{base}\n[[flow]]\nkind = \"web\"\nfrom = \"c2\"\nto = \"c1\"\n"), "web"),
        (base.replace("rate = \"10Mbps\"\n", ""), "bottleneck rate"),
    ];
    for (i, (text, why)) in cases.iter().enumerate() {
        let p = dir.join(format!("case{i}.toml"));
        std::fs::write(&p, text).unwrap();
        let out = bin().args(["crosscheck", "--sim-only"]).arg(&p).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "case {i} accepted");
        assert!(err.contains(why), "case {i}: expected `{why}` in: {err}");
    }
    let out = bin().args(["crosscheck", "--sim-only", "--warmup", "12s"]).arg(scenario("small.toml")).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--warmup"));
    let _ = std::fs::remove_dir_all(&dir);
}
