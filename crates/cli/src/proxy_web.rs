//! `headroom proxy-web` (root): the overlay paper's Figs. 5–7 experiment (Maki et al. §3.2:
//! short-transfer delay through a loaded proxy under split policies) on the real kernel.
//!
//! A testbed chain `clients – seg1 – p1 – seg2 – servers` (`headroom_testbed::chain`) with
//! `headroom proxy --transparent --emulate-cpu T` in `p1` (the paper's processing model, `T` per
//! relayed packet, `10 T` per SYN and SYN-ACK: `headroom_proxy::cpu`). Per policy (none, all,
//! A, C, D) and round (`--rounds`, the policies interleaved within each, every policy of a round
//! with the same workload), a fresh proxy and:
//! - long "FTP" downloads, started in the first second, each paced by its server at
//!   `--ftp-rate` (standing in for the paper's 256 kbit/s FTP access links), from addresses of
//!   their own (`10.9.1.16/28`);
//! - after `--warmup`, short web transfers for `--web-time`: Poisson arrivals, sizes from SURGE
//!   (`headroom_sim::overlay::surge`, as the simulator), each from one of `--web-sources`
//!   addresses added to the clients node (`10.9.1.64` …). A transfer connects to the server,
//!   sends its id and the size wanted; the server sends that many bytes and closes. Delay =
//!   connect start to last byte (the paper's "SYN to last byte").
//!
//! Which transfers were split: the proxy's own records (`--log-conns`; in transparent mode it
//! sees only the connections it intercepted), matched by the client's address and port. The
//! server's view is an independent check: it records the peer address of every request, which
//! is the proxy's (`10.9.2.1`) exactly when the connection was split; the summary counts the
//! transfers on which the two agree. (The FTP flows' split state comes from the server's view
//! only: they are still open when the proxy stops.)
//!
//! Choices, ours (the paper's topology has 1 ms between servers and proxy; on Linux, whose IW10
//! sends most web objects in the first round trip, a split there gains almost nothing, so the
//! question "does C keep split transfers faster" would be decided by the emulated processing
//! cost alone): both segments have `--client-delay` / `--server-delay` (10 ms each by default),
//! so a split halves each leg's round trip; policy A lists the FTP addresses and the first
//! `--a-share` (0.6, as the paper's 300 of 500 users) of the web addresses; the FTP flows follow
//! the policy like any connection (a real proxy has no "FTP class": under "none" they are not
//! split and the proxy is idle — the reference for unsplit transfers; under C they start while
//! `L(T)` is still below the limit and are split); `T` and the loads: see docs/results.md.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};
use clap::Args;
use headroom_core::rng::Rng;
use headroom_core::units::{parse_positive, Bytes, Dur, Rate};
use headroom_sim::overlay::surge::SurgeModel;
use headroom_testbed::sys::set_tcp_congestion;
use headroom_testbed::traffic::tcp_connect_from;
use headroom_testbed::{Bottleneck, Buffer, Chain, ChainSpec};

use crate::plot::{panels_svg, Chart, Series};
use crate::proxy::PolicyArg;
use crate::reproduce::overlay::{cdf, fmt_q, q};

const WEB_PORT: u16 = 8080;
const FTP_PORT: u16 = 8021;
const PACKET: u64 = 1448;
/// p1's address on the servers' segment: the peer a server sees for a split connection.
const PROXY_ADDR: Ipv4Addr = Ipv4Addr::new(10, 9, 2, 1);

#[derive(Args, Debug)]
pub struct ProxyWebArgs {
    /// Policies, run one after another in each round (none, all, a, c, d; b is not meaningful
    /// in a proxy).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "none,all,a,c,d")]
    pub policies: Vec<PolicyArg>,
    /// Rounds: each runs every policy once, in the order given (none, all, a, c, d, none, all,
    /// ...), so slow drift of a shared machine hits every policy alike; all policies of a round
    /// get the same workload (FTP starts, web arrivals, sizes, sources). The summary gives each
    /// round's figures and verdicts and the medians over rounds. Default 3: a single run's
    /// verdict is not to be trusted on a loaded machine, and three give a majority.
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// Policy D's queueing-delay target (default: 1/16 of the end-to-end round trip,
    /// 2 (--client-delay + --server-delay), the simulator's ratio: overlay-policy-d's 1 ms
    /// against its web transfers' 16 ms).
    #[arg(long, value_parser = parse_positive::<Dur>)]
    pub d_target: Option<Dur>,
    /// The emulated proxy CPU's time per packet T (10 T per SYN and SYN-ACK); policy C's t.
    #[arg(long, default_value = "250us", value_parser = parse_positive::<Dur>)]
    pub emulate_cpu: Dur,
    /// Long downloads ("FTP"), started in the first second.
    #[arg(long, default_value_t = 20)]
    pub ftp_flows: u32,
    /// Each FTP download's rate (paced by its server).
    #[arg(long, default_value = "1.5Mbps", value_parser = parse_positive::<Rate>)]
    pub ftp_rate: Rate,
    /// Web transfers per second (Poisson).
    #[arg(long, default_value_t = 30.0)]
    pub web_per_second: f64,
    /// Web client addresses.
    #[arg(long, default_value_t = 20)]
    pub web_sources: u32,
    /// Share of the web addresses policy A lists.
    #[arg(long, default_value_t = 0.6)]
    pub a_share: f64,
    /// Time from the FTP starts to the first web transfer.
    #[arg(long, default_value = "3s")]
    pub warmup: Dur,
    /// Time during which web transfers start.
    #[arg(long, default_value = "15s", value_parser = parse_positive::<Dur>)]
    pub web_time: Dur,
    /// Longest wait for a web transfer after the web time (it is then counted unfinished).
    #[arg(long, default_value = "15s")]
    pub drain: Dur,
    /// One-way delay between the clients and p1.
    #[arg(long, default_value = "10ms")]
    pub client_delay: Dur,
    /// One-way delay between p1 and the servers.
    #[arg(long, default_value = "10ms")]
    pub server_delay: Dur,
    /// Rate of both segments, each direction.
    #[arg(long, default_value = "100Mbps", value_parser = parse_positive::<Rate>)]
    pub link_rate: Rate,
    /// Loss of the packets toward the clients (the paper's Fig. 8 has 1 %).
    #[arg(long, default_value_t = 0.0)]
    pub client_loss: f64,
    /// Largest web object (SURGE's Pareto tail is capped here).
    #[arg(long, default_value = "2MB", value_parser = parse_positive::<Bytes>)]
    pub size_cap: Bytes,
    /// Kernel congestion control of every socket (clients, servers, both legs of the proxy).
    #[arg(long, default_value = "cubic")]
    pub cc: String,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output directory: transfers.csv, cdf.svg, summary.txt, and the proxy's JSON lines
    /// (records and stats) per policy, proxy-POLICY.jsonl.
    #[arg(long, default_value = "out/proxy-web")]
    pub out: PathBuf,
}

