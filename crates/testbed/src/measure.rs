//! Measurements in the simulator's long CSV shape: `time_s,flow,metric,value`.
//!
//! Metrics written by the testbed: `throughput_bps` (per flow, received goodput for TCP and
//! web, received IP bytes for UDP, over each sampling interval), `rtt_ms` (smoothed RTT),
//! `cwnd_bytes`, and the cumulative `retrans_segs` and `data_segs_out` (TCP_INFO of TCP
//! senders), `queue_bytes`, `queue_pkts` and `drops` (flow `bottleneck`: the
//! forward qdisc's backlog and cumulative drops; for UDP flows `drops` is the cumulative count of
//! lost packets), and `page_ms` (web flows: one row per finished page at its finish time). An
//! interrupted `headroom testbed run` adds one row `run,interrupted_after_s` (its partial mark).

use std::io::Write;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Result;
use headroom_core::Dur;

use crate::sys;
use crate::traffic::FlowCounters;

/// The CSV header.
pub const CSV_HEADER: &str = "time_s,flow,metric,value";

/// One CSV row.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub time_s: f64,
    pub flow: String,
    pub metric: &'static str,
    pub value: f64,
}

/// Collects rows from many threads; time 0 is the recorder's creation.
#[derive(Debug)]
pub struct Recorder {
    start_ns: u64,
    rows: Mutex<Vec<Row>>,
}

impl Recorder {
    pub fn new() -> Arc<Recorder> {
        Arc::new(Recorder { start_ns: sys::now_ns(), rows: Mutex::new(Vec::new()) })
    }
    pub fn start_ns(&self) -> u64 {
        self.start_ns
    }
    /// Seconds since the start for a `CLOCK_MONOTONIC` instant.
    pub fn time_of(&self, ns: u64) -> f64 {
        ns.saturating_sub(self.start_ns) as f64 * 1e-9
    }
    pub fn push(&self, time_s: f64, flow: &str, metric: &'static str, value: f64) {
        if let Ok(mut r) = self.rows.lock() {
            r.push(Row { time_s, flow: flow.to_string(), metric, value });
        }
    }
    pub fn rows(&self) -> Vec<Row> {
        let mut rows = self.rows.lock().map(|r| r.clone()).unwrap_or_default();
        rows.sort_by(|a, b| a.time_s.total_cmp(&b.time_s));
        rows
    }
    /// Writes the header and all rows, sorted by time.
    pub fn write_csv(&self, w: &mut dyn Write) -> Result<()> {
        writeln!(w, "{CSV_HEADER}")?;
        for r in self.rows() {
            writeln!(w, "{:.6},{},{},{}", r.time_s, r.flow, r.metric, r.value)?;
        }
        Ok(())
    }
}

/// Something the sampler reads every interval.
pub enum Probe {
    /// `throughput_bps` from the byte counter (and `drops` from its `lost` counter if `udp`).
    Throughput { flow: String, counters: Arc<FlowCounters>, udp: bool },
    /// `rtt_ms`, `cwnd_bytes`, `retrans_segs`, `data_segs_out` of a TCP sender socket.
    TcpInfo { flow: String, socket: Arc<TcpStream> },
    /// `queue_bytes`, `queue_pkts`, `drops` of a root qdisc (and of the link behind it).
    /// The qdisc of `dev` in `netns`, plus the delay-box link's queue behind it when `link`.
    Queue { flow: String, netns: String, dev: String, link: Option<std::sync::Arc<crate::delaybox::Counters>> },
}

/// A thread sampling probes every `interval` until stopped.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    probes: Arc<Mutex<Vec<Probe>>>,
    thread: Option<JoinHandle<()>>,
}

impl Sampler {
    pub fn start(rec: Arc<Recorder>, interval: Dur) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let probes: Arc<Mutex<Vec<Probe>>> = Arc::new(Mutex::new(Vec::new()));
        let (s, p) = (stop.clone(), probes.clone());
        let thread = std::thread::spawn(move || sample_loop(&rec, interval, &s, &p));
        Sampler { stop, probes, thread: Some(thread) }
    }
    pub fn add(&self, p: Probe) {
        if let Ok(mut v) = self.probes.lock() {
            v.push(p);
        }
    }
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop();
    }
}

fn sample_loop(rec: &Recorder, interval: Dur, stop: &AtomicBool, probes: &Mutex<Vec<Probe>>) {
    sys::precise_timers();
    let mut last_bytes: std::collections::HashMap<String, (u64, u64)> = Default::default();
    let mut next = sys::now_ns() + interval.0;
    while !stop.load(Ordering::Relaxed) {
        let now = sys::now_ns();
        if next > now {
            std::thread::sleep(Duration::from_nanos((next - now).min(50_000_000)));
            continue;
        }
        next += interval.0;
        let t_ns = sys::now_ns();
        let t = rec.time_of(t_ns);
        let Ok(probes) = probes.lock() else { return };
        for p in probes.iter() {
            match p {
                Probe::Throughput { flow, counters, udp } => {
                    let b = counters.bytes.load(Ordering::Relaxed);
                    let (pb, pt) = last_bytes.get(flow).copied().unwrap_or((0, rec.start_ns()));
                    let rate = (b - pb) as f64 * 8e9 / (t_ns - pt).max(1) as f64;
                    last_bytes.insert(flow.clone(), (b, t_ns));
                    rec.push(t, flow, "throughput_bps", rate);
                    if *udp {
                        rec.push(t, flow, "drops", counters.lost.load(Ordering::Relaxed) as f64);
                    }
                }
                Probe::TcpInfo { flow, socket } => {
                    if let Ok(i) = sys::tcp_info(socket.as_raw_fd()) {
                        rec.push(t, flow, "rtt_ms", i.rtt_us as f64 / 1000.0);
                        rec.push(t, flow, "cwnd_bytes", i.cwnd_bytes as f64);
                        rec.push(t, flow, "retrans_segs", i.total_retrans as f64);
                        rec.push(t, flow, "data_segs_out", i.data_segs_out as f64);
                    }
                }
                Probe::Queue { flow, netns, dev, link } => {
                    if let Ok(mut q) = crate::bed::queue_stats(netns, dev) {
                        if let Some(l) = link {
                            q = q.with_link(&l.snapshot());
                        }
                        rec.push(t, flow, "queue_bytes", q.backlog_bytes as f64);
                        rec.push(t, flow, "queue_pkts", q.backlog_pkts as f64);
                        rec.push(t, flow, "drops", q.drops as f64);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_shape() {
        let r = Recorder::new();
        r.push(0.2, "f", "throughput_bps", 5e6);
        r.push(0.1, "bottleneck", "queue_pkts", 3.0);
        let mut out = Vec::new();
        r.write_csv(&mut out).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert_eq!(
            s,
            "time_s,flow,metric,value\n0.100000,bottleneck,queue_pkts,3\n0.200000,f,throughput_bps,5000000\n"
        );
    }
}
