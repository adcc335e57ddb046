//! The `headroom` command: one front end over the simulator, the testbed and the socket tools.

use clap::{Parser, Subcommand};

mod cc;
mod cc_bench;
mod chirp_smoothing;
mod crosscheck;
mod demo;
mod outdir;
mod pacing_grid;
mod plot;
mod probe;
mod probe_bench;
mod probe_monitor;
mod probe_replay;
mod probe_watch;
mod proxy;
mod proxy_bench;
mod proxy_bench_idle;
mod proxy_fig3;
mod proxy_web;
mod proxy_workers;
mod reproduce;
mod send_bench;
mod shaper_grid;
mod sim;
mod testbed;
mod transfer;

#[derive(Parser, Debug)]
#[command(
    name = "headroom",
    version,
    about = "Measure the available bandwidth of a path and transport data according to it"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// What headroom is for, in under a minute on simulated paths (no root): available-bandwidth estimates against the truth, a background transfer in the spare bandwidth; writes a report.
    Demo(demo::DemoArgs),
    /// Packet-level simulation of a scenario file.
    #[command(subcommand)]
    Sim(sim::SimCmd),
    /// Rerun a paper's experiment: CSV, SVG plot and a comparison with the paper.
    Reproduce(reproduce::ReproduceArgs),
    /// Emulated networks from Linux network namespaces.
    #[command(subcommand)]
    Testbed(testbed::TestbedCmd),
    /// Estimate the available bandwidth to a `headroom serve` peer.
    Probe(probe::ProbeArgs),
    /// Answer probe clients.
    Serve(probe::ServeArgs),
    /// Benchmark PathQuick against pathChirp on the testbed (root): 12 Mbit/s, 26 ms each way, Poisson cross traffic.
    ProbeBench(probe_bench::ProbeBenchArgs),
    /// Judge the trains of a `probe-bench --dump` again offline and replay auto-ranging's ladder on them: recorded against replayed answers, per estimate.
    ProbeReplay(probe_replay::ProbeReplayArgs),
    /// PathQuick and pathChirp train designs: the paper's analytic comparison, or your own.
    Design(probe::DesignArgs),
    /// Split-TCP proxy (performance-enhancing proxy): relays clients to one upstream.
    Proxy(proxy::ProxyArgs),
    /// Benchmark the proxy on loopback against direct TCP: throughput, CPU, latency, memory.
    ProxyBench(proxy_bench::ProxyBenchArgs),
    /// The overlay paper's Fig. 3 on the kernel (root): testbed chain, Linux TCP end to end vs split by two proxies, beside the simulator and the model.
    ProxyFig3(proxy_fig3::ProxyFig3Args),
    /// The overlay paper's Figs. 5-7 on the kernel (root): web transfer delays through a transparent proxy with an emulated CPU under policies none / all / A / C / D, in rounds.
    ProxyWeb(proxy_web::ProxyWebArgs),
    /// headroom's congestion controllers in the Linux kernel (BECC, TCP-LP, LEDBAT as BPF struct_ops).
    #[command(subcommand)]
    Cc(cc::CcCmd),
    /// Bulk transfer to a `headroom recv` over the kernel's TCP (optionally measuring the available bandwidth inline).
    Send(transfer::SendArgs),
    /// Receive `headroom send` transfers.
    Recv(transfer::RecvArgs),
    /// Benchmark `headroom send` on the testbed (root): measurement accuracy, integrity through loss.
    SendBench(send_bench::SendBenchArgs),
    /// One dumbbell scenario in the simulator and on the testbed (kernel CUBIC/Reno), side by side.
    Crosscheck(crosscheck::CrosscheckArgs),
}

fn main() {
    // Die quietly on a closed pipe (`headroom ... | head`) instead of panicking in print!.
    // SAFETY: resetting a signal disposition to its default before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Demo(a) => demo::run(a),
        Cmd::Sim(c) => sim::run(c),
        Cmd::Reproduce(a) => reproduce::run(a),
        Cmd::Testbed(c) => testbed::run(c),
        Cmd::Probe(a) => probe::run_probe(a),
        Cmd::Serve(a) => probe::run_serve(a),
        Cmd::Design(a) => probe::run_design(a),
        Cmd::ProbeBench(a) => probe_bench::run_probe_bench(a),
        Cmd::ProbeReplay(a) => probe_replay::run(a),
        Cmd::Proxy(a) => proxy::run(a),
        Cmd::ProxyBench(a) => proxy_bench::run(a),
        Cmd::ProxyFig3(a) => proxy_fig3::run(a),
        Cmd::ProxyWeb(a) => proxy_web::run(a),
        Cmd::Cc(c) => cc::run(c),
        Cmd::Send(a) => transfer::run_send(a),
        Cmd::Recv(a) => transfer::run_recv(a),
        Cmd::SendBench(a) => send_bench::run_send_bench(a),
        Cmd::Crosscheck(a) => crosscheck::run(a),
    };
    if let Err(e) = r {
        eprintln!("headroom: error: {e:#}");
        std::process::exit(1);
    }
}
