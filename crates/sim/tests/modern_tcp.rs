//! Today's TCP in the simulator (issue 13): CUBIC, HighSpeed TCP, Westwood+ and ImTCP's full-speed
//! mode by scenario key, and SACK's default and its refusal with Reno's recovery.

mod common;

use common::{run, TestPath};
use headroom_sim::{Scenario, World};

fn path(flows: &str, link_extra: &str) -> String {
    TestPath {
        seed: 5,
        bottleneck: "50Mbps",
        delay_ms: 20,
        queue: 200,
        link_extra,
        cross: false,
        rest: flows,
        duration: "20s",
    }
    .toml()
}

#[test]
fn cubic_and_newreno_with_sack_and_highspeed_without_fill_an_empty_path() {
    for cc in ["cubic", "newreno"] {
        let (_, r) = run(&path(&format!("[[tcp]]\nfrom = \"s\"\nto = \"d\"\ncc = \"{cc}\""), ""));
        let f = &r.flows[0];
        assert_eq!(f.cc.as_deref(), Some(cc));
        assert!(f.throughput_mbps > 0.9 * 50.0, "{cc}: {:.2} Mb/s of 50", f.throughput_mbps);
        assert_eq!(f.timeouts, 0, "{cc}: SACK recovers the slow-start overshoot without a timeout");
        assert_eq!(f.retransmits, f.drops, "{cc}: with SACK nothing is sent twice that was not lost");
    }
    // HighSpeed runs without SACK by default (see `CcKind::sack_by_default`).
    let (_, r) = run(&path("[[tcp]]\nfrom = \"s\"\nto = \"d\"\ncc = \"highspeed\"", ""));
    assert_eq!(r.flows[0].cc.as_deref(), Some("highspeed"));
    assert!(r.flows[0].throughput_mbps > 0.85 * 50.0, "highspeed: {:.2} Mb/s of 50", r.flows[0].throughput_mbps);
}

#[test]
fn westwood_plus_keeps_its_rate_through_random_loss_where_newreno_does_not() {
    // 0.5 % random loss on a 50 Mb/s, 40 ms path: NewReno halves per loss; Westwood+ falls back
    // only to BWE × RTT_min.
    let rate = |cc: &str| {
        let (_, r) = run(&path(&format!("[[tcp]]\nfrom = \"s\"\nto = \"d\"\ncc = \"{cc}\""), "loss = 0.005"));
        r.flows[0].throughput_mbps
    };
    let (westwood, newreno) = (rate("westwood+"), rate("newreno"));
    assert!(westwood > 1.5 * newreno, "Westwood+ {westwood:.2} vs NewReno {newreno:.2} Mb/s");
}

#[test]
fn sack_is_on_by_default_where_the_recovery_fits_and_refused_with_reno() {
    let flows = "[[tcp]]\nfrom = \"s\"\nto = \"d\"\ncc = \"newreno\"\n[[tcp]]\nfrom = \"s\"\nto = \"d\"\ncc = \"newreno\"\nsack = false";
    let (_, r) = run(&path(flows, "loss = 0.002"));
    // The SACK flow resends exactly what was lost; NewReno without SACK resends more (go-back-N
    // after its timeouts) or as much.
    assert_eq!(r.flows[0].retransmits, r.flows[0].drops);
    assert!(r.flows[1].retransmits >= r.flows[1].drops);
    let bad = path("[[tcp]]\nfrom = \"s\"\nto = \"d\"\ncc = \"reno\"\nsack = true", "");
    let sc = Scenario::parse(&bad, "t.toml").unwrap();
    let e = World::new(&sc, None).err().expect("reno with SACK is refused");
    assert!(e.contains("tcp[0]") && e.contains("sack = true") && e.contains("reno"), "{e}");
}

#[test]
fn full_speed_mode_keeps_its_rate_through_random_loss_and_is_reno_with_h_one() {
    // ImTCP Fig. 16's situation on the test path: 0.1 % random loss. The full-speed mode regrows
    // toward A·RTT at up to h segments per RTT after each loss; NewReno (both without SACK, as
    // the full-speed mode runs by default) one per RTT.
    let rate = |cc: &str| {
        let flows = format!("[[tcp]]\nfrom = \"s\"\nto = \"d\"\ncc = {cc}\nsack = false");
        let (_, r) = run(&path(&flows, "loss = 0.001"));
        r.flows[0].throughput_mbps
    };
    let full = rate("\"imtcp-fullspeed\"");
    let newreno = rate("\"newreno\"");
    let reno_like = rate("{ name = \"imtcp-fullspeed\", h = 1.0 }");
    assert!(full > 1.5 * newreno, "full-speed {full:.2} vs NewReno {newreno:.2} Mb/s");
    // With h = 1 only ImTCP's buffer differs from NewReno (it shapes, it does not change the
    // window): within 15 %.
    assert!((reno_like - newreno).abs() <= 0.15 * newreno, "h = 1: {reno_like:.2} vs NewReno {newreno:.2} Mb/s");
    let bad = path("[[tcp]]\nfrom = \"s\"\nto = \"d\"\ncc = { name = \"imtcp-fullspeed\", h = -1 }", "");
    let e = Scenario::parse(&bad, "t.toml").expect_err("h must be positive").to_string();
    assert!(e.contains("`h`"), "{e}");
}

