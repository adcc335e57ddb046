//! `headroom probe-bench --pacing-grid [RATES]`: the spacing error at each rate (issue 19:
//! "sender pacing and receiver timestamps accurate enough for the packet spacing at the top
//! rate (measure and report the spacing error at each rate)").
//!
//! Per rate `R`, a `headroom serve` on loopback (its pacer at SCHED_FIFO like
//! `probe-bench`'s server unless `--no-realtime`) sends `--trains` PathQuick trains with
//! `B_max = R` (`T_quick = P_N / R`, PathQuick Eq. 5; the client's default train otherwise) and
//! no auto-ranging. Printed per rate, medians over the trains:
//! - **sender**: the server's own account of each packet's |send − schedule| (its END message:
//!   the train's mean and worst packet), in µs and in % of `T_quick`;
//! - **receiver**: |receive gap − send gap| over every pair of consecutive packets, from the
//!   kernel's arrival stamps and the send times the probes carry: loopback has no bottleneck, so
//!   this is the receive side's error (stamping plus the loopback path), median and 99th
//!   percentile;
//! - trains the client judged badly paced (`pacing_fault`).
//!
//! Loopback needs no testbed and no root (without root the pacer runs at normal priority, and
//! says so); the machine's load moves the sender, so the load average is printed per rate.

use std::fmt::Write as _;
use std::str::FromStr;

use anyhow::{Context, Result};
use headroom_core::abw::{InconclusiveReason, Method, Outcome};
use headroom_core::stats::{median, Sorted};
use headroom_core::units::{Dur, Rate};
use headroom_net::{estimate_addr, EstimateOptions, Server, ServerConfig};

use crate::probe_bench::ProbeBenchArgs;

/// Rates, `RATE,RATE,...`.
#[derive(Clone, Debug, PartialEq)]
pub struct PacingGrid(pub Vec<Rate>);

/// The range, 1 to 500 Mbit/s.
pub const DEFAULT_RATES: &str = "1Mbps,10Mbps,100Mbps,200Mbps,400Mbps,500Mbps";

impl FromStr for PacingGrid {
    type Err = String;
    fn from_str(s: &str) -> Result<PacingGrid, String> {
        s.split(',')
            .map(|x| headroom_core::units::parse_positive::<Rate>(x.trim()).map_err(|e| e.to_string()))
            .collect::<Result<Vec<_>, _>>()
            .map(PacingGrid)
    }
}

/// One rate's figures.
#[derive(Clone, Debug)]
pub struct PacingRow {
    pub rate: Rate,
    pub t_quick: Dur,
    pub trains: usize,
    /// Medians over the trains of the sender's mean and worst |send − schedule|, ns.
    pub send_mean_ns: f64,
    pub send_max_ns: f64,
    /// Median and 99th percentile of |receive gap − send gap| over every train's pairs, ns.
    pub recv_median_ns: f64,
    pub recv_p99_ns: f64,
    pub badly_paced: usize,
}

/// |receive gap − send gap| of every consecutive pair received in a train.
pub fn receive_gap_errors(records: &[headroom_core::abw::ProbeRecord]) -> Vec<f64> {
    records
        .windows(2)
        .filter(|w| w[1].index == w[0].index + 1)
        .filter_map(|w| {
            let (r0, r1) = (w[0].recv_time?, w[1].recv_time?);
            let recv = r1.0 as f64 - r0.0 as f64;
            let send = w[1].send_time.0 as f64 - w[0].send_time.0 as f64;
            Some((recv - send).abs())
        })
        .collect()
}

fn measure_rate(server: std::net::SocketAddr, rate: Rate, trains: u32) -> Result<PacingRow> {
    let defaults = EstimateOptions::for_method(Method::PathQuick);
    let opts = EstimateOptions { b_max: rate, auto_range: false, repeat: 1, ..defaults };
    let (mut means, mut maxes, mut recv, mut badly, mut t_quick) = (vec![], vec![], vec![], 0, Dur::ZERO);
    for _ in 0..trains {
        let e = estimate_addr(server, &opts).with_context(|| format!("a {rate} train on loopback"))?;
        if let headroom_core::abw::TrainDesign::PathQuick(d) = &e.design {
            t_quick = d.t_quick;
        }
        for t in &e.trains {
            means.push(t.spacing_error_mean.0 as f64);
            maxes.push(t.spacing_error_max.0 as f64);
            recv.extend(receive_gap_errors(&t.records));
            badly += matches!(&t.estimate.outcome, Outcome::Inconclusive { reason: InconclusiveReason::BadlyPaced(_) })
                as usize;
        }
    }
    let recv: Sorted = recv.into_iter().collect();
    Ok(PacingRow {
        rate,
        t_quick,
        trains: means.len(),
        send_mean_ns: median(&means).unwrap_or(f64::NAN),
        send_max_ns: median(&maxes).unwrap_or(f64::NAN),
        recv_median_ns: recv.quantile(0.5).unwrap_or(f64::NAN),
        recv_p99_ns: recv.quantile(0.99).unwrap_or(f64::NAN),
        badly_paced: badly,
    })
}

