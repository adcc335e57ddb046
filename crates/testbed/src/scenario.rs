//! `headroom testbed run FILE`: bring a scenario's testbed up, run its flows, sample, tear down.
//!
//! Receivers start first (all at time 0), each flow's sender at its `start`; every flow stops at
//! `start + duration` (default: the run's end). Ports are 5001, 5002, ... in flow order. The
//! sampler writes `throughput_bps` for every flow, TCP_INFO metrics for TCP senders, and the
//! forward bottleneck queue as flow `bottleneck`.

use std::collections::HashMap;
use std::net::{SocketAddr, SocketAddrV4, TcpListener, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, Result};
use headroom_core::{Bytes, Dur, Rate};

use crate::bed::{Testbed, DELAY_DEV};
use crate::measure::{Probe, Recorder, Sampler};
use crate::sys;
use crate::topology::{FlowKind, PatternKind, Scenario};
use crate::traffic::{self, FlowCounters, Pattern, UdpGen, WebClient};

/// One flow's outcome.
#[derive(Clone, Debug)]
pub struct FlowSummary {
    pub name: String,
    pub kind: FlowKind,
    /// Received bytes per second over the flow's active time.
    pub throughput: Rate,
    /// Kind-specific details (loss, page times).
    pub detail: String,
}

/// Result of a scenario run.
pub struct RunOutcome {
    pub prefix: String,
    pub recorder: Arc<Recorder>,
    pub flows: Vec<FlowSummary>,
    /// `Some(t)` when `interrupt` stopped the run `t` after its start: the rows and summaries
    /// cover only that time (throughputs are over each flow's active time within it).
    pub interrupted_after: Option<Dur>,
    /// The forward bottleneck link's counters at the end (its queue drops, the delay box's own
    /// drops and release lateness), when the box runs a link.
    pub forward_link: Option<crate::delaybox::CounterSnapshot>,
    /// Packets the TUN devices dropped because the delay box did not read them in time
    /// (forward, reverse): the box's own input drops.
    pub tun_drops: (u64, u64),
}

fn wait_until(t_ns: u64, stop: &AtomicBool) -> bool {
    while sys::now_ns() < t_ns {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        std::thread::sleep(Duration::from_nanos((t_ns - sys::now_ns().min(t_ns)).min(20_000_000)));
    }
    true
}

/// Registers the headroom kernel controllers `s`'s flows name that the kernel lacks; returns
/// them (held for the run) and the map from the scenario's name to the registered name.
fn register_kernel_cc(s: &Scenario) -> Result<(Vec<headroom_bpf::Registered>, HashMap<String, String>)> {
    let mut held = Vec::new();
    let mut names = HashMap::new();
    let available = headroom_bpf::available().map_err(|e| anyhow!(e))?;
    for cc in s.flows.iter().filter_map(|f| f.cc.as_deref()) {
        let Some(c) = headroom_bpf::Controller::parse(cc) else { continue };
        if available.iter().any(|a| a == cc) || names.contains_key(cc) {
            continue;
        }
        let name = headroom_bpf::unique_name(c);
        let opts = headroom_bpf::LoadOptions { name: Some(name.clone()), ..Default::default() };
        held.push(headroom_bpf::load(c, &opts).map_err(|e| anyhow!("cc = \"{cc}\": {e}"))?);
        names.insert(cc.to_owned(), name);
    }
    Ok((held, names))
}

/// Runs `s` to completion, or until `interrupt` is set: then the flows stop, the testbed is torn
/// down and the outcome covers what was measured so far ([`RunOutcome::interrupted_after`]).
pub fn run(s: &Scenario, interrupt: &AtomicBool) -> Result<RunOutcome> {
    run_with(s, interrupt, |_| Ok(()))
}