/// The Fig. 15 and Fig. 16 files with their one flow's `cc` (and ImTCP's buffer only for the
/// full-speed mode) and a few top-level keys replaced.
fn paper_file(rel: &str, cc: &str, seed: u64, duration: &str, loss: Option<f64>) -> String {
    let mut v: toml::Value = toml::from_str(&common::repo_file(rel)).unwrap();
    let top = v.as_table_mut().unwrap();
    top.insert("seed".into(), toml::Value::Integer(seed as i64));
    top.insert("duration".into(), toml::Value::String(duration.into()));
    let tcp = top["tcp"].as_array_mut().unwrap()[0].as_table_mut().unwrap();
    tcp.insert("cc".into(), toml::Value::String(cc.into()));
    if cc != "imtcp-fullspeed" {
        tcp.remove("imtcp");
    }
    if let Some(loss) = loss {
        for l in top["link"].as_array_mut().unwrap() {
            let l = l.as_table_mut().unwrap();
            if l.contains_key("loss") {
                l.insert("loss".into(), toml::Value::Float(loss));
            }
        }
    }
    toml::to_string(&v).unwrap()
}

#[test]
fn fig16_full_speed_beats_westwood_plus_and_newreno_at_high_loss() {
    // ImTCP Fig. 16's claim at 5 % loss on the lossy 2 Mbit/s hop (scenarios/imtcp/fig16.toml),
    // one seed, 100 s.
    let rate =
        |cc: &str| run(&paper_file("scenarios/imtcp/fig16.toml", cc, 3, "100s", Some(0.05))).1.flows[0].throughput_mbps;
    let (full, westwood, newreno) = (rate("imtcp-fullspeed"), rate("westwood+"), rate("newreno"));
    assert!(
        full > westwood && full > newreno,
        "full-speed {full:.3}, Westwood+ {westwood:.3}, NewReno {newreno:.3} Mb/s"
    );
}

#[test]
fn fig15_full_speed_fills_the_500_mbps_path_long_before_newreno() {
    // ImTCP Fig. 15 (scenarios/imtcp/fig15.toml), first 30 s: full-speed grows at up to h
    // segments per RTT toward A·RTT; NewReno regrows one segment per RTT after its slow-start
    // overshoot, from about half the 5,167-segment pipe.
    let rate = |cc: &str| run(&paper_file("scenarios/imtcp/fig15.toml", cc, 1, "30s", None)).1.flows[0].throughput_mbps;
    let (full, newreno) = (rate("imtcp-fullspeed"), rate("newreno"));
    assert!(full > 1.5 * newreno, "full-speed {full:.1} vs NewReno {newreno:.1} Mb/s");
}

#[test]
fn cubic_with_hystart_leaves_slow_start_before_the_overshoot() {
    // The 50 Mbit/s, 40 ms test path with a 200-packet buffer (BDP 167 segments): standard slow
    // start doubles past BDP + buffer and loses a large part of a window; HyStart (Linux's
    // default) ends slow start when the ACK train spans half the minimum RTT or the RTT grows.
    let run_cubic = |cc: &str| {
        let (_, r) = run(&path(&format!("[[tcp]]\nfrom = \"s\"\nto = \"d\"\ncc = {cc}"), ""));
        (r.flows[0].drops, r.flows[0].throughput_mbps)
    };
    let (drops_plain, _) = run_cubic("\"cubic\"");
    let (drops_hystart, rate_hystart) = run_cubic("{ name = \"cubic\", hystart = true }");
    eprintln!("cubic drops: {drops_plain} without HyStart, {drops_hystart} with ({rate_hystart:.2} Mb/s)");
    assert!(drops_hystart * 2 < drops_plain, "drops with HyStart {drops_hystart}, without {drops_plain}");
    assert!(rate_hystart > 0.85 * 50.0, "with HyStart {rate_hystart:.2} Mb/s of 50");
    let bad = path("[[tcp]]\nfrom = \"s\"\nto = \"d\"\ncc = { name = \"cubic\", hystrat = true }", "");
    let e = Scenario::parse(&bad, "t.toml").expect_err("unknown key").to_string();
    assert!(e.contains("hystrat"), "{e}");
}
