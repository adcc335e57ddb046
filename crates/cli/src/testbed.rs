//! `headroom testbed ...`: emulated networks from Linux network namespaces (see the
//! `headroom-testbed` crate and docs/testbed.md).

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::Subcommand;
use headroom_core::units::{parse_positive, Dur, Rate};
use headroom_testbed::bench::{bench_delaybox, BenchConfig};
use headroom_testbed::{scenario, Chain, ChainScenario, Scenario, Testbed};

#[derive(Subcommand, Debug)]
pub enum TestbedCmd {
    /// Build the topology of FILE and keep it up until Ctrl-C / SIGTERM / `testbed down`.
    Up {
        /// Scenario or topology file (TOML, see scenarios/testbed/).
        file: PathBuf,
    },
    /// Run a command inside a host of a running testbed.
    Exec {
        /// Pick the testbed when several run (prefix as printed by `up` or `list`).
        #[arg(long)]
        prefix: Option<String>,
        host: String,
        /// The command and its arguments (after `--`).
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
    /// Bring FILE's testbed up, run its flows, write the CSV (`time_s,flow,metric,value`), tear down.
    Run {
        file: PathBuf,
        /// CSV output path (default: [run] output of the file, else stdout).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Remove testbeds: all of them (asking live owners to stop first), or with --stale only
    /// those whose owner process is gone.
    Down {
        #[arg(long)]
        stale: bool,
        /// Only this testbed.
        #[arg(long, conflicts_with = "stale")]
        prefix: Option<String>,
    },
    /// List running and stale testbeds.
    List,
    /// Measure the delay box: added-delay error and maximum throughput without own drops.
    BenchDelaybox {
        /// One-way delay configured in each direction.
        #[arg(long, default_value = "10ms")]
        delay: Dur,
        /// Offered UDP rates, comma separated; stops at the first that fails.
        #[arg(
            long,
            default_value = "100Mbps,200Mbps,400Mbps,600Mbps,800Mbps,1000Mbps",
            value_delimiter = ',',
            required = true,
            value_parser = parse_positive::<Rate>
        )]
        rates: Vec<Rate>,
        /// Length of each rate step.
        #[arg(long, default_value = "2s", value_parser = parse_positive::<Dur>)]
        step: Dur,
        /// IP packet size in bytes.
        #[arg(long, default_value_t = 1500)]
        size: usize,
    },
    /// Measure the exact link: a flood's arrival spacing against size/rate, per rate.
    BenchLink {
        /// Link rates, comma separated.
        #[arg(
            long,
            default_value = "10Mbps,100Mbps,200Mbps,400Mbps,500Mbps,600Mbps,800Mbps",
            value_delimiter = ',',
            value_parser = parse_positive::<Rate>
        )]
        rates: Vec<Rate>,
        /// IP packet size in bytes.
        #[arg(long, default_value_t = 1500)]
        size: usize,
        /// Packets per flood.
        #[arg(long, default_value_t = 2000)]
        packets: u32,
        /// Instead of floods, paced trains at half each rate (the link never queues): how
        /// constant the delay is with the box polling its input for 300 µs after arrivals (as
        /// `probe-bench` runs it) and sleeping after every packet (the testbed's default), side by side
        /// (`headroom_testbed::linkcheck::arrival_delays`). `--packets` is then the packets per
        /// train, 20 trains per rate and setting.
        #[arg(long)]
        paced: bool,
    },
}

