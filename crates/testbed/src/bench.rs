//! `headroom testbed bench-delaybox`: how fast and how precise the delay box is on this machine.
//!
//! A two-host testbed with no rate limit and a one-way delay `delay` in each direction. First a
//! low-rate Poisson UDP stream (1 Mbit/s, 200-byte packets, 2 s) measures the one-way delay
//! (receiver clock minus the sender's timestamp, both `CLOCK_MONOTONIC`) with delay 0 (the
//! path's own latency through three namespaces and two TUN passes) and with `delay`; the
//! added-delay error is the second minus the configured delay. The box's own release lateness
//! (write start minus scheduled release) is reported too. Then UDP CBR
//! streams of increasing rate measure throughput: a rate passes if the box dropped nothing of
//! its own (TUN ring, delay-line overflow, write errors), took in at least 99.9% of what was
//! sent and released all of it, with a mean release lateness under 100 µs (a box that falls
//! behind delivers everything, late).

use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Result};
use headroom_core::stats::Sorted;
use headroom_core::{Dur, Rate};

use crate::bed::Testbed;
use crate::delaybox::CounterSnapshot;
use crate::topology::{Bottleneck, Buffer, Topology};
use crate::traffic::{self, Pattern, UdpGen, UdpRecvReport};

/// Settings of the benchmark.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    pub delay: Dur,
    pub rates: Vec<Rate>,
    pub step: Dur,
    /// IP packet size.
    pub size: usize,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            delay: Dur::from_millis(10),
            rates: [100, 200, 400, 600, 800, 1000].into_iter().map(Rate::from_mbps).collect(),
            step: Dur::from_secs(2),
            size: 1500,
        }
    }
}

/// One throughput step.
#[derive(Clone, Debug)]
pub struct RateStep {
    pub offered: Rate,
    pub sent: Rate,
    pub received: Rate,
    pub sent_pkts: u64,
    pub received_pkts: u64,
    pub own_drops: u64,
    /// IP bytes the box released over the step's duration.
    pub box_rate: Rate,
    pub box_late_mean: Dur,
    pub passed: bool,
}

/// Delay error statistics (measured one-way delay minus configured), order statistics by
/// [`Sorted::quantile`] (the nearest one, no interpolation: `median` is the upper median).
#[derive(Clone, Debug)]
pub struct DelayError {
    pub packets: usize,
    pub min: f64,
    pub median: f64,
    pub p99: f64,
    pub max: f64,
}

/// Everything the benchmark measured.
#[derive(Clone, Debug)]
pub struct BenchReport {
    pub config: BenchConfig,
    /// End-to-end one-way delay error at low rate, µs.
    pub delay_error_us: DelayError,
    /// The same measured with delay 0: the path's own latency (three namespaces, two TUN
    /// passes, socket wake-ups), µs.
    pub path_latency_us: DelayError,
    /// The box's release lateness at low rate: mean and histogram bound of the 99th percentile.
    pub release_late_mean: Dur,
    pub release_late_p99_bound: Dur,
    pub release_late_max: Dur,
    pub steps: Vec<RateStep>,
    /// Highest offered rate that passed.
    pub max_rate: Option<Rate>,
}

fn stream(tb: &Testbed, g: UdpGen) -> Result<(traffic::UdpSendReport, UdpRecvReport)> {
    let port = g.dst.port();
    let rx_sock = tb.run_in("r1", move || Ok(UdpSocket::bind(("0.0.0.0", port))?))?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let rx =
        std::thread::spawn(move || traffic::udp_receive(&rx_sock, None, &stop2, Duration::from_millis(500), false));
    let tx = tb.spawn_in("s1", move || {
        let s = UdpSocket::bind("0.0.0.0:0")?;
        traffic::udp_send(&s, &g, None, None)
    })?;
    let sent = tx.join().map_err(|_| anyhow!("sender panicked"))??;
    let got = rx.join().map_err(|_| anyhow!("receiver panicked"))??;
    Ok((sent, got))
}

/// Low-rate one-way delay error (measured minus `delay`) through a fresh testbed, and the delay
/// box's release lateness meanwhile.
fn delay_error(delay: Dur) -> Result<(DelayError, CounterSnapshot)> {
    let tb = Testbed::up(&Topology::dumbbell(1, Bottleneck::new(None, delay)))?;
    let dst = SocketAddr::V4(SocketAddrV4::new(tb.host("r1")?.addr, 6000));
    let g = UdpGen {
        dst,
        rate: Rate::from_mbps(1),
        size: 200,
        pattern: Pattern::Poisson,
        duration: Dur::from_secs(2),
        seed: 1,
        flow_id: 0,
        realtime: true,
    };
    let (_, got) = stream(&tb, g)?;
    let counters = tb.delaybox_counters().0;
    tb.down()?;
    let err: Sorted = got.delays_ns.iter().map(|&d| (d as f64 - delay.0 as f64) / 1e3).collect();
    // No packet arrived: NaN, which the report prints as such.
    let at = |q| err.quantile(q).unwrap_or(f64::NAN);
    let e = DelayError { packets: err.len(), min: at(0.0), median: at(0.5), p99: at(0.99), max: at(1.0) };
    Ok((e, counters))
}

