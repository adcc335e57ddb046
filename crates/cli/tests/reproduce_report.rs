//! `headroom reproduce ... --report`: the experiments' files are the same whatever the number of
//! threads (rayon), and the report holds every figure the run drew, with no point outside its
//! axes (the report writer refuses such a figure; Chromium's layout is checked too, when it is
//! installed: required under CI=true), and the report's numbers are the CSV's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn run(out: &Path, threads: &str, names: &[&str]) -> String {
    let args = [&["reproduce", "--report", "--out", out.to_str().unwrap()], names].concat();
    common::headroom(&args, threads)
}

mod common;

/// Every file below `dir` (relative path -> bytes), the report's own files left out.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    common::files(dir, |name| !name.starts_with("report."))
}

/// The numbers of the report's claim rows for `quantity` (the `headroom` column of report.md).
fn claimed(md: &str, quantity: &str) -> Vec<String> {
    md.lines()
        .filter(|l| l.starts_with("| ") && l.split(" | ").nth(1) == Some(quantity))
        .map(|l| l.split(" | ").nth(3).unwrap().to_string())
        .collect()
}

/// `printed` (rounded by the report) equals `value` to its last printed digit.
fn same_number(printed: &str, value: f64) -> bool {
    let decimals = printed.split_once('.').map_or(0, |(_, d)| d.len()) as i32;
    let p: f64 = printed.parse().unwrap();
    (p - value).abs() <= 0.5 * 10f64.powi(-decimals) + 1e-12
}

/// Column `name` of a CSV as text fields, row by row (the test's own reading of the file).
fn column<'a>(csv: &'a str, name: &str) -> Vec<&'a str> {
    let mut lines = csv.lines();
    let i = lines.next().unwrap().split(',').position(|h| h == name).unwrap();
    lines.map(|l| l.split(',').nth(i).unwrap()).collect()
}

/// Field `i` of the CSV rows (header skipped) that `keep` accepts, as numbers.
fn field(csv: &str, i: usize, keep: impl Fn(&[&str]) -> bool) -> Vec<f64> {
    csv.lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| keep(f))
        .map(|f| f[i].parse::<f64>().unwrap())
        .collect()
}

/// Every number the report states for these experiments is the value of the run's CSV,
/// recomputed here independently of the report's code.
fn report_numbers_are_the_csv_values(dir: &Path, md: &str) {
    let fig2 = std::fs::read_to_string(dir.join("becc-fig2/fig2.csv")).unwrap();
    let pairs: Vec<(f64, f64)> = column(&fig2, "max_window_kb")
        .iter()
        .zip(column(&fig2, "reno_mbps"))
        .map(|(w, t)| (w.parse().unwrap(), t.parse().unwrap()))
        .collect();
    let sat: Vec<f64> = pairs.iter().filter(|p| p.0 >= 90.0 && p.0 <= 200.0).map(|p| p.1).collect();
    let low = pairs.iter().filter(|p| p.0 > 200.0).map(|p| p.1).fold(f64::INFINITY, f64::min);
    let expect = [
        ("Reno throughput, max window 90-200 KB (Mb/s)", sat.iter().sum::<f64>() / sat.len() as f64),
        ("Reno throughput, lowest above 200 KB (Mb/s)", low),
    ];
    let trace = std::fs::read_to_string(dir.join("becc-fig12/trace.csv")).unwrap();
    let rate: Vec<f64> = field(&trace, 3, |f| {
        f[1] == "becc"
            && f[2] == "throughput_bps"
            && (0.5..=10.0).contains(&f[0].parse::<f64>().unwrap())
            && f[0] != "0.500000"
    })
    .iter()
    .map(|v| v / 1e6)
    .collect();
    assert!(rate.len() > 10);
    let becc = (
        "BECC rate 0.5-10 s, UDP on (paper: t_msrd_th; ours: throughput) (Mb/s)",
        rate.iter().sum::<f64>() / rate.len() as f64,
    );
    // BECC Fig. 13: the second flow's mean 1-s throughput over the first's, 5 s < t <= 60 s.
    let trace = std::fs::read_to_string(dir.join("becc-fig13/trace.csv")).unwrap();
    let flow_mean = |flow: &str| {
        let v = field(&trace, 3, |f| {
            f[1] == flow && f[2] == "throughput_bps" && f[0].parse::<f64>().is_ok_and(|t| t > 5.0 && t <= 60.0)
        });
        assert!(v.len() > 100, "{flow}: {} samples", v.len());
        v.iter().sum::<f64>() / v.len() as f64
    };
    let two = (
        "second / first flow's throughput 5-60 s (ratio; paper: both transfer stably)",
        flow_mean("becc2") / flow_mean("becc1"),
    );
    // ImTCP Fig. 16: full-speed over Westwood+ at the highest loss rate, means of the seeds.
    let fig16 = std::fs::read_to_string(dir.join("imtcp-fig16/fig16.csv")).unwrap();
    let at = |controller: &str| {
        let v = field(&fig16, 3, |f| f[0] == controller && f[1] == "0.1");
        assert_eq!(v.len(), 5, "{controller}: one value per seed");
        v.iter().sum::<f64>() / v.len() as f64
    };
    let lossy = (
        "full-speed ImTCP / Westwood+ throughput at 10 % loss, mean of seeds (ratio; paper: larger when the loss rate is high)",
        at("imtcp full-speed") / at("westwood+"),
    );
    for (quantity, value) in expect.into_iter().chain([becc, two, lossy]) {
        let got = claimed(md, quantity);
        assert_eq!(got.len(), 1, "{quantity}: {got:?}");
        assert!(same_number(&got[0], value), "{quantity}: report {} but the CSV gives {value}", got[0]);
    }
    // The summaries are the experiments' own summary.txt, unchanged.
    for name in ["becc-fig2", "becc-fig12"] {
        let summary = std::fs::read_to_string(dir.join(name).join("summary.txt")).unwrap();
        assert!(md.contains(&format!("```\n{summary}```")), "{name}'s summary not in report.md");
    }
}