fn policy_name(p: PolicyArg) -> &'static str {
    match p {
        PolicyArg::All => "all",
        PolicyArg::None => "none",
        PolicyArg::A => "a",
        PolicyArg::B => "b",
        PolicyArg::C => "c",
        PolicyArg::D => "d",
    }
}

/// The simulator's policy-D target over its web transfers' round trip: `overlay-policy-d`'s
/// `D_TARGET` (1 ms) against 16 ms (server – R1 – proxy – R2 at 1 ms each, R2 – client `d` =
/// 5 ms, each way: `scenarios/overlay/web.toml`).
const D_TARGET_PER_RTT: f64 = 1.0 / 16.0;

/// Policy D's target: `--d-target`, or [`D_TARGET_PER_RTT`] of this chain's round trip.
fn d_target(a: &ProxyWebArgs) -> Dur {
    a.d_target.unwrap_or_else(|| {
        let rtt = 2 * (a.client_delay.as_nanos() + a.server_delay.as_nanos());
        Dur((rtt as f64 * D_TARGET_PER_RTT).round() as u64)
    })
}

fn ftp_addr(i: u32) -> Ipv4Addr {
    Ipv4Addr::new(10, 9, 1, 16 + (i % 16) as u8)
}

fn web_addr(j: u32) -> Ipv4Addr {
    Ipv4Addr::new(10, 9, 1, 64 + j as u8)
}

/// Policy A's list: the FTP prefix and the first `a_share` of the web addresses.
fn a_users(a: &ProxyWebArgs) -> Vec<String> {
    let listed = (f64::from(a.web_sources) * a.a_share).round() as u32;
    let mut v = vec!["10.9.1.16/28".to_string()];
    v.extend((0..listed).map(|j| format!("{}/32", web_addr(j))));
    v
}

/// One web transfer.
#[derive(Clone, Debug)]
struct Transfer {
    id: u64,
    /// Start, seconds after the policy's web window opened.
    start_s: f64,
    source: Ipv4Addr,
    port: u16,
    size: u64,
    delay_s: Option<f64>,
    split: bool,
}

/// The servers' side: who each request came from (id -> peer address).
type Seen = Arc<Mutex<HashMap<u64, Ipv4Addr>>>;

fn peer_v4(s: &TcpStream) -> Option<Ipv4Addr> {
    match s.peer_addr().ok()? {
        SocketAddr::V4(a) => Some(*a.ip()),
        SocketAddr::V6(_) => None,
    }
}

/// Accepts until `stop` (poll with a timeout, so an accept is never delayed by a sleep).
fn accept_loop(l: TcpListener, stop: Arc<AtomicBool>, handle: impl Fn(TcpStream) + Send + Clone + 'static) {
    while !stop.load(Ordering::Relaxed) {
        let mut p = libc::pollfd { fd: l.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one live pollfd.
        if unsafe { libc::poll(&mut p, 1, 100) } <= 0 {
            continue;
        }
        if let Ok((s, _)) = l.accept() {
            let h = handle.clone();
            std::thread::spawn(move || h(s));
        }
    }
}

/// Web server: 16 bytes (id, size, big-endian) in, `size` bytes out, close.
fn web_conn(mut s: TcpStream, seen: Seen, cc: &str) {
    let _ = set_tcp_congestion(s.as_raw_fd(), cc);
    let _ = s.set_nodelay(true);
    let _ = s.set_read_timeout(Some(Duration::from_secs(20)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(30)));
    let mut req = [0u8; 16];
    if s.read_exact(&mut req).is_err() {
        return;
    }
    let id = u64::from_be_bytes(req[..8].try_into().expect("8 bytes"));
    let mut left = u64::from_be_bytes(req[8..].try_into().expect("8 bytes"));
    if let Some(p) = peer_v4(&s) {
        seen.lock().expect("seen lock").insert(id, p);
    }
    let body = [0x61u8; 16 * 1024];
    while left > 0 {
        let n = left.min(body.len() as u64) as usize;
        if s.write_all(&body[..n]).is_err() {
            return;
        }
        left -= n as u64;
    }
}

/// FTP server: sends at `rate` (10 ms ticks, no catch-up beyond 100 ms) until the client goes.
fn ftp_conn(mut s: TcpStream, rate: Rate, ftp_seen: Arc<Mutex<Vec<Ipv4Addr>>>, cc: &str) {
    let _ = set_tcp_congestion(s.as_raw_fd(), cc);
    if let Some(p) = peer_v4(&s) {
        ftp_seen.lock().expect("ftp lock").push(p);
    }
    let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
    let tick = Duration::from_millis(10);
    let chunk = vec![0x62u8; (rate.bytes_in(Dur::from_millis(10)).0 as usize).max(1)];
    let mut next = Instant::now();
    loop {
        if s.write_all(&chunk).is_err() {
            return;
        }
        next += tick;
        let now = Instant::now();
        if now > next + Duration::from_millis(100) {
            next = now;
        } else if next > now {
            std::thread::sleep(next - now);
        }
    }
}

/// The proxy child; SIGTERM and wait on drop (the chain's teardown kills it otherwise).
struct ProxyChild {
    child: Child,
    lines: Arc<Mutex<Vec<serde_json::Value>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl ProxyChild {
    fn start(chain: &Chain, args: &[String]) -> Result<ProxyChild> {
        let exe = std::env::current_exe().context("finding the headroom binary")?;
        let mut child = chain
            .command("p1", &exe.to_string_lossy())?
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting headroom proxy")?;
        let mut err = BufReader::new(child.stderr.take().context("proxy stderr")?);
        let mut line = String::new();
        err.read_line(&mut line)?;
        if !line.contains("transparent on port") {
            let _ = child.kill();
            let _ = child.wait();
            bail!("the proxy in p1 did not start: {}", line.trim());
        }
        // Drain stderr so that the proxy never blocks on it.
        std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = err.read_to_string(&mut rest);
            eprint!("{rest}");
        });
        let lines = Arc::new(Mutex::new(Vec::new()));
        let out = child.stdout.take().context("proxy stdout")?;
        let l = lines.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str(&line) {
                    l.lock().expect("lines lock").push(v);
                }
            }
        });
        Ok(ProxyChild { child, lines, reader: Some(reader) })
    }

    /// Stops the proxy (SIGTERM: it removes its nftables table) and returns its stdout lines.
    fn stop(mut self) -> Vec<serde_json::Value> {
        self.terminate();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        std::mem::take(&mut *self.lines.lock().expect("lines lock"))
    }

    fn terminate(&mut self) {
        // SAFETY: signalling our own child by pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ProxyChild {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.terminate();
        }
    }
}

