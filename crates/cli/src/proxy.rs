//! `headroom proxy`: the split-TCP proxy (`headroom_proxy`), with the split policies of
//! `headroom_core::overlay`.

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use headroom_core::overlay::{
    SourcePrefix, SplitLargeDocuments, SplitPolicy, SplitUsers, SplitWhileLowLoad, SplitWhileShortQueue, UnknownSize,
};
use headroom_core::units::{parse_positive, Bytes, Dur, Time};
use headroom_proxy::transparent::{Interception, Selection};
use headroom_proxy::{CopyMode, ProxyConfig, Transparency};
use serde_json::json;
use std::io::Write;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PolicyArg {
    /// Split every connection.
    All,
    /// Split no connection.
    None,
    /// Policy A: split connections from the --users prefixes only.
    A,
    /// Policy B: split documents of at least --threshold bytes. A proxy never knows the size
    /// when a connection starts, so this follows --unknown-size for every connection.
    B,
    /// Policy C: split while the load estimate L(T) (relayed packets per second, a SYN counts
    /// 10, EWMA 7/8) is below --utilisation / --per-packet.
    C,
    /// Policy D (headroom's, not in the paper): split while the emulated CPU's smoothed
    /// per-packet queueing delay (gain 1/8, reset after 50 ms without a job) is below
    /// --d-target. Needs --emulate-cpu (its waits are what D is fed).
    D,
}

