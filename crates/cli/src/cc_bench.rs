//! `headroom cc bench`: measurements of headroom's kernel congestion controllers (root).
//!
//! - `ack-cost`: CPU time per Gbit of BECC against the kernel's reno and cubic over loopback,
//!   interleaved rounds in one run (MSS 1448 so that there are ACKs to process).
//! - `sweep`: BECC's paper, Figs. 2 and 10/11 on the testbed: throughput against the maximum
//!   window (TCP_WINDOW_CLAMP + receive buffer at the receiver), Reno and BECC, 10 ms RTT.
//! - `fig12`: BECC's Fig. 12: a 20 Mbit/s UDP stream on for the first phase, off for the
//!   second, on again for the third.
//! - `background`: kernel LEDBAT and TCP-LP against CUBIC on a 50 Mbit/s path.
//!
//! `--no-sack` turns SACK off (net.ipv4.tcp_sack = 0) inside the run's namespaces only, closer
//! to the 1997 stack. Nothing here touches the system default congestion control.
use std::fmt::Write as _;
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use headroom_bpf::{Controller, LoadOptions, Registered};
use headroom_core::stats::median;
use headroom_core::{Bytes, Dur, Rate};
use headroom_testbed::traffic::{self, FlowCounters, Pattern, UdpGen};
use headroom_testbed::{Bottleneck, Buffer, Testbed, Topology};

#[derive(Subcommand, Debug)]
pub enum BenchCmd {
    /// CPU time per Gbit of BECC vs kernel reno and cubic on loopback (interleaved rounds).
    AckCost {
        /// Rounds (each runs every controller once).
        #[arg(long, default_value_t = 5)]
        rounds: u32,
        /// Seconds per transfer.
        #[arg(long, default_value_t = 1.0)]
        seconds: f64,
    },
    /// Throughput vs maximum window, Reno and BECC (the BECC paper's Figs. 2, 10, 11).
    Sweep(SweepArgs),
    /// The BECC paper's Fig. 12: 20 Mbit/s UDP on, off, on again; Reno and BECC.
    Fig12 {
        /// Seconds per phase.
        #[arg(long, default_value_t = 10)]
        phase_seconds: u64,
        /// SACK off in the namespaces.
        #[arg(long)]
        no_sack: bool,
    },
    /// Kernel LEDBAT and TCP-LP against CUBIC on a 50 Mbit/s path.
    Background {
        /// Seconds per run.
        #[arg(long, default_value_t = 15)]
        seconds: u64,
        /// LEDBAT's TARGET, ms.
        #[arg(long, default_value_t = 25)]
        target_ms: u64,
    },
}

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// Bottleneck rate, Mbit/s (Fig. 2 and 10: 45; Fig. 11: 10).
    #[arg(long, default_value_t = 45)]
    rate_mbps: u64,
    /// Maximum windows, KB.
    #[arg(long, value_delimiter = ',', default_value = "30,90,150,210,270,350")]
    windows_kb: Vec<u32>,
    /// Seconds per transfer (the first second is not counted).
    #[arg(long, default_value_t = 8)]
    seconds: u64,
    /// SACK off in the namespaces.
    #[arg(long)]
    no_sack: bool,
}

pub fn run(c: BenchCmd) -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("headroom cc bench needs root (BPF struct_ops, network namespaces)");
    }
    match c {
        BenchCmd::AckCost { rounds, seconds } => ack_cost(rounds, seconds),
        BenchCmd::Sweep(a) => sweep(a),
        BenchCmd::Fig12 { phase_seconds, no_sack } => fig12(phase_seconds, no_sack),
        BenchCmd::Background { seconds, target_ms } => background(seconds, target_ms),
    }
}

fn register(c: Controller, ledbat_target: Option<Duration>) -> Result<Registered> {
    let opts = LoadOptions { name: Some(headroom_bpf::unique_name(c)), ledbat_target };
    headroom_bpf::load(c, &opts).map_err(anyhow::Error::new)
}

pub(crate) fn cpu_time() -> Duration {
    // SAFETY: getrusage into a zeroed struct.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(u.ru_utime) + tv(u.ru_stime)
}

fn set_int(fd: i32, level: i32, opt: i32, v: i32) -> Result<()> {
    headroom_testbed::sys::setsockopt_int(fd, level, opt, v).with_context(|| format!("setsockopt {level}/{opt}"))
}

