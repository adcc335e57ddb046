//! Output of a run: the per-flow summary table, `summary.json`, `trace.csv` (long format
//! `time_s,flow,metric,value`, the same shape as the testbed's traces), `pages.csv` (web page
//! download times) and `flows.csv`. Every number is formatted deterministically, so the same
//! scenario and seed give byte-identical files.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::path::Path;

use crate::world::{FlowKind, FlowStats, Report, World};

/// How a per-flow row is written: the stdout table (a subset of the columns, rounded, `-` for
/// no value) or `flows.csv` (every column, 6 decimals, empty for no value).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Style {
    Table,
    Csv,
}

/// One column of the per-flow rows: its CSV header, its table header and width (absent: not in
/// the table; negative width: left-aligned), and how a flow's value is written in either style.
struct Column {
    csv: &'static str,
    table: Option<(&'static str, i8)>,
    cell: fn(&FlowStats, Style) -> String,
}

/// `v` with `table` decimals in the table and 6 in the CSV.
fn real(v: f64, table: usize, style: Style) -> String {
    match style {
        Style::Table => format!("{v:.table$}"),
        Style::Csv => format!("{v:.6}"),
    }
}

/// No value: `-` in the table, empty in the CSV.
fn none(style: Style) -> String {
    if style == Style::Table {
        "-".into()
    } else {
        String::new()
    }
}

/// The per-flow columns, in order: the summary table and `flows.csv` are both written from
/// these, so they cannot disagree about a flow.
const FLOW_COLUMNS: &[Column] = &[
    Column { csv: "flow", table: Some(("flow", -16)), cell: |f, _| f.name.clone() },
    Column { csv: "kind", table: Some(("kind", -5)), cell: |f, _| f.kind.name().into() },
    Column { csv: "cc", table: Some(("cc", -8)), cell: |f, st| f.cc.clone().unwrap_or_else(|| none(st)) },
    Column { csv: "throughput_mbps", table: Some(("Mbps", 10)), cell: |f, st| real(f.throughput_mbps, 3, st) },
    Column { csv: "bytes", table: Some(("bytes", 14)), cell: |f, _| f.bytes.to_string() },
    Column { csv: "packets_sent", table: None, cell: |f, _| f.packets_sent.to_string() },
    Column { csv: "drops", table: Some(("drops", 9)), cell: |f, _| f.drops.to_string() },
    Column { csv: "retransmits", table: Some(("retx", 8)), cell: |f, _| f.retransmits.to_string() },
    Column { csv: "fast_retransmits", table: None, cell: |f, _| f.fast_retransmits.to_string() },
    Column { csv: "timeouts", table: Some(("rto", 8)), cell: |f, _| f.timeouts.to_string() },
    // The table shows pages for web populations only; the CSV counts them for every flow.
    Column {
        csv: "pages",
        table: Some(("pages", 9)),
        cell: |f, st| if st == Style::Table && f.kind != FlowKind::Web { none(st) } else { f.pages.to_string() },
    },
    Column {
        csv: "mean_page_time_s",
        table: Some(("page_time_s", 12)),
        cell: |f, st| f.mean_page_time_s.map_or_else(|| none(st), |t| real(t, 4, st)),
    },
    Column { csv: "min_rtt_ms", table: None, cell: |f, st| f.min_rtt_ms.map_or_else(|| none(st), |t| real(t, 6, st)) },
];

/// One table line: the columns' texts padded to their widths, separated by a space.
fn table_line<'a>(cells: impl Iterator<Item = (String, i8)> + 'a) -> String {
    let parts: Vec<String> = cells
        .map(|(text, w)| {
            let n = w.unsigned_abs() as usize;
            if w < 0 {
                format!("{text:<n$}")
            } else {
                format!("{text:>n$}")
            }
        })
        .collect();
    parts.join(" ")
}

/// The per-flow summary table printed on stdout.
pub fn summary_table(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "scenario {} (seed {}), {:.3} s simulated", r.scenario, r.seed, r.duration_s);
    let shown = || FLOW_COLUMNS.iter().filter_map(|c| c.table.map(|t| (c, t)));
    let _ = writeln!(s, "{}", table_line(shown().map(|(_, (head, w))| (head.to_string(), w))));
    for f in &r.flows {
        let _ = writeln!(s, "{}", table_line(shown().map(|(c, (_, w))| ((c.cell)(f, Style::Table), w))));
    }
    for l in r.links.iter().filter(|l| l.drops > 0 || l.utilisation > 0.5) {
        let _ = writeln!(
            s,
            "link {:<14} {:>8.1} Mbps  utilisation {:>6.1}%  drops {:>8}  max queue {:>6} pkts",
            l.name,
            l.rate_mbps,
            l.utilisation * 100.0,
            l.drops,
            l.max_queue_packets
        );
    }
    s
}

