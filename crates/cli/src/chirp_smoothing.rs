//! pathChirp smoothed over consecutive chirps: the baseline at the accuracy PathQuick reaches
//! (issue 19, "PathQuick ahead of the pathChirp mode on error and time in the same run").
//!
//! # Why a single chirp is not the whole comparison
//!
//! `probe-bench` runs pathChirp as `headroom probe --method pathchirp` does: one chirp over
//! 1 Mbit/s to the top with the client's spread factor γ = 1.2 (37 packets of 1,500 B up to
//! 500 Mbit/s, 55,500 B in the bench's `train_bytes`). It answers fast (one short chirp and an
//! RTT) and coarsely: its rates are 20 % apart. pathChirp's own tool does not answer from one
//! chirp; it sends chirps continuously and reports the per-chirp estimates averaged over a time
//! window (Ribeiro et al., "pathChirp: Efficient Available Bandwidth Estimation for Network
//! Paths", PAM 2003).
//! The PathQuick paper's claim is the same trade-off read the other way: for PathQuick's range
//! and resolution pathChirp needs a 4.2× longer train (PathQuick paper §4, 682 ms against
//! 124 ms). So the fair question is: **how long does pathChirp take to be as accurate as
//! PathQuick?**
//!
//! # What is computed (from the bench's own estimates, nothing sent twice)
//!
//! For `K` = 1, 2, 3, 4, 6, 8, 12, 16 (at most the chirps run), every window of `K` consecutive
//! pathChirp estimates of one level ([`smoothed`]):
//! - the estimate is the mean of the window's conclusive readings (an inconclusive chirp adds
//!   time and nothing else; a window with none counts as a 100 % error, as the bench counts an
//!   inconclusive estimate);
//! - its time is the first chirp's (START → estimate, an RTT included) plus the train length of
//!   each further chirp, as if they were sent back to back with one round trip at the end:
//!   the least a continuous pathChirp can take, so the comparison favours the baseline.
//!
//! The bench alternates PathQuick and pathChirp estimates with a pause, so the chirps of one
//! window are not back to back on the wire; against stationary (Poisson) cross traffic that
//! makes their readings no less independent than back-to-back chirps', which is what the mean's
//! accuracy depends on.
//!
//! # The verdict ([`verdict`])
//!
//! PathQuick is ahead of pathChirp when no `K` makes pathChirp both as accurate (median |error|
//! at most PathQuick's) and at least as fast (median time at most PathQuick's). The line names
//! the smallest `K` that reaches PathQuick's median error and its time, or, if none does within
//! the chirps run, pathChirp's best median error and its `K`.

use std::fmt::Write as _;

use headroom_core::stats::{median, Sorted};

/// Window sizes tried (those at most the number of chirps run).
pub const WINDOWS: [usize; 8] = [1, 2, 3, 4, 6, 8, 12, 16];

/// One pathChirp estimate, in the order the bench ran them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Chirp {
    /// The reading in Mbit/s; `None` when inconclusive or failed.
    pub value_mbps: Option<f64>,
    /// START → estimate, ms.
    pub time_ms: f64,
    /// The chirp's own length, ms.
    pub train_ms: f64,
}

/// pathChirp averaged over `chirps` consecutive chirps, over every such window of one level.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Smoothed {
    pub chirps: usize,
    pub windows: usize,
    /// Median |error| over the windows, % of the capacity.
    pub median_error: f64,
    /// 90th percentile of |error|, % of the capacity.
    pub p90_error: f64,
    /// Median time of a window's estimate, ms.
    pub median_time_ms: f64,
}

/// Every window of `k` consecutive `chirps` (module doc). `None` when `k` is 0 or more than the
/// chirps run.
pub fn smoothed(chirps: &[Chirp], k: usize, truth_mbps: f64, capacity_mbps: f64) -> Option<Smoothed> {
    if k == 0 || k > chirps.len() || capacity_mbps <= 0.0 {
        return None;
    }
    let (mut errors, mut times) = (Vec::new(), Vec::new());
    for window in chirps.windows(k) {
        let readings: Vec<f64> = window.iter().filter_map(|c| c.value_mbps).collect();
        let error = if readings.is_empty() {
            100.0
        } else {
            let mean = readings.iter().sum::<f64>() / readings.len() as f64;
            100.0 * (mean - truth_mbps).abs() / capacity_mbps
        };
        errors.push(error);
        times.push(window[0].time_ms + window[1..].iter().map(|c| c.train_ms).sum::<f64>());
    }
    let sorted = Sorted::from(errors);
    Some(Smoothed {
        chirps: k,
        windows: times.len(),
        median_error: sorted.quantile(0.5)?,
        p90_error: sorted.quantile(0.9)?,
        median_time_ms: median(&times)?,
    })
}

/// The verdict line for one level: is PathQuick (median |error| `quick_error` %, median time
/// `quick_time_ms`) ahead of every smoothed pathChirp in `rows` (module doc)?
pub fn verdict(rows: &[Smoothed], quick_error: f64, quick_time_ms: f64) -> (bool, String) {
    let matched = rows.iter().find(|r| r.median_error <= quick_error);
    let dominated = rows.iter().any(|r| r.median_error <= quick_error && r.median_time_ms <= quick_time_ms);
    let mut s = String::new();
    match matched {
        Some(r) => {
            let _ = write!(
                s,
                "pathChirp reaches PathQuick's {:.2} % after {} chirp(s), {:.0} ms (PathQuick {:.0} ms)",
                quick_error, r.chirps, r.median_time_ms, quick_time_ms
            );
        }
        None => {
            let best = rows.iter().min_by(|a, b| a.median_error.total_cmp(&b.median_error));
            match best {
                Some(b) => {
                    let _ = write!(
                        s,
                        "pathChirp does not reach PathQuick's {:.2} % within {} chirps (best {:.2} % from {} chirp(s), {:.0} ms; PathQuick {:.0} ms)",
                        quick_error,
                        rows.iter().map(|r| r.chirps).max().unwrap_or(0),
                        b.median_error,
                        b.chirps,
                        b.median_time_ms,
                        quick_time_ms
                    );
                }
                None => s.push_str("no pathChirp estimate"),
            }
        }
    }
    (!dominated && !rows.is_empty(), s)
}

