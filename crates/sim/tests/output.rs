//! Output files: a flow name with a comma is quoted in every CSV, so each row keeps its columns.

use headroom_sim::{output, Scenario, World};

#[test]
fn a_flow_name_with_a_comma_is_quoted_in_every_csv() {
    let src = r#"
duration = "2s"
seed = 1
[[link]]
a = "s"
b = "d"
rate = "10Mbps"
delay = "5ms"
[[tcp]]
name = "bulk, \"main\""
from = "s"
to = "d"
[trace]
interval = "500ms"
"#;
    let sc = Scenario::parse(src, "comma").unwrap_or_else(|e| panic!("{e}"));
    let mut w = World::new(&sc, None).unwrap();
    w.run();
    let r = w.report();
    let quoted = "\"bulk, \"\"main\"\"\"";
    let flows = output::flows_csv(&r);
    let header_columns = flows.lines().next().unwrap().split(',').count();
    let row = flows.lines().nth(1).unwrap();
    assert!(row.starts_with(&format!("{quoted},tcp,")), "{flows}");
    // Outside the quoted name, the row has as many separators as the header.
    assert_eq!(row[quoted.len()..].split(',').count(), header_columns, "{flows}");
    let trace = output::trace_csv(&w);
    assert!(trace.lines().skip(1).any(|l| l.split_once(',').unwrap().1.starts_with(quoted)), "{trace}");
    assert!(!trace.contains(",bulk, "), "an unquoted name in trace.csv: {trace}");
}
