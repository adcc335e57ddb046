//! `headroom reproduce ... --report`: one `report.md` and one self-contained `report.html`
//! (every figure inlined as SVG, no network needed) over the experiments just run: per paper and
//! experiment, the command, the wall time, the summary, the figures and, where the experiment's
//! CSV carries the paper's digitised numbers beside ours, a verdict per row computed from a
//! stated tolerance.
//!
//! The numbers of the verdict tables are read back from the CSV files the run wrote, so the
//! report cannot disagree with the data. An experiment plugs in by being registered in
//! `mod.rs`; it gets verdict rows by adding a [`Comparison`] naming its CSV columns below.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};

use super::{Experiment, Outcome};

/// A verdict: how our number compares with the paper's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Within the stated relative tolerance.
    Matches,
    /// Outside the tolerance but within a factor of two, same sign.
    Qualitatively,
    /// Further off.
    Differs,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Matches => "matches",
            Verdict::Qualitatively => "qualitatively",
            Verdict::Differs => "differs",
        }
    }
}

/// The verdict for `ours` against `paper` with relative tolerance `tol` (0.2 = ±20 %).
pub fn verdict(paper: f64, ours: f64, tol: f64) -> Verdict {
    if !(paper.is_finite() && ours.is_finite()) {
        return Verdict::Differs;
    }
    if (ours - paper).abs() <= tol * paper.abs() {
        Verdict::Matches
    } else if paper != 0.0 && ours / paper >= 0.5 && ours / paper <= 2.0 {
        Verdict::Qualitatively
    } else {
        Verdict::Differs
    }
}

/// Rows of an experiment's CSV that hold a number of the paper beside ours.
pub struct Comparison {
    pub experiment: &'static str,
    pub csv: &'static str,
    /// The paper's figure or table the numbers come from.
    pub cite: &'static str,
    /// Columns that name a row (e.g. N and m).
    pub keys: &'static [&'static str],
    pub paper: &'static str,
    pub ours: &'static str,
    /// Relative tolerance for "matches".
    pub tolerance: f64,
}

/// Every comparison, experiment by experiment.
pub const COMPARISONS: &[Comparison] = &[
    Comparison {
        experiment: "imtcp-table1",
        csv: "table1.csv",
        cite: "ImTCP Table 1 (results in 80 s)",
        keys: &["n", "m"],
        paper: "paper_results",
        ours: "results",
        tolerance: 0.2,
    },
    Comparison {
        experiment: "imtcp-table2",
        csv: "table2.csv",
        cite: "ImTCP Table 2 (results in 80 s)",
        keys: &["available_mbps", "storing_timer"],
        paper: "paper_results",
        ours: "results",
        tolerance: 0.2,
    },
    Comparison {
        experiment: "imtcp-table3",
        csv: "table3.csv",
        cite: "ImTCP Table 3 (Jain index)",
        keys: &["capacity_mbps", "flows"],
        paper: "paper_jain",
        ours: "jain_imtcp",
        tolerance: 0.01,
    },
    Comparison {
        experiment: "imtcp-table3",
        csv: "table3.csv",
        cite: "ImTCP Table 3 (ImTCP total, Mb/s)",
        keys: &["capacity_mbps", "flows"],
        paper: "paper_imtcp_mbps",
        ours: "imtcp_total_mbps",
        tolerance: 0.05,
    },
    Comparison {
        experiment: "imtcp-table3",
        csv: "table3.csv",
        cite: "ImTCP Table 3 (Reno total, Mb/s)",
        keys: &["capacity_mbps", "flows"],
        paper: "paper_reno_mbps",
        ours: "reno_total_mbps",
        tolerance: 0.05,
    },
];

/// What a paper states about a number: about a value, or a bound.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Paper {
    /// About this value (relative tolerance for "matches", a factor of two for "qualitatively").
    About(f64),
    /// At least this (e.g. "always higher": a ratio of at least 1).
    AtLeast(f64),
    /// At most this (e.g. "error about ±2 Mb/s": a mean absolute error of at most 2).
    AtMost(f64),
}

impl Paper {
    /// The verdict for `ours`: for a bound, *matches* on its side, *qualitatively* within the
    /// tolerance (relative to the bound) beyond it, *differs* further off.
    pub fn verdict(self, ours: f64, tol: f64) -> Verdict {
        let (bound, beyond) = match self {
            Paper::About(p) => return verdict(p, ours, tol),
            Paper::AtLeast(b) => (b, b - ours),
            Paper::AtMost(b) => (b, ours - b),
        };
        if beyond.is_nan() {
            Verdict::Differs
        } else if beyond <= 0.0 {
            Verdict::Matches
        } else if beyond <= tol * bound.abs() {
            Verdict::Qualitatively
        } else {
            Verdict::Differs
        }
    }

    fn show(self) -> String {
        match self {
            Paper::About(v) => format!("about {v}"),
            Paper::AtLeast(v) => format!(">= {v}"),
            Paper::AtMost(v) => format!("<= {v}"),
        }
    }
}

