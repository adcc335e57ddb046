//! `headroom proxy --workers N`: N worker processes accept on one address, supervised by the
//! process the operator started.
//!
//! Why processes: RLIMIT_NOFILE is per process, and a relayed connection holds two sockets (and
//! pipes while data moves) in the proxy; where the hard limit cannot be raised (this container:
//! 20,000, no CAP_SYS_RESOURCE) one process tops out near 9,990 connections. Like nginx's
//! workers, each worker has its own descriptor limit and its own tokio runtime.
//!
//! How: the supervisor binds N listening sockets on the address with SO_REUSEPORT (one
//! reuseport group; the kernel hashes each new connection's 4-tuple to one of them) and starts
//! N copies of its own command line with `--worker ID`, each inheriting its socket as
//! descriptor 3 and dying with the supervisor (PR_SET_PDEATHSIG). The supervisor forwards
//! SIGINT/SIGTERM/SIGHUP (as SIGTERM), forwards the workers' output lines, prints the totals
//! of their `--stats` lines, and if a worker exits on its own stops the others and exits
//! non-zero. Transparent mode is refused with workers (docs/proxy.md says why).
//!
//! How the limits are divided, since the kernel spreads connections evenly and each worker sees
//! only its own: worker `i` gets `total / N` (+1 for the first `total mod N`) of `--max-conns`
//! and of `--max-per-source`, so the sums are the configured limits; policy C's capacity
//! `utilisation / t` is divided by N (each worker's `t` is `N t`), so each worker splits while
//! its own `L(T)` — about `1/N` of the whole proxy's — is below its share.

use crate::proxy::{block_signals, wait_signal, ProxyArgs};
use anyhow::{bail, Context};
use headroom_core::overlay::SplitPolicy;
use headroom_core::units::Dur;
use serde_json::{json, Map, Value};
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

/// Which worker this process is, of how many.
#[derive(Clone, Copy, Debug)]
pub struct Worker {
    pub id: usize,
    pub of: usize,
}

impl Worker {
    /// This worker's share of a limit: `total / N`, one more for the first `total mod N`.
    pub fn share(self, total: usize) -> usize {
        total / self.of + usize::from(self.id < total % self.of)
    }

    /// Policy C's capacity divided among the workers: `t` becomes `N t`.
    pub fn divide(self, policy: &mut SplitPolicy) {
        if let SplitPolicy::LowLoad(c) = policy {
            c.per_packet = Dur(c.per_packet.0 * self.of as u64);
        }
    }
}

/// The listening socket a worker inherits as descriptor 3.
pub fn inherited_listener() -> anyhow::Result<std::net::TcpListener> {
    let mut on: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt into a local int of the length passed.
    let r = unsafe {
        libc::getsockopt(3, libc::SOL_SOCKET, libc::SO_ACCEPTCONN, (&mut on as *mut libc::c_int).cast(), &mut len)
    };
    if r != 0 || on == 0 {
        bail!("--worker is internal to --workers: descriptor 3 is not a listening socket");
    }
    // SAFETY: descriptor 3 is a listening socket this process owns from now on.
    Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(3) })
}