/// What one policy's run gives.
struct PolicyRun {
    /// 1-based.
    round: u32,
    policy: PolicyArg,
    transfers: Vec<Transfer>,
    /// Transfers whose split flag (proxy records) agrees with the server's view, of those the
    /// server saw.
    agree: (usize, usize),
    ftp_split: usize,
    ftp_total: usize,
    /// Emulated CPU during the web window: (busy fraction, mean wait per job in ms).
    cpu: Option<(f64, f64)>,
}

fn unix_now() -> f64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// The emulated CPU's busy fraction and mean wait per job between two wall-clock instants,
/// from the proxy's `--stats` lines.
fn cpu_window(lines: &[serde_json::Value], from: f64, to: f64) -> Option<(f64, f64)> {
    let stats: Vec<&serde_json::Value> = lines.iter().filter(|v| v.get("t_s").is_some()).collect();
    let at = |t: f64| stats.iter().rev().find(|v| v["unix_s"].as_f64().is_some_and(|u| u <= t)).copied();
    let (a, b) = (at(from).or(stats.first().copied())?, at(to)?);
    let d = |k: &str| b[k].as_f64().unwrap_or(0.0) - a[k].as_f64().unwrap_or(0.0);
    let secs = d("unix_s");
    if secs <= 0.0 {
        return None;
    }
    Some((d("cpu_busy_ms") / 1e3 / secs, d("cpu_wait_ms") / d("cpu_jobs").max(1.0)))
}

struct Servers {
    seen: Seen,
    ftp_seen: Arc<Mutex<Vec<Ipv4Addr>>>,
    stop: Arc<AtomicBool>,
}

fn start_servers(chain: &Chain, ftp_rate: Rate, cc: &str) -> Result<Servers> {
    let cc: Arc<str> = cc.into();
    let seen: Seen = Arc::default();
    let ftp_seen: Arc<Mutex<Vec<Ipv4Addr>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let web = chain.run_in("servers", || Ok(TcpListener::bind(("0.0.0.0", WEB_PORT))?))?;
    let ftp = chain.run_in("servers", || Ok(TcpListener::bind(("0.0.0.0", FTP_PORT))?))?;
    let (s, st, k) = (seen.clone(), stop.clone(), cc.clone());
    std::thread::spawn(move || accept_loop(web, st, move |c| web_conn(c, s.clone(), &k)));
    let (f, st, k) = (ftp_seen.clone(), stop.clone(), cc);
    std::thread::spawn(move || accept_loop(ftp, st, move |c| ftp_conn(c, ftp_rate, f.clone(), &k)));
    Ok(Servers { seen, ftp_seen, stop })
}

/// One web transfer from `src`; returns (local port, delay in s if it finished).
fn web_transfer(src: Ipv4Addr, id: u64, size: u64, cc: &str, deadline: Instant) -> (u16, Option<f64>) {
    let t0 = Instant::now();
    let server = SocketAddrV4::new(Ipv4Addr::new(10, 9, 2, 2), WEB_PORT);
    let Ok(mut s) = tcp_connect_from(src, server, Duration::from_secs(5)) else { return (0, None) };
    let port = s.local_addr().map_or(0, |a| a.port());
    // Right after the handshake, before any data: the kernel re-initialises the algorithm.
    let _ = set_tcp_congestion(s.as_raw_fd(), cc);
    let _ = s.set_nodelay(true);
    let mut req = [0u8; 16];
    req[..8].copy_from_slice(&id.to_be_bytes());
    req[8..].copy_from_slice(&size.to_be_bytes());
    if s.write_all(&req).is_err() || s.set_read_timeout(Some(Duration::from_millis(250))).is_err() {
        return (port, None);
    }
    let mut buf = vec![0u8; 64 * 1024];
    let mut got = 0u64;
    while got < size {
        match s.read(&mut buf) {
            Ok(0) => return (port, None),
            Ok(n) => got += n as u64,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                if Instant::now() >= deadline {
                    return (port, None);
                }
            }
            Err(_) => return (port, None),
        }
    }
    (port, Some(t0.elapsed().as_secs_f64()))
}