/// The table's line for one rate.
pub fn row_line(r: &PacingRow, load: &str) -> String {
    let pct = |ns: f64| 100.0 * ns / r.t_quick.0.max(1) as f64;
    format!(
        "{:>8.1} {:>9.1} {:>6} {:>9.2} {:>7.2} {:>9.1} {:>10.2} {:>9.1} {:>8}/{:<3}  {load}",
        r.rate.as_mbps(),
        r.t_quick.0 as f64 / 1e3,
        r.trains,
        r.send_mean_ns / 1e3,
        pct(r.send_mean_ns),
        r.send_max_ns / 1e3,
        r.recv_median_ns / 1e3,
        r.recv_p99_ns / 1e3,
        r.badly_paced,
        r.trains
    )
}

/// Runs the grid on loopback and prints the table.
pub fn run(a: &ProbeBenchArgs, grid: &PacingGrid) -> Result<()> {
    let realtime = !a.no_realtime;
    let server = std::thread::spawn(move || -> Result<_> {
        let s = Server::bind("127.0.0.1:0", ServerConfig::default())?;
        // The pacer and receive threads inherit this thread's scheduling.
        if realtime && crate::probe::try_realtime().is_err() {
            eprintln!("note: no real-time priority for the pacer here (needs root or CAP_SYS_NICE): it runs at normal priority");
        }
        Ok(s.spawn()?)
    })
    .join()
    .map_err(|_| anyhow::anyhow!("server thread panicked"))??;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "spacing error at each rate (issue 19): PathQuick trains on loopback, {} per rate, T_quick = 1500 B / rate; \
         sender = the server's |send - schedule| (median over trains of each train's mean and worst packet); \
         receiver = |receive gap - send gap| from kernel stamps (median, p99 over all pairs)",
        a.trains
    );
    let _ = writeln!(
        s,
        "{:>8} {:>9} {:>6} {:>9} {:>7} {:>9} {:>10} {:>9} {:>12}  load before",
        "Mbit/s", "T_q us", "trains", "send us", "% T_q", "worst us", "recv med", "recv p99", "badly paced"
    );
    print!("{s}");
    for &rate in &grid.0 {
        let load = crate::shaper_grid::load_average();
        let row = measure_rate(server.local_addr(), rate, a.trains);
        match row {
            Ok(r) => println!("{}", row_line(&r, &load)),
            Err(e) => println!("{:>8.1} failed: {e:#}", rate.as_mbps()),
        }
        std::thread::sleep(std::time::Duration::from_nanos(a.pause.0));
    }
    server.shutdown();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_core::abw::ProbeRecord;
    use headroom_core::units::{Bytes, Time};

    #[test]
    fn receive_gap_errors_compare_consecutive_received_pairs_only() {
        let rec = |index, send: u64, recv: Option<u64>| ProbeRecord {
            index,
            send_time: Time(send),
            recv_time: recv.map(Time),
            size: Bytes(100),
        };
        // gaps sent 100 ns apart; received 100, 130, then a loss, then 100 again
        let r = [
            rec(0, 0, Some(1000)),
            rec(1, 100, Some(1100)),
            rec(2, 200, Some(1230)),
            rec(3, 300, None),
            rec(4, 400, Some(1400)),
            rec(5, 500, Some(1500)),
        ];
        assert_eq!(receive_gap_errors(&r), vec![0.0, 30.0, 0.0]);
        assert_eq!("1Mbps,500Mbps".parse::<PacingGrid>().unwrap().0, vec![Rate::from_mbps(1), Rate::from_mbps(500)]);
        assert!("1Mbps,fast".parse::<PacingGrid>().is_err());
    }
}
