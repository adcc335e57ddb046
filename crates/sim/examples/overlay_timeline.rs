//! The proxy's CPU over time in one Figs. 5-8 run (issue 14): per interval, the CPU's busy
//! share, packets served, their mean wait, and the connections split. Used to see when policy C
//! splits and what queue its splits meet (docs/results.md, issue 14 session 4).
//!
//!     cargo run --release -p headroom-sim --example overlay_timeline -- c 7 [SEED] [STEP_MS]
//!
//! Policy `c`, `d`, `none` or `all`; figure `7` (Figs. 5-7 set-up) or `8`.

use headroom_core::units::{Dur, Time};
use headroom_sim::overlay::experiments::{web_proxy, PolicyChoice, WebSetup, WEB_FILE};
use headroom_sim::overlay::OverlayWorld;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: overlay_timeline c|d|none|all 7|8 [SEED] [STEP_MS]";
    let setup = WebSetup::parse(WEB_FILE, "scenarios/overlay/web.toml").expect("the embedded file parses");
    let pol = match args.get(1).map(String::as_str) {
        Some("c") => PolicyChoice::LowLoad,
        Some("d") => PolicyChoice::ShortQueue { target: Dur::from_millis(1) },
        Some("none") => PolicyChoice::None,
        Some("all") => PolicyChoice::All,
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    let mut p = match args.get(2).map(String::as_str) {
        Some("7") => setup.fig5_7(pol),
        Some("8") => setup.fig8(pol),
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    let num = |i: usize, default: u64| match args.get(i) {
        None => default,
        Some(s) => s.parse().unwrap_or_else(|_| {
            eprintln!("{usage}");
            std::process::exit(2)
        }),
    };
    p.seed = num(3, p.seed);
    let step = Dur::from_millis(num(4, 500).max(1));
    let mut w = OverlayWorld::new(web_proxy(&p));
    let mut t = Time::ZERO;
    let mut prev = w.proxy_stats()[0].clone();
    println!("time_s,cpu_busy_pct,served,mean_wait_ms,split");
    while t < Time::ZERO + p.end {
        t += step;
        w.run_until(t);
        let s = w.proxy_stats()[0].clone();
        let served = s.served - prev.served;
        let busy = (s.busy.as_secs_f64() - prev.busy.as_secs_f64()) / step.as_secs_f64();
        let wait = (s.total_wait.as_secs_f64() - prev.total_wait.as_secs_f64()) / served.max(1) as f64;
        println!("{:.2},{:.1},{},{:.3},{}", t.as_secs_f64(), busy * 100.0, served, wait * 1e3, s.split - prev.split);
        prev = s;
    }
}