/// One run of `policy` in round `round`; `rng` gives the round's workload.
fn run_policy(
    chain: &Chain,
    a: &ProxyWebArgs,
    servers: &Servers,
    (round, policy): (u32, PolicyArg),
    next_id: &AtomicU64,
    mut rng: Rng,
) -> Result<PolicyRun> {
    let rng = &mut rng;
    let t = a.emulate_cpu.to_string();
    let mut args: Vec<String> = ["proxy", "--transparent", "--ports", "8080,8021", "--buffer", "256KiB"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(["--emulate-cpu".into(), t.clone(), "--packet-size".into(), format!("{PACKET}B")]);
    args.extend(["--log-conns".into(), "--stats".into(), "1s".into(), "--cc".into(), a.cc.clone()]);
    args.extend(["--policy".into(), policy_name(policy).into()]);
    match policy {
        PolicyArg::A => args.extend(["--users".into(), a_users(a).join(",")]),
        PolicyArg::C => args.extend(["--per-packet".into(), t]),
        PolicyArg::D => args.extend(["--d-target".into(), d_target(a).to_string()]),
        _ => {}
    }
    let proxy = ProxyChild::start(chain, &args)?;
    servers.ftp_seen.lock().expect("ftp lock").clear();
    // FTP downloads, started at uniform times in the first second.
    let ftp_stop = Arc::new(AtomicBool::new(false));
    let starts: Vec<f64> = (0..a.ftp_flows).map(|_| rng.uniform()).collect();
    let mut ftp = Vec::new();
    for (i, s) in starts.into_iter().enumerate() {
        let (stop, cc) = (ftp_stop.clone(), a.cc.clone());
        ftp.push(chain.spawn_in("clients", move || {
            std::thread::sleep(Duration::from_secs_f64(s));
            let server = SocketAddrV4::new(Ipv4Addr::new(10, 9, 2, 2), FTP_PORT);
            let mut c = tcp_connect_from(ftp_addr(i as u32), server, Duration::from_secs(5))?;
            set_tcp_congestion(c.as_raw_fd(), &cc)?;
            c.set_read_timeout(Some(Duration::from_millis(200)))?;
            let mut buf = vec![0u8; 256 * 1024];
            let mut got = 0u64;
            while !stop.load(Ordering::Relaxed) {
                match c.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => got += n as u64,
                    Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                    Err(e) => return Err(e).context("FTP download"),
                }
            }
            Ok(got)
        })?);
    }
    std::thread::sleep(Duration::from_nanos(a.warmup.as_nanos()));
    // Web transfers: Poisson arrivals during the web time, SURGE sizes.
    let surge = SurgeModel { size_cap: a.size_cap.0, ..SurgeModel::default() };
    let web_start = Instant::now();
    let web_start_unix = unix_now();
    let deadline = web_start + Duration::from_nanos(a.web_time.as_nanos() + a.drain.as_nanos());
    let mut at = 0.0;
    let mut jobs = Vec::new();
    loop {
        at += rng.exponential(1.0 / a.web_per_second);
        if at >= a.web_time.as_secs_f64() {
            break;
        }
        let (id, size) = (next_id.fetch_add(1, Ordering::Relaxed), surge.file_size(rng));
        let src = web_addr(rng.uniform_int(0, u64::from(a.web_sources) - 1) as u32);
        let due = web_start + Duration::from_secs_f64(at);
        if let Some(w) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(w);
        }
        let start_s = web_start.elapsed().as_secs_f64();
        let cc = a.cc.clone();
        let h = chain.spawn_in("clients", move || {
            let (port, delay_s) = web_transfer(src, id, size, &cc, deadline);
            Ok(Transfer { id, start_s, source: src, port, size, delay_s, split: false })
        })?;
        jobs.push(h);
    }
    let mut transfers = Vec::new();
    for h in jobs {
        transfers.push(h.join().map_err(|_| anyhow::anyhow!("a web transfer panicked"))??);
    }
    let web_end_unix = unix_now();
    ftp_stop.store(true, Ordering::Relaxed);
    for h in ftp {
        h.join().map_err(|_| anyhow::anyhow!("an FTP download panicked"))??;
    }
    // Let the proxy print the last finished connections' records.
    std::thread::sleep(Duration::from_millis(2000));
    let lines = proxy.stop();
    let jsonl: String = lines.iter().map(|v| format!("{v}\n")).collect();
    std::fs::write(a.out.join(format!("proxy-{}-r{round}.jsonl", policy_name(policy))), jsonl)?;
    let split_clients: HashSet<SocketAddr> = lines
        .iter()
        .filter(|v| v["split"].as_bool() == Some(true))
        .filter(|v| v["upstream"].as_str().is_some_and(|u| u.ends_with(&format!(":{WEB_PORT}"))))
        .filter_map(|v| v["client"].as_str()?.parse().ok())
        .collect();
    let seen = servers.seen.lock().expect("seen lock");
    let mut agree = (0, 0);
    for tr in &mut transfers {
        tr.split = tr.port != 0 && split_clients.contains(&SocketAddr::new(tr.source.into(), tr.port));
        if let Some(p) = seen.get(&tr.id) {
            agree.1 += 1;
            agree.0 += usize::from((*p == PROXY_ADDR) == tr.split);
        }
    }
    let ftp_seen = servers.ftp_seen.lock().expect("ftp lock");
    Ok(PolicyRun {
        round,
        policy,
        transfers,
        agree,
        ftp_split: ftp_seen.iter().filter(|&&p| p == PROXY_ADDR).count(),
        ftp_total: ftp_seen.len(),
        cpu: cpu_window(&lines, web_start_unix, web_end_unix),
    })
}

