//! ImTCP in the simulator (issue 5): the inline measurement (ImTCP's buffer below a Reno sender)
//! on simulated paths — accuracy and tracking, no stall of TCP, the delayed-ACK and
//! retransmission paths, and the passive estimators' tap. Each test runs a small scenario and
//! checks a property a broken control unit or driver would violate.

mod common;

use common::{median, repo_file, run, TestPath};
use headroom_core::stats;
use headroom_sim::probe::Verdict;
use headroom_sim::world::FlowKind;
use headroom_sim::{Scenario, World};

/// sender -- r1 ==bottleneck== r2 -- receiver, cross traffic from x1 (at r1) to x2 (at r2).
fn path(bottleneck: &str, delay_ms: u32, queue: u32, link_extra: &str, flows: &str, duration: &str) -> String {
    let rest = format!("{flows}\n[trace]\ninterval = \"500ms\"");
    TestPath { seed: 3, bottleneck, delay_ms, queue, link_extra, cross: true, rest: &rest, duration }.toml()
}

/// In-range inline estimates (Mb/s) of flow `stat` in (a, b] seconds.
fn estimates(w: &World, method: &str, a: f64, b: f64) -> Vec<(f64, f64, bool)> {
    w.estimates
        .iter()
        .filter(|e| e.method.name() == method)
        .map(|e| (e.time.as_secs_f64(), e.value.map_or(f64::NAN, |v| v.0 as f64 / 1e6), e.verdict == Verdict::Estimate))
        .filter(|e| e.0 > a && e.0 <= b)
        .collect()
}

const CROSS_40_THEN_60: &str = r#"
[[udp]]
from = "x1"
to = "x2"
pattern = { kind = "cbr", rate = "40Mbps" }
size = 1000
[[udp]]
from = "x1"
to = "x2"
pattern = { kind = "cbr", rate = "20Mbps" }
size = 1000
start = "8s"
"#;

#[test]
fn inline_estimate_settles_within_ten_percent_and_follows_a_step() {
    // 100 Mb/s bottleneck, 40 Mb/s CBR cross traffic (60 available), 60 Mb/s from 8 s (40
    // available). The ImTCP sender is window-limited (150 KB over ~24 ms: ~50 Mb/s offered, so
    // it never fills the path itself).
    let tcp =
        "[[tcp]]\nfrom = \"s\"\nto = \"d\"\ncc = \"reno\"\nmax_window = \"150KB\"\nimtcp = { link_rate = \"1Gbps\" }";
    let (w, r) = run(&path("100Mbps", 10, 1000, "", &format!("{tcp}\n{CROSS_40_THEN_60}"), "16s"));
    let rtt = r.flows[0].min_rtt_ms.unwrap() / 1e3;
    // Settles: within 10 % of 60 from the first few RTTs on.
    let first_good = estimates(&w, "imtcp", 0.0, 8.0)
        .into_iter()
        .find(|e| e.2 && (e.1 - 60.0).abs() <= 6.0)
        .expect("an estimate within 10 % of 60");
    assert!(
        first_good.0 <= 20.0 * rtt,
        "first estimate within 10 % after {:.3} s = {:.0} RTTs",
        first_good.0,
        first_good.0 / rtt
    );
    let before: Vec<f64> = estimates(&w, "imtcp", 2.0, 8.0).into_iter().filter(|e| e.2).map(|e| e.1).collect();
    assert!(before.len() >= 20, "{} in-range estimates in 6 s", before.len());
    let m = median(before.clone());
    assert!((m - 60.0).abs() <= 6.0, "median before the step {m:.1} Mb/s, expected 60 ± 10 %");
    let within = before.iter().filter(|v| (**v - 60.0).abs() <= 6.0).count() as f64 / before.len() as f64;
    assert!(within >= 0.8, "only {:.0} % of the estimates within 10 % of 60: {before:?}", within * 100.0);
    // Follows the step: the first in-range estimate within 10 % of 40 comes within 2 s, and the
    // estimates of the last 6 s sit there.
    let after = estimates(&w, "imtcp", 8.0, 16.0);
    let caught =
        after.iter().find(|e| e.2 && (e.1 - 40.0).abs() <= 4.0).expect("an estimate within 10 % of 40 after the step");
    assert!(caught.0 - 8.0 <= 2.0, "step caught after {:.2} s", caught.0 - 8.0);
    let late: Vec<f64> = after.iter().filter(|e| e.0 > 10.0 && e.2).map(|e| e.1).collect();
    let m = median(late);
    assert!((m - 40.0).abs() <= 4.0, "median after the step {m:.1} Mb/s, expected 40 ± 10 %");
}