/// A CSV document: a header and rows of fields, every field passed through [`csv_field`]. The
/// one way this crate (and the reproductions) write CSV.
pub struct Csv {
    text: String,
    columns: usize,
}

impl Csv {
    pub fn new(header: &[&str]) -> Csv {
        let mut c = Csv { text: String::new(), columns: header.len() };
        c.push(header.iter().copied());
        c
    }

    /// Appends a row; every field is quoted as RFC 4180 says when it holds a separator.
    ///
    /// # Panics
    /// When the row has a different number of fields than the header (a programming error).
    pub fn row<S: AsRef<str>>(&mut self, fields: impl IntoIterator<Item = S>) {
        let n = self.push(fields);
        assert_eq!(n, self.columns, "CSV row with {n} fields under a header of {}", self.columns);
    }

    fn push<S: AsRef<str>>(&mut self, fields: impl IntoIterator<Item = S>) -> usize {
        let mut n = 0;
        for f in fields {
            if n > 0 {
                self.text.push(',');
            }
            self.text.push_str(&csv_field(f.as_ref()));
            n += 1;
        }
        self.text.push('\n');
        n
    }

    pub fn finish(self) -> String {
        self.text
    }
}

/// `trace.csv` text.
pub fn trace_csv(w: &World) -> String {
    let mut s = String::with_capacity(w.trace.len() * 32 + 32);
    s.push_str("time_s,flow,metric,value\n");
    for row in &w.trace {
        let _ = writeln!(
            s,
            "{:.6},{},{},{}",
            row.time.as_secs_f64(),
            csv_field(&w.series[row.series as usize]),
            row.metric.name(),
            fmt_value(row.value)
        );
    }
    s
}

/// A text field of a CSV row, quoted as RFC 4180 says when it holds a comma, a double quote or a
/// line break (a quote is doubled); every other name is written as it is, so outputs of scenarios
/// with plain names do not change. Every CSV this module writes passes its names through here.
pub fn csv_field(text: &str) -> Cow<'_, str> {
    if text.contains([',', '"', '\n', '\r']) {
        Cow::Owned(format!("\"{}\"", text.replace('"', "\"\"")))
    } else {
        Cow::Borrowed(text)
    }
}

fn fmt_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v:.6}")
    }
}

/// `pages.csv` text: one row per completed web page.
pub fn pages_csv(r: &Report) -> String {
    let mut c = Csv::new(&["flow", "start_s", "download_time_s"]);
    for f in r.flows.iter().filter(|f| f.kind == FlowKind::Web) {
        for (t, d) in &f.page_times {
            c.row([f.name.clone(), format!("{:.6}", t.as_secs_f64()), format!("{:.6}", d.as_secs_f64())]);
        }
    }
    c.finish()
}

/// `flows.csv` text: the summary table's rows as CSV, with every column.
pub fn flows_csv(r: &Report) -> String {
    let mut c = Csv::new(&FLOW_COLUMNS.iter().map(|col| col.csv).collect::<Vec<_>>());
    for f in &r.flows {
        c.row(FLOW_COLUMNS.iter().map(|col| (col.cell)(f, Style::Csv)));
    }
    c.finish()
}

/// `estimates.csv` text: every available-bandwidth estimate (probe trains, ImTCP).
pub fn estimates_csv(w: &World) -> String {
    let mut c = Csv::new(&[
        "time_s",
        "flow",
        "method",
        "verdict",
        "value_bps",
        "range_lo_bps",
        "range_hi_bps",
        "elapsed_s",
        "probe_bytes",
    ]);
    for e in &w.estimates {
        c.row([
            format!("{:.6}", e.time.as_secs_f64()),
            w.stats[e.stat as usize].name.clone(),
            e.method.name().to_string(),
            e.verdict.name().to_string(),
            e.value.map_or(String::new(), |v| v.0.to_string()),
            e.range.0 .0.to_string(),
            e.range.1 .0.to_string(),
            format!("{:.6}", e.elapsed.as_secs_f64()),
            e.bytes.to_string(),
        ]);
    }
    c.finish()
}

