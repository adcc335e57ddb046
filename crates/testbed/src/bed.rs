//! Building and tearing down a testbed: namespaces, links, addresses, routes, qdiscs, the delay
//! box, and the bookkeeping that lets `down --stale` clean up after a killed run.
//!
//! Naming: every run draws a prefix `hr<pid hex><counter hex><random hex>-`. The namespaces are
//! `<prefix><host>` for hosts and `<prefix>left` / `<prefix>right` for the two routers. Links and
//! TUN devices are created *directly inside* these namespaces (`ip link add ... netns A type veth
//! peer ... netns B`), never in the root namespace, so their short names (`eth0`, `v3`, `dbox`)
//! cannot collide between runs. Threads of the delay box are named `<prefix>dlyf`/`dlyr`
//! (truncated by Linux to 15 bytes).
//!
//! Bookkeeping: before creating anything, `up` writes `/run/headroom-testbed/<prefix>/state.json`
//! with the owner's pid and its start time (field 22 of `/proc/<pid>/stat`, so a recycled pid is
//! not mistaken for the owner) and every namespace it is about to create. Teardown kills the
//! processes left in the namespaces (`ip netns pids`), deletes the namespaces (which destroys
//! their links), and removes the state directory. A run is *stale* when its owner is gone.

use std::fs;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::thread::JoinHandle;

use anyhow::{anyhow, bail, Context, Result};
use headroom_core::{Bytes, Dur};
use serde::{Deserialize, Serialize};

use crate::delaybox::{CounterSnapshot, DelayBox, Direction, LineConfig};
use crate::sys;
use crate::topology::{Bottleneck, Buffer, InLinkCross, Side, Topology};

/// Where runs record what they created.
pub const STATE_ROOT: &str = "/run/headroom-testbed";
/// Name of the TUN device of the delay box in each router.
pub const DELAY_DEV: &str = "dbox";
/// txqueuelen of the TUN devices (a TUN device drops when this ring is full).
pub const TUN_TXQUEUELEN: u32 = 10_000;

/// One host of a running testbed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Host {
    pub name: String,
    /// The network namespace (`ip netns exec <netns> ...`).
    pub netns: String,
    /// The host's address on its access link (`eth0`).
    pub addr: Ipv4Addr,
    pub side: Side,
}

/// What `state.json` records.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunState {
    pub prefix: String,
    pub pid: u32,
    /// Start time of the owner process in clock ticks since boot.
    pub pid_start: u64,
    pub namespaces: Vec<String>,
    pub hosts: Vec<Host>,
    /// Namespace and device of the forward bottleneck qdisc.
    pub bottleneck_netns: String,
    pub bottleneck_dev: String,
}

impl RunState {
    /// Whether the process that made this run is gone (or its pid now names another process).
    pub fn is_stale(&self) -> bool {
        process_start_time(self.pid) != Some(self.pid_start)
    }
}

pub(crate) fn process_start_time(pid: u32) -> Option<u64> {
    // starttime is field 22
    stat_fields(pid)?.split_whitespace().nth(19)?.parse().ok()
}

/// `/proc/PID/stat` from field 3 (the state) on: what follows the command name's `)`.
fn stat_fields(pid: u32) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(stat[stat.rfind(')')? + 1..].to_string())
}

