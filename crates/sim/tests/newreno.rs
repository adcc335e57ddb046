//! The simulator's NewReno on single-flow paths (issue 20): across a grid of rates, RTTs and
//! buffers it must deliver at least 95 % of Reno's throughput, never hold a cwnd above twice
//! BDP + buffer once the initial slow start's overshoot is over, and recover from that overshoot
//! in a bounded number of retransmission timeouts.

use headroom_sim::{Scenario, World};

struct Run {
    throughput_mbps: f64,
    timeouts: u64,
    /// (time s, cwnd bytes) samples of the trace.
    cwnd: Vec<(f64, f64)>,
}

fn run(cc: &str, rate_mbps: u32, one_way_ms: u32, queue: u32) -> Run {
    let src = format!(
        r#"
duration = "30s"
seed = 1
[[link]]
a = "s"
b = "r1"
rate = "1Gbps"
delay = "0ms"
[[link]]
a = "r1"
b = "r2"
rate = "{rate_mbps}Mbps"
delay = "{one_way_ms}ms"
queue = {queue}
[[link]]
a = "r2"
b = "d"
rate = "1Gbps"
delay = "0ms"
[[tcp]]
name = "bulk"
from = "s"
to = "d"
cc = "{cc}"
[trace]
interval = "100ms"
queues = ["r1->r2"]
"#
    );
    let sc = Scenario::parse(&src, "newreno-grid").unwrap_or_else(|e| panic!("{e}"));
    let mut w = World::new(&sc, None).unwrap();
    w.run();
    let r = w.report();
    let cwnd = headroom_sim::output::trace_csv(&w)
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[2] == "cwnd_bytes").then(|| (f[0].parse().unwrap(), f[3].parse().unwrap()))
        })
        .collect();
    Run { throughput_mbps: r.flows[0].throughput_mbps, timeouts: r.flows[0].timeouts, cwnd }
}

#[test]
fn newreno_keeps_up_with_reno_and_holds_no_runaway_window() {
    let mut failures = Vec::new();
    for rate in [10u32, 50, 100] {
        for one_way in [5u32, 10, 20, 50] {
            // RTT = 2 × one_way; BDP in 1500-byte packets; buffers of half and one BDP (≥ 10).
            let bdp_pkts = (rate as f64 * 1e6 * 2.0 * one_way as f64 * 1e-3 / 8.0 / 1500.0).round() as u32;
            let mut queues = vec![(bdp_pkts / 2).max(10), bdp_pkts.max(10)];
            queues.dedup();
            for queue in queues {
                let reno = run("reno", rate, one_way, queue);
                let newreno = run("newreno", rate, one_way, queue);
                let label = format!("{rate} Mbit/s, {one_way} ms one way, {queue}-packet buffer");
                let ratio = newreno.throughput_mbps / reno.throughput_mbps;
                if ratio < 0.95 {
                    failures.push(format!(
                        "{label}: NewReno {:.2} Mbit/s is {:.0} % of Reno's {:.2}",
                        newreno.throughput_mbps,
                        100.0 * ratio,
                        reno.throughput_mbps
                    ));
                }
                // Twice BDP + buffer, in bytes (1500-byte packets).
                let limit = 2.0 * (bdp_pkts + queue) as f64 * 1500.0;
                // The initial slow start and the recovery from its overshoot are over well
                // before 5 s on every path of the grid (RTT ≤ 100 ms).
                if let Some((t, c)) = newreno.cwnd.iter().find(|(t, c)| *t >= 5.0 && *c > limit) {
                    failures.push(format!("{label}: cwnd {c:.0} B at {t:.1} s, above 2 (BDP + buffer) = {limit:.0} B"));
                }
                if newreno.timeouts > 3 {
                    failures.push(format!("{label}: {} timeouts (Reno: {})", newreno.timeouts, reno.timeouts));
                }
            }
        }
    }
    assert!(failures.is_empty(), "NewReno failures:\n  {}", failures.join("\n  "));
}
