//! `headroom proxy-web` on the testbed (root only; SKIP otherwise, a failure under CI): a short
//! run of two rounds of policies none and A writes the CSV, SVG and summary; the rounds
//! interleave the policies (none, a, none, a); the CSV's rows are the transfers the summary
//! counts, per round; split flags follow the policy (none: nothing split; A: exactly the listed
//! sources) and agree with the servers' view; the summary's medians and p95s are those of the
//! CSV, per round, and its figures over rounds are the medians of the rounds'; no namespace of
//! the run is left. Bad input (`--rounds 0`) is refused before anything starts (no root needed).

use headroom_core::stats::Sorted;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_headroom");

fn fmt_q(v: &[f64], p: f64) -> String {
    Sorted::new(v.to_vec()).quantile(p).map_or_else(|| "-".into(), |x| format!("{x:.3}"))
}

#[test]
fn zero_rounds_are_refused_with_a_clear_error() {
    let r = Command::new(BIN).args(["proxy-web", "--rounds", "0"]).output().unwrap();
    assert!(!r.status.success());
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(stderr.contains("--rounds must be 1 to 100"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn proxy_web_splits_by_policy_and_its_summary_is_computed_from_its_csv() {
    if !headroom_testbed::testbed_available_for_test() {
        return;
    }
    let out = std::env::temp_dir().join(format!("hr-proxy-web-test-{}", std::process::id()));
    let r = Command::new(BIN)
        .args(["proxy-web", "--policies", "none,a", "--rounds", "2", "--ftp-flows", "4", "--web-per-second", "12"])
        .args(["--web-sources", "6", "--a-share", "0.5", "--warmup", "1s", "--web-time", "2s", "--drain", "5s"])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{stderr}");
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert_eq!(String::from_utf8_lossy(&r.stdout), summary);
    assert!(std::fs::read_to_string(out.join("cdf.svg")).unwrap().starts_with("<svg"));
    let csv = std::fs::read_to_string(out.join("transfers.csv")).unwrap();
    let rows: Vec<Vec<&str>> = csv.lines().skip(1).map(|l| l.split(',').collect()).collect();
    assert!(rows.iter().all(|r| r.len() == 9), "{csv}");
    // The rounds interleave the policies.
    let mut order: Vec<(&str, &str)> = rows.iter().map(|r| (r[0], r[1])).collect();
    order.dedup();
    assert_eq!(order, [("1", "none"), ("1", "a"), ("2", "none"), ("2", "a")], "{csv}");
    let users: Vec<&str> =
        summary.lines().find_map(|l| l.strip_prefix("policy a users: ")).unwrap().split(", ").collect();
    // Web transfers come from the web addresses only, each listed as a /32 or not at all.
    let listed = |src: &str| users.contains(&format!("{src}/32").as_str());
    let mut ids = std::collections::HashSet::new();
    for policy in ["none", "a"] {
        let mut per_round: Vec<[String; 4]> = Vec::new();
        for round in ["1", "2"] {
            let mine: Vec<&Vec<&str>> = rows.iter().filter(|r| r[0] == round && r[1] == policy).collect();
            assert!(mine.iter().all(|r| ids.insert(r[2])), "transfer ids repeat");
            let tag = format!("round {round} {policy}");
            let head = summary.lines().find(|l| l.starts_with(&format!("{tag}: web transfers"))).unwrap();
            let n: usize = head.split_whitespace().nth(5).unwrap().parse().unwrap();
            assert_eq!(mine.len(), n, "{head}");
            assert!(n >= 10, "{head}");
            // The proxy's records and the servers' view agree on every transfer the server saw.
            let agree = head.rsplit(' ').next().unwrap();
            let (k, m) = agree.split_once('/').unwrap();
            assert_eq!(k, m, "{head}");
            for r in &mine {
                let split = r[7] == "true";
                match policy {
                    "none" => assert!(!split, "{r:?}"),
                    _ if r[8].is_empty() => {}
                    _ => assert_eq!(split, listed(r[4]), "{r:?} (users {users:?})"),
                }
            }
            if policy == "a" {
                assert!(mine.iter().any(|r| r[7] == "true") && mine.iter().any(|r| r[7] == "false"), "{csv}");
            }
            let delays = |split: &str| -> Vec<f64> {
                mine.iter().filter(|r| r[7] == split && !r[8].is_empty()).map(|r| r[8].parse().unwrap()).collect()
            };
            let (sp, ns) = (delays("true"), delays("false"));
            let figs = [fmt_q(&sp, 0.5), fmt_q(&sp, 0.95), fmt_q(&ns, 0.5), fmt_q(&ns, 0.95)];
            let want = format!(
                "{tag}: median / p95 delay (s): split {} / {}, non-split {} / {}",
                figs[0], figs[1], figs[2], figs[3]
            );
            assert!(summary.lines().any(|l| l == want), "{want}\n{summary}");
            per_round.push(figs);
        }
        // Over rounds: each figure is the median of the rounds' (the upper of two, as the
        // quantiles here: no interpolation), followed by the rounds' values.
        let over = summary.lines().find(|l| l.starts_with(&format!("{policy} over 2 rounds, median"))).unwrap();
        for (i, name) in ["median split", "p95 split", "median non-split", "p95 non-split"].iter().enumerate() {
            let vals: Vec<f64> = per_round.iter().filter_map(|f| f[i].parse().ok()).collect();
            let each: Vec<&str> = per_round.iter().map(|f| f[i].as_str()).collect();
            let want = format!("{name} {} [{}]", fmt_q(&vals, 0.5), each.join(", "));
            assert!(over.contains(&want), "{want}\n{over}");
        }
    }
    // Nothing of the run is left: its namespaces are gone.
    let prefix = stderr.lines().find_map(|l| l.strip_prefix("proxy-web: testbed prefix ")).unwrap().trim();
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&ns.stdout).contains(prefix), "namespaces of {prefix} left");
    let _ = std::fs::remove_dir_all(&out);
}
