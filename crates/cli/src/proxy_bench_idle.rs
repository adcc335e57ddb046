//! `proxy-bench --idle N`: N idle connections held through the proxy, its memory per connection.
//!
//! Three kinds of process share the descriptors, so that none holds more than RLIMIT_NOFILE
//! allows (20,000 here, and it cannot be raised): the benchmark holds the upstream ends (one
//! poll loop, [`HoldServer`]); a child `headroom proxy-bench --hold-clients ADDR --idle N` holds
//! the client ends ([`hold_clients`]); the proxy holds two sockets per connection, divided among
//! `--workers` processes when one process could not hold them all.
//!
//! "Established end to end": the upstream holds exactly N connections from the proxy, a byte
//! sent on a sample of the client connections comes back through the proxy (echoed by the
//! upstream), and no client connection has been reset or closed.

use crate::proxy_bench::{children_of, die_with_parent, rss_bytes, ProxyProc};
use anyhow::{bail, Context};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// The upstream: accepts and holds connections, echoes whatever arrives on them, forgets those
/// that close. One thread, poll(2) over every socket.
pub struct HoldServer {
    pub addr: SocketAddr,
    /// Connections open now.
    open: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl HoldServer {
    pub fn start() -> anyhow::Result<HoldServer> {
        let l = TcpListener::bind("127.0.0.1:0")?;
        // A backlog of 4,096 (listen again: Linux resizes it): the proxy connects upstream as
        // fast as clients arrive, and a SYN dropped at a full backlog costs the proxy 1 s and
        // then 3 s of retransmission, past its 5 s connect timeout (the client is reset).
        // SAFETY: listen on our own listening socket.
        if unsafe { libc::listen(l.as_raw_fd(), 4096) } != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        l.set_nonblocking(true)?;
        let addr = l.local_addr()?;
        let (open, stop) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let (o, st) = (open.clone(), stop.clone());
        let thread = thread::spawn(move || hold_loop(l, &o, &st));
        Ok(HoldServer { addr, open, stop, thread: Some(thread) })
    }
    pub fn open(&self) -> usize {
        self.open.load(Relaxed)
    }
}

impl Drop for HoldServer {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn hold_loop(l: TcpListener, open: &AtomicUsize, stop: &AtomicBool) {
    let mut conns: Vec<TcpStream> = Vec::new();
    let mut fds: Vec<libc::pollfd> = Vec::new();
    let mut buf = [0u8; 64];
    while !stop.load(Relaxed) {
        fds.clear();
        fds.push(libc::pollfd { fd: l.as_raw_fd(), events: libc::POLLIN, revents: 0 });
        fds.extend(conns.iter().map(|c| libc::pollfd { fd: c.as_raw_fd(), events: libc::POLLIN, revents: 0 }));
        // SAFETY: `fds` is a live array of the length passed.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 50) };
        if n <= 0 {
            continue;
        }
        let mut closed = vec![false; conns.len()];
        for (i, f) in fds.iter().enumerate().skip(1) {
            if f.revents == 0 {
                continue;
            }
            let c = &mut conns[i - 1];
            match c.read(&mut buf) {
                Ok(0) | Err(_) => closed[i - 1] = true,
                Ok(k) => closed[i - 1] = c.write_all(&buf[..k]).is_err(),
            }
        }
        let mut k = 0;
        conns.retain(|_| {
            k += 1;
            !closed[k - 1]
        });
        if fds[0].revents != 0 {
            while let Ok((c, _)) = l.accept() {
                let _ = c.set_nonblocking(false);
                let _ = c.set_nodelay(true);
                conns.push(c);
            }
        }
        open.store(conns.len(), Relaxed);
    }
}

/// The child's side (`proxy-bench --hold-clients ADDR --idle N`): opens `n` connections to
/// `to` and prints `{"connected": n, "open_s": ...}`; then for each line `echo K` on stdin sends
/// one byte on K connections spread over all and reads it back, checks every connection for a
/// reset or close, and prints `{"echoed": .., "sample": K, "broken": ..}`; exits at the end of
/// stdin (the benchmark gone).
pub fn hold_clients(to: SocketAddr, n: usize) -> anyhow::Result<()> {
    let _ = headroom_proxy::sock::raise_nofile_limit();
    let t = Instant::now();
    let mut held = Vec::with_capacity(n);
    for i in 0..n {
        held.push(TcpStream::connect(to).with_context(|| format!("client connection {i} of {n}"))?);
    }
    let out = std::io::stdout();
    writeln!(out.lock(), "{}", json!({"connected": n, "open_s": t.elapsed().as_secs_f64()}))?;
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let Some(k) = line.strip_prefix("echo ").and_then(|k| k.parse::<usize>().ok()) else {
            bail!("unknown command {line:?}");
        };
        let k = k.clamp(1, n.max(1));
        let mut echoed = 0;
        for j in 0..k {
            let s = &mut held[j * n / k];
            let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
            let mut b = [j as u8];
            if s.write_all(&b).is_ok() && s.read_exact(&mut b).is_ok() && b[0] == j as u8 {
                echoed += 1;
            }
        }
        // Anything readable now on an idle connection is a FIN or a reset: it was broken.
        let mut fds: Vec<libc::pollfd> = held
            .iter()
            .map(|c| libc::pollfd { fd: c.as_raw_fd(), events: libc::POLLIN | libc::POLLRDHUP, revents: 0 })
            .collect();
        // SAFETY: `fds` is a live array of the length passed.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
        if r < 0 {
            bail!("poll: {}", std::io::Error::last_os_error());
        }
        let broken = fds.iter().filter(|f| f.revents != 0).count();
        writeln!(out.lock(), "{}", json!({"echoed": echoed, "sample": k, "broken": broken}))?;
    }
    Ok(())
}

/// The client child; killed and reaped on drop.
struct Clients {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Clients {
    fn start(to: SocketAddr, n: usize) -> anyhow::Result<Clients> {
        let mut cmd = Command::new(std::env::current_exe()?);
        cmd.args(["proxy-bench", "--hold-clients", &to.to_string(), "--idle", &n.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let me = std::process::id();
        // SAFETY: only async-signal-safe syscalls in the child before exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || die_with_parent(me));
        }
        let mut child = cmd.spawn().context("starting the client process")?;
        let out = child.stdout.take().context("client stdout")?;
        let (tx, lines) = std::sync::mpsc::channel();
        thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Ok(Clients { child, lines })
    }
    /// The next line of the child as JSON, within `wait`.
    fn next(&mut self, wait: Duration) -> anyhow::Result<Value> {
        let l = self.lines.recv_timeout(wait).map_err(|_| {
            let st = self.child.try_wait().ok().flatten().map_or("running".to_string(), |s| s.to_string());
            anyhow::anyhow!("the client process did not answer within {wait:?} ({st})")
        })?;
        serde_json::from_str(&l).with_context(|| format!("client process said {l:?}"))
    }
    fn ask(&mut self, cmd: &str) -> anyhow::Result<()> {
        writeln!(self.child.stdin.as_mut().context("client stdin")?, "{cmd}")?;
        Ok(())
    }
}

impl Drop for Clients {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The idle run's figures.
pub struct IdleResult {
    pub connections: usize,
    pub workers: usize,
    /// Proxy resident memory growth (all its processes) per connection, bytes.
    pub rss_per_conn: f64,
    /// Kernel TCP memory growth (/proc/net/sockstat "mem": socket buffers) per connection,
    /// bytes. Its resolution is coarse: the kernel charges it per CPU in batches of
    /// net.core.mem_pcpu_rsv pages (256 here), so about ±2 MiB over all connections.
    pub kernel_per_conn: f64,
    /// Kernel slab growth (/proc/meminfo "Slab") per connection, bytes: the four sockets of a
    /// relayed connection (client, the proxy's two, upstream) with their files, inodes and epoll
    /// entries — plus whatever other processes allocated meanwhile.
    pub slab_per_conn: f64,
    /// Seconds to open them (client connects until the proxy's memory stopped growing).
    pub open_s: f64,
    pub echoed: usize,
    pub sample: usize,
    /// Per proxy process: (pid, RSS growth bytes, open descriptors).
    pub processes: Vec<(u32, u64, usize)>,
}

impl IdleResult {
    pub fn to_json(&self) -> Value {
        json!({"connections": self.connections, "proxy_workers": self.workers,
               "proxy_rss_bytes_per_conn": self.rss_per_conn, "kernel_tcp_bytes_per_conn": self.kernel_per_conn,
               "kernel_slab_bytes_per_conn": self.slab_per_conn,
               "open_s": self.open_s, "established": self.connections, "echoed": self.echoed, "sample": self.sample,
               "proxy_processes": self.processes.iter().map(|(pid, rss, fds)| json!({"pid": pid, "rss_growth_bytes": rss, "descriptors": fds})).collect::<Vec<_>>()})
    }
}

/// The kernel's slab memory (/proc/meminfo "Slab"), bytes.
fn slab_bytes() -> anyhow::Result<u64> {
    let m = std::fs::read_to_string("/proc/meminfo")?;
    let l = m.lines().find(|l| l.starts_with("Slab:")).context("no Slab in /proc/meminfo")?;
    Ok(l.split_whitespace().nth(1).context("Slab format")?.parse::<u64>()? * 1024)
}

fn descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Holds `n` idle connections through `p` (whose upstream is `server`), checks them end to
/// end and measures the memory they cost (see the module documentation). Errors if any is
/// not established or a sampled byte does not come back.
pub fn measure(p: &ProxyProc, server: &HoldServer, n: usize, workers: usize) -> anyhow::Result<IdleResult> {
    let pids = p.pids();
    let rss0: Vec<u64> = pids.iter().map(|&pid| rss_bytes(pid)).collect::<anyhow::Result<_>>()?;
    let mem0 = crate::proxy_bench::tcp_mem_pages()?;
    let slab0 = slab_bytes()?;
    let t = Instant::now();
    let mut c = Clients::start(p.addr, n)?;
    let connected = c.next(Duration::from_secs(300))?;
    if connected["connected"].as_u64() != Some(n as u64) {
        bail!("the client process: {connected}");
    }
    // Wait until the proxy has connected upstream for every one and its memory stopped growing.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = 0;
    loop {
        thread::sleep(Duration::from_millis(100));
        let r: u64 = pids.iter().map(|&pid| rss_bytes(pid).unwrap_or(0)).sum();
        if server.open() >= n && r == last {
            break;
        }
        if Instant::now() > deadline {
            bail!("after 60 s the upstream holds {} of {n} connections through the proxy", server.open());
        }
        last = r;
    }
    let open_s = t.elapsed().as_secs_f64();
    let rss1: Vec<u64> = pids.iter().map(|&pid| rss_bytes(pid)).collect::<anyhow::Result<_>>()?;
    let kmem = crate::proxy_bench::tcp_mem_pages()?.saturating_sub(mem0) as f64 * 4096.0 / n as f64;
    let slab = slab_bytes()?.saturating_sub(slab0) as f64 / n as f64;
    let processes: Vec<(u32, u64, usize)> = pids
        .iter()
        .zip(rss0.iter().zip(&rss1))
        .map(|(&pid, (a, b))| (pid, b.saturating_sub(*a), descriptors(pid)))
        .collect();
    let rss = processes.iter().map(|x| x.1).sum::<u64>() as f64 / n as f64;
    let sample = n.min(100);
    c.ask(&format!("echo {sample}"))?;
    let check = c.next(Duration::from_secs(120))?;
    let (echoed, broken) = (check["echoed"].as_u64().unwrap_or(0) as usize, check["broken"].as_u64().unwrap_or(1));
    if server.open() != n || echoed != sample || broken != 0 {
        bail!(
            "not established end to end: the upstream holds {} of {n}, {echoed} of {sample} sampled bytes came back, {broken} client connections reset or closed",
            server.open()
        );
    }
    if children_of(p.pid()).len() + 1 != pids.len() {
        bail!("the proxy's worker processes changed during the run");
    }
    Ok(IdleResult {
        connections: n,
        workers,
        rss_per_conn: rss,
        kernel_per_conn: kmem,
        slab_per_conn: slab,
        open_s,
        echoed,
        sample,
        processes,
    })
}