/// Checks that this process can build testbeds; the error says why not.
pub fn check_support() -> Result<()> {
    if !sys::is_root() {
        bail!("the testbed needs root (network namespaces, TUN devices and qdiscs); run as root");
    }
    if !Path::new("/dev/net/tun").exists() {
        bail!("/dev/net/tun is missing: the kernel has no TUN support (modprobe tun)");
    }
    sys::can_create_netns()
        .context("cannot create network namespaces here (no CAP_SYS_ADMIN, or a kernel without CONFIG_NET_NS)")?;
    let out = Command::new("ip").args(["netns", "list"]).output().context("running `ip` (install iproute2)")?;
    if !out.status.success() {
        bail!("`ip netns list` failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Command::new("tc").arg("-V").output().context("running `tc` (install iproute2)")?;
    Ok(())
}

/// Why the testbed cannot run here, or `None` if it can. Tests print `SKIP: <reason>`.
pub fn unsupported_reason() -> Option<String> {
    check_support().err().map(|e| format!("{e:#}"))
}

/// Runs a command, failing with its stderr.
pub(crate) fn run_cmd(argv: &[&str]) -> Result<String> {
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {}", argv[0]))?;
    if !out.status.success() {
        bail!("`{}` failed: {}", argv.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `ip [-n NS] -batch -` with the given lines (one process for many changes).
pub(crate) fn ip_batch(netns: Option<&str>, lines: &[String]) -> Result<()> {
    use std::io::Write;
    if lines.is_empty() {
        return Ok(());
    }
    let mut cmd = Command::new("ip");
    if let Some(ns) = netns {
        cmd.args(["-n", ns]);
    }
    let mut child = cmd
        .args(["-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("running `ip -batch`")?;
    {
        let stdin = child.stdin.as_mut().ok_or_else(|| anyhow!("ip -batch: no stdin"))?;
        stdin.write_all(lines.join("\n").as_bytes())?;
        stdin.write_all(b"\n")?;
    }
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "ip -batch in {} failed: {}",
            netns.unwrap_or("the root namespace"),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

pub(crate) fn ns_path(ns: &str) -> String {
    format!("/run/netns/{ns}")
}

/// Runs `f` on a fresh thread inside namespace `netns` and returns its result.
pub fn run_in_netns<T: Send + 'static>(netns: &str, f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    spawn_in_netns(netns, f)?.join().map_err(|_| anyhow!("thread in {netns} panicked"))?
}

/// Starts `f` on a fresh thread inside namespace `netns`. Sockets that `f` creates belong to that
/// namespace, also when handed to other threads.
pub fn spawn_in_netns<T: Send + 'static>(
    netns: &str,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<JoinHandle<Result<T>>> {
    let path = ns_path(netns);
    let name: String = netns.chars().take(15).collect();
    std::thread::Builder::new()
        .name(name)
        .spawn(move || {
            sys::enter_netns(&path)?;
            f()
        })
        .context("spawning a thread")
}

/// The namespace's sysctls: reverse-path filtering off; IPv4 forwarding on a `router`; IPv6
/// forwarding where `ipv6_router` (a router of a topology that carries IPv6, the chain). Not
/// for the dumbbell's routers: a forwarding interface joins the all-routers groups, and its MLD
/// reports would take places in the emulated links' queues that tests count.
pub(crate) fn write_sysctls(netns: &str, router: bool, ipv6_router: bool) -> Result<()> {
    run_in_netns(netns, move || {
        let mut settings =
            vec![("/proc/sys/net/ipv4/conf/all/rp_filter", "0"), ("/proc/sys/net/ipv4/conf/default/rp_filter", "0")];
        if router {
            settings.push(("/proc/sys/net/ipv4/ip_forward", "1"));
        }
        if ipv6_router {
            settings.push(("/proc/sys/net/ipv6/conf/all/forwarding", "1"));
        }
        for (path, v) in settings {
            fs::write(path, v).with_context(|| format!("writing {path}"))?;
        }
        Ok(())
    })
}

// ----- live-run registry, for teardown on signals -----

struct LiveRun {
    prefix: String,
    namespaces: Vec<String>,
}

static LIVE: Mutex<Vec<LiveRun>> = Mutex::new(Vec::new());
static SIGNALS: Once = Once::new();
/// Set by [`interrupt_on_signal`]: the first signal sets this flag instead of tearing down.
static GRACEFUL: Mutex<Option<Arc<AtomicBool>>> = Mutex::new(None);
/// The first signal received while [`GRACEFUL`] was set (0: none).
static RECEIVED: AtomicI32 = AtomicI32::new(0);

fn install_signals() {
    SIGNALS.call_once(|| match sys::install_signal_pipe() {
        Ok(pipe) => {
            let _ = std::thread::Builder::new().name("hr-testbed-sig".into()).spawn(move || signal_watcher(pipe));
        }
        Err(e) => {
            eprintln!("headroom-testbed: cannot install signal handlers ({e:#}); Ctrl-C will leave namespaces behind")
        }
    });
}

/// Makes the first SIGINT/SIGTERM/SIGHUP set `flag` instead of tearing every testbed down and
/// exiting: the caller stops measuring, writes what it has, and drops its testbeds. A second
/// signal still tears down and exits at once with 128+signal. Installs the handlers now, so a
/// signal that arrives before the first `up` is not lost either.
pub fn interrupt_on_signal(flag: Arc<AtomicBool>) {
    if let Ok(mut g) = GRACEFUL.lock() {
        *g = Some(flag);
    }
    install_signals();
}

/// The signal that set the flag of [`interrupt_on_signal`], if one did.
pub fn received_signal() -> Option<i32> {
    Some(RECEIVED.load(Ordering::Relaxed)).filter(|s| *s != 0)
}

pub(crate) fn register_live(prefix: &str, namespaces: &[String]) {
    install_signals();
    if let Ok(mut live) = LIVE.lock() {
        live.push(LiveRun { prefix: prefix.to_string(), namespaces: namespaces.to_vec() });
    }
}

pub(crate) fn unregister_live(prefix: &str) {
    if let Ok(mut live) = LIVE.lock() {
        live.retain(|r| r.prefix != prefix);
    }
}

fn signal_watcher(mut pipe: fs::File) {
    use std::io::Read;
    let mut b = [0u8; 1];
    loop {
        if pipe.read_exact(&mut b).is_err() {
            return;
        }
        let graceful = GRACEFUL.lock().ok().and_then(|g| g.clone());
        match graceful {
            Some(flag) if RECEIVED.load(Ordering::Relaxed) == 0 => {
                RECEIVED.store(b[0] as i32, Ordering::Relaxed);
                flag.store(true, Ordering::Relaxed);
                eprintln!(
                    "headroom-testbed: signal {}: stopping; writing what was measured (signal again to abort)",
                    b[0]
                );
            }
            _ => break,
        }
    }
    let runs: Vec<LiveRun> = match LIVE.lock() {
        Ok(mut l) => l.drain(..).collect(),
        Err(_) => Vec::new(),
    };
    for r in &runs {
        eprintln!("headroom-testbed: signal {}: removing testbed {}", b[0], r.prefix);
        remove_namespaces(&r.namespaces);
        let _ = fs::remove_dir_all(Path::new(STATE_ROOT).join(&r.prefix));
    }
    std::process::exit(128 + b[0] as i32);
}

/// Stops every process in the namespaces, then deletes them (which destroys their links).
/// The processes get SIGTERM and up to [`TERM_GRACE`] to exit on their own before SIGKILL: a
/// transparent `headroom proxy` started with `testbed exec` removes its record in
/// /run/headroom-proxy on SIGTERM, where SIGKILL left it for `proxy --cleanup` (session 8).
pub(crate) fn remove_namespaces(namespaces: &[String]) {
    let present: Vec<&String> = namespaces.iter().filter(|ns| Path::new(&ns_path(ns)).exists()).collect();
    let mut pids = Vec::new();
    for ns in &present {
        if let Ok(out) = run_cmd(&["ip", "netns", "pids", ns]) {
            pids.extend(out.split_whitespace().filter_map(|p| p.parse::<i32>().ok()));
        }
    }
    pids.retain(|&p| p as u32 != std::process::id());
    for &pid in &pids {
        sys::kill(pid, libc::SIGTERM);
    }
    let t = std::time::Instant::now();
    while pids.iter().any(|&p| running(p)) && t.elapsed() < TERM_GRACE {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for &pid in pids.iter().filter(|&&p| running(p)) {
        sys::kill(pid, libc::SIGKILL);
    }
    for ns in present {
        let _ = run_cmd(&["ip", "netns", "del", ns]);
    }
}

/// How long [`remove_namespaces`] waits for SIGTERMed processes before SIGKILL.
const TERM_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether process `pid` exists and is not a zombie (which waits only for its parent's reaping).
fn running(pid: i32) -> bool {
    u32::try_from(pid)
        .ok()
        .and_then(stat_fields)
        .and_then(|f| f.split_whitespace().next().map(|state| state != "Z"))
        .unwrap_or(false)
}

static RUN_COUNTER: AtomicU32 = AtomicU32::new(0);

pub(crate) fn new_prefix() -> String {
    let n = RUN_COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut rng = headroom_core::rng::Rng::new(sys::now_ns() ^ ((std::process::id() as u64) << 32) ^ n as u64);
    format!("hr{:x}{:x}{:03x}-", std::process::id(), n, rng.next_u64() & 0xfff)
}

/// What every running topology owns (the dumbbell [`Testbed`] and the [`crate::chain::Chain`]
/// deref to it): its prefix, hosts and namespaces, its delay boxes, and the state file that
/// `down --stale` reads. Dropping it tears everything down.
pub struct Netns {
    prefix: String,
    hosts: Vec<Host>,
    namespaces: Vec<String>,
    pub(crate) boxes: Vec<DelayBox>,
    state_dir: PathBuf,
    torn_down: bool,
}

impl std::fmt::Debug for Netns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Netns").field("prefix", &self.prefix).field("hosts", &self.hosts).finish()
    }
}

impl Netns {
    /// Writes `state.json` (before anything is created, so that a killed run is found) and
    /// registers the run for teardown on signals. Creates nothing else.
    pub(crate) fn record(
        prefix: String,
        hosts: Vec<Host>,
        namespaces: Vec<String>,
        bottleneck: (&str, &str),
    ) -> Result<Netns> {
        let state_dir = Path::new(STATE_ROOT).join(&prefix);
        let state = RunState {
            prefix: prefix.clone(),
            pid: std::process::id(),
            pid_start: process_start_time(std::process::id()).unwrap_or(0),
            namespaces: namespaces.clone(),
            hosts: hosts.clone(),
            bottleneck_netns: bottleneck.0.to_string(),
            bottleneck_dev: bottleneck.1.to_string(),
        };
        fs::create_dir_all(&state_dir).with_context(|| format!("creating {}", state_dir.display()))?;
        fs::write(state_dir.join("state.json"), serde_json::to_vec_pretty(&state)?)?;
        register_live(&prefix, &namespaces);
        Ok(Netns { prefix, hosts, namespaces, boxes: Vec::new(), state_dir, torn_down: false })
    }

    /// The per-run prefix of every name this run created.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    /// The host named `name` (as in the topology).
    pub fn host(&self, name: &str) -> Result<&Host> {
        self.hosts
            .iter()
            .find(|h| h.name == name)
            .ok_or_else(|| anyhow!("no host named `{name}` in testbed {}", self.prefix))
    }

    /// Every namespace of this run (a dumbbell's routers first).
    pub fn namespaces(&self) -> &[String] {
        &self.namespaces
    }

    /// A `Command` that runs `program` inside `host`'s namespace (via `ip netns exec`). Processes
    /// still running at teardown are killed.
    pub fn command(&self, host: &str, program: &str) -> Result<Command> {
        let h = self.host(host)?;
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &h.netns, program]);
        Ok(c)
    }

    /// Runs `argv` inside `host` and waits for it; fails if it exits non-zero.
    pub fn exec(&self, host: &str, argv: &[&str]) -> Result<Output> {
        let (prog, args) = argv.split_first().ok_or_else(|| anyhow!("exec: empty command"))?;
        let out = self.command(host, prog)?.args(args).stdin(Stdio::null()).output()?;
        if !out.status.success() {
            bail!(
                "`{}` in {host} failed ({}): {}",
                argv.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(out)
    }

    /// Runs `f` on a thread inside `host`'s namespace and waits for its result.
    pub fn run_in<T: Send + 'static>(&self, host: &str, f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
        run_in_netns(&self.host(host)?.netns, f)
    }

    /// Starts `f` on a thread inside `host`'s namespace.
    pub fn spawn_in<T: Send + 'static>(
        &self,
        host: &str,
        f: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> Result<JoinHandle<Result<T>>> {
        spawn_in_netns(&self.host(host)?.netns, f)
    }

    /// Tears everything down now (Drop does the same, ignoring errors).
    pub(crate) fn down(mut self) -> Result<()> {
        self.teardown();
        let left: Vec<_> = self.namespaces.iter().filter(|n| Path::new(&ns_path(n)).exists()).cloned().collect();
        if !left.is_empty() {
            bail!("namespaces left after teardown: {left:?}");
        }
        Ok(())
    }

    fn teardown(&mut self) {
        if self.torn_down {
            return;
        }
        self.torn_down = true;
        for mut d in self.boxes.drain(..) {
            d.stop();
        }
        remove_namespaces(&self.namespaces);
        let _ = fs::remove_dir_all(&self.state_dir);
        unregister_live(&self.prefix);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// A running dumbbell. Dropping it tears everything down; the host accessors are [`Netns`]'s.
pub struct Testbed {
    run: Netns,
    left_ns: String,
    right_ns: String,
    /// The bottleneck it was built with.
    bottleneck: Bottleneck,
}

impl std::ops::Deref for Testbed {
    type Target = Netns;
    fn deref(&self) -> &Netns {
        &self.run
    }
}

impl std::fmt::Debug for Testbed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Testbed").field("prefix", &self.prefix).field("hosts", &self.hosts).finish()
    }
}

impl Testbed {
    /// Builds `topo`. On any error, whatever was created is removed before returning.
    pub fn up(topo: &Topology) -> Result<Testbed> {
        check_support()?;
        topo.validate()?;
        let prefix = new_prefix();
        let left_ns = format!("{prefix}left");
        let right_ns = format!("{prefix}right");
        let mut hosts = Vec::new();
        let (mut nl, mut nr) = (0u8, 0u8);
        for h in &topo.hosts {
            let k = match h.side {
                Side::Left => {
                    nl += 1;
                    nl
                }
                Side::Right | Side::Chain => {
                    nr += 1;
                    nr
                }
            };
            let net = if h.side == Side::Left { 1 } else { 2 };
            hosts.push(Host {
                name: h.name.clone(),
                netns: format!("{prefix}{}", h.name),
                addr: Ipv4Addr::new(10, net, k, 2),
                side: h.side,
            });
        }
        let mut namespaces = vec![left_ns.clone(), right_ns.clone()];
        namespaces.extend(hosts.iter().map(|h| h.netns.clone()));
        let run = Netns::record(prefix, hosts, namespaces, (&left_ns, DELAY_DEV))?;
        let mut tb = Testbed { run, left_ns, right_ns, bottleneck: topo.bottleneck.clone() };
        // On error `tb` is dropped here, which removes what was built.
        tb.build(topo)?;
        Ok(tb)
    }

    fn build(&mut self, topo: &Topology) -> Result<()> {
        // root namespace: the namespaces and the veth pairs, created directly inside them
        let mut root = Vec::new();
        for ns in &self.run.namespaces {
            root.push(format!("netns add {ns}"));
        }
        // inside each namespace: per-namespace `ip -n NS -batch -` (batch lines take no -n)
        let mut inside: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
        for ns in &self.run.namespaces {
            inside.entry(ns.as_str()).or_default().push("link set lo up".into());
        }
        for (i, h) in self.run.hosts.iter().enumerate() {
            let router = if h.side == Side::Left { &self.left_ns } else { &self.right_ns };
            let o = h.addr.octets();
            let gw = Ipv4Addr::new(o[0], o[1], o[2], 1);
            let rdev = format!("v{i}");
            root.push(format!("link add {rdev} netns {router} type veth peer name eth0 netns {}", h.netns));
            let r = inside.entry(router.as_str()).or_default();
            r.push(format!("addr add {gw}/24 dev {rdev}"));
            r.push(format!("link set {rdev} up"));
            let hc = inside.entry(h.netns.as_str()).or_default();
            hc.push(format!("addr add {}/24 dev eth0", h.addr));
            hc.push("link set eth0 up".into());
            hc.push(format!("route add default via {gw}"));
        }
        ip_batch(None, &root)?;
        for (ns, lines) in &inside {
            ip_batch(Some(ns), lines)?;
        }
        for ns in &self.run.namespaces {
            write_sysctls(ns, ns == &self.left_ns || ns == &self.right_ns, false)?;
        }
        // access link rate limits
        for (i, (h, spec)) in self.run.hosts.iter().zip(&topo.hosts).enumerate() {
            if let Some(rate) = spec.rate {
                let router = if h.side == Side::Left { &self.left_ns } else { &self.right_ns };
                add_rate_limit(&h.netns, "eth0", rate, Buffer::Packets(1000), None)?;
                add_rate_limit(router, &format!("v{i}"), rate, Buffer::Packets(1000), None)?;
            }
        }
        // the delay box's TUN devices, one per router, created from inside each router
        let (l, r) = (self.left_ns.clone(), self.right_ns.clone());
        let (left_tun, right_tun) = std::thread::spawn(move || -> Result<_> {
            sys::enter_netns(&ns_path(&l))?;
            let a = sys::open_tun(DELAY_DEV)?;
            sys::enter_netns(&ns_path(&r))?;
            let b = sys::open_tun(DELAY_DEV)?;
            Ok((a, b))
        })
        .join()
        .map_err(|_| anyhow!("TUN setup thread panicked"))??;
        for (ns, remote) in [(&self.left_ns, "10.2.0.0/16"), (&self.right_ns, "10.1.0.0/16")] {
            ip_batch(
                Some(ns),
                &[
                    format!("link set {DELAY_DEV} txqueuelen {TUN_TXQUEUELEN} up"),
                    format!("route add {remote} dev {DELAY_DEV}"),
                ],
            )?;
        }
        let b = &topo.bottleneck;
        // The links' queues are in the delay box; the qdiscs on `dbox` only hand packets to it
        // (a shaper's tbf queues in front of the forward link).
        match b.shaper {
            Some(sh) => add_rate_limit(&self.left_ns, DELAY_DEV, sh.rate, b.buffer, Some(Bytes(sh.burst_bytes())))?,
            None => set_fifo(&self.left_ns, DELAY_DEV, Buffer::Packets(TUN_TXQUEUELEN))?,
        }
        set_fifo(&self.right_ns, DELAY_DEV, Buffer::Packets(TUN_TXQUEUELEN))?;
        let mut extra = std::collections::HashMap::new();
        for (h, spec) in self.run.hosts.iter().zip(&topo.hosts) {
            if spec.delay.0 > 0 {
                extra.insert(h.addr, spec.delay);
            }
        }
        let fwd = LineConfig {
            delay: b.delay,
            loss: b.loss,
            seed: b.seed,
            extra: extra.clone(),
            spin: Dur::ZERO,
            arrival_spin: b.arrival_spin,
            realtime: true,
            rate: b.rate,
            buffer: Some(b.buffer),
            cross: b.cross,
        };
        let rev = LineConfig {
            delay: b.reverse_delay(),
            loss: b.reverse_loss,
            seed: b.seed ^ 0x5eed,
            extra,
            spin: Dur::ZERO,
            // The reverse line carries ACKs and control packets, and sleeps between them:
            // polling both lines would take both cores of a 2-core machine during a bulk
            // transfer (delaybox module doc, step 4).
            arrival_spin: Dur::ZERO,
            realtime: true,
            rate: b.reverse_rate,
            buffer: Some(b.buffer),
            cross: b.reverse_cross,
        };
        let dbox =
            DelayBox::start(&self.run.prefix, left_tun, right_tun, fwd, rev).context("starting the delay box")?;
        self.run.boxes.push(dbox);
        Ok(())
    }

    /// From now on, in-link Poisson cross traffic `cross` (or none) in the bottleneck's
    /// direction `dir` ([`crate::delaybox`], "In-link cross traffic"), checked as a topology's
    /// `cross` is ([`crate::topology::InLinkCross::check`]). The delay box's counters
    /// (`cross_sent`, `cross_bytes`, `cross_drops`) count what it carried.
    pub fn set_link_cross(&self, dir: Direction, cross: Option<InLinkCross>) -> Result<()> {
        let (rate, what) = match dir {
            Direction::Forward => (self.bottleneck.rate, "cross"),
            Direction::Reverse => (self.bottleneck.reverse_rate, "reverse_cross"),
        };
        if let Some(c) = &cross {
            c.check(what, rate, self.bottleneck.buffer)?;
        }
        if !self.boxes.first().context("no delay box")?.set_cross(dir, cross) {
            bail!("the delay box did not take the new cross traffic within a second (stopped?)");
        }
        Ok(())
    }

    /// Delay box counters (forward = left to right, reverse).
    pub fn delaybox_counters(&self) -> (CounterSnapshot, CounterSnapshot) {
        match self.boxes.first() {
            Some(d) => (d.forward.snapshot(), d.reverse.snapshot()),
            None => Default::default(),
        }
    }

    /// Statistics of the forward bottleneck: its link's queue in the delay box plus the qdisc
    /// in front of it (a shaper's queue, if any).
    pub fn queue_stats(&self) -> Result<QueueStats> {
        let link = self.boxes.first().map(|d| d.forward.snapshot()).unwrap_or_default();
        Ok(queue_stats(&self.left_ns, DELAY_DEV)?.with_link(&link))
    }

    /// Statistics of the reverse bottleneck (its link's queue and the qdisc in front).
    pub fn reverse_queue_stats(&self) -> Result<QueueStats> {
        let link = self.boxes.first().map(|d| d.reverse.snapshot()).unwrap_or_default();
        Ok(queue_stats(&self.right_ns, DELAY_DEV)?.with_link(&link))
    }

    /// The live counters of the forward link (for samplers that outlive a borrow).
    pub fn forward_link_counters(&self) -> Option<Arc<crate::delaybox::Counters>> {
        self.boxes.first().map(|d| d.forward.clone())
    }

    /// Packets the TUN devices dropped because the delay box did not read them in time
    /// (forward, reverse): the box's own input drops.
    pub fn tun_drops(&self) -> Result<(u64, u64)> {
        Ok((link_tx_dropped(&self.left_ns, DELAY_DEV)?, link_tx_dropped(&self.right_ns, DELAY_DEV)?))
    }

    /// Tears everything down now (Drop does the same, ignoring errors).
    pub fn down(self) -> Result<()> {
        self.run.down()
    }
}

/// Installs `tbf rate R` with a drop-tail child queue of `buffer` as the root qdisc of `dev`.
pub(crate) fn add_rate_limit(
    ns: &str,
    dev: &str,
    rate: headroom_core::Rate,
    buffer: Buffer,
    burst: Option<Bytes>,
) -> Result<()> {
    // A small bucket keeps the rate accurate over short intervals; at least 3 packets so that
    // the timer granularity never starves the link.
    let burst = burst.map(|b| b.0).unwrap_or_else(|| crate::topology::Shaper { rate, burst: None }.burst_bytes());
    let rate_s = format!("{}bit", rate.bps());
    run_cmd(&[
        "tc",
        "-n",
        ns,
        "qdisc",
        "replace",
        "dev",
        dev,
        "root",
        "handle",
        "1:",
        "tbf",
        "rate",
        &rate_s,
        "burst",
        &burst.to_string(),
        "limit",
        "100000",
    ])?;
    let (kind, limit) = fifo_args(buffer);
    run_cmd(&[
        "tc", "-n", ns, "qdisc", "replace", "dev", dev, "parent", "1:1", "handle", "10:", kind, "limit", &limit,
    ])?;
    Ok(())
}

fn fifo_args(buffer: Buffer) -> (&'static str, String) {
    match buffer {
        Buffer::Packets(n) => ("pfifo", n.to_string()),
        Buffer::Bytes(b) => ("bfifo", b.0.to_string()),
    }
}

pub(crate) fn set_fifo(ns: &str, dev: &str, buffer: Buffer) -> Result<()> {
    let (kind, limit) = fifo_args(buffer);
    run_cmd(&["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "handle", "1:", kind, "limit", &limit])?;
    Ok(())
}

/// Backlog and drops of a root qdisc.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    pub backlog_bytes: u64,
    pub backlog_pkts: u64,
    pub drops: u64,
    pub sent_bytes: u64,
    pub sent_pkts: u64,
}

impl QueueStats {
    /// Adds the delay-box link's queue to a qdisc's: backlog and drops add up; `sent` stays
    /// the qdisc's (every packet passes it on the way to the link).
    pub fn with_link(self, link: &CounterSnapshot) -> QueueStats {
        QueueStats {
            backlog_bytes: self.backlog_bytes + link.backlog_bytes,
            backlog_pkts: self.backlog_pkts + link.backlog_pkts,
            drops: self.drops + link.queue_drops,
            ..self
        }
    }
}

/// Reads the root qdisc of `dev` in `ns` (`tc -s -j qdisc show`).
pub fn queue_stats(ns: &str, dev: &str) -> Result<QueueStats> {
    let out = run_cmd(&["tc", "-n", ns, "-s", "-j", "qdisc", "show", "dev", dev])?;
    let v: serde_json::Value = serde_json::from_str(&out).context("parsing tc -j output")?;
    let arr = v.as_array().ok_or_else(|| anyhow!("tc -j: not an array"))?;
    let root = arr
        .iter()
        .find(|q| q.get("root").and_then(|r| r.as_bool()) == Some(true))
        .ok_or_else(|| anyhow!("no root qdisc on {dev} in {ns}"))?;
    let g = |k: &str| root.get(k).and_then(|x| x.as_u64()).unwrap_or(0);
    Ok(QueueStats {
        backlog_bytes: g("backlog"),
        backlog_pkts: g("qlen"),
        drops: g("drops"),
        sent_bytes: g("bytes"),
        sent_pkts: g("packets"),
    })
}

fn link_tx_dropped(ns: &str, dev: &str) -> Result<u64> {
    let out = run_cmd(&["ip", "-n", ns, "-s", "-j", "link", "show", "dev", dev])?;
    let v: serde_json::Value = serde_json::from_str(&out).context("parsing ip -j output")?;
    Ok(v.pointer("/0/stats64/tx/dropped").and_then(|x| x.as_u64()).unwrap_or(0))
}

// ----- finding and removing runs from other processes (the CLI) -----

/// Every recorded run on this machine.
pub fn list_runs() -> Vec<RunState> {
    let mut runs = Vec::new();
    let Ok(dir) = fs::read_dir(STATE_ROOT) else { return runs };
    for e in dir.flatten() {
        if let Ok(text) = fs::read_to_string(e.path().join("state.json")) {
            if let Ok(s) = serde_json::from_str::<RunState>(&text) {
                runs.push(s);
            }
        }
    }
    runs.sort_by(|a, b| a.prefix.cmp(&b.prefix));
    runs
}

/// Removes one recorded run's namespaces and state directory.
pub fn remove_run(run: &RunState) {
    remove_namespaces(&run.namespaces);
    let _ = fs::remove_dir_all(Path::new(STATE_ROOT).join(&run.prefix));
}

/// Whether `name` has the shape of our namespace names, `hr<hex>-...`. The shape alone proves
/// nothing: anybody can name a namespace like that, so it is never a reason to remove one.
fn looks_like_ours(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("hr") else { return false };
    let Some((hex, _)) = rest.split_once('-') else { return false };
    !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit())
}

/// Namespaces named like ours (`hr<hex>-...`) that no state file under [`STATE_ROOT`] records.
/// A testbed writes its state file before it creates anything, so such a namespace is not one of
/// ours: it is reported, never removed.
pub fn unrecorded_namespaces() -> Vec<String> {
    let runs = list_runs();
    let Ok(out) = run_cmd(&["ip", "netns", "list"]) else { return Vec::new() };
    out.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| looks_like_ours(n))
        .filter(|n| !runs.iter().any(|r| r.namespaces.iter().any(|x| x == n)))
        .map(str::to_string)
        .collect()
}

/// `down --stale`: for every state file whose owner process is gone (or whose pid now names a
/// process with another start time), removes exactly the namespaces it records (killing the
/// processes left in them), then the state file. Namespaces that no state file records are left
/// alone, whatever their name ([`unrecorded_namespaces`] lists them). Returns the prefixes of
/// the runs removed.
pub fn down_stale() -> Result<Vec<String>> {
    check_support()?;
    let mut removed = Vec::new();
    for r in list_runs().iter().filter(|r| r.is_stale()) {
        remove_run(r);
        removed.push(r.prefix.clone());
    }
    Ok(removed)
}

/// `down`: asks live owners (`headroom testbed up`) to tear down with SIGTERM, waits up to
/// `wait`, then removes whatever their state files record, stale runs included. With `prefix`,
/// only that run. Like [`down_stale`], it never touches a namespace no state file records.
pub fn down_all(prefix: Option<&str>, wait: std::time::Duration) -> Result<Vec<String>> {
    check_support()?;
    let runs: Vec<RunState> = list_runs().into_iter().filter(|r| prefix.is_none_or(|p| r.prefix == p)).collect();
    if let Some(p) = prefix {
        if runs.is_empty() {
            bail!("no testbed with prefix `{p}` (see {STATE_ROOT})");
        }
    }
    for r in runs.iter().filter(|r| !r.is_stale() && r.pid != std::process::id()) {
        sys::kill(r.pid as i32, libc::SIGTERM);
    }
    let deadline = std::time::Instant::now() + wait;
    while std::time::Instant::now() < deadline && runs.iter().any(|r| Path::new(STATE_ROOT).join(&r.prefix).exists()) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let mut removed = Vec::new();
    for r in &runs {
        remove_run(r);
        removed.push(r.prefix.clone());
    }
    Ok(removed)
}

/// Finds the namespace of `host` among recorded live runs (`prefix` picks one when several
/// testbeds run).
pub fn find_host(host: &str, prefix: Option<&str>) -> Result<Host> {
    let runs: Vec<RunState> =
        list_runs().into_iter().filter(|r| !r.is_stale() && prefix.is_none_or(|p| r.prefix == p)).collect();
    let found: Vec<(&RunState, &Host)> =
        runs.iter().flat_map(|r| r.hosts.iter().filter(|h| h.name == host).map(move |h| (r, h))).collect();
    match found.as_slice() {
        [] => bail!("no running testbed has a host `{host}` (start one with `headroom testbed up FILE`)"),
        [(_, h)] => Ok((*h).clone()),
        many => bail!(
            "host `{host}` exists in several testbeds ({}); pick one with --prefix",
            many.iter().map(|(r, _)| r.prefix.as_str()).collect::<Vec<_>>().join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_unique_short_and_match_the_stale_pattern() {
        let a = new_prefix();
        let b = new_prefix();
        assert_ne!(a, b);
        assert!(a.starts_with("hr") && a.ends_with('-'), "{a}");
        assert!(a[2..a.len() - 1].chars().all(|c| c.is_ascii_hexdigit()), "{a}");
        // namespace names stay short enough to read; interface names never carry the prefix
        assert!(a.len() <= 20, "{a}");
    }

    #[test]
    fn own_start_time_is_readable_and_a_dead_pid_is_stale() {
        let me = std::process::id();
        let start = process_start_time(me).expect("own /proc/self/stat");
        let live = RunState {
            prefix: "hrtest-".into(),
            pid: me,
            pid_start: start,
            namespaces: vec![],
            hosts: vec![],
            bottleneck_netns: String::new(),
            bottleneck_dev: String::new(),
        };
        assert!(!live.is_stale());
        let recycled = RunState { pid_start: start + 1, ..live.clone() };
        assert!(recycled.is_stale());
        let dead = RunState { pid: u32::MAX - 1, ..live };
        assert!(dead.is_stale());
    }
}