/// The running workers; dropping them stops them (SIGTERM, then SIGKILL after 5 s) and reaps
/// them, so no path out of the supervisor leaves one behind.
struct Workers(Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for c in &self.0 {
            // SAFETY: signalling a child we started, by its pid (not yet reaped: still ours).
            unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        for c in &mut self.0 {
            while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if matches!(c.try_wait(), Ok(None)) {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
    }
}

/// Starts worker `id` on `listener` (inherited as descriptor 3), its stdout piped to us.
fn start_worker(id: usize, listener: &std::net::TcpListener) -> anyhow::Result<Child> {
    let exe = std::env::current_exe().context("finding this program to start workers")?;
    let mut cmd = Command::new(exe);
    cmd.args(std::env::args_os().skip(1))
        .args(["--worker", &id.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let fd = listener.as_raw_fd();
    // SAFETY: getpid before fork; the closure makes only async-signal-safe calls (dup2, fcntl,
    // prctl, getppid) in the child before exec.
    let parent = unsafe { libc::getpid() };
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
            if fd == 3 {
                let fl = libc::fcntl(3, libc::F_GETFD);
                if fl < 0 || libc::fcntl(3, libc::F_SETFD, fl & !libc::FD_CLOEXEC) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The worker goes when the supervisor goes, even by SIGKILL.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 || libc::getppid() != parent {
                return Err(std::io::Error::other("the supervisor is gone"));
            }
            Ok(())
        });
    }
    cmd.spawn().with_context(|| format!("starting worker {id}"))
}

/// The totals of the workers' latest `--stats` lines: counters and times summed
/// (`buffered_peak_bytes` too: an upper bound of the whole proxy's peak, the workers' peaks
/// need not coincide).
fn totals(latest: &[Value]) -> Value {
    let mut sum = Map::new();
    for v in latest {
        for (k, x) in v.as_object().into_iter().flatten() {
            if matches!(k.as_str(), "worker" | "t_s" | "unix_s") {
                continue;
            }
            let acc = sum.entry(k.clone()).or_insert(json!(0u64));
            *acc = match (acc.as_u64(), x.as_u64()) {
                (Some(a), Some(b)) => json!(a + b),
                _ => json!(acc.as_f64().unwrap_or(0.0) + x.as_f64().unwrap_or(0.0)),
            };
        }
    }
    Value::Object(sum)
}

/// Runs the supervisor of `a.workers` workers (see the module documentation).
pub fn supervise(a: &ProxyArgs, listen: SocketAddr, to: SocketAddr) -> anyhow::Result<()> {
    let n = a.workers;
    if a.transparent {
        bail!(
            "--transparent with --workers {n} is not supported: one nftables gate serves the whole proxy and \
             policy C would need the workers' load estimates combined (docs/proxy.md, \"Worker processes\")"
        );
    }
    if a.emulate_cpu.is_some() {
        bail!("--emulate-cpu with --workers {n} is not supported: the emulated CPU is one FIFO queue shared by every connection, which separate processes do not share");
    }
    if a.max_conns < n || a.max_per_source < n {
        bail!("--max-conns and --max-per-source must be at least --workers ({n}): each worker gets a share");
    }
    if let Some(cc) = &a.cc {
        headroom_proxy::check_congestion(cc)?;
    }
    // SAFETY: setting a signal disposition to SIG_IGN (a worker's pipe closing must not kill us).
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let sigs = block_signals();
    let listeners = headroom_proxy::bind_reuseport(listen, n, to)?;
    let local = listeners[0].local_addr()?;
    let mut workers = Workers(Vec::with_capacity(n));
    let (tx, rx) = mpsc::channel::<(usize, String)>();
    for (id, l) in listeners.iter().enumerate() {
        let mut c = start_worker(id, l)?;
        let out = c.stdout.take().context("worker stdout")?;
        workers.0.push(c);
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send((id, line)).is_err() {
                    break;
                }
            }
        });
    }
    drop(tx);
    // Each worker holds its own copy; ours would keep a dead worker's socket in the group.
    drop(listeners);
    let pids: Vec<String> = workers.0.iter().map(|c| c.id().to_string()).collect();
    eprintln!(
        "headroom proxy: {local} -> {to} (policy {:?}, {:?}), {n} worker processes (pids {}) on one SO_REUSEPORT address",
        a.policy,
        a.mode,
        pids.join(", ")
    );
    let start = Instant::now();
    let tick = a.stats.map(|d| Duration::from_nanos(d.as_nanos())).unwrap_or(Duration::from_millis(200));
    let mut next_stats = start + tick;
    let mut latest: Vec<Option<Value>> = vec![None; n];
    let stdout = std::io::stdout();
    let forward = |latest: &mut Vec<Option<Value>>, id: usize, line: String| -> std::io::Result<()> {
        if let Ok(v) = serde_json::from_str::<Value>(&line) {
            if v.get("accepted").is_some() {
                latest[id] = Some(v);
            }
        }
        writeln!(stdout.lock(), "{line}")
    };
    let died = loop {
        let wait = next_stats.saturating_duration_since(Instant::now()).min(Duration::from_millis(100));
        if wait_signal(&sigs, wait) {
            break None;
        }
        for (id, line) in rx.try_iter() {
            forward(&mut latest, id, line)?;
        }
        if let Some(d) = workers.0.iter_mut().enumerate().find_map(|(id, c)| match c.try_wait() {
            Ok(Some(st)) => Some((id, c.id(), st.to_string())),
            _ => None,
        }) {
            // A Ctrl-C reaches the workers too (one process group): a worker that stopped on it
            // just before our own wait saw the signal is not a failure.
            break if wait_signal(&sigs, Duration::ZERO) { None } else { Some(d) };
        }
        if Instant::now() >= next_stats {
            if a.stats.is_some() && latest.iter().all(Option::is_some) {
                let all: Vec<Value> = latest.iter().flatten().cloned().collect();
                let mut v = totals(&all);
                v["worker"] = json!("all");
                v["workers"] = json!(n);
                v["t_s"] = json!(start.elapsed().as_secs_f64());
                v["unix_s"] =
                    json!(SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64()));
                writeln!(stdout.lock(), "{v}")?;
            }
            next_stats += tick;
        }
        stdout.lock().flush()?;
    };
    if let Some((id, pid, st)) = &died {
        eprintln!("headroom proxy: worker {id} (pid {pid}) exited on its own ({st}); stopping the others");
    }
    drop(workers);
    // The workers' last lines (connections that ended as they stopped).
    let deadline = Instant::now() + Duration::from_secs(2);
    while let Ok((id, line)) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        forward(&mut latest, id, line)?;
    }
    stdout.lock().flush()?;
    if let Some((id, pid, st)) = died {
        bail!("worker {id} (pid {pid}) exited unexpectedly ({st})");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_to_the_limit_and_differ_by_at_most_one() {
        for (total, n) in [(10_000, 2), (7, 3), (1_000, 7), (5, 5)] {
            let s: Vec<usize> = (0..n).map(|id| Worker { id, of: n }.share(total)).collect();
            assert_eq!(s.iter().sum::<usize>(), total, "{total} over {n}: {s:?}");
            assert!(s.iter().max().unwrap() - s.iter().min().unwrap() <= 1, "{s:?}");
        }
    }

    #[test]
    fn policy_c_capacity_is_divided_among_the_workers() {
        let c = headroom_core::overlay::SplitWhileLowLoad::paper(Dur(250_000), headroom_core::units::Time::ZERO);
        let whole = c.limit_pps();
        let mut p = SplitPolicy::LowLoad(c);
        Worker { id: 1, of: 4 }.divide(&mut p);
        let SplitPolicy::LowLoad(c) = p else { unreachable!() };
        assert!((c.limit_pps() * 4.0 - whole).abs() < 1e-9, "{} x 4 vs {whole}", c.limit_pps());
    }

    #[test]
    fn totals_sum_counters_and_times_but_not_stamps() {
        let a = json!({"worker": 0, "accepted": 3, "upstream_idle_ms": 1.5, "t_s": 2.0});
        let b = json!({"worker": 1, "accepted": 4, "upstream_idle_ms": 0.25, "t_s": 2.1});
        let t = totals(&[a, b]);
        assert_eq!(t["accepted"], json!(7));
        assert_eq!(t["upstream_idle_ms"], json!(1.75));
        assert!(t.get("t_s").is_none() && t.get("worker").is_none());
    }
}
