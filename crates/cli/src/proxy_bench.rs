//! `headroom proxy-bench`: the proxy's cost on loopback, each figure beside direct TCP measured
//! in the same run (interleaved repetitions, medians): single-connection throughput, aggregate
//! throughput of many connections, the proxy process's CPU per Gbit/s, the added round-trip
//! latency of one relay hop at low load, and the proxy's memory per idle connection.
//!
//! The proxy runs as a child process (`headroom proxy`) so that its CPU time and memory are its
//! own (`/proc/PID/stat`, `/proc/PID/status`); senders and sinks are threads of this process.

use anyhow::{bail, Context};
use clap::Args;
use headroom_core::units::{parse_positive, Dur};
use serde_json::json;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct ProxyBenchArgs {
    /// Length of one throughput run.
    #[arg(long, default_value = "1s", value_parser = parse_positive::<Dur>)]
    pub run: Dur,
    /// Interleaved repetitions of each throughput run (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub repeat: usize,
    /// Connections of the aggregate run.
    #[arg(long, default_value_t = 100)]
    pub connections: usize,
    /// Round trips of the latency run.
    #[arg(long, default_value_t = 5000)]
    pub round_trips: usize,
    /// Idle connections held for the memory figure (0: skip). Each takes two descriptors in
    /// the proxy and two in this process, so RLIMIT_NOFILE bounds it (9,000 fits a hard limit
    /// of 20,000).
    #[arg(long, default_value_t = 9_000)]
    pub idle: usize,
    /// Proxy worker threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// One JSON object on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Another `headroom` binary (e.g. an older build) whose proxy (splice mode) is measured
    /// in the same interleaved runs: a before/after comparison on a noisy machine.
    #[arg(long)]
    pub compare: Option<std::path::PathBuf>,
}

/// The proxy under test, a child `headroom proxy` process.
struct ProxyProc {
    child: Child,
    addr: SocketAddr,
}

impl ProxyProc {
    fn start(to: SocketAddr, mode: &str, threads: usize) -> anyhow::Result<ProxyProc> {
        ProxyProc::start_bin(&std::env::current_exe()?, to, mode, threads)
    }
    fn start_bin(exe: &std::path::Path, to: SocketAddr, mode: &str, threads: usize) -> anyhow::Result<ProxyProc> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
        let child = Command::new(exe)
            .args(["proxy", "--listen", &addr.to_string(), "--to", &to.to_string(), "--mode", mode])
            .args(["--threads", &threads.to_string(), "--max-conns", "1000000", "--max-per-source", "1000000"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting the proxy")?;
        let mut p = ProxyProc { child, addr };
        let t = Instant::now();
        while TcpStream::connect(addr).is_err() {
            if t.elapsed() > Duration::from_secs(5) || p.child.try_wait()?.is_some() {
                bail!("the proxy did not start listening on {addr}");
            }
            thread::sleep(Duration::from_millis(10));
        }
        Ok(p)
    }
    fn pid(&self) -> u32 {
        self.child.id()
    }
    /// user + system CPU seconds so far.
    fn cpu_s(&self) -> anyhow::Result<f64> {
        let s = std::fs::read_to_string(format!("/proc/{}/stat", self.pid()))?;
        let after = s.rsplit_once(')').context("stat format")?.1;
        let f: Vec<&str> = after.split_whitespace().collect();
        // Fields 14 and 15 of stat (1-based) are utime and stime; `after` starts at field 3.
        let ticks: f64 = f[11].parse::<f64>()? + f[12].parse::<f64>()?;
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        Ok(ticks / hz)
    }
    fn rss_bytes(&self) -> anyhow::Result<u64> {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))?;
        let l = s.lines().find(|l| l.starts_with("VmRSS:")).context("no VmRSS")?;
        let kb: u64 = l.split_whitespace().nth(1).context("VmRSS format")?.parse()?;
        Ok(kb * 1024)
    }
}

impl Drop for ProxyProc {
    fn drop(&mut self) {
        // SAFETY: signalling the child we started, by its pid.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let _ = self.child.wait();
    }
}