/// One loopback transfer with `cc`, MSS 1448; returns (bytes, CPU time of this process).
fn loopback_once(cc: &str, secs: f64) -> Result<(u64, Duration)> {
    let l = traffic::tcp_listen_max_window(0, 4 << 20)?;
    set_int(l.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_MAXSEG, 1448)?;
    let port = l.local_addr()?.port();
    let counters = Arc::new(FlowCounters::default());
    let c2 = counters.clone();
    let rx = std::thread::spawn(move || -> Result<()> {
        let (c, _) = l.accept()?;
        let _ = traffic::tcp_sink(c, Some(&c2));
        Ok(())
    });
    let s = traffic::tcp_connect(SocketAddr::from(([127, 0, 0, 1], port)), cc)?;
    let cpu0 = cpu_time();
    let sent = traffic::tcp_bulk_send(&s, Dur::from_secs_f64(secs), None, None)?;
    drop(s);
    rx.join().map_err(|_| anyhow::anyhow!("receiver panicked"))??;
    let cpu = cpu_time() - cpu0;
    Ok((sent.max(counters.bytes.load(Ordering::Relaxed)), cpu))
}

fn ack_cost(rounds: u32, secs: f64) -> Result<()> {
    let becc = register(Controller::Becc, None)?;
    let ccs = ["reno", "cubic", becc.name()];
    let mut per_gbit: Vec<Vec<f64>> = vec![Vec::new(); ccs.len()];
    let mut gbps: Vec<Vec<f64>> = vec![Vec::new(); ccs.len()];
    for r in 0..rounds {
        for (k, cc) in ccs.iter().enumerate() {
            let (bytes, cpu) = loopback_once(cc, secs)?;
            let gbit = bytes as f64 * 8.0 / 1e9;
            per_gbit[k].push(cpu.as_secs_f64() * 1e3 / gbit);
            gbps[k].push(gbit / secs);
            eprintln!("round {r} {cc}: {:.2} Gbit/s, {:.1} ms CPU per Gbit", gbit / secs, per_gbit[k].last().unwrap());
        }
    }
    let med = |v: &[f64]| median(v).unwrap_or(f64::NAN);
    println!("| controller | throughput, median | CPU time per Gbit, median | vs reno (median of per-round ratios) |");
    println!("|---|---|---|---|");
    for (k, cc) in ccs.iter().enumerate() {
        let ratios: Vec<f64> = (0..rounds as usize).map(|i| per_gbit[k][i] / per_gbit[0][i]).collect();
        let label = if k == 2 { "becc (BPF)" } else { cc };
        println!("| {label} | {:.2} Gbit/s | {:.1} ms | {:.3} |", med(&gbps[k]), med(&per_gbit[k]), med(&ratios));
    }
    Ok(())
}

/// What a flow in a testbed run does.
enum Plan {
    Tcp {
        cc: String,
        max_window: Option<u32>,
    },
    /// On between the given seconds.
    Udp {
        rate: Rate,
        on: Vec<(u64, u64)>,
    },
}

struct Flow {
    from: &'static str,
    to: &'static str,
    plan: Plan,
}

/// Per flow: bytes received in each `interval`, and the TCP senders' smoothed RTT (µs) samples.
struct Trace {
    bytes: Vec<Vec<u64>>,
    rtt_us: Vec<Vec<u32>>,
    retrans: Vec<u32>,
}

fn no_sack(tb: &Testbed) -> Result<()> {
    for h in tb.hosts().iter().map(|h| h.name.clone()).collect::<Vec<_>>() {
        let o = tb.exec(&h, &["sysctl", "-qw", "net.ipv4.tcp_sack=0"])?;
        if !o.status.success() {
            bail!("sysctl tcp_sack=0 in {h}: {}", String::from_utf8_lossy(&o.stderr));
        }
    }
    Ok(())
}

fn tcp_info(s: &TcpStream) -> libc::tcp_info {
    // SAFETY: getsockopt into a zeroed tcp_info of the size passed.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    info
}

fn reset(s: &TcpStream) {
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: setsockopt with a linger struct of the size passed.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
}

