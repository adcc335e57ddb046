//! Set-up shared by the simulator's integration tests: reading the repository's scenarios, running
//! a scenario, the test path, and the median the assertions use.

// Each test binary uses its own subset of these helpers.
#![allow(dead_code)]

use headroom_core::stats::Sorted;
use headroom_sim::{Report, Scenario, World};

/// A file of the repository (`rel` from its root), read whole.
pub fn repo_file(rel: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Parses and runs a scenario to its end; the world (estimates, taps) and its report.
pub fn run(src: &str) -> (World, Report) {
    let sc = Scenario::parse(src, "test").unwrap_or_else(|e| panic!("{e}"));
    let mut w = World::new(&sc, None).unwrap();
    w.run();
    let r = w.report();
    (w, r)
}

/// The test path as scenario TOML: `s -- r1 ==bottleneck== r2 -- d` with 1 Gb/s, 1 ms access
/// links, the bottleneck's `rate`, one-way `delay_ms`, `queue` (packets) and `link_extra` keys.
/// With `cross`, hosts `x1` (at r1) and `x2` (at r2) on 1 Gb/s, 0 ms links carry cross traffic.
/// `rest` (flows, trace) follows the links.
pub struct TestPath<'a> {
    pub seed: u64,
    pub bottleneck: &'a str,
    pub delay_ms: u32,
    pub queue: u32,
    pub link_extra: &'a str,
    pub cross: bool,
    pub rest: &'a str,
    pub duration: &'a str,
}

impl TestPath<'_> {
    pub fn toml(&self) -> String {
        let TestPath { seed, bottleneck, delay_ms, queue, link_extra, cross, rest, duration } = self;
        let link = |a: &str, b: &str, delay: &str| {
            format!("[[link]]\na = \"{a}\"\nb = \"{b}\"\nrate = \"1Gbps\"\ndelay = \"{delay}\"\n")
        };
        let mut s = format!("duration = \"{duration}\"\nseed = {seed}\n");
        s += &link("s", "r1", "1ms");
        if *cross {
            s += &link("x1", "r1", "0ms");
        }
        s += &format!(
            "[[link]]\na = \"r1\"\nb = \"r2\"\nrate = \"{bottleneck}\"\ndelay = \"{delay_ms}ms\"\nqueue = {queue}\n{link_extra}\n"
        );
        s += &link("r2", "d", "1ms");
        if *cross {
            s += &link("r2", "x2", "0ms");
        }
        s + rest + "\n"
    }
}

/// The median the tests assert on: the upper one (`x[n / 2]`) for an even count, i.e.
/// [`Sorted::quantile`]`(0.5)`. Fails the test when there are no values.
pub fn median(v: Vec<f64>) -> f64 {
    Sorted::new(v).quantile(0.5).expect("no values")
}