/// Runs the benchmark (needs root); `progress` gets one line per step.
pub fn bench_delaybox(cfg: &BenchConfig, progress: &mut dyn FnMut(&str)) -> Result<BenchReport> {
    let (path_latency_us, _) = delay_error(Dur::ZERO)?;
    progress(&format!(
        "path latency with delay 0 over {} packets: median {:.1} us, p99 {:.1} us, max {:.1} us",
        path_latency_us.packets, path_latency_us.median, path_latency_us.p99, path_latency_us.max
    ));
    let (delay_error_us, late) = delay_error(cfg.delay)?;
    progress(&format!(
        "delay {:.3} ms: measured minus configured over {} packets: median {:.1} us, p99 {:.1} us, max {:.1} us; box release lateness mean {:.1} us, max {:.1} us",
        cfg.delay.as_millis_f64(),
        delay_error_us.packets,
        delay_error_us.median,
        delay_error_us.p99,
        delay_error_us.max,
        late.mean_lateness().0 as f64 / 1e3,
        late.late_max_ns as f64 / 1e3
    ));
    let mut b = Bottleneck::new(None, cfg.delay);
    b.buffer = Buffer::Packets(100_000);
    let tb = Testbed::up(&Topology::dumbbell(1, b))?;
    let mut steps = Vec::new();
    let mut max_rate = None;
    for (k, &rate) in cfg.rates.iter().enumerate() {
        let c0 = tb.delaybox_counters().0;
        let t0 = tb.tun_drops()?.0;
        let dst = SocketAddr::V4(SocketAddrV4::new(tb.host("r1")?.addr, 6001 + k as u16));
        let g = UdpGen {
            dst,
            rate,
            size: cfg.size,
            pattern: Pattern::Cbr,
            duration: cfg.step,
            seed: 2,
            flow_id: 1,
            realtime: false,
        };
        let (sent, got) = stream(&tb, g)?;
        // Let the delay line drain (a packet may still be waiting out its delay) before reading.
        let drain_until = std::time::Instant::now()
            + std::time::Duration::from_nanos(cfg.delay.0 * 2)
            + std::time::Duration::from_millis(100);
        let mut c = tb.delaybox_counters().0.since(&c0);
        while c.packets_out < c.packets_in && std::time::Instant::now() < drain_until {
            std::thread::sleep(std::time::Duration::from_millis(1));
            c = tb.delaybox_counters().0.since(&c0);
        }
        let own = c.own_drops() + (tb.tun_drops()?.0 - t0);
        // The box passes a rate if it dropped nothing of its own, released every packet it took
        // in, and kept pace (mean release lateness under 100 µs; a box that falls behind delivers
        // everything, late). What the receiving socket then misses on a 2-core machine is
        // reported, not held against the box.
        let box_rate = headroom_core::Bytes(c.bytes_out).per(cfg.step);
        let passed = own == 0
            && c.packets_out >= c.packets_in
            && c.packets_in as f64 >= 0.999 * sent.packets as f64
            && c.mean_lateness() < Dur::from_micros(100);
        let step = RateStep {
            offered: rate,
            sent: sent.rate(),
            received: got.rate(),
            sent_pkts: sent.packets,
            received_pkts: got.packets,
            own_drops: own,
            box_rate,
            box_late_mean: c.mean_lateness(),
            passed,
        };
        progress(&format!(
            "offered {:7.1} Mbit/s: sent {:7.1} Mbit/s ({} pkts); box in {} out {} pkts, released {:7.1} Mbit/s, own drops {}, lateness mean {:.1} us; receiver got {} pkts: {}",
            rate.as_mbps(),
            step.sent.as_mbps(),
            step.sent_pkts,
            c.packets_in,
            c.packets_out,
            box_rate.as_mbps(),
            own,
            step.box_late_mean.0 as f64 / 1e3,
            step.received_pkts,
            if passed { "ok" } else { "FAIL" }
        ));
        if passed {
            max_rate = Some(step.box_rate);
        }
        steps.push(step);
        if !passed {
            break;
        }
    }
    tb.down()?;
    Ok(BenchReport {
        config: cfg.clone(),
        delay_error_us,
        path_latency_us,
        release_late_mean: late.mean_lateness(),
        release_late_p99_bound: late.lateness_quantile_bound(0.99),
        release_late_max: Dur(late.late_max_ns),
        steps,
        max_rate,
    })
}