/// Mean traced throughput (Mb/s) of flow `stat` over (a, b] seconds.
fn mean_throughput(w: &World, stat: u32, a: f64, b: f64) -> f64 {
    let v: Vec<f64> = w
        .trace
        .iter()
        .filter(|r| r.series == stat && r.metric == headroom_sim::world::Metric::ThroughputBps)
        .filter(|r| r.time.as_secs_f64() > a && r.time.as_secs_f64() <= b)
        .map(|r| r.value / 1e6)
        .collect();
    assert!(!v.is_empty(), "no throughput samples in ({a}, {b}]");
    v.iter().sum::<f64>() / v.len() as f64
}

/// Throughput (Mb/s) of flow 0 and the run's world, with and without ImTCP below the sender.
fn with_and_without(
    imtcp: &str,
    bottleneck: &str,
    delay_ms: u32,
    queue: u32,
    link_extra: &str,
    tcp_extra: &str,
    duration: &str,
) -> ((World, headroom_sim::Report), (World, headroom_sim::Report)) {
    let tcp = |m: &str| format!("[[tcp]]\nfrom = \"s\"\nto = \"d\"\ncc = \"reno\"\n{m}\n{tcp_extra}");
    let with = run(&path(bottleneck, delay_ms, queue, link_extra, &tcp(imtcp), duration));
    let without = run(&path(bottleneck, delay_ms, queue, link_extra, &tcp(""), duration));
    (with, without)
}

/// Checks that nothing was lost inside ImTCP's buffer and that the byte counts agree.
fn assert_conserved(w: &World, r: &headroom_sim::Report) {
    let m = w.inline_measurement(0).expect("flow 0 measures inline");
    let s = m.stats();
    let c = w.bulk_conn(0).expect("flow 0's connection");
    let held = s.segments_released - s.segments_sent;
    // Every segment TCP released left the buffer, except those it holds right now (at most a
    // window's worth).
    assert!(
        held as f64 * c.params.mss as f64 <= c.cwnd().0 as f64 + c.params.mss as f64,
        "{held} segments held at the end, cwnd {}",
        c.cwnd().0
    );
    // What reached the receiver was sent: delivered bytes ≤ sent, cumulative ACK ≤ highest sent.
    assert!(
        c.snd_una <= c.rcv_nxt && c.rcv_nxt <= c.snd_max,
        "snd_una {} rcv_nxt {} snd_max {}",
        c.snd_una,
        c.rcv_nxt,
        c.snd_max
    );
    assert_eq!(
        r.flows[0].bytes,
        c.rcv_nxt + c.out_of_order_bytes(),
        "receiver's fresh bytes = in-order bytes + out-of-order bytes"
    );
    let p = r.packets;
    assert_eq!(p.created, p.delivered + p.dropped + p.in_network, "packets conserved: {p:?}");
}

