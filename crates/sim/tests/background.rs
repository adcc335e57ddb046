//! Background transfer (issue 12): seed 000's web workload (N_web servers for 200 clients) and
//! the background controllers in the simulator.

mod common;

use common::{run, TestPath};
use headroom_sim::world::FlowKind;

/// Web clients at `d`'s side fetching from servers at `s`'s side over 50 Mbit/s, 10 ms.
fn web_path(clients: u32, servers: Option<u32>, duration: &str) -> String {
    let max = servers.map_or(String::new(), |n| format!("max_pages = {n}\n"));
    let rest = format!(
        "[[web]]\nclients = \"d\"\nservers = \"s\"\ncount = {clients}\n{max}\
         model = {{ object_cap = \"1MB\" }}\n[trace]\ninterval = \"1s\""
    );
    TestPath {
        seed: 5,
        bottleneck: "50Mbps",
        delay_ms: 10,
        queue: 1000,
        link_extra: "",
        cross: false,
        rest: &rest,
        duration,
    }
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
