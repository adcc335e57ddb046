//! `headroom sim run|sweep|bench`: the simulator's front end.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use headroom_core::units::Time;
use headroom_sim::output;
use headroom_sim::sweep;
use headroom_sim::{Scenario, World};

#[derive(Subcommand, Debug)]
pub enum SimCmd {
    /// Run a scenario: summary table on stdout, CSV and JSON in --out.
    Run(RunArgs),
    /// Run a scenario once per value of one parameter and print throughput per flow.
    Sweep(SweepArgs),
    /// Benchmark the simulator on a scenario (release build): wall time, packets and events per second.
    Bench(BenchArgs),
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Scenario file (TOML); without it, the built-in dumbbell (scenarios/sim/dumbbell.toml).
    pub file: Option<PathBuf>,
    /// Seed (overrides the scenario's).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Directory for summary.json, flows.csv, trace.csv (and pages.csv).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print the JSON summary on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// Scenario file (TOML); its `[sweep]` table gives key and values unless --key is given.
    pub file: PathBuf,
    /// Dotted key to vary, e.g. tcp.max_window.
    #[arg(long, requires = "values")]
    pub key: Option<String>,
    /// Comma-separated values (strings such as 64KB, or numbers).
    #[arg(long, value_delimiter = ',')]
    pub values: Vec<String>,
    #[arg(long)]
    pub seed: Option<u64>,
    /// Write sweep.csv here.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Scenario files to time.
    #[arg(default_values = ["scenarios/bench/dumbbell.toml", "scenarios/bench/web.toml"])]
    pub files: Vec<PathBuf>,
    /// Runs per scenario (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
}

pub fn run(cmd: SimCmd) -> Result<()> {
    match cmd {
        SimCmd::Run(a) => run_one(a),
        SimCmd::Sweep(a) => run_sweep(a),
        SimCmd::Bench(a) => run_bench(a),
    }
}

fn load(file: &Path) -> Result<(String, Scenario)> {
    let src = std::fs::read_to_string(file).with_context(|| format!("cannot read scenario {}", file.display()))?;
    let sc = Scenario::parse(&src, &file.display().to_string())?;
    Ok((src, sc))
}

/// Seconds a run lasts before its progress bar appears, unless `HEADROOM_PROGRESS_AFTER` (seconds,
/// e.g. `0` to draw from the start, as the progress test does) says otherwise.
const PROGRESS_AFTER_S: f64 = 1.0;

/// Runs the world to its end, drawing a progress bar (indicatif) on a terminal once a run passes
/// [`PROGRESS_AFTER_S`]; nothing is drawn when stdout or stderr is not a terminal, so files and
/// pipes see only the results.
pub fn run_with_progress(w: &mut World) {
    let after = std::env::var("HEADROOM_PROGRESS_AFTER")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .unwrap_or(PROGRESS_AFTER_S);
    let started = Instant::now();
    let end = w.end;
    let steps = 200u64;
    let tty = std::io::stderr().is_terminal() && std::io::stdout().is_terminal();
    let mut bar: Option<ProgressBar> = None;
    for k in 1..=steps {
        w.run_until(Time(end.0 / steps * k));
        if tty && started.elapsed().as_secs_f64() >= after {
            let b = bar.get_or_insert_with(|| {
                let b = ProgressBar::with_draw_target(Some(steps), ProgressDrawTarget::stderr());
                b.set_style(
                    ProgressStyle::with_template("[{bar:40}] {msg}").expect("a valid template").progress_chars("#> "),
                );
                b
            });
            b.set_position(k);
            b.set_message(format!(
                "{:>5.1}%  {:.1}/{:.1} s simulated",
                k as f64 / steps as f64 * 100.0,
                w.now().as_secs_f64(),
                end.as_secs_f64()
            ));
        }
    }
    w.run();
    if let Some(b) = bar {
        b.finish();
    }
}

/// The scenario `headroom sim run` uses when given no file.
pub const BUILT_IN_SCENARIO: &str = include_str!("../../../scenarios/sim/dumbbell.toml");