fn chain_spec(a: &ProxyWebArgs) -> ChainSpec {
    let seg = |delay: Dur, reverse_loss: f64, seed: u64| Bottleneck {
        rate: Some(a.link_rate),
        reverse_rate: Some(a.link_rate),
        buffer: Buffer::Packets(1000),
        delay,
        reverse_loss,
        seed,
        ..Bottleneck::default()
    };
    // Forward is toward the servers: the clients' data direction is segment 1's reverse.
    ChainSpec {
        nodes: vec!["clients".into(), "p1".into(), "servers".into()],
        segments: vec![seg(a.client_delay, a.client_loss, a.seed * 2), seg(a.server_delay, 0.0, a.seed * 2 + 1)],
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map_or_else(|_| "?".into(), |s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}

fn check(a: &ProxyWebArgs) -> Result<()> {
    if a.policies.is_empty() {
        bail!("--policies: give at least one of none, all, a, c, d");
    }
    if !(1..=100).contains(&a.rounds) {
        bail!("--rounds must be 1 to 100 (each round runs every policy once)");
    }
    if a.policies.contains(&PolicyArg::B) {
        bail!(
            "--policies: b is not meaningful in a proxy (the size is unknown when a connection starts; docs/proxy.md)"
        );
    }
    if a.ftp_flows > 64 {
        bail!("--ftp-flows: at most 64");
    }
    if !(1..=64).contains(&a.web_sources) {
        bail!("--web-sources: 1 to 64");
    }
    if !(a.web_per_second.is_finite() && a.web_per_second > 0.0) {
        bail!("--web-per-second must be positive");
    }
    if !(0.0..=1.0).contains(&a.a_share) {
        bail!("--a-share must be in [0, 1]");
    }
    if !(0.0..1.0).contains(&a.client_loss) {
        bail!("--client-loss must be in [0, 1)");
    }
    Ok(())
}

pub fn run(a: ProxyWebArgs) -> Result<()> {
    check(&a)?;
    if let Some(why) = headroom_testbed::unsupported_reason() {
        bail!("proxy-web needs the testbed (root, network namespaces): {why}");
    }
    crate::outdir::writable_dir(Some(&a.out), "--out")?;
    let load_before = loadavg();
    let chain = Chain::up(&chain_spec(&a))?;
    eprintln!("proxy-web: testbed prefix {}", chain.prefix());
    let mut addrs: Vec<Ipv4Addr> = (0..a.ftp_flows.min(16)).map(ftp_addr).collect();
    addrs.extend((0..a.web_sources).map(web_addr));
    for ip in addrs {
        chain.exec("clients", &["ip", "addr", "add", &format!("{ip}/32"), "dev", "seg1"])?;
    }
    let servers = start_servers(&chain, a.ftp_rate, &a.cc)?;
    let next_id = AtomicU64::new(1);
    let root = Rng::new(a.seed);
    let mut runs = Vec::new();
    let mut round_loads = Vec::new();
    for round in 1..=a.rounds {
        round_loads.push(loadavg());
        for &p in &a.policies {
            eprintln!("proxy-web: round {round}/{}, policy {}", a.rounds, policy_name(p));
            // Every policy of a round gets the same workload.
            let rng = root.fork(u64::from(round));
            runs.push(run_policy(&chain, &a, &servers, (round, p), &next_id, rng)?);
        }
    }
    servers.stop.store(true, Ordering::Relaxed);
    chain.down()?;
    let summary = report(&a, &runs, &load_before, &round_loads)?;
    print!("{summary}");
    Ok(())
}

/// The delays of a run's finished transfers, split or not.
fn delays(r: &PolicyRun, split: bool) -> Vec<f64> {
    r.transfers.iter().filter(|t| t.split == split).filter_map(|t| t.delay_s).collect()
}

/// The four figures compared per run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Figure {
    SplitMedian,
    SplitP95,
    NonSplitMedian,
    NonSplitP95,
}

impl Figure {
    const ALL: [Figure; 4] = [Figure::SplitMedian, Figure::SplitP95, Figure::NonSplitMedian, Figure::NonSplitP95];

    fn name(self) -> &'static str {
        match self {
            Figure::SplitMedian => "median split",
            Figure::SplitP95 => "p95 split",
            Figure::NonSplitMedian => "median non-split",
            Figure::NonSplitP95 => "p95 non-split",
        }
    }

    /// This figure of a run, seconds (None: no such transfer finished).
    fn of(self, r: &PolicyRun) -> Option<f64> {
        match self {
            Figure::SplitMedian => q(&delays(r, true), 0.5),
            Figure::SplitP95 => q(&delays(r, true), 0.95),
            Figure::NonSplitMedian => q(&delays(r, false), 0.5),
            Figure::NonSplitP95 => q(&delays(r, false), 0.95),
        }
    }
}

fn fmt_s(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), |v| format!("{v:.3}"))
}

/// The median of the values present (None if none is).
fn median_of(v: &[Option<f64>]) -> Option<f64> {
    let present: Vec<f64> = v.iter().flatten().copied().collect();
    q(&present, 0.5)
}

/// `a < b` as a verdict: Some(true / false), None when either is missing.
fn lower(a: Option<f64>, b: Option<f64>) -> Option<bool> {
    Some(a? < b?)
}

fn yes_no(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "yes",
        Some(false) => "no",
        None => "no comparison (a class is empty)",
    }
}

/// "yes in k/N rounds, no in m/N, no comparison in j/N".
fn tally(v: &[Option<bool>]) -> String {
    let n = v.len();
    let count = |w: Option<bool>| v.iter().filter(|&&x| x == w).count();
    let mut s = format!("yes in {}/{n} rounds, no in {}/{n}", count(Some(true)), count(Some(false)));
    if count(None) > 0 {
        write!(s, ", no comparison in {}/{n}", count(None)).expect("string");
    }
    s
}

