//! `headroom proxy-fig3` (root): the overlay paper's Fig. 3 on the real kernel. The testbed's
//! chain (sender – LAN1 – P1 – WAN – P2 – LAN2 – receiver, `headroom_testbed::chain`) with the
//! simulator's Fig. 3 parameters (`scenarios/overlay/fig3.toml`: 100 Mbit/s segments, LAN1 5 ms / 0.1 %,
//! WAN 20 ms / 0.1 %, LAN2 varied, loss on the data direction only, 1000-packet queues); Linux
//! TCP end to end (Case 1) against split at P1 and P2 by `headroom proxy` (Case 2), for each
//! congestion control; the gain beside the simulator's and the analytic model's
//! (`fig3_point`, the same code as `headroom reproduce overlay-fig3`).
//!
//! Choices: the four flows of a grid point (end-to-end and split, per congestion control) run
//! at the same time on one chain — their sum stays far below the 100 Mbit/s of the links (the
//! path's loss limits them), the table prints the links' queue drops so that any congestion
//! between them shows, and one run per point keeps the grid inside minutes; the receiver's
//! window is clamped to 1 MB (the simulator's client window); the proxies relay through
//! 256 KiB buffers (the simulator's relay buffer) with kernel-autotuned socket buffers and use
//! the flow's congestion control on their upstream legs (`--cc`).

use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use headroom_core::units::{parse_positive, Dur};
use headroom_sim::overlay::experiments::{fig3_point, ChainParams, Fig3Point, Fig3Setup, FIG3_FILE};
use headroom_testbed::traffic::{tcp_bulk_send, tcp_connect, tcp_listen_max_window, tcp_sink, FlowCounters};
use headroom_testbed::{Bottleneck, Buffer, Chain, ChainSpec};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Grid {
    /// `reproduce overlay-fig3`'s grid: P_LAN2 0.1, 0.5, 1, 2, 5 % x D_LAN2 5, 20, 50, 100 ms.
    Full,
    /// P_LAN2 0.1, 1, 5 % x D_LAN2 5, 50 ms (6 of the 20 points).
    Reduced,
}

#[derive(Args, Debug)]
pub struct ProxyFig3Args {
    /// Which grid points.
    #[arg(long, value_enum, default_value = "reduced")]
    pub grid: Grid,
    /// Measured time per point (after the warm-up).
    #[arg(long, default_value = "20s", value_parser = parse_positive::<Dur>)]
    pub seconds: Dur,
    /// Time before measuring (slow start, proxies' connections up).
    #[arg(long, default_value = "5s")]
    pub warmup: Dur,
    /// Kernel congestion controls, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "cubic,reno")]
    pub cc: Vec<String>,
    /// Simulated time per point for the simulator's column (as `reproduce overlay-fig3`).
    #[arg(long, default_value = "100s", value_parser = parse_positive::<Dur>)]
    pub sim_seconds: Dur,
    /// Also write the table as CSV here.
    #[arg(long)]
    pub csv: Option<std::path::PathBuf>,
}

/// The grid's (P_LAN2, D_LAN2 ms) points.
fn points(g: Grid) -> Vec<(f64, u64)> {
    let (ps, ds): (&[f64], &[u64]) = match g {
        Grid::Full => (&[0.001, 0.005, 0.01, 0.02, 0.05], &[5, 20, 50, 100]),
        Grid::Reduced => (&[0.001, 0.01, 0.05], &[5, 50]),
    };
    ps.iter().flat_map(|&p| ds.iter().map(move |&d| (p, d))).collect()
}

/// The chain of one grid point, from the simulator's parameters.
fn chain_spec(p: &ChainParams, seed: u64) -> ChainSpec {
    let segs = (0..3)
        .map(|i| Bottleneck {
            rate: Some(p.rate[i]),
            reverse_rate: Some(p.rate[i]),
            buffer: Buffer::Packets(p.queue as u32),
            delay: p.delay[i],
            loss: p.loss[i],
            seed: seed * 3 + i as u64,
            ..Bottleneck::default()
        })
        .collect();
    ChainSpec::new(segs)
}

