//! Output of a run: the per-flow summary table, `summary.json`, `trace.csv` (long format
//! `time_s,flow,metric,value`, the same shape as the testbed's traces), `pages.csv` (web page
//! download times) and `flows.csv`. Every number is formatted deterministically, so the same
//! scenario and seed give byte-identical files.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::path::Path;

use crate::world::{FlowKind, Report, World};

/// The per-flow summary table printed on stdout.
pub fn summary_table(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "scenario {} (seed {}), {:.3} s simulated", r.scenario, r.seed, r.duration_s);
    let _ = writeln!(
        s,
        "{:<16} {:<5} {:<8} {:>10} {:>14} {:>9} {:>8} {:>8} {:>9} {:>12}",
        "flow", "kind", "cc", "Mbps", "bytes", "drops", "retx", "rto", "pages", "page_time_s"
    );
    for f in &r.flows {
        let _ = writeln!(
            s,
            "{:<16} {:<5} {:<8} {:>10.3} {:>14} {:>9} {:>8} {:>8} {:>9} {:>12}",
            f.name,
            f.kind.name(),
            f.cc.as_deref().unwrap_or("-"),
            f.throughput_mbps,
            f.bytes,
            f.drops,
            f.retransmits,
            f.timeouts,
            if f.kind == FlowKind::Web { f.pages.to_string() } else { "-".into() },
            f.mean_page_time_s.map_or("-".to_string(), |t| format!("{t:.4}")),
        );
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
    let mut s = String::from("flow,start_s,download_time_s\n");
    for f in r.flows.iter().filter(|f| f.kind == FlowKind::Web) {
        for (t, d) in &f.page_times {
            let _ = writeln!(s, "{},{:.6},{:.6}", csv_field(&f.name), t.as_secs_f64(), d.as_secs_f64());
        }
    }
    s
}

/// `flows.csv` text: the summary table as CSV.
pub fn flows_csv(r: &Report) -> String {
    let mut s = String::from("flow,kind,cc,throughput_mbps,bytes,packets_sent,drops,retransmits,fast_retransmits,timeouts,pages,mean_page_time_s,min_rtt_ms\n");
    for f in &r.flows {
        let _ = writeln!(
            s,
            "{},{},{},{:.6},{},{},{},{},{},{},{},{},{}",
            csv_field(&f.name),
            f.kind.name(),
            f.cc.as_deref().unwrap_or(""),
            f.throughput_mbps,
            f.bytes,
            f.packets_sent,
            f.drops,
            f.retransmits,
            f.fast_retransmits,
            f.timeouts,
            f.pages,
            f.mean_page_time_s.map_or(String::new(), |t| format!("{t:.6}")),
            f.min_rtt_ms.map_or(String::new(), |t| format!("{t:.6}")),
        );
    }
    s
}

/// `estimates.csv` text: every available-bandwidth estimate (probe trains, ImTCP).
pub fn estimates_csv(w: &World) -> String {
    let mut s = String::from("time_s,flow,method,verdict,value_bps,range_lo_bps,range_hi_bps,elapsed_s,probe_bytes\n");
    for e in &w.estimates {
        let _ = writeln!(
            s,
            "{:.6},{},{},{},{},{},{},{:.6},{}",
            e.time.as_secs_f64(),
            csv_field(&w.stats[e.stat as usize].name),
            e.method.name(),
            e.verdict.name(),
            e.value.map_or(String::new(), |v| v.0.to_string()),
            e.range.0 .0,
            e.range.1 .0,
            e.elapsed.as_secs_f64(),
            e.bytes
        );
    }
    s
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
    fn csv_fields_with_separators_are_quoted_and_plain_ones_are_not() {
        use super::csv_field;
        assert_eq!(csv_field("short-rtt"), "short-rtt");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("two\nlines"), "\"two\nlines\"");
    }
}