/// The summary's verdicts from the runs, per round and over rounds (the lines the summary ends
/// with): for C and D, "split faster than non-split" (median split below median non-split in
/// the same run); and "D beats C": lower in all four figures (median and p95, split and
/// non-split). Over rounds a figure is the median of the per-round values.
fn verdicts(runs: &[PolicyRun], rounds: u32) -> Result<String> {
    let mut s = String::new();
    let run = |round: u32, p: PolicyArg| runs.iter().find(|r| r.round == round && r.policy == p);
    let present = |p: PolicyArg| runs.iter().any(|r| r.policy == p);
    for (p, name) in [(PolicyArg::C, "C"), (PolicyArg::D, "D")] {
        if !present(p) {
            continue;
        }
        let mut per_round = Vec::new();
        let mut detail = Vec::new();
        for round in 1..=rounds {
            let Some(r) = run(round, p) else { continue };
            let (sp, ns) = (Figure::SplitMedian.of(r), Figure::NonSplitMedian.of(r));
            let v = lower(sp, ns);
            per_round.push(v);
            detail.push(format!("round {round} {} ({} vs {})", yes_no(v), fmt_s(sp), fmt_s(ns)));
            writeln!(
                s,
                "round {round}: {name} keeps split faster than non-split: {} (median split {} s vs non-split {} s)",
                yes_no(v),
                fmt_s(sp),
                fmt_s(ns)
            )?;
        }
        let of = |f: Figure| median_of(&runs.iter().filter(|r| r.policy == p).map(|r| f.of(r)).collect::<Vec<_>>());
        let (sp, ns) = (of(Figure::SplitMedian), of(Figure::NonSplitMedian));
        writeln!(
            s,
            "{name} keeps split faster than non-split: {}; over rounds: {} (median of the rounds' medians: split {} s vs non-split {} s; per round: {})",
            tally(&per_round),
            yes_no(lower(sp, ns)),
            fmt_s(sp),
            fmt_s(ns),
            detail.join(", ")
        )?;
    }
    if present(PolicyArg::C) && present(PolicyArg::D) {
        let mut per_round = Vec::new();
        let mut per_figure: Vec<Vec<Option<bool>>> = vec![Vec::new(); Figure::ALL.len()];
        for round in 1..=rounds {
            let (Some(c), Some(d)) = (run(round, PolicyArg::C), run(round, PolicyArg::D)) else { continue };
            let mut parts = Vec::new();
            let mut all = Some(true);
            for (i, f) in Figure::ALL.iter().enumerate() {
                let (vc, vd) = (f.of(c), f.of(d));
                let v = lower(vd, vc);
                per_figure[i].push(v);
                all = match (all, v) {
                    (Some(a), Some(b)) => Some(a && b),
                    _ => None,
                };
                parts.push(format!("{} C {} D {}", f.name(), fmt_s(vc), fmt_s(vd)));
            }
            per_round.push(all);
            writeln!(
                s,
                "round {round}: D beats C (lower median and p95, split and non-split): {} ({})",
                yes_no(all),
                parts.join(", ")
            )?;
        }
        let mut parts = Vec::new();
        let mut all = Some(true);
        for (i, f) in Figure::ALL.iter().enumerate() {
            let of =
                |p: PolicyArg| median_of(&runs.iter().filter(|r| r.policy == p).map(|r| f.of(r)).collect::<Vec<_>>());
            let (vc, vd) = (of(PolicyArg::C), of(PolicyArg::D));
            let v = lower(vd, vc);
            all = match (all, v) {
                (Some(a), Some(b)) => Some(a && b),
                _ => None,
            };
            let k = per_figure[i].iter().filter(|&&x| x == Some(true)).count();
            parts.push(format!(
                "{} C {} D {} (D lower in {k}/{} rounds)",
                f.name(),
                fmt_s(vc),
                fmt_s(vd),
                per_figure[i].len()
            ));
        }
        writeln!(
            s,
            "D beats C (lower median and p95, split and non-split): {}; over rounds: {} (medians over rounds: {})",
            tally(&per_round),
            yes_no(all),
            parts.join(", ")
        )?;
    }
    Ok(s)
}

/// C against D transfer by transfer: every policy of a round has the same workload, so the
/// `k`-th transfer of the C run and of the D run of a round are the same request (source and
/// size; mismatches are counted and must be 0). As the simulator's `overlay-policy-d` does: a
/// transfer neither splits never meets the proxy's CPU, so its delay should not depend on the
/// policy (the difference is the machine's noise), and a policy changes the non-split figures
/// only through *which* transfers it leaves unsplit (their sizes are printed).
fn paired_c_d(runs: &[PolicyRun], rounds: u32) -> Result<String> {
    let mut s = String::new();
    let run = |round: u32, p: PolicyArg| runs.iter().find(|r| r.round == round && r.policy == p);
    let ms = |v: &[f64], p: f64| q(v, p).map_or_else(|| "-".into(), |x| format!("{:+.1}", x * 1e3));
    for round in 1..=rounds {
        let (Some(c), Some(d)) = (run(round, PolicyArg::C), run(round, PolicyArg::D)) else { continue };
        let pairs: Vec<(&Transfer, &Transfer)> = c.transfers.iter().zip(&d.transfers).collect();
        let mismatched = pairs.iter().filter(|(x, y)| (x.source, x.size) != (y.source, y.size)).count()
            + c.transfers.len().abs_diff(d.transfers.len());
        // (delay under D - under C, split under either) of the transfers finished under both.
        let finished: Vec<(f64, bool)> =
            pairs.iter().filter_map(|(x, y)| Some((y.delay_s? - x.delay_s?, x.split || y.split))).collect();
        let neither: Vec<f64> = finished.iter().filter(|f| !f.1).map(|f| f.0).collect();
        let all: Vec<f64> = finished.iter().map(|f| f.0).collect();
        let share = |pred: &dyn Fn(f64) -> bool| {
            100.0 * all.iter().filter(|&&x| pred(x)).count() as f64 / all.len().max(1) as f64
        };
        let sizes =
            |r: &PolicyRun| -> Vec<f64> { r.transfers.iter().filter(|t| !t.split).map(|t| t.size as f64).collect() };
        let kb = |v: &[f64], p: f64| q(v, p).map_or_else(|| "-".into(), |x| format!("{:.1}", x / 1e3));
        let (sc, sd) = (sizes(c), sizes(d));
        writeln!(
            s,
            "round {round}: C and D paired ({} transfers, {mismatched} mismatches): non-split under both {}, delay D - C median {} ms, p5 {} ms, p95 {} ms; finished under both {}, delay D - C median {} ms, p5 {} ms, p95 {} ms, faster under D by > 1 ms {:.0} %, slower by > 1 ms {:.0} %; sizes of the non-split (kB) median / p95: C {} / {}, D {} / {}",
            pairs.len(),
            neither.len(),
            ms(&neither, 0.5),
            ms(&neither, 0.05),
            ms(&neither, 0.95),
            all.len(),
            ms(&all, 0.5),
            ms(&all, 0.05),
            ms(&all, 0.95),
            share(&|x| x < -1e-3),
            share(&|x| x > 1e-3),
            kb(&sc, 0.5),
            kb(&sc, 0.95),
            kb(&sd, 0.5),
            kb(&sd, 0.95)
        )?;
    }
    Ok(s)
}

