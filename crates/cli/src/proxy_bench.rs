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
    /// Idle connections held for the memory figure (0: skip). The client ends are held by a
    /// child process, the upstream ends by this one, and the proxy's two sockets per
    /// connection by enough worker processes (--idle-workers) that none exceeds RLIMIT_NOFILE.
    #[arg(long, default_value_t = 9_000)]
    pub idle: usize,
    /// Proxy worker processes (`proxy --workers`) of the idle run (default: the fewest whose
    /// share of two descriptors per connection fits RLIMIT_NOFILE; 2 for 10,000 here).
    #[arg(long)]
    pub idle_workers: Option<usize>,
    /// Only the idle run (no throughput or latency runs).
    #[arg(long)]
    pub idle_only: bool,
    /// Internal: be the idle run's client process, holding --idle connections to this address.
    #[arg(long, hide = true)]
    pub hold_clients: Option<SocketAddr>,
    /// Proxy worker threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Kernel congestion control of every socket of the throughput runs, direct and through
    /// the proxies (the senders', the sinks' and both legs of the proxies': `--cc`); default:
    /// the system's. Same for both sides of each comparison.
    #[arg(long)]
    pub cc: Option<String>,
    /// One JSON object on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Another `headroom` binary (e.g. an older build) whose proxy (splice mode) is measured
    /// in the same interleaved runs: a before/after comparison on a noisy machine.
    #[arg(long)]
    pub compare: Option<std::path::PathBuf>,
    /// Where the throughput runs' threads run on the machine's CPUs (direct and relayed alike).
    /// Several, comma-separated (`none,split`): each round runs every placement in turn, so the
    /// placements are compared in the same run.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "none")]
    pub pin: Vec<Pin>,
}

/// CPU placement of the throughput runs. On loopback the sender's copy into the kernel and the
/// sink's copy out of it are the bulk of the work; whether they run on one core (the sink
/// copies cache-hot data) or on two (every byte crosses between the cores' caches, as between
/// two hosts) changes the cost per byte several-fold, so the comparison states its placement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Pin {
    /// The scheduler places everything.
    None,
    /// Senders on CPU 0, sinks on CPU 1 (the two ends apart, as two hosts), the proxy unpinned.
    Split,
    /// Senders, sinks and the proxy all on CPU 0.
    One,
}

impl Pin {
    /// (senders' CPU, sinks' CPU, proxy's CPU).
    fn cpus(self) -> (Option<usize>, Option<usize>, Option<usize>) {
        match self {
            Pin::None => (None, None, None),
            Pin::Split => (Some(0), Some(1), None),
            Pin::One => (Some(0), Some(0), Some(0)),
        }
    }
}

/// The sinks' CPU (+1; 0: unpinned), read by each sink thread as it starts.
static SINK_CPU: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Restricts the calling thread (pid 0) or thread `pid` to `cpu` (None: leaves it as it is).
fn pin_to(pid: libc::pid_t, cpu: Option<usize>) -> std::io::Result<()> {
    match cpu {
        Some(c) => set_affinity(pid, &[c]),
        None => Ok(()),
    }
}