/// A row filter of a [`Select`].
#[derive(Clone, Copy, Debug)]
pub enum Filter {
    /// The column's text equals this.
    Is(&'static str, &'static str),
    /// The column's number is in (low, high].
    Within(&'static str, f64, f64),
}

/// How the selected values are combined into one number.
#[derive(Clone, Copy, Debug)]
pub enum Agg {
    Mean,
    MeanAbs,
    Min,
    Max,
}

/// One number from a run's CSV: `agg` of `column` (times `scale`) over the rows that pass every
/// filter; rows whose value is empty (no estimate) are left out.
#[derive(Clone, Copy, Debug)]
pub struct Select {
    pub csv: &'static str,
    pub column: &'static str,
    pub filters: &'static [Filter],
    pub agg: Agg,
    pub scale: f64,
}

/// Our side of a claim.
#[derive(Clone, Copy, Debug)]
pub enum Ours {
    Of(Select),
    /// The first number over the second.
    Ratio(Select, Select),
}

/// A number the paper states (digitised from its text; `cite` names the figure or table and the
/// section) and how to compute ours from the run's CSV files.
#[derive(Clone, Copy, Debug)]
pub struct Claim {
    pub experiment: &'static str,
    pub cite: &'static str,
    /// The quantity, with its unit.
    pub quantity: &'static str,
    pub paper: Paper,
    pub ours: Ours,
    /// Relative tolerance for the verdict (see [`Paper::verdict`]).
    pub tolerance: f64,
}

const fn sel(csv: &'static str, column: &'static str, filters: &'static [Filter], agg: Agg) -> Select {
    Select { csv, column, filters, agg, scale: 1.0 }
}

const fn mean(csv: &'static str, column: &'static str, filters: &'static [Filter]) -> Ours {
    Ours::Of(sel(csv, column, filters, Agg::Mean))
}

/// The ratio of the mean of `column` over two row sets of one CSV.
const fn mean_ratio(csv: &'static str, column: &'static str, a: &'static [Filter], b: &'static [Filter]) -> Ours {
    Ours::Ratio(sel(csv, column, a, Agg::Mean), sel(csv, column, b, Agg::Mean))
}

const fn claim(
    experiment: &'static str,
    cite: &'static str,
    quantity: &'static str,
    paper: Paper,
    ours: Ours,
    tolerance: f64,
) -> Claim {
    Claim { experiment, cite, quantity, paper, ours, tolerance }
}

use Filter::{Is, Within};

/// ImTCP Fig. 8 / Fig. 10: the available bandwidth per phase (first 5 s of a phase left out).
macro_rules! phase {
    ($exp:literal, $cite:literal, $csv:literal, $col:literal, $key:literal, $val:literal, $a:literal, $b:literal, $avail:literal) => {
        claim(
            $exp,
            $cite,
            concat!("mean estimate ", $a, "-", $b, " s (Mb/s)"),
            Paper::About($avail),
            mean($csv, $col, &[Is($key, $val), Within("time_s", $a + 5.0, $b)]),
            0.2,
        )
    };
}

/// The papers' numbers beside ours, experiment by experiment (the tables with one paper number
/// per CSV row are [`COMPARISONS`]). Sources: BECC (seed 004) §2 and §5, ImTCP (seed 001)
/// §4, PathQuick (seed 003) §4-5, the overlay paper (seed 002) §3-4, ImTCP-bg (seed 000) §4.
pub const CLAIMS: &[Claim] = &[
    claim(
        "becc-fig2",
        "BECC §2, Fig. 2",
        "Reno throughput, max window 90-200 KB (Mb/s)",
        Paper::About(41.0),
        mean("fig2.csv", "reno_mbps", &[Within("max_window_kb", 89.9, 200.0)]),
        0.15,
    ),
    claim(
        "becc-fig2",
        "BECC §2, Fig. 2",
        "Reno throughput, lowest above 200 KB (Mb/s)",
        Paper::About(12.0),
        Ours::Of(sel("fig2.csv", "reno_mbps", &[Within("max_window_kb", 200.0, 1e9)], Agg::Min)),
        0.3,
    ),
    claim(
        "becc-fig10",
        "BECC §5, Fig. 10",
        "Reno throughput, max window > 220 KB (Mb/s)",
        Paper::About(12.0),
        mean("fig10.csv", "reno_mbps", &[Within("max_window_kb", 220.0, 1e9)]),
        0.3,
    ),
    claim(
        "becc-fig10",
        "BECC §5, Fig. 10",
        "BECC throughput, max window > 220 KB (Mb/s)",
        Paper::About(30.0),
        mean("fig10.csv", "becc_mbps", &[Within("max_window_kb", 220.0, 1e9)]),
        0.2,
    ),
    claim(
        "becc-fig11",
        "BECC §5, Fig. 11",
        "BECC / Reno throughput, max window > 220 KB (ratio)",
        Paper::AtLeast(1.0),
        Ours::Ratio(
            sel("fig11.csv", "becc_mbps", &[Within("max_window_kb", 220.0, 1e9)], Agg::Mean),
            sel("fig11.csv", "reno_mbps", &[Within("max_window_kb", 220.0, 1e9)], Agg::Mean),
        ),
        0.05,
    ),
    claim(
        "becc-fig12",
        "BECC §5, Fig. 12",
        "BECC rate 0.5-10 s, UDP on (paper: t_msrd_th; ours: throughput) (Mb/s)",
        Paper::About(15.0),
        Ours::Of(Select {
            csv: "trace.csv",
            column: "value",
            filters: &[Is("flow", "becc"), Is("metric", "throughput_bps"), Within("time_s", 0.5, 10.0)],
            agg: Agg::Mean,
            scale: 1e-6,
        }),
        0.2,
    ),
    phase!("imtcp-fig8", "ImTCP §4.1, Fig. 8(c)", "fig8.csv", "estimate_mbps", "n", "35", 0.0, 50.0, 60.0),
    phase!("imtcp-fig8", "ImTCP §4.1, Fig. 8(c)", "fig8.csv", "estimate_mbps", "n", "35", 50.0, 100.0, 40.0),
    phase!("imtcp-fig8", "ImTCP §4.1, Fig. 8(c)", "fig8.csv", "estimate_mbps", "n", "35", 100.0, 150.0, 60.0),
    phase!("imtcp-fig8", "ImTCP §4.1, Fig. 8(c)", "fig8.csv", "estimate_mbps", "n", "35", 150.0, 210.0, 20.0),
    phase!("imtcp-fig8", "ImTCP §4.1, Fig. 8(c)", "fig8.csv", "estimate_mbps", "n", "35", 210.0, 300.0, 60.0),
    phase!(
        "imtcp-fig10",
        "ImTCP §4.2, Fig. 10(a)",
        "fig10.csv",
        "mean_estimate_mbps",
        "method",
        "imtcp",
        0.0,
        50.0,
        60.0
    ),
    phase!(
        "imtcp-fig10",
        "ImTCP §4.2, Fig. 10(a)",
        "fig10.csv",
        "mean_estimate_mbps",
        "method",
        "imtcp",
        50.0,
        100.0,
        40.0
    ),
    phase!(
        "imtcp-fig10",
        "ImTCP §4.2, Fig. 10(a)",
        "fig10.csv",
        "mean_estimate_mbps",
        "method",
        "imtcp",
        100.0,
        150.0,
        60.0
    ),
    phase!(
        "imtcp-fig10",
        "ImTCP §4.2, Fig. 10(a)",
        "fig10.csv",
        "mean_estimate_mbps",
        "method",
        "imtcp",
        150.0,
        210.0,
        20.0
    ),
    phase!(
        "imtcp-fig10",
        "ImTCP §4.2, Fig. 10(a)",
        "fig10.csv",
        "mean_estimate_mbps",
        "method",
        "imtcp",
        210.0,
        300.0,
        60.0
    ),
    claim(
        "imtcp-web",
        "ImTCP §4.3 (Fig. 11's run)",
        "ImTCP throughput with web traffic, mean of seeds (Mb/s)",
        Paper::About(25.2),
        mean("web.csv", "throughput_mbps", &[Is("bulk", "ImTCP (reno)")]),
        0.1,
    ),
    claim(
        "imtcp-web",
        "ImTCP §4.3 (Fig. 11's run)",
        "Reno throughput with web traffic, mean of seeds (Mb/s)",
        Paper::About(23.1),
        mean("web.csv", "throughput_mbps", &[Is("bulk", "reno")]),
        0.1,
    ),
    claim(
        "imtcp-web",
        "ImTCP §4.3, Fig. 11",
        "mean page time with ImTCP / with Reno (ratio; paper: CDFs almost equal)",
        Paper::About(1.0),
        mean_ratio("web.csv", "mean_page_time_s", &[Is("bulk", "ImTCP (reno)")], &[Is("bulk", "reno")]),
        0.05,
    ),
    claim(
        "imtcp-fig13",
        "ImTCP §4.4, Fig. 13",
        "ImTCP / Reno throughput, interval 0 RTT, mean (ratio; paper: below 1)",
        Paper::AtMost(1.0),
        mean("fig13.csv", "ratio", &[Is("interval_rtts", "0")]),
        0.05,
    ),
    claim(
        "imtcp-fig13",
        "ImTCP §4.4, Fig. 13",
        "ImTCP / Reno throughput, interval 20 RTT, mean (ratio)",
        Paper::About(1.0),
        mean("fig13.csv", "ratio", &[Is("interval_rtts", "20")]),
        0.1,
    ),
    claim(
        "imtcp-fig15",
        "ImTCP §5.2, Fig. 15",
        "full-speed ImTCP / HSTCP throughput (ratio; paper: full-speed's is the best)",
        Paper::AtLeast(1.0),
        mean_ratio("runs.csv", "throughput_mbps", &[Is("controller", "imtcp full-speed")], &[Is("controller", "highspeed")]),
        0.05,
    ),
    claim(
        "imtcp-fig15",
        "ImTCP §5.2, Fig. 15",
        "full-speed ImTCP / Reno throughput (ratio; paper: full-speed's is the best)",
        Paper::AtLeast(1.0),
        mean_ratio("runs.csv", "throughput_mbps", &[Is("controller", "imtcp full-speed")], &[Is("controller", "reno")]),
        0.05,
    ),
    claim(
        "imtcp-fig15",
        "ImTCP §5.2, Fig. 15",
        "HSTCP / full-speed ImTCP drops (ratio; paper: HSTCP loses often)",
        Paper::AtLeast(1.0),
        mean_ratio("runs.csv", "drops", &[Is("controller", "highspeed")], &[Is("controller", "imtcp full-speed")]),
        0.05,
    ),
    claim(
        "imtcp-fig16",
        "ImTCP §5.2, Fig. 16",
        "full-speed ImTCP / Westwood+ throughput at 10 % loss, mean of seeds (ratio; paper: larger when the loss rate is high)",
        Paper::AtLeast(1.0),
        mean_ratio(
            "fig16.csv",
            "throughput_mbps",
            &[Is("controller", "imtcp full-speed"), Is("loss_rate", "0.1")],
            &[Is("controller", "westwood+"), Is("loss_rate", "0.1")],
        ),
        0.05,
    ),
    claim(
        "imtcp-fig16",
        "ImTCP §5.2, Fig. 16",
        "full-speed ImTCP / Reno throughput at 10 % loss, mean of seeds (ratio; paper: larger when the loss rate is high)",
        Paper::AtLeast(1.0),
        mean_ratio(
            "fig16.csv",
            "throughput_mbps",
            &[Is("controller", "imtcp full-speed"), Is("loss_rate", "0.1")],
            &[Is("controller", "reno"), Is("loss_rate", "0.1")],
        ),
        0.05,
    ),
    claim(
        "overlay-fig8",
        "overlay §4, Fig. 8 (policy C, D = 30 ms, 1 % loss)",
        "mean delay split / nonsplit (ratio; paper: split faster, more so than in Fig. 7)",
        Paper::AtMost(1.0),
        mean_ratio("fig8-policy-c.csv", "delay_s", &[Is("split", "true")], &[Is("split", "false")]),
        0.05,
    ),
    claim(
        "pathquick-fig6",
        "PathQuick §5, Fig. 6(a)",
        "PathQuick mean |error| below 9 Mb/s available (Mb/s; paper: about ±2)",
        Paper::AtMost(2.0),
        Ours::Of(sel(
            "fig6.csv",
            "error_mbps",
            &[Is("method", "pathquick"), Within("available_mbps", -1.0, 8.9)],
            Agg::MeanAbs,
        )),
        0.25,
    ),
    claim(
        "pathquick-fig6",
        "PathQuick §5, Fig. 6(b)",
        "pathChirp / PathQuick mean |error| above 5 Mb/s available (ratio; paper: much worse)",
        Paper::AtLeast(1.0),
        Ours::Ratio(
            sel(
                "fig6.csv",
                "error_mbps",
                &[Is("method", "pathchirp"), Within("available_mbps", 5.0, 1e9)],
                Agg::MeanAbs,
            ),
            sel(
                "fig6.csv",
                "error_mbps",
                &[Is("method", "pathquick"), Within("available_mbps", 5.0, 1e9)],
                Agg::MeanAbs,
            ),
        ),
        0.1,
    ),
    claim(
        "pathquick-fig6",
        "PathQuick §3 (train 124 ms + RTT 52 ms)",
        "PathQuick time per estimate (ms)",
        Paper::About(176.0),
        mean("fig6.csv", "elapsed_ms", &[Is("method", "pathquick")]),
        0.1,
    ),
    claim(
        "overlay-fig3",
        "overlay §3, Fig. 3",
        "split / one connection throughput, smallest (model; paper: always higher)",
        Paper::AtLeast(1.0),
        Ours::Of(sel("fig3.csv", "model_gain", &[], Agg::Min)),
        0.05,
    ),
    claim(
        "overlay-fig3",
        "overlay §3, Fig. 3",
        "split / one connection throughput, largest (model; paper: over 3)",
        Paper::AtLeast(3.0),
        Ours::Of(sel("fig3.csv", "model_gain", &[], Agg::Max)),
        0.1,
    ),
    claim(
        "overlay-fig3",
        "overlay §3, Fig. 3",
        "split / one connection throughput, smallest (simulation)",
        Paper::AtLeast(1.0),
        Ours::Of(sel("fig3.csv", "sim_gain", &[], Agg::Min)),
        0.05,
    ),
    claim(
        "overlay-fig5-7",
        "overlay §4, Fig. 5 (policy A)",
        "mean delay split / nonsplit (ratio; paper: split slower)",
        Paper::AtLeast(1.0),
        mean_ratio("fig5-policy-a.csv", "delay_s", &[Is("split", "true")], &[Is("split", "false")]),
        0.05,
    ),
    claim(
        "overlay-fig5-7",
        "overlay §4, Fig. 6 (policy B)",
        "mean delay split / nonsplit (ratio; paper: split slower)",
        Paper::AtLeast(1.0),
        mean_ratio("fig6-policy-b.csv", "delay_s", &[Is("split", "true")], &[Is("split", "false")]),
        0.05,
    ),
    claim(
        "overlay-fig5-7",
        "overlay §4, Fig. 7 (policy C)",
        "mean delay split / nonsplit (ratio; paper: split faster)",
        Paper::AtMost(1.0),
        mean_ratio("fig7-policy-c.csv", "delay_s", &[Is("split", "true")], &[Is("split", "false")]),
        0.05,
    ),
    claim(
        "imtcp-bg-fig3",
        "ImTCP-bg §4, Fig. 3",
        "mean page time with a Reno background / none (ratio; paper: Reno hurts the web)",
        Paper::AtLeast(1.1),
        mean_ratio("fig3_4.csv", "mean_page_time_s", &[Is("background", "reno")], &[Is("background", "none")]),
        0.05,
    ),
    claim(
        "imtcp-bg-fig3",
        "ImTCP-bg §4, Fig. 3",
        "mean page time with ImTCP-bg / none (ratio; paper: no effect)",
        Paper::AtMost(1.1),
        mean_ratio("fig3_4.csv", "mean_page_time_s", &[Is("background", "imtcp-bg")], &[Is("background", "none")]),
        0.05,
    ),
    claim(
        "imtcp-bg-fig3",
        "ImTCP-bg §4.1, Fig. 4",
        "Reno background / available bandwidth, mean over N_web (ratio; paper: takes more than is free)",
        Paper::AtLeast(1.0),
        Ours::Ratio(
            sel("fig3_4.csv", "background_mbps", &[Is("background", "reno")], Agg::Mean),
            sel("fig3_4.csv", "available_mbps", &[Is("background", "reno")], Agg::Mean),
        ),
        0.05,
    ),
    claim(
        "imtcp-bg-fig3",
        "ImTCP-bg §4.1, Fig. 4",
        "Reno / ImTCP-bg background throughput (ratio; paper: Reno's is the highest)",
        Paper::AtLeast(1.0),
        mean_ratio("fig3_4.csv", "background_mbps", &[Is("background", "reno")], &[Is("background", "imtcp-bg")]),
        0.05,
    ),
    claim(
        "imtcp-bg-fig3",
        "ImTCP-bg §4.1, Fig. 4",
        "ImTCP-bg / TCP Nice throughput (ratio; paper: ImTCP-bg closest to the available bandwidth)",
        Paper::AtLeast(1.0),
        mean_ratio("fig3_4.csv", "background_mbps", &[Is("background", "imtcp-bg")], &[Is("background", "nice")]),
        0.05,
    ),
    claim(
        "imtcp-bg-fig3",
        "ImTCP-bg §4.1, Fig. 4",
        "ImTCP-bg / TCP-LP throughput (ratio; paper: ImTCP-bg closest to the available bandwidth)",
        Paper::AtLeast(1.0),
        mean_ratio("fig3_4.csv", "background_mbps", &[Is("background", "imtcp-bg")], &[Is("background", "lp")]),
        0.05,
    ),
    claim(
        "imtcp-bg-fig3",
        "ImTCP-bg §4.1, Fig. 3",
        "mean page time with TCP Nice / none (ratio; paper: about the same)",
        Paper::AtMost(1.1),
        mean_ratio("fig3_4.csv", "mean_page_time_s", &[Is("background", "nice")], &[Is("background", "none")]),
        0.05,
    ),
    claim(
        "imtcp-bg-fig3",
        "ImTCP-bg §4.1, Fig. 3",
        "mean page time with TCP-LP / none (ratio; paper: about the same)",
        Paper::AtMost(1.1),
        mean_ratio("fig3_4.csv", "mean_page_time_s", &[Is("background", "lp")], &[Is("background", "none")]),
        0.05,
    ),
    claim(
        "imtcp-bg-fig5",
        "ImTCP-bg §4.2, Fig. 5",
        "mean page time with five Reno flows / none (ratio; paper: Reno hurts the web traffic)",
        Paper::AtLeast(1.1),
        mean_ratio("runs.csv", "mean_page_time_s", &[Is("background", "reno")], &[Is("background", "none")]),
        0.05,
    ),
    claim(
        "imtcp-bg-fig5",
        "ImTCP-bg §4.2, Fig. 5",
        "Reno / ImTCP-bg (delta 1.5) total throughput, mean of the phases (ratio; paper: Reno's highest)",
        Paper::AtLeast(1.0),
        mean_ratio(
            "phases.csv",
            "total_mbps",
            &[Is("background", "reno")],
            &[Is("background", "imtcp-bg (delta 1.5)")],
        ),
        0.05,
    ),
    claim(
        "imtcp-bg-fig5",
        "ImTCP-bg §4.2, Fig. 6(a)",
        "TCP Nice / ImTCP-bg (delta 1.5) mean queue (ratio; paper: Nice keeps the shortest queue)",
        Paper::AtMost(1.0),
        mean_ratio(
            "runs.csv",
            "mean_queue_pkts",
            &[Is("background", "nice")],
            &[Is("background", "imtcp-bg (delta 1.5)")],
        ),
        0.05,
    ),
    claim(
        "imtcp-bg-fig5",
        "ImTCP-bg §4.2, Fig. 6(b)",
        "TCP Nice / ImTCP-bg (delta 1.5) throughput, one flow (ratio; paper: Nice's lowest, few flows)",
        Paper::AtMost(1.0),
        Ours::Ratio(
            sel("phases.csv", "total_mbps", &[Is("background", "nice"), Is("flows", "1")], Agg::Mean),
            sel("phases.csv", "total_mbps", &[Is("background", "imtcp-bg (delta 1.5)"), Is("flows", "1")], Agg::Mean),
        ),
        0.05,
    ),
    claim(
        "imtcp-bg-fig5",
        "ImTCP-bg §4.2, Fig. 7(a)",
        "TCP-LP / TCP Nice mean queue (ratio; paper: LP's queue is longer than Nice's)",
        Paper::AtLeast(1.0),
        mean_ratio("runs.csv", "mean_queue_pkts", &[Is("background", "lp")], &[Is("background", "nice")]),
        0.05,
    ),
    Claim {
        experiment: "imtcp-bg-fig5",
        cite: "ImTCP-bg §4.2, Fig. 8(b)",
        quantity: "ImTCP-bg (delta 1.5) throughput / available, one flow (ratio; paper: uses it up)",
        paper: Paper::About(1.0),
        ours: Ours::Ratio(
            sel("phases.csv", "total_mbps", &[Is("background", "imtcp-bg (delta 1.5)"), Is("flows", "1")], Agg::Mean),
            sel(
                "phases.csv",
                "available_mbps",
                &[Is("background", "imtcp-bg (delta 1.5)"), Is("flows", "1")],
                Agg::Mean,
            ),
        ),
        tolerance: 0.2,
    },
    claim(
        "imtcp-bg-fig5",
        "ImTCP-bg §4.2, Fig. 8(b)",
        "CoV of the 1-s total, ImTCP-bg (delta 1.5) / TCP Nice (ratio; paper: ImTCP-bg varies less)",
        Paper::AtMost(1.0),
        mean_ratio("runs.csv", "cov_1s", &[Is("background", "imtcp-bg (delta 1.5)")], &[Is("background", "nice")]),
        0.05,
    ),
    claim(
        "imtcp-bg-fig5",
        "ImTCP-bg §4.2, Fig. 8(b)",
        "CoV of the 1-s total, ImTCP-bg (delta 1.5) / TCP-LP (ratio; paper: ImTCP-bg varies less)",
        Paper::AtMost(1.0),
        mean_ratio("runs.csv", "cov_1s", &[Is("background", "imtcp-bg (delta 1.5)")], &[Is("background", "lp")]),
        0.05,
    ),
    claim(
        "imtcp-bg-fig5",
        "ImTCP-bg §4.2, Fig. 8(b)",
        "Jain index, ImTCP-bg (delta 1.5), lowest phase of 2-5 flows (paper: fair; bound: our reading)",
        Paper::AtLeast(0.9),
        Ours::Of(sel(
            "phases.csv",
            "jain",
            &[Is("background", "imtcp-bg (delta 1.5)"), Within("flows", 1.0, 5.0)],
            Agg::Min,
        )),
        0.05,
    ),
    claim(
        "imtcp-bg-fig5",
        "ImTCP-bg §4.2, Fig. 9(a)",
        "delta 1.2 / delta 1.5 mean queue (ratio; paper: the smaller threshold keeps a shorter queue)",
        Paper::AtMost(1.0),
        mean_ratio(
            "runs.csv",
            "mean_queue_pkts",
            &[Is("background", "imtcp-bg (delta 1.2)")],
            &[Is("background", "imtcp-bg (delta 1.5)")],
        ),
        0.05,
    ),
    claim(
        "imtcp-bg-fig5",
        "ImTCP-bg §4.2, Fig. 9(b)",
        "delta 1.2 / delta 1.5 throughput, one flow (ratio; paper: smaller delta uses less, few flows)",
        Paper::AtMost(1.0),
        Ours::Ratio(
            sel("phases.csv", "total_mbps", &[Is("background", "imtcp-bg (delta 1.2)"), Is("flows", "1")], Agg::Mean),
            sel("phases.csv", "total_mbps", &[Is("background", "imtcp-bg (delta 1.5)"), Is("flows", "1")], Agg::Mean),
        ),
        0.05,
    ),
    claim(
        "imtcp-bg-fig14",
        "ImTCP §5.1, Fig. 14",
        "background mode (g = 0.8) / Reno throughput (ratio; paper: about 72 %)",
        Paper::About(0.72),
        mean_ratio(
            "fig14.csv",
            "throughput_mbps",
            &[Is("background", "background g=0.8")],
            &[Is("background", "reno")],
        ),
        0.15,
    ),
    claim(
        "imtcp-bg-fig14",
        "ImTCP §5.1, Fig. 14",
        "mean page time with background mode (g = 0.8) / none (ratio; paper: a very small effect)",
        Paper::AtMost(1.1),
        mean_ratio(
            "fig14.csv",
            "mean_page_time_s",
            &[Is("background", "background g=0.8")],
            &[Is("background", "none")],
        ),
        0.05,
    ),
    claim(
        "imtcp-bg-fig14",
        "ImTCP §5.1, Fig. 14",
        "mean page time, background mode (g = 0.8) / Reno (ratio; paper: background mode hurts less)",
        Paper::AtMost(1.0),
        mean_ratio(
            "fig14.csv",
            "mean_page_time_s",
            &[Is("background", "background g=0.8")],
            &[Is("background", "reno")],
        ),
        0.05,
    ),
    claim(
        "imtcp-table2",
        "ImTCP §4.1.3, Fig. 9",
        "first-packet wait p90, proposed T / T = 0.04 s, A = 4 Mb/s (ratio; paper: no long waits)",
        Paper::AtMost(1.0),
        Ours::Ratio(
            sel(
                "fig9.csv",
                "wait_ms",
                &[Is("available_mbps", "4"), Is("setting", "Pro."), Within("cdf", 0.89999, 1.0)],
                Agg::Min,
            ),
            sel(
                "fig9.csv",
                "wait_ms",
                &[Is("available_mbps", "4"), Is("setting", "0.04 s"), Within("cdf", 0.89999, 1.0)],
                Agg::Min,
            ),
        ),
        0.1,
    ),
    claim(
        "imtcp-table2",
        "ImTCP §4.1.3, Fig. 9",
        "first-packet wait p90, proposed T / T = 0.04 s, A = 7 Mb/s (ratio; paper: no long waits)",
        Paper::AtMost(1.0),
        Ours::Ratio(
            sel(
                "fig9.csv",
                "wait_ms",
                &[Is("available_mbps", "7"), Is("setting", "Pro."), Within("cdf", 0.89999, 1.0)],
                Agg::Min,
            ),
            sel(
                "fig9.csv",
                "wait_ms",
                &[Is("available_mbps", "7"), Is("setting", "0.04 s"), Within("cdf", 0.89999, 1.0)],
                Agg::Min,
            ),
        ),
        0.1,
    ),
    claim(
        "imtcp-table2",
        "ImTCP §4.1.3, Fig. 9 and Table 2",
        "results, proposed T / T = 0.04 s, 4 Mb/s available (ratio; paper 371 / 379: the count is kept)",
        Paper::About(0.98),
        mean_ratio(
            "table2.csv",
            "results",
            &[Is("available_mbps", "4"), Is("storing_timer", "Pro.")],
            &[Is("available_mbps", "4"), Is("storing_timer", "0.04 s")],
        ),
        0.1,
    ),
    claim(
        "imtcp-table2",
        "ImTCP §4.1.3, Fig. 9 and Table 2",
        "results, proposed T / T = 0.04 s, 7 Mb/s available (ratio; paper 488 / 486: the count is kept)",
        Paper::About(1.0),
        mean_ratio(
            "table2.csv",
            "results",
            &[Is("available_mbps", "7"), Is("storing_timer", "Pro.")],
            &[Is("available_mbps", "7"), Is("storing_timer", "0.04 s")],
        ),
        0.1,
    ),
    claim(
        "becc-fig13",
        "BECC §4.1.4, Fig. 13",
        "second / first flow's throughput 5-60 s (ratio; paper: both transfer stably)",
        Paper::About(1.0),
        Ours::Ratio(
            Select {
                csv: "trace.csv",
                column: "value",
                filters: &[Is("flow", "becc2"), Is("metric", "throughput_bps"), Within("time_s", 5.0, 60.0)],
                agg: Agg::Mean,
                scale: 1e-6,
            },
            Select {
                csv: "trace.csv",
                column: "value",
                filters: &[Is("flow", "becc1"), Is("metric", "throughput_bps"), Within("time_s", 5.0, 60.0)],
                agg: Agg::Mean,
                scale: 1e-6,
            },
        ),
        0.2,
    ),
];

/// A CSV file's header and rows (plain fields: the reproductions' CSVs quote nothing).
fn table(csv: &str) -> Result<(Vec<&str>, Vec<Vec<&str>>)> {
    let mut lines = csv.lines();
    let header = lines.next().context("empty CSV")?.split(',').collect();
    Ok((header, lines.map(|l| l.split(',').collect()).collect()))
}

impl Select {
    /// The number this selection gives for the CSV text; an error when a column is missing or
    /// no row has a value.
    pub fn value(&self, csv: &str) -> Result<f64> {
        let (header, rows) = table(csv)?;
        let col = |name: &str| header.iter().position(|h| *h == name).with_context(|| format!("no column `{name}`"));
        let c = col(self.column)?;
        let filters: Vec<(usize, Filter)> = self
            .filters
            .iter()
            .map(|f| {
                let name = match f {
                    Filter::Is(n, _) | Filter::Within(n, _, _) => n,
                };
                Ok((col(name)?, *f))
            })
            .collect::<Result<_>>()?;
        let keep = |row: &[&str]| {
            filters.iter().all(|(i, f)| {
                let v = row.get(*i).copied().unwrap_or("");
                match f {
                    Filter::Is(_, want) => v == *want,
                    Filter::Within(_, lo, hi) => v.parse::<f64>().is_ok_and(|x| x > *lo && x <= *hi),
                }
            })
        };
        let vals: Vec<f64> = rows
            .iter()
            .filter(|r| keep(r))
            .filter_map(|r| r.get(c).and_then(|v| v.parse::<f64>().ok()))
            .map(|v| v * self.scale)
            .collect();
        anyhow::ensure!(!vals.is_empty(), "no row of {} selected for `{}`", self.csv, self.column);
        let n = vals.len() as f64;
        Ok(match self.agg {
            Agg::Mean => vals.iter().sum::<f64>() / n,
            Agg::MeanAbs => vals.iter().map(|v| v.abs()).sum::<f64>() / n,
            Agg::Min => vals.iter().copied().fold(f64::INFINITY, f64::min),
            Agg::Max => vals.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }
}

impl Ours {
    /// Our number, reading the CSV files from `dir`.
    pub fn value(&self, dir: &Path) -> Result<f64> {
        let read = |s: &Select| -> Result<f64> {
            let text = std::fs::read_to_string(dir.join(s.csv)).with_context(|| format!("cannot read {}", s.csv))?;
            s.value(&text).with_context(|| s.csv.to_string())
        };
        match self {
            Ours::Of(s) => read(s),
            Ours::Ratio(a, b) => Ok(read(a)? / read(b)?),
        }
    }

    /// Where the number comes from, for the report.
    fn source(&self) -> String {
        let one = |s: &Select| {
            let agg = match s.agg {
                Agg::Mean => "mean",
                Agg::MeanAbs => "mean |.|",
                Agg::Min => "min",
                Agg::Max => "max",
            };
            let f: Vec<String> = s
                .filters
                .iter()
                .map(|f| match f {
                    Filter::Is(c, v) => format!("{c} = {v}"),
                    Filter::Within(c, lo, hi) => format!("{lo} < {c} <= {hi}"),
                })
                .collect();
            let scale = if s.scale == 1.0 { String::new() } else { format!(" × {}", s.scale) };
            let wher = if f.is_empty() { String::new() } else { format!(" where {}", f.join(", ")) };
            format!("{agg} {}{scale} of {}{wher}", s.column, s.csv)
        };
        match self {
            Ours::Of(s) => one(s),
            Ours::Ratio(a, b) => format!("({}) / ({})", one(a), one(b)),
        }
    }
}

/// Rounds for display: 4 significant digits (the CSVs' own precision or better).
fn show(v: f64) -> String {
    if !v.is_finite() || v == 0.0 {
        return format!("{v}");
    }
    let digits = (3 - v.abs().log10().floor() as i32).max(0) as usize;
    format!("{v:.digits$}")
}

/// One compared row.
#[derive(Debug, PartialEq)]
pub struct Row {
    pub key: String,
    pub paper: f64,
    pub ours: f64,
    pub verdict: Verdict,
}

/// Reads a comparison's rows from its CSV (plain fields: the reproductions' CSVs quote nothing
/// in these files).
pub fn rows(c: &Comparison, csv: &str) -> Result<Vec<Row>> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().context("empty CSV")?.split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).with_context(|| format!("no column `{name}`"));
    let keys: Vec<usize> = c.keys.iter().map(|k| col(k)).collect::<Result<_>>()?;
    let (p, o) = (col(c.paper)?, col(c.ours)?);
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let num = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).with_context(|| format!("bad row `{l}`"));
            let (paper, ours) = (num(p)?, num(o)?);
            let key = keys
                .iter()
                .zip(c.keys)
                .map(|(&i, k)| format!("{k} = {}", f.get(i).copied().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(", ");
            Ok(Row { key, paper, ours, verdict: verdict(paper, ours, c.tolerance) })
        })
        .collect()
}