#[test]
fn control_unit_never_stalls_tcp_on_a_clean_path() {
    // Reno alone fills a 50 Mb/s bottleneck (20 ms one way, 200-packet buffer); with ImTCP
    // measuring continuously (interval 0) its steady-state throughput (10-30 s, after both
    // slow-start overshoots) stays within 5 %.
    let ((w, r), (w0, r0)) = with_and_without("imtcp = { link_rate = \"1Gbps\" }", "50Mbps", 20, 200, "", "", "30s");
    let (a, b) = (mean_throughput(&w, 0, 10.0, 30.0), mean_throughput(&w0, 0, 10.0, 30.0));
    assert!(b > 45.0, "Reno fills the path: {b:.1}");
    assert!(a >= 0.95 * b, "ImTCP {a:.2} Mb/s vs Reno {b:.2} Mb/s");
    assert!(
        r.flows[0].timeouts <= r0.flows[0].timeouts + 1,
        "timeouts {} vs {}",
        r.flows[0].timeouts,
        r0.flows[0].timeouts
    );
    let s = w.inline_measurement(0).unwrap().stats();
    assert!(s.measurements >= 50, "it did measure: {s:?}");
    // No segment waits long: the storing timer is capped at one SRTT (42 ms and up here).
    assert!(s.max_hold.as_secs_f64() <= 0.1, "longest hold {:?}", s.max_hold);
    assert_conserved(&w, &r);
}

#[test]
fn delayed_ack_receiver_still_gives_estimates_without_stall() {
    // §3.5.1: with a delayed-ACK receiver only every other segment gives a delay sample. Reno
    // fills what 40 Mb/s of CBR cross traffic leaves of 100 Mb/s (200-packet buffer).
    let cross = "[[udp]]\nfrom = \"x1\"\nto = \"x2\"\npattern = { kind = \"cbr\", rate = \"40Mbps\" }\nsize = 1000";
    let ((w, r), (w0, _)) = with_and_without(
        "imtcp = { link_rate = \"1Gbps\" }",
        "100Mbps",
        10,
        200,
        "",
        &format!("delayed_ack = true\n{cross}"),
        "20s",
    );
    let v: Vec<f64> = estimates(&w, "imtcp", 5.0, 20.0).into_iter().filter(|e| e.2).map(|e| e.1).collect();
    assert!(v.len() >= 20, "{} in-range estimates with delayed ACKs", v.len());
    let m = median(v);
    assert!((m - 60.0).abs() <= 9.0, "median {m:.1} Mb/s with delayed ACKs, expected 60 ± 15 %");
    let c = w.bulk_conn(0).unwrap();
    assert!(
        c.counters.acks_sent * 10 < c.counters.segments_sent * 7,
        "the receiver did delay ACKs: {} ACKs for {} segments",
        c.counters.acks_sent,
        c.counters.segments_sent
    );
    assert_conserved(&w, &r);
    let (a, b) = (mean_throughput(&w, 0, 8.0, 20.0), mean_throughput(&w0, 0, 8.0, 20.0));
    assert!(a >= 0.95 * b, "delayed ACKs: ImTCP {a:.1} vs Reno {b:.1} Mb/s");
}

