//! Background controllers in the simulator (issue 12): TCP Nice, TCP-LP and LEDBAT alone on an
//! empty path fill it; beside one Reno flow they leave Reno what it gets alone; LEDBAT alone
//! holds the bottleneck's queueing delay near its TARGET.
//!
//! The path: 10 Mb/s bottleneck, 20 ms one way (RTT 44 ms, BDP 37 packets of 1500 B), a
//! 200-packet DropTail buffer (240 ms of queue: more than LEDBAT's 100 ms TARGET, 83 packets,
//! so LEDBAT can hold it without losses).

mod common;

use common::{run, TestPath};
use headroom_sim::world::Metric;

const RATE_MBPS: f64 = 10.0;
/// Goodput ceiling: payload share of each 1500-byte packet.
const CEILING_MBPS: f64 = RATE_MBPS * 1460.0 / 1500.0;

fn scenario(flows: &str, duration: &str) -> String {
    let rest = format!("{flows}\n[trace]\ninterval = \"100ms\"\nqueues = [\"r1->r2\"]");
    TestPath {
        seed: 3,
        bottleneck: "10Mbps",
        delay_ms: 20,
        queue: 200,
        link_extra: "",
        cross: false,
        rest: &rest,
        duration,
    }
    .toml()
}

fn flow(cc: &str, start: &str) -> String {
    format!("[[tcp]]\nfrom = \"s\"\nto = \"d\"\ncc = {cc}\nstart = \"{start}\"\n")
}

/// Goodput (Mb/s) of each flow over the run.
fn goodputs(flows: &str, duration: &str) -> Vec<f64> {
    let (_, r) = run(&scenario(flows, duration));
    r.flows.iter().map(|f| f.throughput_mbps).collect()
}

#[test]
fn each_background_controller_alone_fills_an_empty_path() {
    // TCP-LP under the paper's rule (the default); Linux's literal rule misses the line (1.17
    // Mb/s: `crates/core/src/cc/lp.rs`, "Two rules") and is printed only.
    for cc in ["\"nice\"", "\"lp\"", "\"ledbat\"", "{ name = \"ledbat\", target = \"25ms\" }", "\"vegas\""] {
        let g = goodputs(&flow(cc, "0s"), "60s")[0];
        println!("alone: {cc} {g:.2} Mb/s of {CEILING_MBPS:.2}");
        assert!(g >= 0.9 * CEILING_MBPS, "{cc}: {g:.2} Mb/s of {CEILING_MBPS:.2}");
    }
    let linux = goodputs(&flow("{ name = \"lp\", rule = \"linux\" }", "0s"), "60s")[0];
    println!("alone: lp, rule = linux {linux:.2} Mb/s of {CEILING_MBPS:.2}");
}

#[test]
fn reno_keeps_what_it_gets_alone_beside_each_background_controller() {
    // The background flow starts at 0 s, Reno at 1 s (a background flow that starts into a
    // standing queue takes it for the base delay: docs/results.md); Reno's goodput to 60 s.
    let alone = goodputs(&flow("\"reno\"", "1s"), "60s")[0];
    assert!(alone >= 0.9 * CEILING_MBPS, "Reno alone {alone:.2}");
    for cc in ["\"nice\"", "\"lp\"", "{ name = \"lp\", rule = \"linux\" }", "\"ledbat\""] {
        let g = goodputs(&(flow("\"reno\"", "1s") + &flow(cc, "0s")), "60s");
        println!("beside {cc}: Reno {:.2} of {alone:.2} Mb/s alone; {cc} {:.2}", g[0], g[1]);
        assert!(g[0] >= 0.9 * alone, "beside {cc}: Reno {:.2} of {alone:.2} Mb/s alone; {cc} {:.2}", g[0], g[1]);
    }
}

/// Mean and spread of the bottleneck's queueing delay (ms) from `from_s` on, for one LEDBAT
/// flow alone.
fn ledbat_queue_delay_ms(cc: &str, from_s: f64) -> (f64, f64, f64) {
    let (w, _) = run(&scenario(&flow(cc, "0s"), "40s"));
    let d: Vec<f64> = w
        .trace
        .iter()
        .filter(|row| row.metric == Metric::QueueBytes && row.time.as_secs_f64() >= from_s)
        .map(|row| row.value * 8.0 / (RATE_MBPS * 1e6) * 1e3)
        .collect();
    let mean = d.iter().sum::<f64>() / d.len() as f64;
    let min = d.iter().cloned().fold(f64::MAX, f64::min);
    let max = d.iter().cloned().fold(f64::MIN, f64::max);
    (mean, min, max)
}

#[test]
fn ledbat_alone_holds_the_queueing_delay_near_target() {
    for (cc, target) in [("\"ledbat\"", 100.0), ("{ name = \"ledbat\", target = \"25ms\" }", 25.0)] {
        let (mean, min, max) = ledbat_queue_delay_ms(cc, 20.0);
        // Within 10 % of TARGET: LEDBAT's current delay is the minimum of 4 samples and its
        // window changes by fractions of a segment per ACK near TARGET, so the queue settles a
        // few packets (1.2 ms each) below it; measured 94.3 ms (87.6–98.4) and 25.1 ms (24.0–26.4).
        let msg = format!("{cc}: queueing delay mean {mean:.1} ms (min {min:.1}, max {max:.1}), TARGET {target}");
        assert!((mean - target).abs() <= 0.1 * target, "{msg}");
        assert!(max <= 1.1 * target && min >= 0.8 * target, "{msg}");
    }
}