/// The paper an experiment belongs to, from its name's prefix.
fn paper_of(name: &str) -> &'static str {
    match name.split('-').next() {
        Some("becc") => "BECC (Kugimoto & Amagai 1997)",
        Some("imtcp") => "ImTCP (Man, Hasegawa & Murata 2005)",
        Some("pathquick") => "PathQuick (Oshiba & Nakajima)",
        _ => "other",
    }
}

fn esc(t: &str) -> String {
    t.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The SVG files of an experiment's directory, sorted by name.
fn figures(dir: &Path) -> Result<Vec<(String, String)>> {
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".svg"))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let svg = std::fs::read_to_string(dir.join(&n))?;
            // No figure of the report draws a point outside its axes.
            let outside = crate::plot::points_outside_axes(&svg).map_err(|e| anyhow::anyhow!("{n}: {e}"))?;
            if let Some(p) = outside.first() {
                anyhow::bail!(
                    "{}: {} point(s) drawn outside the axes, e.g. at {p:?}",
                    dir.join(&n).display(),
                    outside.len()
                );
            }
            Ok((n, svg))
        })
        .collect()
}

/// What a report page says around its sections: `reproduce --report` and `headroom demo` share
/// the writer and differ in these.
pub struct Page {
    pub title: &'static str,
    /// A paragraph under the title (plain text).
    pub intro: &'static str,
    /// The command that reruns one section, from its experiment's name.
    pub command: fn(&str) -> String,
    /// The heading a section is grouped under, from its experiment's name.
    pub heading: fn(&str) -> &'static str,
    /// Print each section's wall time and output directory (not byte-reproducible, so the
    /// demo, whose report is compared byte for byte, leaves them out).
    pub wall_time: bool,
}