/// Restricts thread `pid` (0: the calling one) to `cpus`.
fn set_affinity(pid: libc::pid_t, cpus: &[usize]) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes inside it.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The proxy under test, a child `headroom proxy` process (with `--workers N > 1`, a supervisor
/// and its N worker processes).
pub(crate) struct ProxyProc {
    child: Child,
    pub(crate) addr: SocketAddr,
}

impl ProxyProc {
    fn start(to: SocketAddr, mode: &str, a: &ProxyBenchArgs) -> anyhow::Result<ProxyProc> {
        ProxyProc::start_bin(&std::env::current_exe()?, to, mode, a, 1)
    }
    fn start_bin(
        exe: &std::path::Path,
        to: SocketAddr,
        mode: &str,
        a: &ProxyBenchArgs,
        workers: usize,
    ) -> anyhow::Result<ProxyProc> {
        let threads = a.threads;
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
        let mut cmd = Command::new(exe);
        cmd.args(["proxy", "--listen", &addr.to_string(), "--to", &to.to_string(), "--mode", mode])
            .args(["--threads", &threads.to_string(), "--max-conns", "1000000", "--max-per-source", "1000000"])
            .args(a.cc.iter().flat_map(|cc| ["--cc", cc.as_str()]))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if workers > 1 {
            cmd.args(["--workers", &workers.to_string()]);
        }
        let me = std::process::id();
        // SAFETY: the closure only makes async-signal-safe syscalls in the child before exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || die_with_parent(me));
        }
        let child = cmd.spawn().context("starting the proxy")?;
        let mut p = ProxyProc { child, addr };
        let t = Instant::now();
        while TcpStream::connect(addr).is_err() {
            if t.elapsed() > Duration::from_secs(5) || p.child.try_wait()?.is_some() {
                bail!("the proxy did not start listening on {addr}");
            }
            thread::sleep(Duration::from_millis(10));
        }
        // The supervisor listens before its workers exist: wait until they run the program.
        let is_worker = |pid: &u32| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|&b| b == 0).any(|arg| arg == b"--worker"))
        };
        while workers > 1 && children_of(p.pid()).iter().filter(|pid| is_worker(pid)).count() < workers {
            if t.elapsed() > Duration::from_secs(5) || p.child.try_wait()?.is_some() {
                bail!("the proxy's {workers} worker processes did not start");
            }
            thread::sleep(Duration::from_millis(10));
        }
        Ok(p)
    }
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }
    /// Places every thread of the proxy process for `pin` (unpinned: all CPUs).
    fn place(&self, pin: Pin) -> anyhow::Result<()> {
        // SAFETY: sysconf has no preconditions.
        let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
        let cpus: Vec<usize> = pin.cpus().2.map_or_else(|| (0..n).collect(), |c| vec![c]);
        for t in std::fs::read_dir(format!("/proc/{}/task", self.pid()))?.flatten() {
            let Ok(tid) = t.file_name().to_string_lossy().parse::<libc::pid_t>() else { continue };
            set_affinity(tid, &cpus).with_context(|| format!("placing the proxy's thread {tid}"))?;
        }
        Ok(())
    }
    /// The proxy's processes: itself and its workers (its children).
    pub(crate) fn pids(&self) -> Vec<u32> {
        let mut v = vec![self.pid()];
        v.extend(children_of(self.pid()));
        v
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
}

/// Resident memory of process `pid`, bytes.
pub(crate) fn rss_bytes(pid: u32) -> anyhow::Result<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let l = s.lines().find(|l| l.starts_with("VmRSS:")).context("no VmRSS")?;
    let kb: u64 = l.split_whitespace().nth(1).context("VmRSS format")?.parse()?;
    Ok(kb * 1024)
}

/// The processes whose parent is `pid` (a scan of /proc: bounded by the processes present).
pub(crate) fn children_of(pid: u32) -> Vec<u32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(child) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else { continue };
        // Field 4 (ppid) is the second after the ")" that ends the command name.
        let ppid = stat.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().nth(1)?.parse::<u32>().ok());
        if ppid == Some(pid) {
            v.push(child);
        }
    }
    v.sort_unstable();
    v
}

/// In a child before exec: be sent SIGTERM when the parent `parent` (the thread that started
/// it) dies, so a benchmark killed by SIGKILL leaves no proxy or client process behind.
pub(crate) fn die_with_parent(parent: u32) -> std::io::Result<()> {
    // SAFETY: prctl and getppid are async-signal-safe syscalls.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 || libc::getppid() as u32 != parent {
            return Err(std::io::Error::other("the benchmark is gone"));
        }
    }
    Ok(())
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
    let _ = pin_to(0, SINK_CPU.load(Relaxed).checked_sub(1));
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