/// Starts `headroom proxy` in `node` and waits until it listens (its first stderr line).
fn start_proxy(chain: &Chain, node: &str, port: u16, to: SocketAddr, cc: &str) -> Result<Child> {
    let exe = std::env::current_exe().context("finding the headroom binary")?;
    let mut c = chain
        .command(node, &exe.to_string_lossy())?
        .args(["proxy", "--listen", &format!("0.0.0.0:{port}"), "--to", &to.to_string()])
        .args(["--cc", cc, "--buffer", "256KiB"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting headroom proxy")?;
    let mut line = String::new();
    BufReader::new(c.stderr.take().context("proxy stderr")?).read_line(&mut line)?;
    if !line.contains("->") {
        bail!("the proxy in {node} did not start: {}", line.trim());
    }
    Ok(c)
}

/// One kernel measurement: goodput (bit/s) of each (cc, split) flow, and the links' drops.
struct KernelPoint {
    /// Per cc: (end-to-end, split) goodput in bit/s.
    rates: Vec<(f64, f64)>,
    /// Per segment: (random losses, queue drops) of the forward direction during the run.
    drops: Vec<(u64, u64)>,
}

fn run_point(p: &ChainParams, seed: u64, ccs: &[String], warmup: Dur, seconds: Dur) -> Result<KernelPoint> {
    let chain = Chain::up(&chain_spec(p, seed))?;
    let addr = |n: &str| -> Result<std::net::IpAddr> { Ok(chain.node(n)?.addr.into()) };
    let window = u32::try_from(p.client_window.0).context("client window")?;
    let stop = Arc::new(AtomicBool::new(false));
    let total = Dur(warmup.0 + seconds.0 + Dur::from_secs(2).0);
    let mut flows = Vec::new(); // (counters, sender, sink)
    let mut proxies = Vec::new();
    // The receiving sockets, to end the sinks without waiting for the data still buffered in
    // the senders' sockets and the proxies (minutes at the lossiest points).
    let mut sinks = Vec::new();
    for (ci, cc) in ccs.iter().enumerate() {
        for split in [false, true] {
            let port = 9100 + 10 * ci as u16 + u16::from(split);
            let l = chain.run_in("receiver", move || tcp_listen_max_window(port, window))?;
            let dst = if split {
                let proxy_port = 9000 + ci as u16;
                proxies.push(start_proxy(&chain, "p2", proxy_port, SocketAddr::new(addr("receiver")?, port), cc)?);
                proxies.push(start_proxy(&chain, "p1", proxy_port, SocketAddr::new(addr("p2")?, proxy_port), cc)?);
                SocketAddr::new(addr("p1")?, proxy_port)
            } else {
                SocketAddr::new(addr("receiver")?, port)
            };
            let counters = Arc::new(FlowCounters::default());
            let c = counters.clone();
            let (tx, rx) = std::sync::mpsc::channel();
            let sink = std::thread::spawn(move || -> Result<u64> {
                let (s, _) = l.accept()?;
                let _ = tx.send(s.try_clone()?);
                tcp_sink(s, Some(&c))
            });
            sinks.push(rx);
            let (cc, stop) = (cc.clone(), stop.clone());
            let sender = chain.spawn_in("sender", move || {
                let s = tcp_connect(dst, &cc)?;
                tcp_bulk_send(&s, total, None, Some(&stop))
            })?;
            flows.push((counters, sender, sink));
        }
    }
    std::thread::sleep(Duration::from_nanos(warmup.0));
    let b0: Vec<u64> = flows.iter().map(|f| f.0.bytes.load(Ordering::Relaxed)).collect();
    let d0: Vec<_> = (1..=3).map(|i| chain.segment_counters(i).map(|c| c.0)).collect::<Result<_>>()?;
    std::thread::sleep(Duration::from_nanos(seconds.0));
    let b1: Vec<u64> = flows.iter().map(|f| f.0.bytes.load(Ordering::Relaxed)).collect();
    let d1: Vec<_> = (1..=3).map(|i| chain.segment_counters(i).map(|c| c.0)).collect::<Result<_>>()?;
    stop.store(true, Ordering::Relaxed);
    for rx in &sinks {
        if let Ok(s) = rx.recv_timeout(Duration::from_secs(1)) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
    for (_, sender, sink) in flows {
        sender.join().map_err(|_| anyhow::anyhow!("sender panicked"))??;
        sink.join().map_err(|_| anyhow::anyhow!("sink panicked"))??;
    }
    let secs = seconds.as_secs_f64();
    let rate = |i: usize| (b1[i] - b0[i]) as f64 * 8.0 / secs;
    let rates = (0..ccs.len()).map(|ci| (rate(2 * ci), rate(2 * ci + 1))).collect();
    let drops = d1.iter().zip(&d0).map(|(a, b)| (a.lost - b.lost, a.queue_drops - b.queue_drops)).collect();
    chain.down()?; // kills the proxies with the namespaces
    for mut c in proxies {
        let _ = c.wait();
    }
    Ok(KernelPoint { rates, drops })
}

pub fn run(a: ProxyFig3Args) -> Result<()> {
    if let Some(why) = headroom_testbed::unsupported_reason() {
        bail!("proxy-fig3 needs the testbed: {why}");
    }
    if a.cc.is_empty() {
        bail!("--cc: give at least one congestion control");
    }
    let grid = points(a.grid);
    println!(
        "Fig. 3 on the kernel: chain sender-LAN1-P1-WAN-P2-LAN2-receiver, 100 Mbit/s segments, LAN1 5 ms / 0.1 %, WAN 20 ms / 0.1 %; grid {:?} ({} points); {} s measured after {} s warm-up per point; sim {} s per point",
        a.grid,
        grid.len(),
        a.seconds.as_secs_f64(),
        a.warmup.as_secs_f64(),
        a.sim_seconds.as_secs_f64()
    );
    println!(
        "{:>6} {:>6} {:>6} {:>9} {:>9} {:>7} {:>7} {:>7} {:>9} {:>9} {:>22}",
        "P_LAN2",
        "D_ms",
        "cc",
        "e2e Mb/s",
        "split",
        "gain",
        "sim",
        "model",
        "sim e2e",
        "sim split",
        "drops (loss/queue) 1,2,3"
    );
    let mut csv = String::from(
        "p_lan2,d_lan2_ms,cc,kernel_e2e_mbps,kernel_split_mbps,kernel_gain,sim_case1_mbps,sim_case2_mbps,sim_gain,padhye_case1_mbps,model_case2_mbps,model_gain\n",
    );
    let mut gains: Vec<(String, f64, f64, f64)> = Vec::new(); // cc, kernel, sim, model
    let mut setup = Fig3Setup::parse(FIG3_FILE, "scenarios/overlay/fig3.toml").map_err(anyhow::Error::msg)?;
    setup.duration = a.sim_seconds;
    for (k, &(p_lan2, d)) in grid.iter().enumerate() {
        let d_lan2 = Dur::from_millis(d);
        let sim: Fig3Point = fig3_point(&setup, p_lan2, d_lan2);
        let params = setup.point(p_lan2, d_lan2, false);
        let kp = run_point(&params, k as u64 + 1, &a.cc, a.warmup, a.seconds)?;
        let drops: Vec<String> = kp.drops.iter().map(|(l, q)| format!("{l}/{q}")).collect();
        for (cc, &(e2e, split)) in a.cc.iter().zip(&kp.rates) {
            let gain = split / e2e;
            println!(
                "{:>6} {:>6} {:>6} {:>9.3} {:>9.3} {:>7.2} {:>7.2} {:>7.2} {:>9.3} {:>9.3} {:>22}",
                p_lan2,
                d,
                cc,
                e2e / 1e6,
                split / 1e6,
                gain,
                sim.sim_gain(),
                sim.model_gain(),
                sim.sim_case1 / 1e6,
                sim.sim_case2 / 1e6,
                drops.join(" ")
            );
            writeln!(
                csv,
                "{p_lan2},{d},{cc},{:.4},{:.4},{:.4},{:.4},{:.4},{:.4},{:.4},{:.4},{:.4}",
                e2e / 1e6,
                split / 1e6,
                gain,
                sim.sim_case1 / 1e6,
                sim.sim_case2 / 1e6,
                sim.sim_gain(),
                sim.padhye_case1 / 1e6,
                sim.model_case2 / 1e6,
                sim.model_gain()
            )?;
            gains.push((cc.clone(), gain, sim.sim_gain(), sim.model_gain()));
        }
    }
    println!("paper: Case 2 (split) always above Case 1, up to more than 3x");
    for cc in &a.cc {
        let g: Vec<&(String, f64, f64, f64)> = gains.iter().filter(|x| &x.0 == cc).collect();
        let (lo, hi) = g.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), x| (lo.min(x.1), hi.max(x.1)));
        let above = g.iter().filter(|x| x.1 > 1.0).count();
        let ratio_sim: Vec<f64> = g.iter().map(|x| x.1 / x.2).collect();
        let (rlo, rhi) = ratio_sim.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &r| (lo.min(r), hi.max(r)));
        println!(
            "kernel {cc}: gain {lo:.2}-{hi:.2}x, above 1 at {above}/{} points; kernel gain / simulator gain {rlo:.2}-{rhi:.2}",
            g.len()
        );
    }
    if let Some(path) = &a.csv {
        std::fs::write(path, csv).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