#[test]
fn retransmissions_flush_the_buffer_and_measurement_resumes() {
    // §3.5.3: 0.1 % random loss on the bottleneck: fast retransmits (and some timeouts) flush
    // the buffer and pause the measurement until a new ACK; measurements keep coming between
    // losses, TCP does not stall, and no segment is lost inside the buffer.
    let cross = "[[udp]]\nfrom = \"x1\"\nto = \"x2\"\npattern = { kind = \"cbr\", rate = \"40Mbps\" }\nsize = 1000";
    let ((w, r), (_, r0)) =
        with_and_without("imtcp = { link_rate = \"1Gbps\" }", "100Mbps", 10, 1000, "loss = 0.001", cross, "20s");
    let s = w.inline_measurement(0).unwrap().stats();
    assert!(r.flows[0].fast_retransmits >= 10, "lossy path: {} fast retransmits", r.flows[0].fast_retransmits);
    assert!(s.retransmission_flushes >= r.flows[0].fast_retransmits, "every fast retransmit flushes: {s:?}");
    assert!(s.aborted_measurements > 0, "some measurements were interrupted: {s:?}");
    let v: Vec<f64> = estimates(&w, "imtcp", 0.0, 20.0).into_iter().filter(|e| e.2).map(|e| e.1).collect();
    assert!(v.len() >= 20, "measurements resume after retransmissions: {} estimates", v.len());
    let m = median(v);
    assert!((m - 60.0).abs() <= 9.0, "median {m:.1} Mb/s on the lossy path, expected 60 ± 15 %");
    // No stall: within 10 % of Reno on the same lossy path (measured 19.78 vs 20.10 Mb/s with the earlier storing rule).
    // Resuming the measurement at the first new ACK after a retransmission instead of at the
    // recovery point gave 15.5 vs 20.1: the held segments were those whose duplicate ACKs
    // Reno needed for the next hole.
    let (a, b) = (r.flows[0].throughput_mbps, r0.flows[0].throughput_mbps);
    assert!(
        a >= 0.9 * b,
        "ImTCP {a:.2} vs Reno {b:.2} Mb/s on the lossy path (timeouts {} vs {})",
        r.flows[0].timeouts,
        r0.flows[0].timeouts
    );
    assert!(
        r.flows[0].timeouts <= r0.flows[0].timeouts + 2,
        "timeouts {} vs {}",
        r.flows[0].timeouts,
        r0.flows[0].timeouts
    );
    assert_conserved(&w, &r);
}

#[test]
fn passive_estimators_watch_without_changing_the_flow() {
    // The tap of Fig. 10: Westwood, Hoe and TCP-Rab watch a Reno flow; the flow's packets are
    // exactly those of the same run without them, and their estimates sit near what the flow
    // gets (a window-limited sender: ~36 Mb/s of 60 available).
    let cross = "[[udp]]\nfrom = \"x1\"\nto = \"x2\"\npattern = { kind = \"cbr\", rate = \"40Mbps\" }\nsize = 1000";
    let tcp = |extra: &str| {
        format!("[[tcp]]\nfrom = \"s\"\nto = \"d\"\ncc = \"reno\"\nmax_window = \"100KB\"\n{extra}\n{cross}")
    };
    let (w, r) = run(&path("100Mbps", 10, 1000, "", &tcp("passive = [\"westwood\", \"hoe\", \"rab\"]"), "10s"));
    let (w0, r0) = run(&path("100Mbps", 10, 1000, "", &tcp(""), "10s"));
    assert_eq!(r.flows[0].bytes, r0.flows[0].bytes);
    assert_eq!(r.packets.created, r0.packets.created);
    assert_eq!(r.packets.events, r0.packets.events);
    assert!(w0.estimates.is_empty());
    let rate = r.flows[0].throughput_mbps;
    for method in ["westwood", "hoe", "rab"] {
        let v: Vec<f64> = estimates(&w, method, 2.0, 10.0).into_iter().map(|e| e.1).collect();
        assert!(v.len() >= 10, "{method}: {} samples (one mean per 0.5 s trace interval)", v.len());
        let m = median(v);
        assert!(m > 0.5 * rate && m < 60.0 * 1.5, "{method}: median {m:.1} Mb/s for a {rate:.1} Mb/s flow");
    }
    // With ImTCP below the same sender, the tap still sees every ACK.
    let (w, _) =
        run(&path("100Mbps", 10, 1000, "", &tcp("imtcp = { link_rate = \"1Gbps\" }\npassive = [\"westwood\"]"), "5s"));
    assert!(estimates(&w, "westwood", 0.0, 5.0).len() >= 8 && estimates(&w, "imtcp", 0.0, 5.0).len() >= 8);
}

