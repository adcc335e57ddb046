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

/// Writes `report.md` and `report.html` into `out` for the experiments run; returns the HTML path.
pub fn write(out: &Path, runs: &[(&Experiment, &Outcome)]) -> Result<std::path::PathBuf> {
    let mut md = String::from("# headroom: reproductions\n\n");
    let mut html = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>headroom: reproductions</title>\n\
         <style>body{font-family:sans-serif;max-width:1000px;margin:auto}pre{background:#f4f4f4;padding:6px;overflow-x:auto}\
         table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px}.matches{background:#dfd}\
         .qualitatively{background:#ffd}.differs{background:#fdd}</style></head><body>\n<h1>headroom: reproductions</h1>\n",
    );
    let _ = writeln!(
        md,
        "Verdicts: *matches* = within the stated relative tolerance of the paper's number; *qualitatively* = within a factor of two; *differs* = further off.\n"
    );
    html.push_str("<p>Verdicts: <em>matches</em> = within the stated relative tolerance of the paper's number; <em>qualitatively</em> = within a factor of two; <em>differs</em> = further off.</p>\n");
    let mut last_paper = "";
    for (e, o) in runs {
        let paper = paper_of(e.name);
        if paper != last_paper {
            let _ = writeln!(md, "## {paper}\n");
            let _ = writeln!(html, "<h2>{}</h2>", esc(paper));
            last_paper = paper;
        }
        let _ = writeln!(md, "### {}\n\n{}\n", e.name, e.about);
        let _ = writeln!(
            md,
            "Command: `headroom reproduce {}`; wall time {:.1} s; files in `{}`.\n",
            e.name,
            o.wall.as_secs_f64(),
            o.dir.display()
        );
        let _ = writeln!(html, "<h3 id=\"{0}\">{0}</h3>\n<p>{1}</p>", esc(e.name), esc(e.about));
        let _ = writeln!(
            html,
            "<p>Command: <code>headroom reproduce {}</code>; wall time {:.1} s.</p>",
            esc(e.name),
            o.wall.as_secs_f64()
        );
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
