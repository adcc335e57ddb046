//! ImTCP-bg in the simulator (issue 12): seed 000's web workload (N_web servers for 200 clients) and
//! ImTCP-bg beside Reno.

mod common;

use common::{run, TestPath};
use headroom_sim::world::FlowKind;
use headroom_sim::{Scenario, World};

/// Web clients at `d`'s side fetching from servers at `s`'s side over 50 Mbit/s, 10 ms.
fn web_path(clients: u32, servers: Option<u32>, duration: &str) -> String {
    let max = servers.map_or(String::new(), |n| format!("max_pages = {n}\n"));
    let rest = format!(
        "[[web]]\nclients = \"d\"\nservers = \"s\"\ncount = {clients}\n{max}\
         model = {{ object_cap = \"1MB\" }}\n[trace]\ninterval = \"1s\""
    );
    on_50mbps(5, &rest, duration)
}

/// `rest` on a 50 Mbit/s, 10 ms bottleneck with a 1000-packet buffer.
fn on_50mbps(seed: u64, rest: &str, duration: &str) -> String {
    TestPath { seed, bottleneck: "50Mbps", delay_ms: 10, queue: 1000, link_extra: "", cross: false, rest, duration }
        .toml()
}

/// The most pages downloading at one instant, from (start, duration) pairs.
fn max_concurrent(pages: &[(f64, f64)]) -> usize {
    let mut ev: Vec<(f64, i32)> = pages.iter().flat_map(|&(s, d)| [(s, 1), (s + d, -1)]).collect();
    ev.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut now, mut max) = (0i32, 0i32);
    for (_, d) in ev {
        now += d;
        max = max.max(now);
    }
    max as usize
}

#[test]
fn n_web_servers_bound_the_pages_in_download_and_set_the_load() {
    let pages = |servers: Option<u32>| {
        let (_, r) = run(&web_path(200, servers, "60s"));
        let web = r.flows.iter().find(|f| f.kind == FlowKind::Web).unwrap();
        let p: Vec<(f64, f64)> = web.page_times.iter().map(|(t, d)| (t.as_secs_f64(), d.as_secs_f64())).collect();
        (max_concurrent(&p), web.pages, web.throughput_mbps)
    };
    let (c5, n5, mbps5) = pages(Some(5));
    let (c20, n20, mbps20) = pages(Some(20));
    let (c_free, _, _) = pages(None);
    assert!((4..=5).contains(&c5), "5 servers: at most 5 pages at once, and the bound is reached ({c5})");
    assert!(c20 <= 20 && c20 > 5, "20 servers: {c20} pages at once");
    assert!(c_free > 20, "200 clients without the servers limit exceed it ({c_free})");
    // Each server alternates a page and a think time: the load grows with the servers.
    assert!(n20 as f64 > 3.0 * n5 as f64, "pages {n5} -> {n20}");
    assert!(mbps20 > 2.0 * mbps5, "web {mbps5:.1} -> {mbps20:.1} Mbit/s");
}

/// A background flow `name` with controller `cc` (TOML) from `s` to `d`, over ImTCP's buffer.
fn bg_flow(cc: &str, name: &str, start: &str) -> String {
    format!(
        "[[tcp]]\nname = \"{name}\"\nfrom = \"s\"\nto = \"d\"\ncc = {cc}\nstart = \"{start}\"\n\
         recover_guard = true\nimtcp = {{ link_rate = \"1Gbps\" }}\n"
    )
}

/// One Reno flow that starts 5 s after the background flow.
const RENO_FROM_5S: &str =
    "[[tcp]]\nname = \"reno\"\nfrom = \"s\"\nto = \"d\"\ncc = \"reno\"\nrecover_guard = true\nstart = \"5s\"\n";

/// `flows` on a 50 Mbit/s, 10 ms bottleneck with a 1000-packet buffer, 30 s, traced per second.
fn path_50mbps(flows: String) -> String {
    on_50mbps(1, &(flows + "[trace]\ninterval = \"1s\""), "30s")
}