#[derive(Args, Debug)]
pub struct ProxyArgs {
    /// Address to accept clients on, HOST:PORT (transparent mode: the tproxy port; default
    /// 0.0.0.0 with a port the kernel picks).
    #[arg(long, required_unless_present_any = ["transparent", "cleanup"])]
    pub listen: Option<String>,
    /// The only upstream (the next proxy of a chain, or the server), HOST:PORT.
    #[arg(long, required_unless_present_any = ["transparent", "cleanup"], conflicts_with = "transparent")]
    pub to: Option<String>,
    /// Transparent mode (root, IPv4 and IPv6): intercept TCP routed through this host with nftables
    /// tproxy and relay each connection to its original destination. Installs its own nftables
    /// table and policy-routing rule; removes them on exit, error and signal.
    #[arg(long)]
    pub transparent: bool,
    /// Transparent mode: connect onward from the client's own address.
    #[arg(long, requires = "transparent")]
    pub full: bool,
    /// Transparent mode: intercept only these destination ports (comma-separated; default all).
    #[arg(long, value_delimiter = ',', requires = "transparent")]
    pub ports: Vec<u16>,
    /// Remove the nftables tables and routing rules of crashed (killed) transparent proxies
    /// (in this network namespace or any other that still exists; records of namespaces that
    /// no longer exist are dropped), then exit.
    #[arg(long, conflicts_with_all = ["listen", "to", "transparent"])]
    pub cleanup: bool,
    /// Relay buffer per direction per split connection.
    #[arg(long, default_value = "1MiB", value_parser = parse_positive::<Bytes>)]
    pub buffer: Bytes,
    /// SO_SNDBUF/SO_RCVBUF on both legs of split connections (default: kernel autotuning).
    #[arg(long, value_parser = parse_positive::<Bytes>)]
    pub socket_buffer: Option<Bytes>,
    /// splice (zero-copy through a pipe) or copy (through user space).
    #[arg(long, default_value = "splice", value_parser = |s: &str| s.parse::<CopyMode>())]
    pub mode: CopyMode,
    /// Most connections relayed at once. At the cap an explicit proxy stops accepting and clients
    /// wait in the listen backlog (it cannot bypass them); a transparent one closes its nftables
    /// gate, so new connections bypass it (forwarded untouched) until a slot is free.
    #[arg(long, default_value_t = 10_000)]
    pub max_conns: usize,
    /// Most connections relayed at once per client IP address; more are reset at once.
    #[arg(long, default_value_t = 1_000)]
    pub max_per_source: usize,
    /// Upstream connect timeout; a failed connect resets the client.
    #[arg(long, default_value = "5s", value_parser = parse_positive::<Dur>)]
    pub connect_timeout: Dur,
    /// Reset both sides of a connection idle (no byte either way) this long.
    #[arg(long, value_parser = parse_positive::<Dur>)]
    pub idle_timeout: Option<Dur>,
    /// Kernel congestion control of both legs (TCP_CONGESTION, e.g. cubic, reno; default: the
    /// system's).
    #[arg(long)]
    pub cc: Option<String>,
    /// Worker threads (of each worker process).
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Worker processes accepting on the same address (SO_REUSEPORT: the kernel spreads new
    /// connections among them), each with its own runtime and descriptor limit, supervised by
    /// this process. 1: no separate process. --max-conns, --max-per-source and policy C's
    /// capacity are divided among them (docs/proxy.md, "Worker processes").
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Internal: run as worker ID (0-based) of a --workers supervisor, accepting on the listening
    /// socket inherited as descriptor 3.
    #[arg(long, hide = true)]
    pub worker: Option<usize>,
    /// Split policy.
    #[arg(long, value_enum, default_value = "all")]
    pub policy: PolicyArg,
    /// Policy A: client prefixes to split, comma-separated (10.1.0.0/16,192.0.2.7).
    #[arg(long, value_delimiter = ',')]
    pub users: Vec<String>,
    /// Policy B: the document-size threshold.
    #[arg(long, default_value = "2000B", value_parser = parse_positive::<Bytes>)]
    pub threshold: Bytes,
    /// Policy B: what to do with a connection whose size is unknown (always, in a proxy).
    #[arg(long, value_enum, default_value = "pass")]
    pub unknown_size: UnknownArg,
    /// Policy C: CPU time per data packet t (the load limit is --utilisation / t; default: the
    /// --emulate-cpu time).
    #[arg(long, value_parser = parse_positive::<Dur>)]
    pub per_packet: Option<Dur>,
    /// Emulate the overlay paper's proxy CPU (off by default): one CPU with a FIFO queue, this
    /// time per relayed packet of --packet-size and 10 times it per accepted SYN and per
    /// upstream SYN-ACK; split connections wait for it (docs/proxy.md, "Emulated CPU").
    #[arg(long, value_parser = parse_positive::<Dur>)]
    pub emulate_cpu: Option<Dur>,
    /// Policy D: the smoothed queueing delay of the emulated CPU at and above which D stops
    /// splitting (the simulator's overlay-policy-d uses 1 ms at t = 50 us).
    #[arg(long, value_parser = parse_positive::<Dur>)]
    pub d_target: Option<Dur>,
    /// Policy C: the utilisation above which C stops splitting.
    #[arg(long, default_value_t = 0.9)]
    pub utilisation: f64,
    /// Bytes counted as one packet for policy C and --emulate-cpu.
    #[arg(long, default_value = "1448B", value_parser = parse_positive::<Bytes>)]
    pub packet_size: Bytes,
    /// Print the counters as one JSON line on stdout every this long.
    #[arg(long, value_parser = parse_positive::<Dur>)]
    pub stats: Option<Dur>,
    /// Print one JSON line per finished connection on stdout.
    #[arg(long)]
    pub log_conns: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum UnknownArg {
    Split,
    Pass,
}

fn prefix(s: &str) -> anyhow::Result<SourcePrefix> {
    let (a, l) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (s, None),
    };
    let addr: std::net::IpAddr = a.parse().with_context(|| format!("{s:?}: not an IP address"))?;
    let len = match l {
        Some(l) => l.parse::<u8>().with_context(|| format!("{s:?}: bad prefix length"))?,
        None if addr.is_ipv4() => 32,
        None => 128,
    };
    SourcePrefix::new(addr, len).with_context(|| format!("{s:?}: prefix length too long"))
}

/// The core policy the arguments name.
pub fn build_policy(a: &ProxyArgs) -> anyhow::Result<SplitPolicy> {
    Ok(match a.policy {
        PolicyArg::All => SplitPolicy::All,
        PolicyArg::None => SplitPolicy::None,
        PolicyArg::A => {
            if a.users.is_empty() {
                bail!("--policy a needs --users PREFIX[,PREFIX...]");
            }
            SplitPolicy::Users(SplitUsers { users: a.users.iter().map(|s| prefix(s)).collect::<anyhow::Result<_>>()? })
        }
        PolicyArg::B => SplitPolicy::LargeDocuments(SplitLargeDocuments {
            threshold: a.threshold,
            unknown: match a.unknown_size {
                UnknownArg::Split => UnknownSize::Split,
                UnknownArg::Pass => UnknownSize::Pass,
            },
        }),
        PolicyArg::C => {
            let t = a
                .per_packet
                .or(a.emulate_cpu)
                .context("--policy c needs --per-packet DURATION (CPU time per packet) or --emulate-cpu")?;
            if !(a.utilisation > 0.0 && a.utilisation <= 1.0) {
                bail!("--utilisation must be in (0, 1]");
            }
            let mut c = SplitWhileLowLoad::paper(t, Time::ZERO);
            c.utilisation = a.utilisation;
            SplitPolicy::LowLoad(c)
        }
        PolicyArg::D => {
            let target = a.d_target.context("--policy d needs --d-target DURATION (the queueing-delay budget)")?;
            if a.emulate_cpu.is_none() {
                bail!(
                    "--policy d needs --emulate-cpu: D is fed the emulated CPU's queueing delays; without it the proxy \
                     has no per-packet queue it can measure (its queues are the kernel's socket buffers and the \
                     scheduler's run queue)"
                );
            }
            SplitPolicy::ShortQueue(SplitWhileShortQueue::new(target, SplitWhileShortQueue::IDLE_RESET))
        }
    })
}

/// Blocks SIGINT and SIGTERM in this thread (and the threads it starts later) so that
/// [`wait_signal`] can take them synchronously (SIGHUP too).
pub(crate) fn block_signals() -> libc::sigset_t {
    // SAFETY: sigset manipulation on a local set; pthread_sigmask on the calling thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGHUP);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// Waits up to `d` for SIGINT/SIGTERM/SIGHUP; true if one came.
pub(crate) fn wait_signal(set: &libc::sigset_t, d: Duration) -> bool {
    let ts = libc::timespec { tv_sec: d.as_secs() as libc::time_t, tv_nsec: d.subsec_nanos() as libc::c_long };
    // SAFETY: sigtimedwait with a valid set and timespec; no siginfo wanted.
    unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &ts) > 0 }
}