fn run_one(a: RunArgs) -> Result<()> {
    crate::outdir::writable_dir(a.out.as_deref(), "--out")?;
    let sc = match &a.file {
        Some(f) => load(f)?.1,
        None => Scenario::parse(BUILT_IN_SCENARIO, "built-in scenarios/sim/dumbbell.toml")?,
    };
    let mut w = World::new(&sc, a.seed).map_err(anyhow::Error::msg)?;
    run_with_progress(&mut w);
    let report = w.report();
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", output::summary_table(&report));
    }
    if let Some(dir) = a.out {
        let files =
            output::write_all(&dir, &w, &report).with_context(|| format!("cannot write to {}", dir.display()))?;
        if !a.json {
            println!("wrote {} in {}", files.join(", "), dir.display());
        }
    }
    Ok(())
}

fn run_sweep(a: SweepArgs) -> Result<()> {
    crate::outdir::writable_dir(a.out.as_deref(), "--out")?;
    let (src, sc) = load(&a.file)?;
    let (key, values) = match (&a.key, &sc.sweep) {
        (Some(k), _) => (k.clone(), a.values.iter().map(|v| parse_cli_value(v)).collect::<Vec<_>>()),
        (None, Some(s)) => (s.key.clone(), s.values.clone()),
        (None, None) => bail!("{}: no [sweep] table and no --key/--values given", a.file.display()),
    };
    if values.is_empty() {
        bail!("the sweep has no values");
    }
    let points = sweep::run(&src, &a.file.display().to_string(), &key, &values, a.seed)?;
    let mut csv = String::from("value,flow,throughput_mbps,retransmits,timeouts,drops\n");
    println!("{:<12} {:<16} {:>10} {:>8} {:>8}", key.rsplit('.').next().unwrap_or(&key), "flow", "Mbps", "retx", "rto");
    for p in &points {
        for f in &p.report.flows {
            let v = sweep::label(&p.value);
            println!("{:<12} {:<16} {:>10.3} {:>8} {:>8}", v, f.name, f.throughput_mbps, f.retransmits, f.timeouts);
            csv.push_str(&format!(
                "{},{},{:.6},{},{},{}\n",
                v, f.name, f.throughput_mbps, f.retransmits, f.timeouts, f.drops
            ));
        }
    }
    if let Some(dir) = a.out {
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        std::fs::write(dir.join("sweep.csv"), csv)?;
        println!("wrote sweep.csv in {}", dir.display());
    }
    Ok(())
}

/// A value from the command line: a number when it parses as one, else a string.
fn parse_cli_value(v: &str) -> toml::Value {
    if let Ok(i) = v.parse::<i64>() {
        toml::Value::Integer(i)
    } else if let Ok(f) = v.parse::<f64>() {
        toml::Value::Float(f)
    } else if v == "true" || v == "false" {
        toml::Value::Boolean(v == "true")
    } else {
        toml::Value::String(v.to_string())
    }
}

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn run_bench(a: BenchArgs) -> Result<()> {
    if cfg!(debug_assertions) {
        eprintln!("warning: debug build; performance figures come from `cargo run --release`");
    }
    println!(
        "{:<32} {:>9} {:>14} {:>14} {:>16} {:>12}",
        "scenario", "wall_s", "bottleneck_pkts", "pkts_per_s", "events_per_s", "peak_rss_MiB"
    );
    for file in &a.files {
        let (_, sc) = load(file)?;
        let Some(bottleneck) = sc.trace.queues.first().map(|q| q.get_ref().clone()) else {
            bail!("{}: a benchmark scenario names its bottleneck as the first entry of trace.queues", file.display());
        };
        let mut runs = Vec::new();
        for _ in 0..a.repeat.max(1) {
            let mut w = World::new(&sc, None).map_err(anyhow::Error::msg)?;
            let t0 = Instant::now();
            w.run();
            let wall = t0.elapsed().as_secs_f64();
            let pkts = w.link_packets(&bottleneck).unwrap_or(0);
            let events = w.net.counters().events;
            let web_pages: u64 = w.report().flows.iter().map(|f| f.pages).sum();
            runs.push((wall, pkts, events, web_pages));
        }
        runs.sort_by(|x, y| x.0.total_cmp(&y.0));
        let (wall, pkts, events, pages) = runs[runs.len() / 2];
        println!(
            "{:<32} {:>9.3} {:>14} {:>14.0} {:>16.0} {:>12.1}{}",
            file.display(),
            wall,
            pkts,
            pkts as f64 / wall,
            events as f64 / wall,
            peak_rss_kib().unwrap_or(0) as f64 / 1024.0,
            if pages > 0 { format!("   ({pages} web pages)") } else { String::new() }
        );
    }
    println!("(median of {} runs each; peak RSS is the process's high-water mark so far)", a.repeat.max(1));
    Ok(())
}