/// Payload ceiling of the 50 Mbit/s path (1460 of 1500 bytes).
const CEILING_50: f64 = 50.0 * 1460.0 / 1500.0;

/// Mean throughput (Mbit/s) of the flow `name` after 10 s.
fn mean_after_10s(w: &World, name: &str) -> f64 {
    let v: Vec<f64> = w
        .trace
        .iter()
        .filter(|t| w.series[t.series as usize] == name && t.metric.name() == "throughput_bps")
        .filter(|t| t.time.as_secs_f64() > 10.0)
        .map(|t| t.value / 1e6)
        .collect();
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
fn imtcp_bg_alone_fills_the_path_and_yields_to_reno() {
    // Alone: at least 90 % of the bottleneck (payload 1460 of 1500 bytes: 48.7 Mbit/s at most).
    let (_, r) = run(&path_50mbps(bg_flow("{ name = \"imtcp-bg\", delta = 1.2 }", "bg", "0s")));
    assert_eq!(r.flows[0].cc.as_deref(), Some("imtcp-bg"));
    assert!(r.flows[0].throughput_mbps >= 45.0, "alone: {:.1} Mbit/s", r.flows[0].throughput_mbps);
    // Against one Reno flow (which starts 5 s later), Reno keeps at least 90 % of the path.
    let (w, _) = run(&(path_50mbps(bg_flow("\"imtcp-bg\"", "bg", "0s")) + "\n" + RENO_FROM_5S));
    let mean = mean_after_10s(&w, "reno");
    assert!(mean >= 0.9 * CEILING_50, "Reno beside ImTCP-bg: {mean:.1} Mbit/s after 10 s");
}

/// ImTCP's background mode (seed 001 §5.1, `cc = "imtcp-background"`) on the path of
/// [`imtcp_bg_alone_fills_the_path_and_yields_to_reno`]: alone, its window bound g·RTT·Ā keeps it
/// below g of the path (so the "alone at least 90 %" cannot hold for g < 0.9; measured
/// 29.7 Mbit/s at g = 0.8 and 18.5 at g = 0.5 of 48.7); beside one Reno flow it yields the larger
/// share to Reno but not 90 % of the path at g = 0.8 (Reno 40.7 Mbit/s, 84 %; at g = 0.5 44.8,
/// 92 %): docs/results.md, issues 12 and 14 audit (session 7).
#[test]
fn imtcp_background_mode_stays_below_g_of_the_path_and_leaves_reno_the_larger_share() {
    for g in [0.8, 0.5] {
        let cc = format!("{{ name = \"imtcp-background\", g = {g} }}");
        let (w, r) = run(&path_50mbps(bg_flow(&cc, "bg", "0s")));
        assert_eq!(r.flows[0].cc.as_deref(), Some("imtcp-background"));
        let alone = mean_after_10s(&w, "bg");
        let (w, _) = run(&(path_50mbps(bg_flow(&cc, "bg", "0s")) + "\n" + RENO_FROM_5S));
        let (bg, reno) = (mean_after_10s(&w, "bg"), mean_after_10s(&w, "reno"));
        println!(
            "g = {g}: alone {alone:.1} Mbit/s ({:.0} % of {CEILING_50:.1}); beside Reno: Reno {reno:.1} ({:.0} %), background {bg:.1}",
            100.0 * alone / CEILING_50,
            100.0 * reno / CEILING_50
        );
        assert!(alone <= g * CEILING_50, "g = {g}: alone {alone:.1} Mbit/s above g of the path");
        assert!(alone >= 0.5 * g * CEILING_50, "g = {g}: alone only {alone:.1} Mbit/s");
        assert!(bg < alone && reno > 2.0 * bg, "g = {g}: beside Reno {bg:.1}, Reno {reno:.1}, alone {alone:.1}");
    }
}

/// headroom's option `rtt = "min"` for the background mode (the bound g·RTT_min·Ā, module doc of
/// `core::cc::imtcp_bg`): beside one Reno flow Reno keeps at least 90 % of the path at g = 0.8,
/// where with the paper's smoothed RTT it kept 84 %
/// ([`imtcp_background_mode_stays_below_g_of_the_path_and_leaves_reno_the_larger_share`]).
#[test]
fn imtcp_background_mode_on_rtt_min_leaves_reno_90_percent() {
    let cc = "{ name = \"imtcp-background\", g = 0.8, rtt = \"min\" }";
    let (w, r) = run(&path_50mbps(bg_flow(cc, "bg", "0s")));
    assert_eq!(r.flows[0].cc.as_deref(), Some("imtcp-background"));
    let alone = mean_after_10s(&w, "bg");
    let (w, _) = run(&(path_50mbps(bg_flow(cc, "bg", "0s")) + "\n" + RENO_FROM_5S));
    let (bg, reno) = (mean_after_10s(&w, "bg"), mean_after_10s(&w, "reno"));
    println!(
        "rtt = min, g = 0.8: alone {alone:.1} Mbit/s ({:.0} %); beside Reno: Reno {reno:.1} ({:.0} %), background {bg:.1}",
        100.0 * alone / CEILING_50,
        100.0 * reno / CEILING_50
    );
    assert!((0.4 * CEILING_50..=0.8 * CEILING_50).contains(&alone), "alone {alone:.1} Mbit/s");
    assert!(reno >= 0.9 * CEILING_50, "Reno beside the background mode on RTT_min: {reno:.1} Mbit/s after 10 s");
}

/// The goal benchmark's set-up at one N_web (`scenarios/imtcp-bg/web.toml`, N_web = 20, seed 2):
/// the headroom rule (`rule = "headroom"`, the one `headroom send --background` runs) beside the
/// web traffic. Measured in `headroom reproduce imtcp-bg-goal`: no controller reaches the goal's
/// 90 % at 1.05 x page time there (docs/results.md, issue 12, session 4); this checks the line
/// the rule does hold: pages within 10 % of the run without background, and at least 40 % of
/// the available bandwidth used. It also checks that the scenario key reaches the controller.
#[test]
fn headroom_rule_on_the_goal_workload_leaves_the_pages_and_uses_the_spare_bandwidth() {
    use headroom_sim::scenario::CcKind;
    let mut sc = Scenario::parse(&common::repo_file("scenarios/imtcp-bg/web.toml"), "web.toml").unwrap();
    sc.seed = 2;
    let mut none = sc.clone();
    none.tcp.clear();
    let mut bg = Scenario::parse(
        &common::repo_file("scenarios/imtcp-bg/web.toml").replace(
            "cc = \"reno\"\n\n[[web]]",
            "cc = { name = \"imtcp-bg\", rule = \"headroom\" }\nimtcp = { link_rate = \"100Mbps\" }\n\n[[web]]",
        ),
        "web.toml, headroom rule",
    )
    .unwrap();
    bg.seed = 2;
    assert!(matches!(bg.tcp[0].cc, CcKind::ImtcpBg(c) if c.measurement_allowance == Some(35)));
    let result = |sc: &Scenario| {
        let mut w = World::new(sc, None).unwrap();
        w.run();
        let r = w.report();
        let web = r.flows.iter().find(|f| f.kind == FlowKind::Web).unwrap();
        let page = web.page_times.iter().map(|p| p.1.as_secs_f64()).sum::<f64>() / web.page_times.len() as f64;
        let link = r.links.iter().find(|l| l.name == "r1->r2").unwrap();
        let bg: f64 = r.flows.iter().filter(|f| f.kind == FlowKind::Tcp).map(|f| f.throughput_mbps).sum();
        (page, (1.0 - link.utilisation) * link.rate_mbps * 1460.0 / 1500.0, bg)
    };
    let (page0, available, _) = result(&none);
    let (page, _, mbps) = result(&bg);
    let (ratio, share) = (page / page0, mbps / available);
    println!("headroom rule, N_web = 20: page time x{ratio:.3}, {:.0} % of {available:.1} Mbit/s", 100.0 * share);
    assert!(ratio <= 1.10, "page time x{ratio:.3}");
    assert!(share >= 0.4, "{:.0} % of the available bandwidth", 100.0 * share);
}