pub fn run(cmd: TestbedCmd) -> Result<()> {
    match cmd {
        TestbedCmd::Up { file } => up(&file),
        TestbedCmd::Exec { prefix, host, cmd } => exec(prefix.as_deref(), &host, &cmd),
        TestbedCmd::Run { file, output } => run_file(&file, output),
        TestbedCmd::Down { stale, prefix } => {
            let removed = if stale {
                headroom_testbed::down_stale()?
            } else {
                headroom_testbed::down_all(prefix.as_deref(), std::time::Duration::from_secs(5))?
            };
            if removed.is_empty() {
                eprintln!("nothing to remove");
            }
            for r in removed {
                println!("removed {r}");
            }
            report_unrecorded();
            Ok(())
        }
        TestbedCmd::List => {
            for r in headroom_testbed::list_runs() {
                let state = if r.is_stale() { "stale" } else { "running" };
                let hosts: Vec<String> = r.hosts.iter().map(|h| format!("{}={}", h.name, h.addr)).collect();
                println!("{}  pid {}  {state}  {}", r.prefix, r.pid, hosts.join(" "));
            }
            report_unrecorded();
            Ok(())
        }
        TestbedCmd::BenchLink { rates, size, packets, paced: false } => bench_link(&rates, size, packets),
        TestbedCmd::BenchLink { rates, size, packets, paced: true } => bench_link_paced(&rates, size, packets),
        TestbedCmd::BenchDelaybox { delay, rates, step, size } => {
            let cfg = BenchConfig { delay, step, rates, size };
            if !(headroom_testbed::traffic::MIN_UDP_SIZE..=65_000).contains(&size) {
                bail!("--size: {size} outside {}..=65000", headroom_testbed::traffic::MIN_UDP_SIZE);
            }
            println!(
                "delay box benchmark: one-way delay {:.3} ms, {}-byte packets, {:.1} s per rate",
                cfg.delay.as_millis_f64(),
                size,
                cfg.step.as_secs_f64()
            );
            let rep = bench_delaybox(&cfg, &mut |l| println!("  {l}"))?;
            println!(
                "added delay error (measured one-way delay - configured, low rate, {} pkts): median {:.1} us, p99 {:.1} us, max {:.1} us",
                rep.delay_error_us.packets, rep.delay_error_us.median, rep.delay_error_us.p99, rep.delay_error_us.max
            );
            println!(
                "  of which path latency (same with delay 0): median {:.1} us; excess over it: median {:.1} us",
                rep.path_latency_us.median,
                rep.delay_error_us.median - rep.path_latency_us.median
            );
            println!(
                "delay box release lateness: mean {:.1} us, p99 < {} us, max {:.1} us",
                rep.release_late_mean.0 as f64 / 1e3,
                rep.release_late_p99_bound.0 / 1000,
                rep.release_late_max.0 as f64 / 1e3
            );
            match rep.max_rate {
                Some(r) => {
                    println!("max throughput (no own drops, mean release lateness < 100 us): {:.1} Mbit/s", r.as_mbps())
                }
                None => println!(
                    "max throughput (no own drops, mean release lateness < 100 us): below the lowest rate tried"
                ),
            }
            Ok(())
        }
    }
}

/// Names namespaces that look like ours but that no state file records: they are left alone.
fn report_unrecorded() {
    for ns in headroom_testbed::bed::unrecorded_namespaces() {
        eprintln!("left alone: namespace {ns} is named like a testbed's but no state file records it");
    }
}

fn up(file: &std::path::Path) -> Result<()> {
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    // Kept alive until the signal handler exits the process.
    let (_chain, _tb, prefix, hosts);
    if ChainScenario::is_chain(&text) {
        let c = Chain::up(&ChainScenario::parse(&text, &file.display().to_string())?.spec())?;
        (prefix, hosts) = (c.prefix().to_string(), c.nodes().to_vec());
        (_chain, _tb) = (Some(c), None);
    } else {
        let tb = Testbed::up(&Scenario::parse(&text, &file.display().to_string())?.topology())?;
        (prefix, hosts) = (tb.prefix().to_string(), tb.hosts().to_vec());
        (_chain, _tb) = (None, Some(tb));
    }
    println!("testbed {prefix} is up (pid {})", std::process::id());
    for h in &hosts {
        println!(
            "  {:12} {:5}  {:15} netns {}",
            h.name,
            format!("{:?}", h.side).to_lowercase(),
            h.addr.to_string(),
            h.netns
        );
    }
    // `testbed down` without --prefix removes every testbed on the machine: name this one.
    println!(
        "run commands with `headroom testbed exec HOST -- CMD` (`--prefix {prefix}` when several testbeds run); stop with Ctrl-C or `headroom testbed down --prefix {prefix}`"
    );
    // The testbed's signal handler removes everything and exits on SIGINT/SIGTERM/SIGHUP.
    loop {
        std::thread::park();
    }
}

fn exec(prefix: Option<&str>, host: &str, cmd: &[String]) -> Result<()> {
    let h = headroom_testbed::find_host(host, prefix)?;
    let status = Command::new("ip")
        .args(["netns", "exec", &h.netns])
        .args(cmd)
        .status()
        .with_context(|| format!("running `{}` in {host}", cmd.join(" ")))?;
    match status.code() {
        Some(0) => Ok(()),
        Some(c) => std::process::exit(c),
        None => bail!("`{}` in {host} was killed by a signal", cmd.join(" ")),
    }
}