/// What transparent mode's nftables rule selects, from the policy.
fn selection(a: &ProxyArgs, policy: &SplitPolicy) -> Selection {
    let (users, open) = match policy {
        SplitPolicy::None => (None, false),
        SplitPolicy::Users(u) => (Some(u.users.iter().map(|p| (p.addr, p.len)).collect()), true),
        SplitPolicy::LargeDocuments(b) => (None, b.unknown == UnknownSize::Split),
        _ => (None, true),
    };
    Selection { users, ports: a.ports.clone(), open }
}

/// Removes the interception when dropped (normal exit and error paths).
struct Installed(Arc<OnceLock<Interception>>);

impl Drop for Installed {
    fn drop(&mut self) {
        if let Some(i) = self.0.get() {
            i.remove();
        }
    }
}

pub fn run(a: ProxyArgs) -> anyhow::Result<()> {
    if a.cleanup {
        for c in headroom_proxy::transparent::cleanup_stale()? {
            println!("{c}");
        }
        return Ok(());
    }
    let listen = headroom_proxy::resolve(a.listen.as_deref().unwrap_or("0.0.0.0:0"))?;
    let to = match &a.to {
        Some(t) => headroom_proxy::resolve(t)?,
        None => "0.0.0.0:0".parse()?,
    };
    let mut policy = build_policy(&a)?;
    if a.workers == 0 {
        bail!("--workers must be at least 1");
    }
    if a.worker.is_none() && a.workers > 1 {
        return crate::proxy_workers::supervise(&a, listen, to);
    }
    let me = a.worker.map(|id| crate::proxy_workers::Worker { id, of: a.workers });
    if let Some(w) = me {
        w.divide(&mut policy);
    }
    // splice(2) into a socket the peer has reset raises SIGPIPE (it has no MSG_NOSIGNAL), and
    // main() restored SIGPIPE's default (die) for printing: a client that closed while the proxy
    // was splicing data to it killed the whole proxy silently, leaving its nftables table
    // behind (found by proxy-web, whose FTP clients close mid-stream). The relay handles EPIPE
    // as a reset; the signal is not wanted here.
    // SAFETY: setting a signal disposition to SIG_IGN; no handler runs.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let sigs = block_signals();
    let _ = headroom_proxy::sock::raise_nofile_limit();
    let mut cfg = ProxyConfig::new(listen, to);
    cfg.buffer = usize::try_from(a.buffer.0).context("--buffer too large")?;
    cfg.socket_buffer = a.socket_buffer.map(|b| b.0 as usize);
    cfg.mode = a.mode;
    cfg.max_conns = me.map_or(a.max_conns, |w| w.share(a.max_conns));
    cfg.max_per_source = me.map_or(a.max_per_source, |w| w.share(a.max_per_source));
    if me.is_some() {
        cfg.listener = Some(crate::proxy_workers::inherited_listener()?);
    }
    cfg.connect_timeout = Duration::from_nanos(a.connect_timeout.as_nanos());
    cfg.idle_timeout = a.idle_timeout.map(|d| Duration::from_nanos(d.as_nanos()));
    cfg.threads = a.threads;
    cfg.congestion = a.cc.clone();
    let installed = Installed(Arc::new(OnceLock::new()));
    let sel = selection(&a, &policy);
    if a.transparent {
        cfg.transparent = Some(if a.full { Transparency::Full } else { Transparency::Destination });
        let cell = installed.0.clone();
        cfg.gate = Some(Box::new(move |open| {
            if let Some(i) = cell.get() {
                if let Err(e) = i.set_gate(open) {
                    eprintln!("headroom proxy: gate: {e:#}");
                }
            }
        }));
    }
    cfg.policy = policy;
    cfg.packet_bytes = a.packet_size.0;
    cfg.emulate_cpu = a.emulate_cpu.map(|d| Duration::from_nanos(d.as_nanos()));
    let (tx, rx) = std::sync::mpsc::channel();
    if a.log_conns {
        cfg.conn_log = Some(tx);
    }
    let p = headroom_proxy::spawn(cfg)?;
    if a.transparent {
        let i = Interception::install(p.local_addr().port(), &sel)?;
        eprintln!("headroom proxy: transparent on port {}, nftables table {}", i.port, i.table);
        let _ = installed.0.set(i);
    } else if me.is_none() {
        eprintln!("headroom proxy: {} -> {} (policy {:?}, {:?})", p.local_addr(), to, a.policy, a.mode);
    }
    // A worker's lines name it (the supervisor forwards them and adds the totals).
    let tag = |mut v: serde_json::Value| {
        if let Some(w) = me {
            v["worker"] = json!(w.id);
        }
        v
    };
    if let Some(t) = a.emulate_cpu {
        eprintln!(
            "headroom proxy: emulated CPU: {t} per {} B packet, {} per SYN and SYN-ACK (split connections)",
            a.packet_size.0,
            Dur(t.as_nanos() * 10)
        );
    }
    let start = Instant::now();
    let tick = a.stats.map(|d| Duration::from_nanos(d.as_nanos())).unwrap_or(Duration::from_millis(200));
    let mut next_stats = start + tick;
    let stdout = std::io::stdout();
    loop {
        let now = Instant::now();
        let wait = next_stats.saturating_duration_since(now).min(Duration::from_millis(200));
        if wait_signal(&sigs, wait) {
            break;
        }
        let mut out = stdout.lock();
        for r in rx.try_iter() {
            writeln!(out, "{}", tag(r.to_json()))?;
        }
        // The deadline advances with or without --stats: a deadline left in the past made
        // every wait zero, and this loop spun a core (found by proxy-fig3's CPU figures).
        if Instant::now() >= next_stats {
            if a.stats.is_some() {
                let mut v = p.stats().to_json();
                v["t_s"] = json!(start.elapsed().as_secs_f64());
                v["unix_s"] =
                    json!(SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64()));
                writeln!(out, "{}", tag(v))?;
            }
            next_stats += tick;
        }
        out.flush()?;
    }
    let who = me.map_or(String::new(), |w| format!(" worker {} (pid {})", w.id, std::process::id()));
    eprintln!("headroom proxy{who}: stopping; {}", p.stats().to_json());
    p.stop();
    // The records of connections that ended before the stop.
    let mut out = stdout.lock();
    for r in rx.try_iter() {
        writeln!(out, "{}", tag(r.to_json()))?;
    }
    out.flush()?;
    drop(out);
    drop(installed);
    Ok(())
}
