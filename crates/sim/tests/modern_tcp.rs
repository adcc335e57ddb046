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