/// Writes transfers.csv, cdf.svg and summary.txt; returns the summary.
fn report(a: &ProxyWebArgs, runs: &[PolicyRun], load_before: &str, round_loads: &[String]) -> Result<String> {
    let mut csv = String::from("round,policy,id,start_s,source,port,size_bytes,split,delay_s\n");
    for r in runs {
        for t in &r.transfers {
            let d = t.delay_s.map_or_else(String::new, |d| format!("{d:.6}"));
            writeln!(
                csv,
                "{},{},{},{:.6},{},{},{},{},{}",
                r.round,
                policy_name(r.policy),
                t.id,
                t.start_s,
                t.source,
                t.port,
                t.size,
                t.split,
                d
            )?;
        }
    }
    std::fs::write(a.out.join("transfers.csv"), csv)?;
    // One panel per policy, its rounds pooled.
    let pooled = |p: PolicyArg, split: bool| -> Vec<f64> {
        runs.iter().filter(|r| r.policy == p).flat_map(|r| delays(r, split)).collect()
    };
    let panels: Vec<Chart> = a
        .policies
        .iter()
        .map(|&p| Chart {
            title: format!("policy {} ({} rounds pooled)", policy_name(p), a.rounds),
            x_label: "transfer delay, connect to last byte (s, log scale)".into(),
            y_label: "cumulative fraction of transfers".into(),
            series: vec![
                Series::line("split", cdf(&pooled(p, true))),
                Series::line("non-split", cdf(&pooled(p, false))),
            ],
            y_range: Some((0.0, 1.0)),
            x_log: true,
            ..Default::default()
        })
        .collect();
    std::fs::write(
        a.out.join("cdf.svg"),
        panels_svg("Web transfers through a proxy with an emulated CPU (kernel, testbed)", &panels),
    )?;
    let mut s = String::new();
    writeln!(
        s,
        "proxy-web: T = {} per {PACKET} B packet, {} per SYN / SYN-ACK; {} FTP x {}; web {}/s Poisson, SURGE sizes capped at {} B; delays {} (clients-p1) and {} (p1-servers), {}; {} of web per policy",
        a.emulate_cpu,
        Dur(a.emulate_cpu.as_nanos() * 10),
        a.ftp_flows,
        a.ftp_rate,
        a.web_per_second,
        a.size_cap.0,
        a.client_delay,
        a.server_delay,
        a.link_rate,
        a.web_time
    )?;
    let order: Vec<&str> = a.policies.iter().map(|&p| policy_name(p)).collect();
    writeln!(
        s,
        "rounds: {}, each running {} in this order, every policy of a round with the same workload (seed {}, round r: its fork r)",
        a.rounds,
        order.join(", "),
        a.seed
    )?;
    writeln!(s, "policy a users: {}", a_users(a).join(", "))?;
    if a.policies.contains(&PolicyArg::D) {
        writeln!(s, "policy d target: {} (smoothed queueing delay of the emulated CPU)", d_target(a))?;
    }
    writeln!(s, "load average before / after: {load_before} / {}", loadavg())?;
    for r in runs {
        let n = format!("round {} {}", r.round, policy_name(r.policy));
        if r.policy == a.policies[0] {
            let load = round_loads.get(r.round as usize - 1).map_or("?", |l| l.as_str());
            writeln!(s, "round {}: load average at its start {load}", r.round)?;
        }
        let (sp, ns) = (delays(r, true), delays(r, false));
        let unfinished = r.transfers.iter().filter(|t| t.delay_s.is_none()).count();
        let cpu = r.cpu.map_or_else(
            || "emulated CPU: no stats".to_string(),
            |(u, w)| format!("emulated CPU busy {:.0} % of the web time, mean wait {w:.1} ms per job", u * 100.0),
        );
        writeln!(
            s,
            "{n}: web transfers {} (split {}, non-split {}, unfinished {unfinished}); FTP split {}/{}; {cpu}; split flag and server's view agree {}/{}",
            r.transfers.len(),
            sp.len(),
            ns.len(),
            r.ftp_split,
            r.ftp_total,
            r.agree.0,
            r.agree.1
        )?;
        writeln!(
            s,
            "{n}: median / p95 delay (s): split {} / {}, non-split {} / {}",
            fmt_q(&sp, 0.5),
            fmt_q(&sp, 0.95),
            fmt_q(&ns, 0.5),
            fmt_q(&ns, 0.95)
        )?;
    }
    for &p in &a.policies {
        let mine: Vec<&PolicyRun> = runs.iter().filter(|r| r.policy == p).collect();
        let counts: Vec<String> = mine
            .iter()
            .map(|r| format!("{}/{}", r.transfers.iter().filter(|t| t.split).count(), r.transfers.len()))
            .collect();
        let busy: Vec<String> =
            mine.iter().map(|r| r.cpu.map_or_else(|| "-".into(), |(u, _)| format!("{:.0}", u * 100.0))).collect();
        writeln!(
            s,
            "{} over {} rounds: split / web transfers [{}]; emulated CPU busy [{}] %",
            policy_name(p),
            mine.len(),
            counts.join(", "),
            busy.join(", ")
        )?;
        let figs: Vec<String> = Figure::ALL
            .iter()
            .map(|f| {
                let v: Vec<Option<f64>> = mine.iter().map(|r| f.of(r)).collect();
                let each: Vec<String> = v.iter().map(|&x| fmt_s(x)).collect();
                format!("{} {} [{}]", f.name(), fmt_s(median_of(&v)), each.join(", "))
            })
            .collect();
        writeln!(
            s,
            "{} over {} rounds, median of the rounds (s) [per round]: {}",
            policy_name(p),
            mine.len(),
            figs.join("; ")
        )?;
    }
    s.push_str(&verdicts(runs, a.rounds)?);
    s.push_str(&paired_c_d(runs, a.rounds)?);
    std::fs::write(a.out.join("summary.txt"), &s)?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(round: u32, policy: PolicyArg, split: &[f64], non_split: &[f64]) -> PolicyRun {
        let t = |d: f64, split: bool| Transfer {
            id: 0,
            start_s: 0.0,
            source: Ipv4Addr::LOCALHOST,
            port: 1,
            size: 1,
            delay_s: Some(d),
            split,
        };
        let mut transfers: Vec<Transfer> = split.iter().map(|&d| t(d, true)).collect();
        transfers.extend(non_split.iter().map(|&d| t(d, false)));
        PolicyRun { round, policy, transfers, agree: (0, 0), ftp_split: 0, ftp_total: 0, cpu: None }
    }

    #[test]
    fn verdicts_are_computed_per_round_and_over_rounds() {
        // C: split slower than non-split in rounds 1 and 2, faster in round 3; D: split faster
        // in every round, and lower than C in all four figures in rounds 1 and 3 only.
        let runs = vec![
            run(1, PolicyArg::C, &[0.3, 0.35, 0.4], &[0.1, 0.15, 0.2]),
            run(1, PolicyArg::D, &[0.05, 0.075, 0.1], &[0.08, 0.115, 0.15]),
            run(2, PolicyArg::C, &[0.5, 0.55, 0.6], &[0.1, 0.15, 0.2]),
            run(2, PolicyArg::D, &[0.05, 0.075, 0.1], &[0.3, 0.35, 0.4]),
            run(3, PolicyArg::C, &[0.05], &[]),
            run(3, PolicyArg::D, &[0.01, 0.015, 0.02], &[0.03]),
        ];
        let v = verdicts(&runs, 3).unwrap();
        let line = |start: &str| v.lines().find(|l| l.starts_with(start)).unwrap_or_else(|| panic!("{start}\n{v}"));
        assert!(line("round 1: C keeps split").contains(": no (median split 0.350 s vs non-split 0.150 s)"), "{v}");
        assert!(line("round 3: C keeps split").contains("no comparison"), "{v}");
        // Over rounds: C's medians 0.35, 0.55, 0.05 -> 0.35; non-split 0.15, 0.15 -> 0.15.
        let c = line("C keeps split faster than non-split:");
        assert!(c.contains("yes in 0/3 rounds, no in 2/3, no comparison in 1/3; over rounds: no"), "{c}");
        assert!(c.contains("split 0.350 s vs non-split 0.150 s"), "{c}");
        let d = line("D keeps split faster than non-split:");
        assert!(d.contains("yes in 3/3 rounds, no in 0/3; over rounds: yes"), "{d}");
        assert!(line("round 1: D beats C").contains(": yes ("), "{v}");
        assert!(line("round 2: D beats C").contains(": no ("), "{v}");
        assert!(line("round 3: D beats C").contains("no comparison"), "{v}");
        let dc = line("D beats C (lower");
        assert!(dc.contains("yes in 1/3 rounds, no in 1/3, no comparison in 1/3"), "{dc}");
        assert!(dc.contains("median split C 0.350 D 0.075 (D lower in 3/3 rounds)"), "{dc}");
    }

    #[test]
    fn c_and_d_are_paired_transfer_by_transfer() {
        // Round 1: C split, split, non-split; D split, non-split, non-split (same requests).
        let c = run(1, PolicyArg::C, &[0.5, 0.3], &[0.1]);
        let mut d = run(1, PolicyArg::D, &[0.2], &[0.25, 0.102]);
        for (k, t) in d.transfers.iter_mut().enumerate() {
            t.size = 1000 * (k as u64 + 1);
        }
        let mut c = c;
        for (k, t) in c.transfers.iter_mut().enumerate() {
            t.size = 1000 * (k as u64 + 1);
        }
        let v = paired_c_d(&[c, d], 1).unwrap();
        assert!(v.starts_with("round 1: C and D paired (3 transfers, 0 mismatches): non-split under both 1, delay D - C median +2.0 ms"), "{v}");
        // Differences -300, -50, +2 ms: median -50, faster under D 2 of 3.
        assert!(v.contains("finished under both 3, delay D - C median -50.0 ms, p5 -300.0 ms, p95 +2.0 ms, faster under D by > 1 ms 67 %, slower by > 1 ms 33 %"), "{v}");
        assert!(v.contains("sizes of the non-split (kB) median / p95: C 3.0 / 3.0, D 3.0 / 3.0"), "{v}");
    }
}