#[test]
fn scenario_keys_for_m_and_the_storing_timer() {
    // Fixed m and fixed T (Tables 1, 2) are accepted and change the behaviour; bad values are
    // clear errors.
    let tcp = |m: &str| {
        format!("[[tcp]]\nfrom = \"s\"\nto = \"d\"\ncc = \"reno\"\nmax_window = \"150KB\"\nimtcp = {{ link_rate = \"1Gbps\"{m} }}")
    };
    let (w, _) = run(&path("100Mbps", 10, 1000, "", &tcp(", stream_len = 17, m = 2"), "5s"));
    let fixed_m = w.inline_measurement(0).unwrap().stats();
    let (w, _) = run(&path("100Mbps", 10, 1000, "", &tcp(", storing_timer = \"1ms\""), "5s"));
    let short_t = w.inline_measurement(0).unwrap().stats();
    assert!(short_t.storing_timeouts > 10 * short_t.measurements.max(1), "a 1 ms storing timer times out: {short_t:?}");
    assert!(fixed_m.streams_sent > 0, "{fixed_m:?}");
    // The storing-rate opt-in (a window-limited sender: 150 KB window on 100 Mbit/s).
    let (w, _) = run(&path("100Mbps", 10, 1000, "", &tcp(""), "5s"));
    let paper_rate = w.inline_measurement(0).unwrap().stats();
    let (w, _) = run(&path("100Mbps", 10, 1000, "", &tcp(", storing_rate = \"slower-of-estimate-and-tcp\""), "5s"));
    let tcp_rate = w.inline_measurement(0).unwrap().stats();
    // min(Ā, window/SRTT) gives the window-limited sender time to fill its streams
    // (measured: 89 storing timeouts against the paper's rule's 199 in 5 s).
    assert!(2 * tcp_rate.storing_timeouts < paper_rate.storing_timeouts, "{tcp_rate:?} vs {paper_rate:?}");
    for bad in [
        ", m = 1",
        ", stream_len = 5, m = 6",
        ", storing_timer = \"0s\"",
        ", m = 3, m_successes = 2",
        ", storing_timer = \"10ms\", max_storing_rtts = 1.0",
    ] {
        let src = path("100Mbps", 10, 1000, "", &tcp(bad), "5s");
        let e = Scenario::parse(&src, "t.toml").expect_err(bad).to_string();
        assert!(e.contains("tcp[0].imtcp"), "{bad}: {e}");
    }
    // A storing rate is one of a fixed list, and the error names the line and the list.
    let src = path("100Mbps", 10, 1000, "", &tcp(", storing_rate = \"fastest\""), "5s");
    let e = Scenario::parse(&src, "t.toml").expect_err("unknown storing rate").to_string();
    assert!(e.contains("line") && e.contains("`fastest`") && e.contains("estimate, slower-of-estimate-and-tcp"), "{e}");
    let src = path("100Mbps", 10, 1000, "", "[[tcp]]\nfrom = \"s\"\nto = \"d\"\npassive = [\"vegas\"]", "5s");
    let e = Scenario::parse(&src, "t.toml").expect_err("unknown estimator").to_string();
    assert!(e.contains("passive") && e.contains("vegas"), "{e}");
}

#[test]
fn same_seed_same_estimates() {
    let src = path("100Mbps", 10, 1000, "", "[[tcp]]\nfrom = \"s\"\nto = \"d\"\ncc = \"reno\"\nimtcp = { link_rate = \"1Gbps\" }\npassive = [\"westwood\", \"hoe\", \"rab\"]\n[[udp]]\nfrom = \"x1\"\nto = \"x2\"\npattern = { kind = \"poisson\", rate = \"40Mbps\" }\nsize = \"internet_mix\"", "4s");
    let (a, _) = run(&src);
    let (b, _) = run(&src);
    assert!(a.estimates.len() > 20);
    assert_eq!(a.estimates, b.estimates);
    assert!(a.stats.iter().any(|s| s.kind == FlowKind::Udp));
}