/// The reproductions' page.
pub const REPRODUCTIONS: Page = Page {
    title: "headroom: reproductions",
    intro: "Verdicts: matches = within the stated relative tolerance of the paper's number; qualitatively = within a factor of two; differs = further off.",
    command: reproduce_command,
    heading: paper_of,
    wall_time: true,
};

fn reproduce_command(name: &str) -> String {
    format!("headroom reproduce {name}")
}

/// Writes `report.md` and `report.html` into `out` for the experiments run; returns the HTML path.
pub fn write(out: &Path, runs: &[(&Experiment, &Outcome)]) -> Result<std::path::PathBuf> {
    write_page(out, &REPRODUCTIONS, runs)
}

/// Writes `report.md` and `report.html` of `page` into `out`; returns the HTML path.
pub fn write_page(out: &Path, page: &Page, runs: &[(&Experiment, &Outcome)]) -> Result<std::path::PathBuf> {
    let mut md = format!("# {}\n\n{}\n\n", page.title, page.intro);
    let mut html = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{0}</title>\n\
         <style>body{{font-family:sans-serif;max-width:1000px;margin:auto}}pre{{background:#f4f4f4;padding:6px;overflow-x:auto}}\
         table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 6px}}.matches{{background:#dfd}}\
         .qualitatively{{background:#ffd}}.differs{{background:#fdd}}</style></head><body>\n<h1>{0}</h1>\n<p>{1}</p>\n",
        esc(page.title),
        esc(page.intro)
    );
    let mut last_heading = "";
    for (e, o) in runs {
        let heading = (page.heading)(e.name);
        if heading != last_heading {
            let _ = writeln!(md, "## {heading}\n");
            let _ = writeln!(html, "<h2>{}</h2>", esc(heading));
            last_heading = heading;
        }
        let command = (page.command)(e.name);
        let _ = writeln!(md, "### {}\n\n{}\n", e.name, e.about);
        let _ = writeln!(html, "<h3 id=\"{0}\">{0}</h3>\n<p>{1}</p>", esc(e.name), esc(e.about));
        if page.wall_time {
            let scenarios = if e.scenarios.is_empty() {
                String::new()
            } else {
                format!("; scenario {}", e.scenarios.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", "))
            };
            let _ = writeln!(
                md,
                "Command: `{command}`{scenarios}; wall time {:.1} s; files in `{}`.\n",
                o.wall.as_secs_f64(),
                o.dir.display()
            );
            let scenarios = e.scenarios.iter().map(|f| format!("<code>{}</code>", esc(f))).collect::<Vec<_>>();
            let _ = writeln!(
                html,
                "<p>Command: <code>{}</code>{}; wall time {:.1} s.</p>",
                esc(&command),
                if scenarios.is_empty() { String::new() } else { format!("; scenario {}", scenarios.join(", ")) },
                o.wall.as_secs_f64()
            );
        } else {
            let _ = writeln!(md, "Command: `{command}`; files in `{}/`.\n", e.name);
            let _ = writeln!(
                html,
                "<p>Command: <code>{}</code>; files in <code>{}/</code>.</p>",
                esc(&command),
                esc(e.name)
            );
        }
        for c in COMPARISONS.iter().filter(|c| c.experiment == e.name) {
            let text = std::fs::read_to_string(o.dir.join(c.csv)).with_context(|| format!("{}/{}", e.name, c.csv))?;
            let rows = rows(c, &text).with_context(|| format!("{}/{}", e.name, c.csv))?;
            let _ = writeln!(md, "{} — from `{}`, tolerance ±{}%:\n", c.cite, c.csv, c.tolerance * 100.0);
            let _ = writeln!(md, "| row | paper | headroom | verdict |\n|---|---|---|---|");
            let _ = writeln!(
                html,
                "<p>{} — from <code>{}</code>, tolerance ±{}%:</p>\n<table><tr><th>row</th><th>paper</th><th>headroom</th><th>verdict</th></tr>",
                esc(c.cite),
                esc(c.csv),
                c.tolerance * 100.0
            );
            for r in &rows {
                let _ = writeln!(md, "| {} | {} | {} | {} |", r.key, r.paper, r.ours, r.verdict.name());
                let _ = writeln!(
                    html,
                    "<tr class=\"{3}\"><td>{0}</td><td>{1}</td><td>{2}</td><td>{3}</td></tr>",
                    esc(&r.key),
                    r.paper,
                    r.ours,
                    r.verdict.name()
                );
            }
            md.push('\n');
            html.push_str("</table>\n");
        }
        let claims: Vec<&Claim> = CLAIMS.iter().filter(|c| c.experiment == e.name).collect();
        if !claims.is_empty() {
            let _ = writeln!(md, "The papers' numbers (digitised from their text) beside ours:\n");
            let _ = writeln!(md, "| source | quantity | paper | headroom | verdict (tolerance) | computed as |\n|---|---|---|---|---|---|");
            html.push_str("<p>The papers' numbers (digitised from their text) beside ours:</p>\n<table><tr><th>source</th><th>quantity</th><th>paper</th><th>headroom</th><th>verdict (tolerance)</th><th>computed as</th></tr>\n");
            for c in &claims {
                let ours = c.ours.value(&o.dir).with_context(|| format!("{}: {}", e.name, c.quantity))?;
                let v = c.paper.verdict(ours, c.tolerance);
                let tol = format!("{} (±{}%)", v.name(), c.tolerance * 100.0);
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} | {tol} | {} |",
                    c.cite,
                    c.quantity,
                    c.paper.show(),
                    show(ours),
                    c.ours.source()
                );
                let _ = writeln!(
                    html,
                    "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
                    v.name(),
                    esc(c.cite),
                    esc(c.quantity),
                    esc(&c.paper.show()),
                    show(ours),
                    esc(&tol),
                    esc(&c.ours.source())
                );
            }
            md.push('\n');
            html.push_str("</table>\n");
        }
        if page.wall_time && claims.is_empty() && !COMPARISONS.iter().any(|c| c.experiment == e.name) {
            // Only the experiments that go beyond the papers (checked by a test).
            let text = "Beyond the papers: no number of theirs to compare with; the claim lines below are computed from the run.";
            let _ = writeln!(md, "{text}\n");
            let _ = writeln!(html, "<p>{}</p>", esc(text));
        }
        let _ = writeln!(md, "```\n{}```\n", o.summary);
        let _ = writeln!(html, "<pre>{}</pre>", esc(&o.summary));
        for (name, svg) in figures(&o.dir)? {
            let _ = writeln!(md, "![{name}]({}/{name})\n", e.name);
            let _ = writeln!(
                html,
                "<figure id=\"{0}/{1}\">{2}<figcaption>{1}</figcaption></figure>",
                esc(e.name),
                esc(&name),
                svg
            );
        }
    }
    html.push_str("</body></html>\n");
    std::fs::write(out.join("report.md"), md)?;
    let path = out.join("report.html");
    std::fs::write(&path, html)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_follow_the_stated_tolerance() {
        assert_eq!(verdict(100.0, 119.0, 0.2), Verdict::Matches);
        assert_eq!(verdict(100.0, 81.0, 0.2), Verdict::Matches);
        assert_eq!(verdict(100.0, 121.0, 0.2), Verdict::Qualitatively);
        assert_eq!(verdict(100.0, 50.0, 0.2), Verdict::Qualitatively);
        assert_eq!(verdict(100.0, 49.0, 0.2), Verdict::Differs);
        assert_eq!(verdict(105.0, 0.0, 0.2), Verdict::Differs);
        assert_eq!(verdict(0.0, 0.0, 0.2), Verdict::Matches);
        assert_eq!(verdict(0.0, 1.0, 0.2), Verdict::Differs);
        assert_eq!(verdict(10.0, -10.0, 0.2), Verdict::Differs);
        assert_eq!(verdict(10.0, f64::NAN, 0.2), Verdict::Differs);
    }

    #[test]
    fn bounds_match_on_their_side_and_are_qualitative_within_the_tolerance() {
        assert_eq!(Paper::AtLeast(1.0).verdict(1.0, 0.05), Verdict::Matches);
        assert_eq!(Paper::AtLeast(1.0).verdict(3.2, 0.05), Verdict::Matches);
        assert_eq!(Paper::AtLeast(1.0).verdict(0.96, 0.05), Verdict::Qualitatively);
        assert_eq!(Paper::AtLeast(1.0).verdict(0.94, 0.05), Verdict::Differs);
        assert_eq!(Paper::AtMost(2.0).verdict(1.2, 0.25), Verdict::Matches);
        assert_eq!(Paper::AtMost(2.0).verdict(2.4, 0.25), Verdict::Qualitatively);
        assert_eq!(Paper::AtMost(2.0).verdict(2.6, 0.25), Verdict::Differs);
        assert_eq!(Paper::AtMost(2.0).verdict(f64::NAN, 0.25), Verdict::Differs);
        assert_eq!(Paper::AtLeast(1.0).verdict(f64::INFINITY, 0.25), Verdict::Matches);
        assert_eq!(Paper::About(25.2).verdict(24.0, 0.1), Verdict::Matches);
        assert_eq!(Paper::About(25.2).verdict(20.0, 0.1), Verdict::Qualitatively);
    }

    #[test]
    fn selections_filter_and_aggregate_the_csv_rows() {
        let csv = "method,available_mbps,error_mbps\npathquick,3,-1.5\npathquick,9,4\npathquick,4,\npathchirp,3,7\npathquick,5,2.5\n";
        let s = |filters: &'static [Filter], agg| sel("x.csv", "error_mbps", filters, agg).value(csv).unwrap();
        const PQ_LOW: &[Filter] = &[Is("method", "pathquick"), Within("available_mbps", -1.0, 8.9)];
        // -1.5 and 2.5 (the empty error of the row at 4 Mb/s is left out, 9 is beyond 8.9).
        assert_eq!(s(PQ_LOW, Agg::MeanAbs), 2.0);
        assert_eq!(s(PQ_LOW, Agg::Mean), 0.5);
        assert_eq!(s(PQ_LOW, Agg::Min), -1.5);
        assert_eq!(s(&[], Agg::Max), 7.0);
        // (low, high]: 3 is out, 5 and 9 in.
        assert_eq!(s(&[Is("method", "pathquick"), Within("available_mbps", 3.0, 9.0)], Agg::Mean), 3.25);
        let scaled = Select { scale: 1e-6, ..sel("x.csv", "available_mbps", &[Is("method", "pathchirp")], Agg::Mean) };
        assert_eq!(scaled.value(csv).unwrap(), 3e-6);
        assert!(sel("x.csv", "nope", &[], Agg::Mean).value(csv).is_err());
        assert!(sel("x.csv", "error_mbps", &[Is("method", "other")], Agg::Mean).value(csv).is_err());
        assert!(sel("x.csv", "error_mbps", &[Is("nocol", "x")], Agg::Mean).value(csv).is_err());
    }

    #[test]
    fn every_claim_cites_a_registered_experiment_and_reads_a_csv() {
        let names: Vec<&str> = super::super::experiments().iter().map(|e| e.name).collect();
        for c in CLAIMS {
            assert!(names.contains(&c.experiment), "{}: unknown experiment", c.experiment);
            let csvs = match c.ours {
                Ours::Of(a) => vec![a.csv],
                Ours::Ratio(a, b) => vec![a.csv, b.csv],
            };
            assert!(csvs.iter().all(|f| f.ends_with(".csv")), "{}", c.quantity);
            assert!(c.tolerance > 0.0 && c.tolerance < 1.0, "{}", c.quantity);
        }
        // Every paper of the report has claims.
        for prefix in ["becc-", "imtcp-fig", "imtcp-web", "imtcp-bg-", "pathquick-", "overlay-"] {
            assert!(CLAIMS.iter().any(|c| c.experiment.starts_with(prefix)), "{prefix}");
        }
    }

    /// The experiments that go beyond the papers (headroom's own goal and policy D): the only
    /// ones without the papers' numbers beside ours.
    const BEYOND_THE_PAPERS: &[&str] = &["imtcp-bg-goal", "overlay-policy-d"];

    #[test]
    fn every_reproduction_of_a_paper_figure_has_verdicts() {
        for e in super::super::experiments() {
            let verdicts =
                CLAIMS.iter().any(|c| c.experiment == e.name) || COMPARISONS.iter().any(|c| c.experiment == e.name);
            assert_eq!(verdicts, !BEYOND_THE_PAPERS.contains(&e.name), "{}: verdicts {verdicts}", e.name);
        }
    }

    #[test]
    fn every_named_scenario_is_a_file_of_the_repository() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let all = super::super::experiments().into_iter().chain(super::super::testbed_experiments());
        for e in all {
            for f in e.scenarios {
                assert!(f.starts_with("scenarios/") && root.join(f).is_file(), "{}: {f}", e.name);
            }
        }
        // Every simulator reproduction names its scenario.
        for e in super::super::experiments() {
            assert!(!e.scenarios.is_empty(), "{}", e.name);
        }
    }

    #[test]
    fn compared_rows_are_the_csv_values() {
        let c = &COMPARISONS[1];
        let csv = "available_mbps,storing_timer,results,paper_results,throughput_mbps\n4,0.04 s,300,379,1.5\n7,0.004 s,3,298,2\n";
        let rows = super::rows(c, csv).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].key, "available_mbps = 4, storing_timer = 0.04 s");
        assert_eq!((rows[0].paper, rows[0].ours, rows[0].verdict), (379.0, 300.0, Verdict::Qualitatively));
        assert_eq!((rows[1].paper, rows[1].ours, rows[1].verdict), (298.0, 3.0, Verdict::Differs));
        assert!(super::rows(c, "a,b\n1,2\n").is_err());
    }
}