/// One level of a bench: what PathQuick reached there and pathChirp's estimates.
#[derive(Clone, Debug, PartialEq)]
pub struct Level {
    /// The cross traffic, Mbit/s (the level's label).
    pub cross_mbps: f64,
    /// The true available bandwidth, Mbit/s.
    pub truth_mbps: f64,
    /// PathQuick's median |error|, % of the capacity.
    pub quick_error: f64,
    /// PathQuick's median time, ms.
    pub quick_time_ms: f64,
    /// The level's pathChirp estimates, in run order.
    pub chirps: Vec<Chirp>,
}

/// The table and verdicts for every level.
pub fn report(capacity_mbps: f64, levels: &[Level]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\npathChirp smoothed over K consecutive chirps (its tool's averaging; time = first chirp's + the others' train lengths), % of the {capacity_mbps} Mbit/s capacity"
    );
    let _ =
        writeln!(s, "{:>6} {:>3} {:>7} {:>10} {:>8} {:>10}", "cross", "K", "windows", "med |e| %", "p90 %", "time med");
    let mut verdicts = String::new();
    for level in levels {
        let cross = level.cross_mbps;
        let rows: Vec<Smoothed> =
            WINDOWS.iter().filter_map(|&k| smoothed(&level.chirps, k, level.truth_mbps, capacity_mbps)).collect();
        for r in &rows {
            let _ = writeln!(
                s,
                "{:>6.1} {:>3} {:>7} {:>10.2} {:>8.2} {:>7.0} ms",
                cross, r.chirps, r.windows, r.median_error, r.p90_error, r.median_time_ms
            );
        }
        let (ahead, line) = verdict(&rows, level.quick_error, level.quick_time_ms);
        let _ = writeln!(
            verdicts,
            "  cross {:>5.1} Mbit/s: PathQuick ahead of pathChirp at equal accuracy: {}; {}",
            cross,
            if ahead { "yes" } else { "NO" },
            line
        );
    }
    s.push_str("time to PathQuick's median error (issue 19: ahead of pathChirp on error and time):\n");
    s.push_str(&verdicts);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chirp(v: Option<f64>) -> Chirp {
        Chirp { value_mbps: v, time_ms: 100.0, train_ms: 40.0 }
    }

    #[test]
    fn a_window_is_the_mean_of_its_conclusive_chirps_and_costs_one_round_trip() {
        // Truth 5 on a 10 Mbit/s link: readings 3 and 7 average to the truth, 9 alone is 40 % off.
        let chirps = [chirp(Some(3.0)), chirp(Some(7.0)), chirp(None), chirp(Some(9.0))];
        let one = smoothed(&chirps, 1, 5.0, 10.0).unwrap();
        assert_eq!(one.windows, 4);
        // Errors 20, 20, 100 (inconclusive), 40: median at index round(1.5) = 2 of [20, 20, 40, 100].
        assert_eq!(one.median_error, 40.0);
        assert_eq!(one.p90_error, 100.0);
        assert_eq!(one.median_time_ms, 100.0);
        let two = smoothed(&chirps, 2, 5.0, 10.0).unwrap();
        // Windows {3,7} → 5 (0 %), {7,None} → 7 (20 %), {None,9} → 9 (40 %).
        assert_eq!(two.windows, 3);
        assert_eq!(two.median_error, 20.0);
        assert_eq!(two.median_time_ms, 140.0);
        assert_eq!(smoothed(&chirps, 5, 5.0, 10.0), None);
        assert_eq!(smoothed(&chirps, 0, 5.0, 10.0), None);
        let none = [chirp(None), chirp(None)];
        assert_eq!(smoothed(&none, 2, 5.0, 10.0).unwrap().median_error, 100.0);
    }

    #[test]
    fn pathquick_is_ahead_unless_some_window_is_as_accurate_and_as_fast() {
        let row = |chirps, e, t| Smoothed { chirps, windows: 3, median_error: e, p90_error: e, median_time_ms: t };
        let rows = [row(1, 20.0, 100.0), row(4, 4.0, 220.0), row(8, 2.0, 380.0)];
        // PathQuick 5 % in 300 ms: four chirps reach 4 % in 220 ms, so pathChirp wins.
        let (ahead, line) = verdict(&rows, 5.0, 300.0);
        assert!(!ahead, "{line}");
        assert!(line.contains("after 4 chirp(s), 220 ms"), "{line}");
        // PathQuick 5 % in 200 ms: pathChirp needs 220 ms for it.
        assert!(verdict(&rows, 5.0, 200.0).0);
        // PathQuick 1 %: no window gets there.
        let (ahead, line) = verdict(&rows, 1.0, 1000.0);
        assert!(ahead);
        assert!(line.contains("best 2.00 % from 8 chirp(s)"), "{line}");
        assert!(!verdict(&[], 1.0, 1.0).0);
    }
}