/// Table 2's scenario (one Reno ImTCP flow, Poisson UDP on 100 Mb/s, 180 ms RTT) with
/// `cross` of UDP (96 Mb/s: 4 Mb/s available), shortened to `duration`, with `imtcp_line`.
fn table2(cross: &str, imtcp_line: &str, duration: &str) -> String {
    let src = include_str!("../../../scenarios/imtcp/table2.toml");
    let line = "imtcp = { link_rate = \"100Mbps\" }";
    assert!(
        src.contains(line) && src.contains("duration = \"80s\"") && src.contains("rate = \"96Mbps\""),
        "table2.toml changed"
    );
    src.replace(line, imtcp_line)
        .replace("duration = \"80s\"", &format!("duration = \"{duration}\""))
        .replace("rate = \"96Mbps\"", &format!("rate = \"{cross}\""))
}

#[test]
fn first_stream_packet_never_waits_longer_than_its_storing_timer() {
    // Fig. 9's samples: the first segment of every stream waited at most the storing timer
    // armed for it. No tolerance: the storing deadline is an exact (integer-ns) wake-up of the
    // buffer, counted from the first held segment's release, and a stream's first packet
    // leaves at the instant the stream starts. (Before the timer counted from the first held
    // segment, a measurement that ended early on an ACK while the next stream was being stored
    // re-armed it from that instant: one wait in the 80 s Table 2 run at 7 Mb/s was 6.6 ms
    // longer than its T.)
    let fixed = |t: &str| format!("imtcp = {{ link_rate = \"100Mbps\", storing_timer = \"{t}\" }}");
    let adaptive = "imtcp = { link_rate = \"100Mbps\" }".to_string();
    let mut runs = Vec::new();
    for (cross, label, line, secs) in [
        ("96Mbps", "40ms", fixed("40ms"), 40),
        ("96Mbps", "adaptive", adaptive.clone(), 40),
        ("96Mbps", "4ms", fixed("4ms"), 40),
        ("93Mbps", "adaptive", adaptive, 40),
    ] {
        let (mut w, _) = run(&table2(cross, &line, &format!("{secs}s")));
        let unit = w.inline_measurement_mut(0).expect("ImTCP flow");
        let waits = unit.take_first_packet_waits();
        let stats = unit.stats();
        // one sample per stream started: sent, failed, cut by a retransmission's flush, or
        // (at most one) still under way at the end
        let started = stats.streams_sent + stats.stream_failures;
        let most = started + stats.aborted_measurements + 1;
        assert!((started..=most).contains(&(waits.len() as u64)), "{label}: {} samples for {stats:?}", waits.len());
        for s in &waits {
            assert!(
                s.wait <= s.storing_timer,
                "{cross} {label}: first packet waited {} with T = {}",
                s.wait,
                s.storing_timer
            );
            // the adaptive T is capped at one SRTT (~185 ms here)
            assert!(s.storing_timer <= headroom_core::units::Dur::from_millis(250), "{label}: T = {}", s.storing_timer);
        }
        assert!(unit.take_first_packet_waits().is_empty(), "samples drained");
        runs.push((label, waits, stats));
    }
    let (_, w40, s40) = &runs[0];
    let (_, wpro, spro) = &runs[1];
    let (_, w4, s4) = &runs[2];
    assert!(w40.len() >= 10 && wpro.len() >= 10, "streams: T = 40 ms {}, adaptive {}", w40.len(), wpro.len());
    // A fixed T is the T armed every time.
    assert!(w40.iter().all(|s| s.storing_timer.as_secs_f64() == 0.04));
    assert!(w4.iter().all(|s| s.storing_timer.as_secs_f64() == 0.004));
    // Table 2's ordering: the adaptive T forms more streams than 40 ms; 4 ms almost never.
    assert!(
        spro.streams_sent > s40.streams_sent,
        "streams adaptive {} vs T = 40 ms {}",
        spro.streams_sent,
        s40.streams_sent
    );
    assert!(s4.storing_timeouts > 20 * s4.streams_sent.max(1), "T = 4 ms: {s4:?}");
}