/// A server thread running `f` on each connection (in a thread each).
fn server(f: fn(TcpStream)) -> anyhow::Result<SocketAddr> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    let a = l.local_addr()?;
    thread::spawn(move || {
        for s in l.incoming().flatten() {
            thread::spawn(move || f(s));
        }
    });
    Ok(a)
}

fn sink(mut s: TcpStream) {
    let mut b = vec![0; 1 << 18];
    while matches!(s.read(&mut b), Ok(n) if n > 0) {}
}

fn echo(mut s: TcpStream) {
    let _ = s.set_nodelay(true);
    let mut b = [0; 64];
    while s.read_exact(&mut b).is_ok() {
        if s.write_all(&b).is_err() {
            return;
        }
    }
}

fn hold(mut s: TcpStream) {
    let _ = s.read(&mut [0; 1]);
}

/// Sends as fast as possible over `conns` connections to `to` for `run`; returns Gbit/s.
fn throughput(to: SocketAddr, conns: usize, run: Duration) -> anyhow::Result<f64> {
    let stop = Arc::new(AtomicBool::new(false));
    let bytes = Arc::new(AtomicU64::new(0));
    let mut hs = Vec::new();
    for _ in 0..conns {
        let mut s = TcpStream::connect(to)?;
        let (stop, bytes) = (stop.clone(), bytes.clone());
        hs.push(thread::spawn(move || {
            let b = vec![0x5a; 1 << 20];
            while !stop.load(Relaxed) {
                match s.write(&b) {
                    Ok(n) => bytes.fetch_add(n as u64, Relaxed),
                    Err(_) => break,
                };
            }
            let _ = s.shutdown(Shutdown::Write);
        }));
    }
    // Count from a warmed-up start.
    thread::sleep(Duration::from_millis(100));
    let (b0, t0) = (bytes.load(Relaxed), Instant::now());
    thread::sleep(run);
    let (b1, t1) = (bytes.load(Relaxed), t0.elapsed());
    stop.store(true, Relaxed);
    for h in hs {
        let _ = h.join();
    }
    Ok((b1 - b0) as f64 * 8.0 / t1.as_secs_f64() / 1e9)
}

