//! Size bounds of a scenario, checked by [`Scenario::validate`] before anything is built.
//!
//! Without them a typo such as `count = 4000000000` makes the simulator try to allocate billions
//! of flows and abort with an allocation failure, and a link so slow that one packet takes longer
//! than the run reports a utilisation of thousands of percent. Each bound is far above every
//! scenario in `scenarios/` and the papers' experiments (the largest has a few hundred flows and
//! 500 s) and low enough that a run fits in memory on a small machine:
//!
//! | what | bound | why |
//! |---|---|---|
//! | `duration` | [`MAX_DURATION_S`] | keeps every time in the run far from `u64` nanoseconds' end |
//! | flows of one entry (`count`) and in total | [`MAX_FLOWS`] | per-flow state and statistics |
//! | flows × duration | [`MAX_FLOW_SECONDS`] | the work of a run grows with both |
//! | links, nodes | [`MAX_LINKS`], [`MAX_NODES`] | the route table has nodes² entries |
//! | trace samples (`duration / trace.interval`) × traced series | [`MAX_TRACE_ROWS`] | trace.csv rows in memory |
//!
//! A link whose rate cannot send one [`FULL_PACKET`]-byte packet within the run is an error too.

use headroom_core::units::Dur;

use crate::scenario::{Scenario, ScenarioError};

/// Longest simulated time, seconds (about 11.6 days).
pub const MAX_DURATION_S: u64 = 1_000_000;
/// Most flows (bulk TCP + UDP + web clients + probes), per entry and in total.
pub const MAX_FLOWS: u64 = 100_000;
/// Most flow-seconds (flows × duration).
pub const MAX_FLOW_SECONDS: f64 = 1e8;
/// Most `[[link]]` entries.
pub const MAX_LINKS: usize = 4_000;
/// Most distinct nodes.
pub const MAX_NODES: usize = 2_000;
/// Most trace rows (samples × traced series).
pub const MAX_TRACE_ROWS: f64 = 5e7;
/// The packet size used to call a link too slow for the run: a full Ethernet-MTU IP packet.
pub const FULL_PACKET: u64 = 1500;

/// Checks the bounds above; the error names the key, the value and the bound.
pub fn check(sc: &Scenario, origin: &str) -> Result<(), ScenarioError> {
    let fail = |key: &str, msg: String| Err(ScenarioError(format!("{origin}: `{key}`: {msg}")));
    if sc.duration > Dur::from_secs(MAX_DURATION_S) {
        return fail(
            "duration",
            format!("{:.0} s is longer than the {MAX_DURATION_S} s a scenario may simulate", sc.duration.as_secs_f64()),
        );
    }
    let mut flows: u64 = sc.probe.len() as u64;
    let entries = sc
        .tcp
        .iter()
        .enumerate()
        .map(|(i, t)| (format!("tcp[{i}].count"), t.count))
        .chain(sc.udp.iter().enumerate().map(|(i, u)| (format!("udp[{i}].count"), u.count)))
        .chain(sc.web.iter().enumerate().map(|(i, w)| (format!("web[{i}].count"), w.count)));
    for (key, count) in entries {
        if u64::from(count) > MAX_FLOWS {
            return fail(&key, format!("{count} flows is more than the {MAX_FLOWS} a scenario may have"));
        }
        flows += u64::from(count);
    }
    if flows > MAX_FLOWS {
        return fail("count", format!("{flows} flows in total is more than the {MAX_FLOWS} a scenario may have"));
    }
    let secs = sc.duration.as_secs_f64();
    if flows as f64 * secs > MAX_FLOW_SECONDS {
        return fail(
            "duration",
            format!(
                "{flows} flows × {secs:.0} s = {:.3e} flow-seconds is more than the {MAX_FLOW_SECONDS:.0e} a run may \
                 simulate; shorten the run or use fewer flows",
                flows as f64 * secs
            ),
        );
    }
    if sc.links.len() > MAX_LINKS {
        return fail("link", format!("{} links is more than the {MAX_LINKS} a scenario may have", sc.links.len()));
    }
    let mut nodes: Vec<&str> = sc.links.iter().flat_map(|l| [l.a.get_ref().as_str(), l.b.get_ref().as_str()]).collect();
    nodes.sort_unstable();
    nodes.dedup();
    if nodes.len() > MAX_NODES {
        return fail("link", format!("{} nodes is more than the {MAX_NODES} a scenario may have", nodes.len()));
    }
    for (i, l) in sc.links.iter().enumerate() {
        for (key, rate) in [("rate", Some(l.rate)), ("rate_ba", l.rate_ba)] {
            let Some(rate) = rate.filter(|r| r.0 > 0) else { continue };
            let packet_s = (FULL_PACKET * 8) as f64 / rate.0 as f64;
            if packet_s > secs {
                return fail(
                    &format!("link[{i}].{key}"),
                    format!(
                        "at {} bit/s one {FULL_PACKET}-byte packet takes {packet_s:.1} s to send, longer than the whole \
                         {secs:.1} s run: nothing meaningful can be measured (raise the rate or the duration)",
                        rate.0
                    ),
                );
            }
        }
    }
    if sc.trace.interval > Dur::ZERO {
        let samples = secs / sc.trace.interval.as_secs_f64();
        let per_flow = [sc.trace.cwnd, sc.trace.rtt, sc.trace.seq].iter().filter(|x| **x).count() as f64;
        let series = (per_flow * flows as f64 + 2.0 * sc.trace.queues.len() as f64).max(1.0);
        if samples * series > MAX_TRACE_ROWS {
            return fail(
                "trace.interval",
                format!(
                    "{:.3e} samples of {series:.0} traced series is more than {MAX_TRACE_ROWS:.0e} trace rows; use a \
                     longer interval",
                    samples
                ),
            );
        }
    }
    Ok(())
}