#[test]
fn nothing_is_held_while_the_send_window_is_below_n() {
    // §3.3: "It stores no data packets when the current window size is smaller than the number
    // of packets required for a measurement stream." Ten ImTCP and ten Reno flows share 50
    // Mb/s (Fig. 13's network), so the ImTCP windows hover around N = 35 and timeouts are
    // common. After a timeout, the first ACK is often cumulative over the whole pre-timeout
    // flight; a control unit that infers the window from that ACK (in flight + newly acked)
    // sees ~70 segments while cwnd is 2, holds the 2 segments TCP may send for a storing
    // timer, and the RTO restarted by that ACK can expire before their ACKs come back.
    // Measured before the simulator told the unit the send window: 326 flow-milliseconds with
    // segments held below N in these 40 s; over the full 200 s run, 18 timeouts of ImTCP flows
    // with fewer than 4 segments in flight, none for the Reno flows.
    let src = include_str!("../../../scenarios/imtcp/fig13.toml")
        .replace("count = 5\n", "count = 10\n")
        .replace("interval_rtts = 0.0", "interval_rtts = 20.0")
        .replace("duration = \"200s\"", "duration = \"40s\"");
    let sc = Scenario::parse(&src, "fig13.toml").unwrap_or_else(|e| panic!("{e}"));
    let mut w = World::new(&sc, None).unwrap();
    let mut violations = Vec::new();
    let mut violating_instants = 0u32;
    let mut held_instants = 0u32;
    for ms in 1..=40_000u64 {
        w.run_until(headroom_core::units::Time(ms * 1_000_000));
        for k in 0..10 {
            let c = w.bulk_conn(k).expect("bulk flow");
            let unit = w.inline_measurement(c.stat).expect("ImTCP flow");
            let held = headroom_core::cc::SendBuffer::held(unit);
            if held == 0 {
                continue;
            }
            held_instants += 1;
            let window = c.cwnd().0.min(c.params.max_window);
            if window < 35 * c.params.mss as u64 {
                violating_instants += 1;
                if violations.len() < 10 {
                    violations.push((ms, k, held, window / c.params.mss as u64));
                }
            }
        }
    }
    assert!(held_instants > 1000, "the ImTCP flows measured: {held_instants} instants with held segments");
    assert!(violations.is_empty(), "{violating_instants} flow-milliseconds with segments held and the send window below N; first (ms, flow, held, window in segments): {violations:?}");
}

/// Table 3's hardest row for us, 60 Mbit/s with 2 connections, 200 s: with the paper's TCP
/// (ns-2's Reno, `bugFix_` = `recover_guard`) ImTCP shares like Reno — total within 5 % of two
/// Reno connections' and a Jain index of at least 0.98. Without the guard this row gave 0.81.
#[test]
fn imtcp_shares_like_reno_on_table3s_path_with_ns2_reno() {
    let table3 = repo_file("scenarios/imtcp/table3.toml");
    let src = table3.replacen("rate = \"50Mbps\"", "rate = \"60Mbps\"", 1).replacen("count = 10", "count = 2", 1);
    assert!(src.contains("60Mbps") && src.contains("count = 2") && src.contains("recover_guard = true"));
    let totals = |src: &str| {
        let (_, r) = run(src);
        let t: Vec<f64> = r.flows.iter().filter(|f| f.kind == FlowKind::Tcp).map(|f| f.throughput_mbps).collect();
        assert_eq!(t.len(), 2);
        (t.iter().sum::<f64>(), stats::jain_index(&t).expect("some throughput"))
    };
    let (imtcp, jain) = totals(&src);
    let (reno, _) = totals(&src.replacen("imtcp = { link_rate = \"100Mbps\" }\n", "", 1));
    assert!(jain >= 0.98, "Jain {jain:.3}");
    assert!((imtcp / reno - 1.0).abs() <= 0.05, "ImTCP {imtcp:.1} vs Reno {reno:.1} Mbit/s");
}