/// [`run`], with `setup` called on the testbed once it is up and before any flow starts (to
/// change a host's sysctls or offloads, say); an error from it tears the testbed down.
pub fn run_with(
    s: &Scenario,
    interrupt: &AtomicBool,
    setup: impl FnOnce(&Testbed) -> Result<()>,
) -> Result<RunOutcome> {
    let tb = Testbed::up(&s.topology())?;
    setup(&tb)?;
    let rec = Recorder::new();
    let mut sampler = Sampler::start(rec.clone(), s.run.sample);
    sampler.add(Probe::Queue {
        flow: "bottleneck".into(),
        netns: tb.namespaces()[0].clone(),
        dev: DELAY_DEV.into(),
        link: tb.forward_link_counters(),
    });
    let t0 = rec.start_ns();
    let run_end = t0 + s.run.duration.0;
    let stop = Arc::new(AtomicBool::new(false));
    let tcp_sockets = Arc::new(Mutex::new(Vec::new()));
    let mut receivers: Vec<JoinHandle<Result<String>>> = Vec::new();
    let mut senders: Vec<JoinHandle<Result<String>>> = Vec::new();
    let mut counters = Vec::new();
    // headroom's kernel controllers (becc, lp, ledbat) that a flow names and the kernel does not
    // have: registered for this run under unique names, unregistered when `_kernel_cc` drops.
    let (_kernel_cc, cc_names) = register_kernel_cc(s)?;
    for (i, f) in s.flows.iter().enumerate() {
        let name = s.flow_name(i);
        let port = 5001 + i as u16;
        let dst = SocketAddr::V4(SocketAddrV4::new(tb.host(&f.to)?.addr, port));
        let c = Arc::new(FlowCounters::default());
        counters.push(c.clone());
        sampler.add(Probe::Throughput { flow: name.clone(), counters: c.clone(), udp: f.kind == FlowKind::Udp });
        let start_ns = t0 + f.start.0;
        let end_ns = f.duration.map_or(run_end, |d| (start_ns + d.0).min(run_end));
        let stop_r = stop.clone();
        // receiver side
        match f.kind {
            FlowKind::Tcp => {
                let l = tb.run_in(&f.to, move || Ok(TcpListener::bind(("0.0.0.0", port))?))?;
                let c = c.clone();
                receivers.push(std::thread::spawn(move || {
                    l.set_nonblocking(true)?;
                    loop {
                        match l.accept() {
                            Ok((conn, _)) => {
                                conn.set_nonblocking(false)?;
                                let n = traffic::tcp_sink(conn, Some(&c))?;
                                return Ok(format!("received {} bytes", n));
                            }
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                                if stop_r.load(Ordering::Relaxed) {
                                    return Ok("no connection".into());
                                }
                                std::thread::sleep(Duration::from_millis(5));
                            }
                            Err(e) => return Err(e.into()),
                        }
                    }
                }));
            }
            FlowKind::Udp => {
                let sock = tb.run_in(&f.to, move || Ok(UdpSocket::bind(("0.0.0.0", port))?))?;
                let c = c.clone();
                receivers.push(std::thread::spawn(move || {
                    let r = traffic::udp_receive(&sock, Some(&c), &stop_r, Duration::from_secs(3600), false)?;
                    let d = &r.delays_ns;
                    let mean_owd = if d.is_empty() { 0.0 } else { d.iter().sum::<u64>() as f64 / d.len() as f64 / 1e6 };
                    Ok(format!(
                        "{} pkts, loss {:.3}%, mean one-way delay {:.3} ms",
                        r.packets,
                        100.0 * r.loss_rate(),
                        mean_owd
                    ))
                }));
            }
            FlowKind::Web => {
                let l = tb.run_in(&f.to, move || Ok(TcpListener::bind(("0.0.0.0", port))?))?;
                receivers.push(std::thread::spawn(move || {
                    traffic::web_serve(l, stop_r)?;
                    Ok(String::new())
                }));
            }
        }
        // sender side
        let stop_s = stop.clone();
        let mut f2 = f.clone();
        if let Some(n) = f2.cc.as_ref().and_then(|c| cc_names.get(c)) {
            f2.cc = Some(n.clone());
        }
        let rec2 = rec.clone();
        let socks = tcp_sockets.clone();
        let name2 = name.clone();
        let flow_seed = f.seed.unwrap_or(i as u64 + 1);
        senders.push(tb.spawn_in(&f.from, move || {
            if !wait_until(start_ns, &stop_s) {
                return Ok("not started".into());
            }
            let dur = Dur(end_ns.saturating_sub(sys::now_ns()));
            match f2.kind {
                FlowKind::Tcp => {
                    let cc = f2.cc.clone().unwrap_or_else(|| "cubic".into());
                    let s = Arc::new(traffic::tcp_connect(dst, &cc)?);
                    socks.lock().map_err(|_| anyhow!("poisoned"))?.push((name2.clone(), s.clone()));
                    let n = traffic::tcp_bulk_send(&s, dur, None, Some(&stop_s))?;
                    Ok(format!("cc {cc}, sent {n} bytes"))
                }
                FlowKind::Udp => {
                    let sock = UdpSocket::bind("0.0.0.0:0")?;
                    let pattern = match f2.pattern.unwrap_or(PatternKind::Cbr) {
                        PatternKind::Cbr => Pattern::Cbr,
                        PatternKind::Poisson => Pattern::Poisson,
                        PatternKind::Onoff => Pattern::OnOff {
                            on: f2.on.unwrap_or(Dur::from_secs(1)),
                            off: f2.off.unwrap_or(Dur::from_secs(1)),
                        },
                    };
                    let g = UdpGen {
                        dst,
                        rate: f2.rate.unwrap_or(Rate::from_mbps(1)),
                        size: f2.size.unwrap_or(Bytes(1200)).0 as usize,
                        pattern,
                        duration: dur,
                        seed: flow_seed,
                        flow_id: i as u32,
                        realtime: true,
                    };
                    let r = traffic::udp_send(&sock, &g, None, Some(&stop_s))?;
                    Ok(format!("sent {} pkts at {:.3} Mbit/s", r.packets, r.rate().as_mbps()))
                }
                FlowKind::Web => {
                    let w = WebClient {
                        server: dst,
                        objects: f2.objects.unwrap_or(5),
                        object_mean: f2.object_mean.unwrap_or(Bytes(20_000)),
                        object_shape: f2.object_shape.unwrap_or(1.5),
                        think: f2.think.unwrap_or(Dur::from_millis(500)),
                        duration: dur,
                        seed: flow_seed,
                    };
                    let c2 = c.clone();
                    let pages = traffic::web_client(&w, Some(&c2), &mut |p| {
                        rec2.push(rec2.time_of(p.done_ns), &name2, "page_ms", p.time.as_millis_f64());
                    })?;
                    let mut ms: Vec<f64> = pages.iter().map(|p| p.time.as_millis_f64()).collect();
                    ms.sort_by(f64::total_cmp);
                    let med = ms.get(ms.len() / 2).copied().unwrap_or(0.0);
                    Ok(format!("{} pages, median page time {:.1} ms", pages.len(), med))
                }
            }
        })?);
    }
    // TCP_INFO probes once the senders have connected
    let mut registered = 0;
    let mut interrupted_ns = None;
    while sys::now_ns() < run_end {
        if interrupt.load(Ordering::Relaxed) {
            interrupted_ns = Some(sys::now_ns());
            break;
        }
        if let Ok(socks) = tcp_sockets.lock() {
            for (name, s) in socks.iter().skip(registered) {
                sampler.add(Probe::TcpInfo { flow: name.clone(), socket: s.clone() });
            }
            registered = socks.len();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    sampler.stop();
    let interrupted_after = interrupted_ns.map(|t| Dur(t.saturating_sub(t0)));
    // A flow cut short by an interruption may fail (a peer gone mid-transfer): that is a note on
    // its partial result, not an error of the run.
    let join = |h: JoinHandle<Result<String>>, side: &str| -> Result<String> {
        match h.join().map_err(|_| anyhow!("{side} panicked"))? {
            Err(e) if interrupted_after.is_some() => Ok(format!("stopped by the interruption ({e:#})")),
            r => r,
        }
    };
    let mut send_notes = Vec::new();
    for h in senders {
        send_notes.push(join(h, "sender")?);
    }
    let mut recv_notes = Vec::new();
    for h in receivers {
        recv_notes.push(join(h, "receiver")?);
    }
    let prefix = tb.prefix().to_string();
    let forward_link = tb.forward_link_counters().map(|c| c.snapshot());
    let tun_drops = tb.tun_drops()?;
    tb.down()?;
    let horizon = interrupted_after.unwrap_or(s.run.duration).min(s.run.duration);
    let mut flows = Vec::new();
    for (i, f) in s.flows.iter().enumerate() {
        let active = f.duration.unwrap_or(horizon).min(horizon.saturating_sub(f.start));
        let bytes = counters[i].bytes.load(Ordering::Relaxed);
        flows.push(FlowSummary {
            name: s.flow_name(i),
            kind: f.kind,
            throughput: if active.0 == 0 { Rate::ZERO } else { Bytes(bytes).per(active) },
            detail: format!("{}; {}", send_notes[i], recv_notes[i]).trim_end_matches("; ").to_string(),
        });
    }
    Ok(RunOutcome { prefix, recorder: rec, flows, interrupted_after, forward_link, tun_drops })
}