/// One throughput run's figures, all over the same counting window.
struct Sample {
    gbps: f64,
    /// CPU seconds per GB moved of this process: the senders and the sinks, and on loopback
    /// the kernel's receive processing that runs in their context.
    bench_s_per_gb: f64,
    /// The same for the proxy process (0 for direct runs).
    proxy_s_per_gb: f64,
    /// The proxy's cores per Gbit/s.
    proxy_cores_per_gbps: f64,
}

/// Sends as fast as possible over `conns` connections to `to` for `run`; `proxy` is the proxy
/// the connections go through (None: direct), whose CPU time is counted too.
fn throughput(
    to: SocketAddr,
    conns: usize,
    run: Duration,
    cc: Option<&str>,
    pin: Pin,
    proxy: Option<&ProxyProc>,
) -> anyhow::Result<Sample> {
    let stop = Arc::new(AtomicBool::new(false));
    let bytes = Arc::new(AtomicU64::new(0));
    // Each sink thread reads its CPU as it starts (one per connection, below).
    SINK_CPU.store(pin.cpus().1.map_or(0, |c| c + 1), Relaxed);
    if let Some(p) = proxy {
        p.place(pin)?;
    }
    let mut hs = Vec::new();
    for _ in 0..conns {
        let mut s = TcpStream::connect(to)?;
        if let Some(cc) = cc {
            headroom_proxy::sock::set_congestion(&s, cc).with_context(|| format!("congestion control {cc:?}"))?;
        }
        let (stop, bytes) = (stop.clone(), bytes.clone());
        hs.push(thread::spawn(move || {
            let _ = pin_to(0, pin.cpus().0);
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
    let proxy_cpu = || proxy.map_or(Ok(0.0), |p| p.cpu_s());
    // Count from a warmed-up start.
    thread::sleep(Duration::from_millis(100));
    let (b0, t0, c0, p0) = (bytes.load(Relaxed), Instant::now(), crate::cc_bench::cpu_time(), proxy_cpu()?);
    thread::sleep(run);
    let (b1, t1, c1, p1) = (bytes.load(Relaxed), t0.elapsed(), crate::cc_bench::cpu_time(), proxy_cpu()?);
    stop.store(true, Relaxed);
    for h in hs {
        let _ = h.join();
    }
    let gb = (b1 - b0).max(1) as f64 / 1e9;
    let gbps = gb * 8.0 / t1.as_secs_f64();
    Ok(Sample {
        gbps,
        bench_s_per_gb: (c1 - c0).as_secs_f64() / gb,
        proxy_s_per_gb: (p1 - p0) / gb,
        proxy_cores_per_gbps: (p1 - p0) / t1.as_secs_f64() / gbps,
    })
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

/// Medians of one path's throughput runs.
#[derive(Clone, Copy)]
struct PathResult {
    gbps: f64,
    /// Cores per Gbit/s of the proxy process.
    proxy_cpu: f64,
    /// CPU seconds per GB of the whole path: senders, sinks and proxy.
    path_s_per_gb: f64,
    /// Median over the interleaved rounds of this path's Gbit/s over direct's in the same round.
    fraction: f64,
}

/// Throughput direct and through splice and copy proxies, interleaved, for one placement.
struct ThroughputResult {
    pin: Pin,
    direct: PathResult,
    splice: PathResult,
    copy: PathResult,
    /// The --compare binary's splice proxy.
    compare: Option<PathResult>,
}

fn summarise(v: &[(Sample, f64)]) -> PathResult {
    let med = |f: &dyn Fn(&(Sample, f64)) -> f64| median(&mut v.iter().map(f).collect::<Vec<_>>());
    PathResult {
        gbps: med(&|x| x.0.gbps),
        proxy_cpu: med(&|x| x.0.proxy_cores_per_gbps),
        path_s_per_gb: med(&|x| x.0.bench_s_per_gb + x.0.proxy_s_per_gb),
        fraction: med(&|x| x.1),
    }
}

/// One result per placement of `--pin`; every round runs each placement in turn (direct, then
/// each proxy), so that the placements and the paths see the same drift of a shared machine.
fn throughput_set(
    sinkaddr: SocketAddr,
    splice: &ProxyProc,
    copy: &ProxyProc,
    compare: Option<&ProxyProc>,
    conns: usize,
    a: &ProxyBenchArgs,
) -> anyhow::Result<Vec<ThroughputResult>> {
    let run = Duration::from_nanos(a.run.as_nanos());
    let cc = a.cc.as_deref();
    type Runs = Vec<(Sample, f64)>;
    let mut per_pin: Vec<[Runs; 4]> = a.pin.iter().map(|_| Default::default()).collect();
    for _ in 0..a.repeat {
        for (&pin, [d, s, c, o]) in a.pin.iter().zip(per_pin.iter_mut()) {
            let direct = throughput(sinkaddr, conns, run, cc, pin, None)?;
            let g = direct.gbps;
            d.push((direct, 1.0));
            let mut procs = vec![(splice, s), (copy, c)];
            if let Some(p) = compare {
                procs.push((p, o));
            }
            for (p, v) in procs {
                let x = throughput(p.addr, conns, run, cc, pin, Some(p))?;
                let f = x.gbps / g;
                v.push((x, f));
            }
        }
    }
    Ok(a.pin
        .iter()
        .zip(&per_pin)
        .map(|(&pin, [d, s, c, o])| ThroughputResult {
            pin,
            direct: summarise(d),
            splice: summarise(s),
            copy: summarise(c),
            compare: compare.map(|_| summarise(o)),
        })
        .collect())
}

/// The 1-minute load average (/proc/loadavg), to quote beside the figures.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// The kernel's TCP memory in pages (/proc/net/sockstat "TCP: ... mem N").
pub(crate) fn tcp_mem_pages() -> anyhow::Result<u64> {
    let s = std::fs::read_to_string("/proc/net/sockstat")?;
    let l = s.lines().find(|l| l.starts_with("TCP:")).context("no TCP line")?;
    let w: Vec<&str> = l.split_whitespace().collect();
    let i = w.iter().position(|x| *x == "mem").context("no mem")?;
    Ok(w[i + 1].parse()?)
}

/// Descriptors a process needs besides its connections' (listeners, pipes, the runtime's).
const SPARE_FDS: u64 = 500;

/// The idle run's proxy worker processes: `--idle-workers`, or the fewest whose share of the
/// proxy's two sockets per connection fits `nofile`.
fn idle_workers(a: &ProxyBenchArgs, nofile: u64) -> anyhow::Result<usize> {
    let n = a.idle as u64;
    if n + SPARE_FDS > nofile {
        bail!(
            "--idle {} needs {} file descriptors in this process and in its client process (limit {nofile}); lower it",
            a.idle,
            n + SPARE_FDS
        );
    }
    let room = nofile - SPARE_FDS;
    let w = a.idle_workers.unwrap_or_else(|| (2 * n).div_ceil(room).max(1) as usize);
    if w == 0 || (2 * n).div_ceil(w as u64) > room {
        bail!("--idle {} through {w} proxy worker(s): more than {room} descriptors each (limit {nofile}); raise --idle-workers", a.idle);
    }
    Ok(w)
}

/// Memory per idle connection (see `proxy_bench_idle`).
fn idle_run(a: &ProxyBenchArgs, workers: usize) -> anyhow::Result<crate::proxy_bench_idle::IdleResult> {
    let hs = crate::proxy_bench_idle::HoldServer::start()?;
    let ph = ProxyProc::start_bin(&std::env::current_exe()?, hs.addr, "splice", a, workers)?;
    crate::proxy_bench_idle::measure(&ph, &hs, a.idle, workers)
}

pub fn run(a: ProxyBenchArgs) -> anyhow::Result<()> {
    if let Some(to) = a.hold_clients {
        return crate::proxy_bench_idle::hold_clients(to, a.idle);
    }
    if a.repeat == 0 || a.connections == 0 || a.round_trips == 0 {
        bail!("--repeat, --connections and --round-trips must be positive");
    }
    if a.pin.is_empty() {
        bail!("--pin needs at least one placement (none, split, one)");
    }
    if let Some(cc) = &a.cc {
        let probe = TcpListener::bind("127.0.0.1:0")?;
        headroom_proxy::sock::set_congestion(&probe, cc)
            .with_context(|| format!("--cc {cc:?}: not a congestion control available here"))?;
    }
    let nofile = headroom_proxy::sock::raise_nofile_limit()?;
    let workers = idle_workers(&a, nofile)?;
    if a.idle_only && a.idle == 0 {
        bail!("--idle-only needs --idle N > 0");
    }
    let perf = if a.idle_only { None } else { Some(perf_runs(&a)?) };
    let idle = if a.idle > 0 { Some(idle_run(&a, workers)?) } else { None };
    report(&a, perf.as_ref(), idle.as_ref())
}

/// Throughput and latency, direct and through the proxies.
struct Perf {
    /// One per `--pin` placement, in its order.
    single: Vec<ThroughputResult>,
    many: Vec<ThroughputResult>,
    lat_direct: f64,
    lat_proxy: f64,
    lat_compare: Option<f64>,
}

fn perf_runs(a: &ProxyBenchArgs) -> anyhow::Result<Perf> {
    let sinkaddr = server(sink)?;
    let echoaddr = server(echo)?;
    let (ps, pc) = (ProxyProc::start(sinkaddr, "splice", a)?, ProxyProc::start(sinkaddr, "copy", a)?);
    let po = a.compare.as_deref().map(|b| ProxyProc::start_bin(b, sinkaddr, "splice", a, 1)).transpose()?;
    let single = throughput_set(sinkaddr, &ps, &pc, po.as_ref(), 1, a)?;
    let many = throughput_set(sinkaddr, &ps, &pc, po.as_ref(), a.connections, a)?;
    drop((ps, pc, po));
    let pe = ProxyProc::start(echoaddr, "splice", a)?;
    let peo = a.compare.as_deref().map(|b| ProxyProc::start_bin(b, echoaddr, "splice", a, 1)).transpose()?;
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
    Ok(Perf { single, many, lat_direct, lat_proxy, lat_compare })
}

fn report(
    a: &ProxyBenchArgs,
    perf: Option<&Perf>,
    idle: Option<&crate::proxy_bench_idle::IdleResult>,
) -> anyhow::Result<()> {
    let path_json = |r: &PathResult| {
        json!({"gbps": r.gbps, "fraction_of_direct": r.fraction, "proxy_cores_per_gbps": r.proxy_cpu,
               "path_cpu_s_per_gb": r.path_s_per_gb})
    };
    let set_json = |t: &ThroughputResult, n: usize| {
        json!({"connections": n, "pin": pin_name(t.pin), "direct": path_json(&t.direct), "splice": path_json(&t.splice),
               "copy": path_json(&t.copy), "compare_splice": t.compare.as_ref().map(path_json)})
    };
    let names: Vec<&str> = a.pin.iter().map(|&p| pin_name(p)).collect();
    let v = json!({
        "run_s": a.run.as_secs_f64(), "repeat": a.repeat, "threads": a.threads, "cc": a.cc,
        "pin": names.join(","),
        "load_average": load_average(),
        // The first placement's (the only one unless --pin lists several) ...
        "single": perf.map(|p| set_json(&p.single[0], 1)),
        "aggregate": perf.map(|p| set_json(&p.many[0], a.connections)),
        // ... and every placement's, in --pin's order.
        "placements": perf.map(|p| p.single.iter().zip(&p.many)
            .map(|(s, m)| json!({"pin": pin_name(s.pin), "single": set_json(s, 1), "aggregate": set_json(m, a.connections)}))
            .collect::<Vec<_>>()),
        "latency": perf.map(|p| json!({"direct_rtt_us": p.lat_direct, "proxy_rtt_us": p.lat_proxy,
                                       "added_rtt_us": p.lat_proxy - p.lat_direct, "compare_rtt_us": p.lat_compare})),
        "compare_binary": a.compare.as_ref().map(|p| p.display().to_string()),
        "idle": idle.map(|i| i.to_json()),
    });
    if a.json {
        println!("{v}");
        return Ok(());
    }
    if let Some(p) = perf {
        println!(
            "proxy-bench: loopback, medians of {} interleaved runs of {} s, proxy {} thread(s), congestion control {}, pinning {}, load average {}",
            a.repeat,
            a.run.as_secs_f64(),
            a.threads,
            a.cc.as_deref().unwrap_or("(system default)"),
            names.join(","),
            load_average()
        );
        report_perf(a, p);
    } else {
        println!(
            "proxy-bench: loopback, idle connections only, proxy {} thread(s) per worker, load average {}",
            a.threads,
            load_average()
        );
    }
    if let Some(i) = idle {
        let procs: Vec<String> = i
            .processes
            .iter()
            .map(|(pid, rss, fds)| format!("pid {pid}: +{} KiB, {fds} descriptors", rss / 1024))
            .collect();
        println!(
            "         idle: {} connections through the proxy ({} worker process(es); opened in {:.1} s; all established end to end, {} of {} sampled bytes echoed): proxy RSS {:.0} B per connection (all its processes), kernel TCP memory {:.0} B and kernel slab {:.0} B per connection [{}]",
            i.connections,
            i.workers,
            i.open_s,
            i.echoed,
            i.sample,
            i.rss_per_conn,
            i.kernel_per_conn,
            i.slab_per_conn,
            procs.join("; ")
        );
    }
    Ok(())
}

fn pin_name(p: Pin) -> &'static str {
    match p {
        Pin::None => "none",
        Pin::Split => "split",
        Pin::One => "one",
    }
}

fn report_perf(a: &ProxyBenchArgs, p: &Perf) {
    println!("  Gbit/s, % of direct (median of per-round ratios), CPU seconds per GB of the whole path (senders, sinks, proxy), proxy cores per Gbit/s");
    let sets =
        p.single.iter().map(|r| ("1 connection", r, 1)).chain(p.many.iter().map(|r| ("aggregate", r, a.connections)));
    for (name, r, n) in sets {
        if a.pin.len() > 1 {
            println!("  --pin {}:", pin_name(r.pin));
        }
        let line = |label: &str, p: &PathResult| {
            format!(
                "{label} {:6.2} Gbit/s = {:5.1} %, path {:.3} CPU s/GB, proxy {:.3} cores per Gbit/s",
                p.gbps,
                100.0 * p.fraction,
                p.path_s_per_gb,
                p.proxy_cpu
            )
        };
        println!(
            "{name:>13} ({n:>3} conn): direct {:6.2} Gbit/s, path {:.3} CPU s/GB",
            r.direct.gbps, r.direct.path_s_per_gb
        );
        println!("{:>22}{}", "", line("splice", &r.splice));
        println!("{:>22}{}", "", line("copy  ", &r.copy));
        if let Some(c) = &r.compare {
            println!("{:>22}{}", "", line("--compare binary, splice", c));
        }
        println!(
            "{:>22}direct's path CPU per GB over splice's: {:.1} % (the fraction a CPU-bound relay can reach)",
            "",
            100.0 * r.direct.path_s_per_gb / r.splice.path_s_per_gb
        );
    }
    let (lat_direct, lat_proxy) = (p.lat_direct, p.lat_proxy);
    println!(
        "      latency (64 B ping-pong, median RTT): direct {lat_direct:.1} µs, through one proxy {lat_proxy:.1} µs: added {:.1} µs per hop (round trip)",
        lat_proxy - lat_direct
    );
    if let Some(l) = p.lat_compare {
        println!(
            "      latency through the --compare binary's proxy: {l:.1} µs: added {:.1} µs per hop",
            l - lat_direct
        );
    }
}