fn run_file(file: &std::path::Path, output: Option<PathBuf>) -> Result<()> {
    let s = Scenario::load(file)?;
    let path = output.or_else(|| s.run.output.as_ref().map(PathBuf::from));
    crate::outdir::writable_file(path.as_deref(), "-o (or [run] output)")?;
    // Ctrl-C / SIGTERM stop the measurement; the CSV and summary of what was measured so far are
    // still written (marked partial) and the testbed torn down. A second signal aborts at once.
    let interrupt = Arc::new(AtomicBool::new(false));
    headroom_testbed::bed::interrupt_on_signal(interrupt.clone());
    let out = scenario::run(&s, &interrupt)?;
    if let Some(t) = out.interrupted_after {
        // marks the CSV as partial: one row `run,interrupted_after_s` at the time of the interruption
        out.recorder.push(t.as_secs_f64(), "run", "interrupted_after_s", t.as_secs_f64());
    }
    match &path {
        Some(p) => {
            let mut f = std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?;
            out.recorder.write_csv(&mut f)?;
        }
        None => out.recorder.write_csv(&mut std::io::stdout().lock())?,
    }
    let measured = match out.interrupted_after {
        Some(t) => {
            format!("PARTIAL: interrupted after {:.1} s of {:.1} s", t.as_secs_f64(), s.run.duration.as_secs_f64())
        }
        None => format!("{:.1} s", s.run.duration.as_secs_f64()),
    };
    eprintln!("testbed {} ({}): {measured}", out.prefix, s.name.as_deref().unwrap_or("unnamed"));
    for f in &out.flows {
        eprintln!("  {:12} {:?}: {:.3} Mbit/s; {}", f.name, f.kind, f.throughput.as_mbps(), f.detail);
    }
    if let Some(p) = path {
        eprintln!("wrote {}{}", p.display(), if out.interrupted_after.is_some() { " (partial)" } else { "" });
    }
    if out.interrupted_after.is_some() {
        std::process::exit(128 + headroom_testbed::bed::received_signal().unwrap_or(libc::SIGINT));
    }
    Ok(())
}

fn bench_link(rates: &[Rate], size: usize, packets: u32) -> Result<()> {
    if packets < 2 {
        bail!("--packets: at least 2 (one gap)");
    }
    println!("exact link: {packets} back-to-back {size}-byte packets per rate; error = |arrival gap - size/rate| at the receiver (kernel timestamps); box late = release lateness mean / p99 bound; idle = packets of the flood that found the link idle (1 or 2: the flood kept it busy)");
    println!(
        "{:>9} {:>9} {:>10} {:>10} {:>10} {:>13} {:>9} {:>14} {:>6} {:>9}",
        "rate",
        "ideal us",
        "median us",
        "p99 us",
        "received",
        "rx Mbit/s",
        "own drop",
        "box late us",
        "idle",
        "verdict"
    );
    let mut top = None;
    for &rate in rates {
        let s = headroom_testbed::linkcheck::link_spacing(rate, size, packets)?;
        println!(
            "{:>9.1} {:>9.2} {:>10.2} {:>10.2} {:>6}/{:<4} {:>13.2} {:>9} {:>6.1}/<{:<6} {:>6} {:>9}",
            rate.as_mbps(),
            s.ideal.0 as f64 / 1e3,
            s.median_error.0 as f64 / 1e3,
            s.p99_error.0 as f64 / 1e3,
            s.received,
            s.sent,
            s.received_rate.as_mbps(),
            s.own_drops,
            s.box_late_mean.0 as f64 / 1e3,
            s.box_late_p99.0 / 1000,
            s.link_idle,
            if s.sustained() { "ok" } else { "NOT SUSTAINED" }
        );
        if !s.sustained() && s.link_idle > 1 {
            println!(
                "          the flood reached the box with gaps ({} idle starts): the input fell behind the rate (the sender and the router path on this machine), not the link",
                s.link_idle
            );
        }
        if s.sustained() {
            top = Some(rate);
        }
    }
    match top {
        Some(r) => println!("highest rate sustained (every packet, no own drops, rate within 1%): {r}"),
        None => println!("no rate tried was sustained"),
    }
    Ok(())
}

/// Trains through each rate's link with the box polling after arrivals and sleeping, alternating.
fn bench_link_paced(rates: &[Rate], size: usize, per_train: u32) -> Result<()> {
    const TRAINS: u32 = 20;
    if per_train < 2 {
        bail!("--packets: at least 2 per train");
    }
    println!("exact link, paced: {TRAINS} trains of {per_train} {size}-byte packets at half the rate, 20 ms apart; dev = |delay - median delay| at the receiver (kernel timestamps against the sender's clock), every packet but each train's first; first = the first packet's delay above the median (median over trains)");
    println!(
        "{:>9} {:>11} {:>10} {:>10} {:>9} {:>9} {:>9} {:>10} {:>12}",
        "rate", "box input", "spacing us", "received", "dev med", "dev p90", "dev p99", "first us", "box late us"
    );
    for &rate in rates {
        for spin in [headroom_testbed::delaybox::DEFAULT_ARRIVAL_SPIN, Dur::ZERO] {
            let a = headroom_testbed::linkcheck::arrival_delays(rate, size, TRAINS, per_train, spin)?;
            println!(
                "{:>9.1} {:>11} {:>10.2} {:>6}/{:<4} {:>9.2} {:>9.2} {:>9.2} {:>10.1} {:>12.1}",
                rate.as_mbps(),
                if spin > Dur::ZERO { "polled" } else { "sleeps" },
                a.spacing.0 as f64 / 1e3,
                a.received,
                a.sent,
                a.median_dev.0 as f64 / 1e3,
                a.p90_dev.0 as f64 / 1e3,
                a.p99_dev.0 as f64 / 1e3,
                a.first_excess_ns as f64 / 1e3,
                a.box_late_mean.0 as f64 / 1e3,
            );
        }
    }
    Ok(())
}