/// Runs `flows` on `tb` for `secs`, sampling every `interval`.
fn run_flows(tb: &Testbed, flows: &[Flow], secs: u64, interval: Duration) -> Result<Trace> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut counters = Vec::new();
    let mut threads: Vec<JoinHandle<()>> = Vec::new();
    let mut tcp: Vec<(usize, Arc<TcpStream>)> = Vec::new();
    let t0 = Instant::now();
    for (i, f) in flows.iter().enumerate() {
        let port = 5301 + i as u16;
        let dst = SocketAddr::from((tb.host(f.to)?.addr, port));
        let c = Arc::new(FlowCounters::default());
        counters.push(c.clone());
        match &f.plan {
            Plan::Tcp { cc, max_window } => {
                let mw = *max_window;
                let l: TcpListener = tb.run_in(f.to, move || match mw {
                    Some(w) => traffic::tcp_listen_max_window(port, w),
                    None => Ok(TcpListener::bind(("0.0.0.0", port))?),
                })?;
                threads.push(std::thread::spawn(move || {
                    if let Ok((conn, _)) = l.accept() {
                        let _ = traffic::tcp_sink(conn, Some(&c));
                    }
                }));
                let cc = cc.clone();
                let s = Arc::new(tb.run_in(f.from, move || traffic::tcp_connect(dst, &cc))?);
                let (s2, stop2) = (s.clone(), stop.clone());
                threads.push(std::thread::spawn(move || {
                    let _ = traffic::tcp_bulk_send(&s2, Dur::from_secs(3600), None, Some(&stop2));
                }));
                tcp.push((i, s));
            }
            Plan::Udp { rate, on } => {
                let rx = tb.run_in(f.to, move || Ok(UdpSocket::bind(("0.0.0.0", port))?))?;
                let stop_r = stop.clone();
                threads.push(std::thread::spawn(move || {
                    let _ = traffic::udp_receive(&rx, Some(&c), &stop_r, Duration::from_secs(3600), false);
                }));
                for &(a, b) in on {
                    let tx = tb.run_in(f.from, || Ok(UdpSocket::bind("0.0.0.0:0")?))?;
                    let (stop_s, rate) = (stop.clone(), *rate);
                    threads.push(std::thread::spawn(move || {
                        while t0.elapsed() < Duration::from_secs(a) {
                            if stop_s.load(Ordering::Relaxed) {
                                return;
                            }
                            std::thread::sleep(Duration::from_millis(2));
                        }
                        let g = UdpGen {
                            dst,
                            rate,
                            size: 1000,
                            pattern: Pattern::Cbr,
                            duration: Dur::from_secs(b - a),
                            seed: 1,
                            flow_id: i as u32,
                            realtime: false,
                        };
                        let _ = traffic::udp_send(&tx, &g, None, Some(&stop_s));
                    }));
                }
            }
        }
    }
    let mut trace = Trace {
        bytes: vec![Vec::new(); flows.len()],
        rtt_us: vec![Vec::new(); flows.len()],
        retrans: vec![0; flows.len()],
    };
    let mut last: Vec<u64> = vec![0; flows.len()];
    let n = (Duration::from_secs(secs).as_nanos() / interval.as_nanos()) as u32;
    for k in 1..=n {
        let due = t0 + interval * k;
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        for (i, c) in counters.iter().enumerate() {
            let b = c.bytes.load(Ordering::Relaxed);
            trace.bytes[i].push(b - last[i]);
            last[i] = b;
        }
        for (i, s) in &tcp {
            trace.rtt_us[*i].push(tcp_info(s).tcpi_rtt);
        }
    }
    for (i, s) in &tcp {
        trace.retrans[*i] = tcp_info(s).tcpi_total_retrans;
    }
    stop.store(true, Ordering::Relaxed);
    for (_, s) in &tcp {
        reset(s);
        let _ = s.shutdown(std::net::Shutdown::Both);
    }
    drop(tcp);
    for t in threads {
        let _ = t.join();
    }
    Ok(trace)
}

fn mbps(bytes: &[u64], interval: Duration) -> f64 {
    bytes.iter().sum::<u64>() as f64 * 8.0 / 1e6 / (interval.as_secs_f64() * bytes.len().max(1) as f64)
}

/// The BECC paper's path: `rate` Mbit/s, 5 ms each way, a 144 KB bottleneck buffer (the
/// simulator's scenarios/becc/*.toml).
fn becc_path(rate_mbps: u64, pairs: usize) -> Topology {
    let mut b = Bottleneck::new(Some(Rate::from_mbps(rate_mbps)), Dur::from_millis(5));
    b.buffer = Buffer::Bytes(Bytes(144 * 1024));
    Topology::dumbbell(pairs, b)
}