/// Chromium, when installed (`scripts/install.sh` installs Debian's `chromium`).
fn chromium() -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join("chromium")).find(|p| p.is_file())
}

/// Opens a copy of report.html headless in Chromium, with a script that measures every figure
/// as laid out: its size, its data elements (`class="d"`) and how many of them have a drawn box,
/// and its text elements that stick out of the figure (a cut legend). One line per figure.
fn render(html: &Path, tmp: &Path) -> Option<String> {
    let Some(chrome) = chromium() else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "chromium not installed (scripts/install.sh installs it)"
        );
        println!("SKIP: chromium not installed");
        return None;
    };
    let probe = r#"<script>
const out = [];
document.querySelectorAll('figure').forEach(f => {
  const svg = f.querySelector('svg');
  if (!svg) { out.push(f.id + ' nosvg'); return; }
  const r = svg.getBoundingClientRect();
  const data = svg.querySelectorAll('.d');
  let drawn = 0, outside = 0, area = null;
  svg.querySelectorAll('.area, .d').forEach(e => {
    const b = e.getBoundingClientRect();
    if (e.classList.contains('area')) { area = b; return; }
    if (b.width > 0 || b.height > 0) drawn++;
    if (!area || b.left < area.left - 5 || b.right > area.right + 5 || b.top < area.top - 5 || b.bottom > area.bottom + 5) outside++;
  });
  let cut = 0;
  svg.querySelectorAll('text').forEach(t => {
    const b = t.getBoundingClientRect();
    if (b.width > 0 && (b.left < r.left - 0.5 || b.right > r.right + 0.5 || b.top < r.top - 0.5 || b.bottom > r.bottom + 0.5)) cut++;
  });
  out.push('FIG ' + f.id + ' w=' + Math.round(r.width) + ' h=' + Math.round(r.height) + ' data=' + data.length + ' drawn=' + drawn + ' outside=' + outside + ' cut=' + cut);
});
const d = document.createElement('pre'); d.id = 'render-check'; d.textContent = out.join(String.fromCharCode(10)); document.body.appendChild(d);
</script>"#;
    let page = tmp.join("render.html");
    let text = std::fs::read_to_string(html).unwrap();
    std::fs::write(&page, text.replace("</body>", &format!("{probe}</body>"))).unwrap();
    let profile = tmp.join("chromium-profile");
    let mut child = Command::new(chrome)
        .args(["--headless", "--disable-gpu", "--no-sandbox", "--window-size=1200,900", "--dump-dom"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("file://{}", page.display()))
        // A file, not a pipe: the DOM (every figure inline) is larger than a pipe's buffer.
        .stdout(std::fs::File::create(tmp.join("dom.html")).unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(180) {
            let _ = child.kill();
            panic!("chromium did not finish within 180 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "chromium failed: {status:?}");
    Some(std::fs::read_to_string(tmp.join("dom.html")).unwrap())
}

#[test]
fn one_or_two_threads_give_the_same_files_and_the_report_has_every_figure() {
    let tmp = std::env::temp_dir().join(format!("headroom-report-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let names = ["becc-fig2", "becc-fig12", "becc-fig13", "pathquick-fig6", "imtcp-fig16"];
    let (a, b) = (tmp.join("t1"), tmp.join("t2"));
    let out1 = run(&a, "1", &names);
    run(&b, "2", &names);
    let (fa, fb) = (files(&a), files(&b));
    assert!(fa.len() > 5, "{:?}", fa.keys());
    assert_eq!(fa.keys().collect::<Vec<_>>(), fb.keys().collect::<Vec<_>>());
    for (k, v) in &fa {
        assert!(fb[k] == *v, "{} differs between 1 and 2 threads", k.display());
    }
    assert!(out1.contains("report.html"), "{out1}");
    let html = std::fs::read_to_string(a.join("report.html")).unwrap();
    let md = std::fs::read_to_string(a.join("report.md")).unwrap();
    let svgs: Vec<&PathBuf> = fa.keys().filter(|p| p.extension().is_some_and(|e| e == "svg")).collect();
    assert!(svgs.len() >= 2, "{svgs:?}");
    for p in svgs {
        let id = p.to_string_lossy().replace('\\', "/");
        assert!(html.contains(&format!("<figure id=\"{id}\">")), "{id} not in report.html");
        assert!(html.contains(std::str::from_utf8(&fa[p]).unwrap()), "{id}'s SVG not inlined");
        assert!(md.contains(&format!("]({id})")), "{id} not in report.md");
    }
    report_numbers_are_the_csv_values(&a, &md);
    // A figure over several seeds shows their spread: ImTCP Fig. 16 (five seeds per point) has a
    // band per controller (the figures of the slower multi-seed experiments are checked by unit
    // tests of their figure code).
    let fig16 = std::str::from_utf8(&fa[Path::new("imtcp-fig16/fig16.svg")]).unwrap();
    assert_eq!(fig16.lines().filter(|l| l.starts_with("<polygon class=\"d\"")).count(), 3, "{fig16}");
    // Every figure of a paper's experiment has the paper's numbers and a verdict beside it.
    for name in names {
        let section = md.split(&format!("### {name}\n")).nth(1).unwrap().split("\n### ").next().unwrap();
        assert!(section.contains("| verdict"), "{name}: no verdict table");
    }
    // Every figure as Chromium lays it out: drawn, every data element with a box, no text cut.
    if let Some(dom) = render(&a.join("report.html"), &tmp) {
        for p in fa.keys().filter(|p| p.extension().is_some_and(|e| e == "svg")) {
            let id = p.to_string_lossy().replace('\\', "/");
            let line =
                dom.lines().find(|l| l.contains(&format!("FIG {id} "))).unwrap_or_else(|| panic!("{id} not rendered"));
            let field = |k: &str| -> f64 {
                let v = line.split(' ').find_map(|w| w.strip_prefix(&format!("{k}="))).unwrap();
                v.trim_end_matches("</pre>").parse().unwrap()
            };
            let svg = std::str::from_utf8(&fa[p]).unwrap();
            let data = svg.lines().filter(|l| l.contains(" class=\"d\"")).count() as f64;
            assert!(field("w") > 300.0 && field("h") > 200.0, "{line}");
            assert!(data > 0.0 && field("data") == data, "{line}: the SVG has {data} data elements");
            assert_eq!(field("drawn"), data, "{line}: data elements without a drawn box");
            assert_eq!(field("outside"), 0.0, "{line}: data drawn outside the plot area");
            assert_eq!(field("cut"), 0.0, "{line}: text outside the figure");
        }
    }
    assert!(
        !html.contains("http://")
            || html.matches("http://").count() == html.matches("xmlns=\"http://www.w3.org/2000/svg\"").count()
    );
    let _ = std::fs::remove_dir_all(&tmp);
}