/// Median round-trip time of 64-byte messages, µs.
fn latency(to: SocketAddr, n: usize) -> anyhow::Result<f64> {
    let mut s = TcpStream::connect(to)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut b = [7u8; 64];
    let mut rtts = Vec::with_capacity(n);
    for i in 0..n + 100 {
        let t = Instant::now();
        s.write_all(&b)?;
        s.read_exact(&mut b)?;
        if i >= 100 {
            rtts.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    Ok(median(&mut rtts))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Throughput direct and through splice and copy proxies, interleaved; medians and the
/// proxies' CPU seconds per Gbit.
struct ThroughputResult {
    direct: f64,
    splice: f64,
    copy: f64,
    /// Proxy CPU seconds per second per Gbit/s (cores per Gbit/s), splice and copy.
    splice_cpu: f64,
    copy_cpu: f64,
    /// The --compare binary's splice proxy: (Gbit/s, cores per Gbit/s).
    compare: Option<(f64, f64)>,
}

fn throughput_set(
    sinkaddr: SocketAddr,
    splice: &ProxyProc,
    copy: &ProxyProc,
    compare: Option<&ProxyProc>,
    conns: usize,
    a: &ProxyBenchArgs,
) -> anyhow::Result<ThroughputResult> {
    let run = Duration::from_nanos(a.run.as_nanos());
    let (mut d, mut s, mut c, mut sc, mut cc) = (vec![], vec![], vec![], vec![], vec![]);
    let (mut o, mut oc) = (vec![], vec![]);
    for _ in 0..a.repeat {
        d.push(throughput(sinkaddr, conns, run)?);
        let mut procs = vec![(splice, &mut s, &mut sc), (copy, &mut c, &mut cc)];
        if let Some(p) = compare {
            procs.push((p, &mut o, &mut oc));
        }
        for (p, v, cpu) in procs {
            let (c0, t0) = (p.cpu_s()?, Instant::now());
            let g = throughput(p.addr, conns, run)?;
            let cores = (p.cpu_s()? - c0) / t0.elapsed().as_secs_f64();
            v.push(g);
            cpu.push(cores / g);
        }
    }
    Ok(ThroughputResult {
        direct: median(&mut d),
        splice: median(&mut s),
        copy: median(&mut c),
        splice_cpu: median(&mut sc),
        copy_cpu: median(&mut cc),
        compare: compare.map(|_| (median(&mut o), median(&mut oc))),
    })
}

/// The kernel's TCP memory in pages (/proc/net/sockstat "TCP: ... mem N").
fn tcp_mem_pages() -> anyhow::Result<u64> {
    let s = std::fs::read_to_string("/proc/net/sockstat")?;
    let l = s.lines().find(|l| l.starts_with("TCP:")).context("no TCP line")?;
    let w: Vec<&str> = l.split_whitespace().collect();
    let i = w.iter().position(|x| *x == "mem").context("no mem")?;
    Ok(w[i + 1].parse()?)
}

/// Opens `n` idle connections through the proxy; returns (proxy RSS bytes per connection,
/// kernel TCP memory bytes per connection, seconds to open them).
fn idle_memory(p: &ProxyProc, n: usize) -> anyhow::Result<(f64, f64, f64)> {
    let rss0 = p.rss_bytes()?;
    let mem0 = tcp_mem_pages()?;
    let t = Instant::now();
    let mut held = Vec::with_capacity(n);
    for i in 0..n {
        held.push(TcpStream::connect(p.addr).with_context(|| format!("idle connection {i}"))?);
    }
    // Let the proxy connect upstream for all of them (its RSS stops growing).
    let mut last = 0;
    for _ in 0..100 {
        thread::sleep(Duration::from_millis(100));
        let r = p.rss_bytes()?;
        if r == last {
            break;
        }
        last = r;
    }
    let open_s = t.elapsed().as_secs_f64();
    let rss = p.rss_bytes()?.saturating_sub(rss0) as f64 / n as f64;
    let page = 4096.0;
    let kmem = tcp_mem_pages()?.saturating_sub(mem0) as f64 * page / n as f64;
    drop(held);
    Ok((rss, kmem, open_s))
}

pub fn run(a: ProxyBenchArgs) -> anyhow::Result<()> {
    if a.repeat == 0 || a.connections == 0 || a.round_trips == 0 {
        bail!("--repeat, --connections and --round-trips must be positive");
    }
    let nofile = headroom_proxy::sock::raise_nofile_limit()?;
    if a.idle > 0 && (a.idle as u64) * 2 + 500 > nofile {
        bail!("--idle {} needs {} file descriptors here (limit {nofile}); lower it", a.idle, a.idle * 2 + 500);
    }
    let sinkaddr = server(sink)?;
    let echoaddr = server(echo)?;
    let holdaddr = server(hold)?;
    let (ps, pc) = (ProxyProc::start(sinkaddr, "splice", a.threads)?, ProxyProc::start(sinkaddr, "copy", a.threads)?);
    let po = a.compare.as_deref().map(|b| ProxyProc::start_bin(b, sinkaddr, "splice", a.threads)).transpose()?;
    let single = throughput_set(sinkaddr, &ps, &pc, po.as_ref(), 1, &a)?;
    let many = throughput_set(sinkaddr, &ps, &pc, po.as_ref(), a.connections, &a)?;
    drop((ps, pc, po));
    let pe = ProxyProc::start(echoaddr, "splice", a.threads)?;
    let peo = a.compare.as_deref().map(|b| ProxyProc::start_bin(b, echoaddr, "splice", a.threads)).transpose()?;
    let (mut ld, mut lp, mut lo) = (vec![], vec![], vec![]);
    for _ in 0..a.repeat {
        ld.push(latency(echoaddr, a.round_trips / a.repeat.max(1))?);
        lp.push(latency(pe.addr, a.round_trips / a.repeat.max(1))?);
        if let Some(p) = &peo {
            lo.push(latency(p.addr, a.round_trips / a.repeat.max(1))?);
        }
    }
    drop((pe, peo));
    let (lat_direct, lat_proxy) = (median(&mut ld), median(&mut lp));
    let lat_compare = (!lo.is_empty()).then(|| median(&mut lo));
    let idle = if a.idle > 0 {
        let ph = ProxyProc::start(holdaddr, "splice", a.threads)?;
        Some(idle_memory(&ph, a.idle)?)
    } else {
        None
    };
    let v = json!({
        "run_s": a.run.as_secs_f64(), "repeat": a.repeat, "threads": a.threads,
        "single": {"direct_gbps": single.direct, "splice_gbps": single.splice, "copy_gbps": single.copy,
                   "splice_fraction": single.splice / single.direct, "copy_fraction": single.copy / single.direct,
                   "splice_cores_per_gbps": single.splice_cpu, "copy_cores_per_gbps": single.copy_cpu},
        "aggregate": {"connections": a.connections, "direct_gbps": many.direct, "splice_gbps": many.splice,
                      "copy_gbps": many.copy, "splice_fraction": many.splice / many.direct,
                      "copy_fraction": many.copy / many.direct,
                      "splice_cores_per_gbps": many.splice_cpu, "copy_cores_per_gbps": many.copy_cpu},
        "latency": {"direct_rtt_us": lat_direct, "proxy_rtt_us": lat_proxy, "added_rtt_us": lat_proxy - lat_direct,
                    "compare_rtt_us": lat_compare},
        "compare": {"binary": a.compare.as_ref().map(|p| p.display().to_string()),
                    "single_splice_gbps": single.compare.map(|c| c.0), "single_splice_cores_per_gbps": single.compare.map(|c| c.1),
                    "aggregate_splice_gbps": many.compare.map(|c| c.0), "aggregate_splice_cores_per_gbps": many.compare.map(|c| c.1)},
        "idle": idle.map(|(rss, k, s)| json!({"connections": a.idle, "proxy_rss_bytes_per_conn": rss,
                                                "kernel_tcp_bytes_per_conn": k, "open_s": s})),
    });
    if a.json {
        println!("{v}");
        return Ok(());
    }
    println!(
        "proxy-bench: loopback, medians of {} interleaved runs of {} s, proxy {} thread(s)",
        a.repeat,
        a.run.as_secs_f64(),
        a.threads
    );
    for (name, r, n) in [("1 connection", &single, 1), ("aggregate", &many, a.connections)] {
        println!(
            "{name:>13} ({n:>3} conn): direct {:6.2} Gbit/s | splice {:6.2} Gbit/s = {:5.1} % ({:.3} cores per Gbit/s) | copy {:6.2} Gbit/s = {:5.1} % ({:.3} cores per Gbit/s)",
            r.direct, r.splice, 100.0 * r.splice / r.direct, r.splice_cpu, r.copy, 100.0 * r.copy / r.direct, r.copy_cpu
        );
        if let Some((g, cpu)) = r.compare {
            println!(
                "{:>13}  --compare binary, splice: {g:6.2} Gbit/s = {:5.1} % ({cpu:.3} cores per Gbit/s)",
                "",
                100.0 * g / r.direct
            );
        }
    }
    println!(
        "      latency (64 B ping-pong, median RTT): direct {lat_direct:.1} µs, through one proxy {lat_proxy:.1} µs: added {:.1} µs per hop (round trip)",
        lat_proxy - lat_direct
    );
    if let Some(l) = lat_compare {
        println!(
            "      latency through the --compare binary's proxy: {l:.1} µs: added {:.1} µs per hop",
            l - lat_direct
        );
    }
    if let Some((rss, k, s)) = idle {
        println!(
            "         idle: {} connections through the proxy (opened in {s:.1} s): proxy RSS {rss:.0} B per connection, kernel TCP memory {k:.0} B per connection",
            a.idle
        );
    }
    Ok(())
}