fn sweep(a: SweepArgs) -> Result<()> {
    let becc = register(Controller::Becc, None)?;
    let tb = Testbed::up(&becc_path(a.rate_mbps, 1))?;
    if a.no_sack {
        no_sack(&tb)?;
    }
    let interval = Duration::from_millis(500);
    let mut out = String::new();
    let sack = if a.no_sack { "SACK off" } else { "kernel defaults (SACK, RACK)" };
    let _ = writeln!(out, "{} Mbit/s, 10 ms RTT, 144 KB buffer, {sack}, {} s per point", a.rate_mbps, a.seconds);
    let _ = writeln!(out, "| max window (KB) | Reno (Mbit/s) | Reno retrans | BECC (Mbit/s) | BECC retrans |");
    let _ = writeln!(out, "|---|---|---|---|---|");
    for w in &a.windows_kb {
        let mut cols = Vec::new();
        for cc in ["reno", becc.name()] {
            let flows = [Flow { from: "s1", to: "r1", plan: Plan::Tcp { cc: cc.into(), max_window: Some(w * 1024) } }];
            let t = run_flows(&tb, &flows, a.seconds, interval)?;
            let counted = &t.bytes[0][2.min(t.bytes[0].len())..];
            cols.push((mbps(counted, interval), t.retrans[0]));
            eprintln!("{w} KB {cc}: {:.2} Mbit/s, {} retransmissions", cols.last().unwrap().0, t.retrans[0]);
        }
        let _ = writeln!(out, "| {w} | {:.1} | {} | {:.1} | {} |", cols[0].0, cols[0].1, cols[1].0, cols[1].1);
    }
    print!("{out}");
    Ok(())
}

fn fig12(phase: u64, no_sack_: bool) -> Result<()> {
    let becc = register(Controller::Becc, None)?;
    let tb = Testbed::up(&becc_path(45, 2))?;
    if no_sack_ {
        no_sack(&tb)?;
    }
    let interval = Duration::from_millis(500);
    let per_phase = (phase * 2) as usize;
    println!(
        "45 Mbit/s, 10 ms RTT, 144 KB buffer, max window 1 MB, 20 Mbit/s UDP on 0-{phase} s, off, on from {} s; {}",
        2 * phase,
        if no_sack_ { "SACK off" } else { "kernel defaults" }
    );
    println!("| controller | TCP, UDP on (Mbit/s) | TCP, UDP off | TCP, UDP on again | retrans |");
    println!("|---|---|---|---|---|");
    for cc in ["reno", becc.name()] {
        let flows = [
            Flow { from: "s1", to: "r1", plan: Plan::Tcp { cc: cc.into(), max_window: Some(1 << 20) } },
            Flow {
                from: "s2",
                to: "r2",
                plan: Plan::Udp { rate: Rate::from_mbps(20), on: vec![(0, phase), (2 * phase, 3 * phase)] },
            },
        ];
        let t = run_flows(&tb, &flows, 3 * phase, interval)?;
        let b = &t.bytes[0];
        // Each phase without its first second.
        let ph = |k: usize| mbps(&b[(k * per_phase + 2).min(b.len())..((k + 1) * per_phase).min(b.len())], interval);
        let label = if cc == "reno" { "reno" } else { "becc" };
        println!("| {label} | {:.1} | {:.1} | {:.1} | {} |", ph(0), ph(1), ph(2), t.retrans[0]);
    }
    Ok(())
}

/// The simulator's run of the same path and flows as [`background`]: bottleneck 50 Mbit/s, 10 ms
/// one way, 625 KB DropTail; hosts on 1 Gbit/s, 0 ms links; flows named by their scenario `cc`.
/// Per flow: goodput (Mbit/s) and median RTT (ms), both from `skip_s` on.
fn sim_background(ccs: &[&str], secs: u64, skip_s: f64) -> Result<Vec<(f64, f64)>> {
    let mut src = format!("duration = \"{secs}s\"\nseed = 1\n");
    let link = |a: &str, b: &str| format!("[[link]]\na = \"{a}\"\nb = \"{b}\"\nrate = \"1Gbps\"\ndelay = \"0ms\"\n");
    for (i, _) in ccs.iter().enumerate() {
        src += &link(&format!("s{i}"), "r1");
        src += &link("r2", &format!("d{i}"));
    }
    src += "[[link]]\na = \"r1\"\nb = \"r2\"\nrate = \"50Mbps\"\ndelay = \"10ms\"\nqueue_bytes = \"625KB\"\n";
    for (i, cc) in ccs.iter().enumerate() {
        src += &format!("[[tcp]]\nfrom = \"s{i}\"\nto = \"d{i}\"\ncc = {cc}\n");
    }
    src += "[trace]\ninterval = \"250ms\"\ncwnd = false\n";
    let sc = headroom_sim::Scenario::parse(&src, "cc-bench-background")?;
    let mut w = headroom_sim::World::new(&sc, None).map_err(anyhow::Error::msg)?;
    w.run();
    use headroom_sim::world::Metric;
    Ok((0..ccs.len() as u32)
        .map(|i| {
            let rows = |m: Metric| -> Vec<f64> {
                w.trace
                    .iter()
                    .filter(|r| r.series == i && r.metric == m && r.time.as_secs_f64() > skip_s)
                    .map(|r| r.value)
                    .collect()
            };
            let bps = rows(Metric::ThroughputBps);
            let mean = bps.iter().sum::<f64>() / bps.len().max(1) as f64 / 1e6;
            (mean, median(&rows(Metric::RttMs)).unwrap_or(f64::NAN))
        })
        .collect())
}