/// Writes `summary.json`, `flows.csv`, `trace.csv` and (with web traffic) `pages.csv` into `dir`.
pub fn write_all(dir: &Path, w: &World, r: &Report) -> std::io::Result<Vec<String>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    let mut put = |name: &str, text: String| -> std::io::Result<()> {
        std::fs::write(dir.join(name), text)?;
        written.push(name.to_string());
        Ok(())
    };
    put("summary.json", serde_json::to_string_pretty(r).map_err(std::io::Error::other)? + "\n")?;
    put("flows.csv", flows_csv(r))?;
    put("trace.csv", trace_csv(w))?;
    if r.flows.iter().any(|f| f.kind == FlowKind::Web) {
        put("pages.csv", pages_csv(r))?;
    }
    if !w.estimates.is_empty() {
        put("estimates.csv", estimates_csv(w))?;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use crate::{Scenario, World};

    #[test]
    fn flows_csv_keeps_flow_names_and_lowercases_kinds() {
        let src = "duration = \"1s\"\n[[link]]\na = \"a\"\nb = \"b\"\nrate = \"10Mbps\"\ndelay = \"1ms\"\n\
                   [[tcp]]\nname = \"MyTcpFlow\"\nfrom = \"a\"\nto = \"b\"\n\
                   [[udp]]\nname = \"UdpWebProbe\"\nfrom = \"a\"\nto = \"b\"\npattern = { kind = \"cbr\", rate = \"1Mbps\" }\n";
        let sc = Scenario::parse(src, "t").unwrap();
        let mut w = World::new(&sc, None).unwrap();
        w.run();
        let csv = super::flows_csv(&w.report());
        assert!(csv.contains("\nMyTcpFlow,tcp,newreno,"), "{csv}");
        assert!(csv.contains("\nUdpWebProbe,udp,,"), "{csv}");
    }

    #[test]
    fn the_table_and_flows_csv_show_the_same_flows_and_numbers() {
        let src = "duration = \"2s\"\n[[link]]\na = \"a\"\nb = \"b\"\nrate = \"10Mbps\"\ndelay = \"5ms\"\nqueue = 20\n\
                   [[tcp]]\nname = \"bulk,1\"\nfrom = \"a\"\nto = \"b\"\ncc = \"reno\"\n\
                   [[udp]]\nname = \"cbr\"\nfrom = \"a\"\nto = \"b\"\npattern = { kind = \"cbr\", rate = \"4Mbps\" }\n";
        let sc = Scenario::parse(src, "t").unwrap();
        let mut w = World::new(&sc, None).unwrap();
        w.run();
        let r = w.report();
        let table = super::summary_table(&r);
        let csv = super::flows_csv(&r);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 1 + r.flows.len(), "{csv}");
        for (f, line) in r.flows.iter().zip(&lines[1..]) {
            // The CSV quotes the comma in the name; the table shows it as it is.
            let row = table.lines().find(|l| l.starts_with(&f.name)).expect(&f.name);
            let cols: Vec<&str> = row[16..].split_whitespace().collect();
            let csv_cols: Vec<&str> = line.rsplitn(13, ',').collect::<Vec<_>>().into_iter().rev().collect();
            assert_eq!(csv_cols[0], super::csv_field(&f.name));
            // kind, cc, Mbps, bytes, drops in both.
            assert_eq!(cols[0], csv_cols[1]);
            assert_eq!(cols[1], if csv_cols[2].is_empty() { "-" } else { csv_cols[2] });
            assert_eq!(cols[2], format!("{:.3}", csv_cols[3].parse::<f64>().unwrap()));
            assert_eq!(cols[3], csv_cols[4]);
            assert_eq!(cols[4], csv_cols[6]);
            assert!(f.bytes > 0);
        }
    }

    #[test]
    #[should_panic(expected = "CSV row with 2 fields under a header of 3")]
    fn a_csv_row_of_the_wrong_width_is_refused() {
        let mut c = super::Csv::new(&["a", "b", "c"]);
        c.row(["1", "2"]);
    }

    #[test]
    fn csv_fields_with_separators_are_quoted_and_plain_ones_are_not() {
        use super::csv_field;
        assert_eq!(csv_field("short-rtt"), "short-rtt");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("two\nlines"), "\"two\nlines\"");
    }
}
