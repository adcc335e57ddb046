//! `headroom cc`: register headroom's kernel congestion controllers (BECC, TCP-LP, LEDBAT as
//! BPF `struct_ops`, crate `headroom-bpf`), list them, unregister them.
//!
//! A registered controller is selected per socket with `setsockopt(TCP_CONGESTION, name)` (the
//! testbed's `cc = "..."`, `headroom send --cc`). This command never changes the system default
//! (`net.ipv4.tcp_congestion_control`).
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use headroom_bpf::{Controller, LoadOptions, Registered};

#[derive(Subcommand, Debug)]
pub enum CcCmd {
    /// Register controllers (becc, lp, ledbat) and hold them until Ctrl-C / SIGTERM, or pin them.
    Load(LoadArgs),
    /// headroom's controllers (registered or not), headroom's pins and the kernel's list.
    List,
    /// Measurements (root): per-ACK cost, the BECC paper's figures, background controllers.
    #[command(subcommand)]
    Bench(crate::cc_bench::BenchCmd),
    /// Unregister a controller pinned by `headroom cc load --pin`.
    Unload {
        /// The registered name (as `headroom cc list` shows it).
        name: String,
    },
}

#[derive(Args, Debug)]
pub struct LoadArgs {
    /// Controllers to register: becc, lp, ledbat.
    #[arg(required = true)]
    names: Vec<String>,
    /// Register as PREFIX + name (a name must be at most 15 characters), e.g. to avoid a
    /// controller of the same name already registered.
    #[arg(long, default_value = "")]
    prefix: String,
    /// Pin into bpffs (/sys/fs/bpf/headroom/cc, mounting bpffs if needed) and exit: the
    /// controllers stay registered until `headroom cc unload NAME`.
    #[arg(long)]
    pin: bool,
    /// LEDBAT's TARGET queueing delay in milliseconds (RFC 6817; at most 100 recommended).
    #[arg(long, value_name = "MS", default_value_t = 100)]
    ledbat_target_ms: u64,
}

pub fn run(c: CcCmd) -> Result<()> {
    match c {
        CcCmd::Load(a) => load(a),
        CcCmd::List => list(),
        CcCmd::Unload { name } => unload(&name),
        CcCmd::Bench(b) => crate::cc_bench::run(b),
    }
}

fn parse_controller(name: &str) -> Result<Controller> {
    Controller::parse(name).with_context(|| {
        let ours: Vec<&str> = Controller::ALL.iter().map(|c| c.name()).collect();
        format!("unknown controller {name:?}: headroom's kernel controllers are {}", ours.join(", "))
    })
}

fn load(a: LoadArgs) -> Result<()> {
    let mut wanted = Vec::new();
    for n in &a.names {
        let c = parse_controller(n)?;
        if wanted.contains(&c) {
            bail!("{n} given twice");
        }
        wanted.push(c);
    }
    // Block the signals before anything is registered, so that a SIGTERM arriving right after
    // the kernel lists a controller waits for `sigwait` below and unregisters cleanly instead
    // of killing the process (the kernel would unregister on exit, but the exit status would
    // say "killed").
    let signals = block_signals()?;
    let mut held: Vec<Registered> = Vec::new();
    for c in wanted {
        let opts = LoadOptions {
            name: Some(format!("{}{}", a.prefix, c.name())),
            ledbat_target: (c == Controller::Ledbat).then(|| Duration::from_millis(a.ledbat_target_ms)),
        };
        // On an error the controllers registered so far are dropped: unregistered.
        let r = headroom_bpf::load(c, &opts).map_err(anyhow::Error::new)?;
        let extra = if c == Controller::Ledbat { format!(", TARGET {} ms", a.ledbat_target_ms) } else { String::new() };
        eprintln!("registered {c} as {:?}{extra}", r.name());
        held.push(r);
    }
    if a.pin {
        let mut pinned = Vec::new();
        for r in &mut held {
            match r.pin() {
                Ok(p) => pinned.push((r.name().to_owned(), p)),
                Err(e) => {
                    for (n, _) in &pinned {
                        let _ = headroom_bpf::unpin(n);
                    }
                    bail!("{e}");
                }
            }
        }
        for (n, p) in pinned {
            println!("{n}\tpinned at {}\t(unregister: headroom cc unload {n})", p.display());
        }
        return Ok(());
    }
    for r in &held {
        println!("{}", r.name());
    }
    eprintln!("select per socket with setsockopt(TCP_CONGESTION); holding until Ctrl-C / SIGTERM");
    let sig = wait_for_signal(&signals)?;
    eprintln!("signal {sig}: unregistering");
    drop(held);
    Ok(())
}

/// Blocks SIGINT, SIGTERM and SIGHUP (they stay pending until [`wait_for_signal`]).
fn block_signals() -> Result<libc::sigset_t> {
    // SAFETY: sigset manipulation on a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            bail!("blocking signals failed");
        }
        Ok(set)
    }
}

/// Waits for one of the signals [`block_signals`] blocked (returns at once if one is pending).
fn wait_for_signal(set: &libc::sigset_t) -> Result<i32> {
    let mut sig = 0;
    // SAFETY: sigwait on a set of signals this thread blocked.
    if unsafe { libc::sigwait(set, &mut sig) } != 0 {
        bail!("sigwait failed");
    }
    Ok(sig)
}

fn list() -> Result<()> {
    let available = headroom_bpf::available().map_err(anyhow::Error::msg)?;
    let pinned = headroom_bpf::pinned();
    println!("headroom's kernel controllers (load with `headroom cc load NAME`):");
    for c in Controller::ALL {
        let state = if pinned.iter().any(|p| p == c.name()) {
            "registered, pinned"
        } else if available.iter().any(|n| n == c.name()) {
            "registered"
        } else {
            "not registered"
        };
        println!("  {:<8} {:<20} {}", c.name(), state, c.describe());
    }
    let others: Vec<&String> = pinned.iter().filter(|p| Controller::parse(p).is_none()).collect();
    if !others.is_empty() {
        println!("pinned by headroom under other names ({}):", headroom_bpf::PIN_DIR);
        for p in others {
            let state = if available.contains(p) { "registered" } else { "not registered (pin only)" };
            println!("  {p:<15} {state}");
        }
    }
    println!("kernel, registered: {}", available.join(" "));
    let read = |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_owned()).unwrap_or_else(|_| "?".into());
    println!("kernel, default (never changed by headroom): {}", read("/proc/sys/net/ipv4/tcp_congestion_control"));
    println!("kernel, allowed without CAP_NET_ADMIN: {}", read("/proc/sys/net/ipv4/tcp_allowed_congestion_control"));
    Ok(())
}

fn unload(name: &str) -> Result<()> {
    match headroom_bpf::unpin(name) {
        Ok(true) => {}
        Ok(false) => {
            let registered = headroom_bpf::available().map_err(anyhow::Error::msg)?.iter().any(|n| n == name);
            if registered {
                bail!(
                    "{name} is registered but not pinned by headroom ({}): if a `headroom cc load` holds it, stop that \
                     process (Ctrl-C); kernel built-ins cannot be unloaded",
                    headroom_bpf::pin_path(name).display()
                );
            }
            bail!("{name} is not registered and not pinned by headroom (see `headroom cc list`)");
        }
        Err(e) => bail!("{e} (unloading needs root)"),
    }
    // The kernel unregisters when the link's last reference goes.
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(2) {
        if !headroom_bpf::available().map_err(anyhow::Error::msg)?.iter().any(|n| n == name) {
            println!("unregistered {name}");
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    println!("unpinned {name}; the kernel still lists it: another process holds it");
    Ok(())
}