fn background(secs: u64, target_ms: u64) -> Result<()> {
    let target = Duration::from_millis(target_ms);
    let ledbat = register(Controller::Ledbat, Some(target))?;
    let lp = register(Controller::Lp, None)?;
    // 50 Mbit/s, 20 ms RTT; a buffer of 100 ms (625 KB) so that a queue of TARGET fits.
    let mut b = Bottleneck::new(Some(Rate::from_mbps(50)), Dur::from_millis(10));
    b.buffer = Buffer::Bytes(Bytes(625_000));
    let tb = Testbed::up(&Topology::dumbbell(2, b))?;
    let interval = Duration::from_millis(250);
    let skip = 8; // the first 2 s
    let tcp = |from, to, cc: &str| Flow { from, to, plan: Plan::Tcp { cc: cc.into(), max_window: None } };
    println!(
        "50 Mbit/s, 20 ms RTT, 625 KB buffer, LEDBAT TARGET {target_ms} ms, {secs} s per run (first 2 s not counted); \
         kernel (testbed) beside the simulator (same path, flows and window of time)"
    );
    println!("| run | flow | kernel Mbit/s | kernel queueing (ms) | sim Mbit/s | sim queueing (ms) |");
    println!("|---|---|---|---|---|---|");
    let sim_ledbat = format!("{{ name = \"ledbat\", target = \"{target_ms}ms\" }}");
    let (mut alone_cubic, mut sim_alone_cubic) = (0.0, 0.0);
    for (label, ccs) in [
        ("alone", vec!["cubic"]),
        ("alone", vec![ledbat.name()]),
        ("alone", vec![lp.name()]),
        ("with CUBIC", vec!["cubic", ledbat.name()]),
        ("with CUBIC", vec!["cubic", lp.name()]),
    ] {
        let flows: Vec<Flow> = ccs
            .iter()
            .enumerate()
            .map(|(i, cc)| if i == 0 { tcp("s1", "r1", cc) } else { tcp("s2", "r2", cc) })
            .collect();
        let names: Vec<&str> = ccs
            .iter()
            .map(|cc| {
                if *cc == ledbat.name() {
                    "ledbat"
                } else if *cc == lp.name() {
                    "lp"
                } else {
                    "cubic"
                }
            })
            .collect();
        let sim_ccs: Vec<&str> = names
            .iter()
            .map(|n| match *n {
                "ledbat" => sim_ledbat.as_str(),
                "lp" => "\"lp\"",
                _ => "\"cubic\"",
            })
            .collect();
        let sim = sim_background(&sim_ccs, secs, skip as f64 * interval.as_secs_f64())?;
        let t = run_flows(&tb, &flows, secs, interval)?;
        for (i, name) in names.iter().enumerate() {
            let r = mbps(&t.bytes[i][skip.min(t.bytes[i].len())..], interval);
            let rtt: Vec<f64> = t.rtt_us[i].iter().skip(skip).map(|&u| u as f64 / 1e3).collect();
            let med = median(&rtt).unwrap_or(f64::NAN);
            let (sr, smed) = sim[i];
            let share = |r: f64, alone: &mut f64| {
                if label == "alone" && *name == "cubic" {
                    *alone = r;
                    String::new()
                } else if *name == "cubic" {
                    format!(" ({:.0} % of alone)", 100.0 * r / *alone)
                } else if label == "alone" {
                    format!(" ({:.0} % of link)", 100.0 * r / 50.0)
                } else {
                    String::new()
                }
            };
            let (k, s) = (share(r, &mut alone_cubic), share(sr, &mut sim_alone_cubic));
            println!("| {label} | {name} | {r:.1}{k} | {:.1} | {sr:.1}{s} | {:.1} |", med - 20.0, smed - 20.0);
        }
    }
    Ok(())
}
