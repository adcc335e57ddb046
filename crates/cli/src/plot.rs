//! A small SVG line chart: enough for the papers' figures (several series against one x axis),
//! with no plotting dependency. Deterministic output (fixed number formatting).

use std::fmt::Write as _;

/// One line (or set of markers) of a chart.
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// Draw markers only, no line (scatter).
    pub markers_only: bool,
}

/// A chart with axes, ticks, a legend and its series.
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// The y range to show (the paper's); computed from the data when `None`. Data beyond it
    /// extend the axis: no point is ever clipped.
    pub y_range: Option<(f64, f64)>,
}

const COLOURS: [&str; 8] = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

fn nice_step(span: f64) -> f64 {
    let raw = span / 6.0;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let step = if norm < 1.5 {
        1.0
    } else if norm < 3.0 {
        2.0
    } else if norm < 7.0 {
        5.0
    } else {
        10.0
    };
    step * mag
}

fn fmt_tick(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e9 {
        format!("{}", v as i64)
    } else {
        format!("{v:.2}").trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

impl Chart {
    /// The chart as an SVG document.
    pub fn to_svg(&self) -> String {
        let (w, h) = (760.0, 460.0);
        let (l, r, t, b) = (70.0, 170.0, 40.0, 55.0);
        let pts = self.series.iter().flat_map(|s| s.points.iter()).filter(|p| p.0.is_finite() && p.1.is_finite());
        let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, 0.0f64, f64::MIN);
        for &(x, y) in pts {
            x0 = x0.min(x);
            x1 = x1.max(x);
            y0 = y0.min(y);
            y1 = y1.max(y);
        }
        // A fixed range is the paper's; data beyond it extend the axis instead of being
        // clipped (nothing is drawn outside the axes, and nothing silently at their edge).
        if let Some((a, bb)) = self.y_range {
            (y0, y1) = if x0 > x1 { (a, bb) } else { (a.min(y0), bb.max(y1)) };
        }
        if x0 > x1 {
            (x0, x1, y1) = (0.0, 1.0, y1.max(1.0));
        }
        if x1 <= x0 {
            x1 = x0 + 1.0;
        }
        if y1 <= y0 {
            y1 = y0 + 1.0;
        }
        let ystep = nice_step(y1 - y0);
        y1 = (y1 / ystep).ceil() * ystep;
        let xstep = nice_step(x1 - x0);
        let px = |x: f64| l + (x - x0) / (x1 - x0) * (w - l - r);
        let py = |y: f64| h - b - (y - y0) / (y1 - y0) * (h - t - b);
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
            (l + w - r) / 2.0,
            esc(&self.title)
        );
        // Grid and ticks.
        let mut y = (y0 / ystep).ceil() * ystep;
        while y <= y1 + 1e-9 {
            let _ = writeln!(
                s,
                r##"<line x1="{l}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                w - r,
                py(y),
                py(y),
                l - 6.0,
                py(y) + 4.0,
                fmt_tick(y)
            );
            y += ystep;
        }
        let mut x = (x0 / xstep).ceil() * xstep;
        while x <= x1 + 1e-9 {
            let _ = writeln!(
                s,
                r##"<line x1="{:.1}" x2="{:.1}" y1="{t}" y2="{:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                px(x),
                px(x),
                h - b,
                px(x),
                h - b + 16.0,
                fmt_tick(x)
            );
            x += xstep;
        }
        let _ = writeln!(
            s,
            r#"<rect x="{l}" y="{t}" width="{:.1}" height="{:.1}" fill="none" stroke="black"/>"#,
            w - l - r,
            h - t - b
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            (l + w - r) / 2.0,
            h - 14.0,
            esc(&self.x_label)
        );
        let _ = writeln!(
            s,
            r#"<text transform="translate(18 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
            (t + h - b) / 2.0,
            esc(&self.y_label)
        );
        for (i, se) in self.series.iter().enumerate() {
            let c = COLOURS[i % COLOURS.len()];
            let coords: Vec<String> = se
                .points
                .iter()
                .filter(|p| p.0.is_finite() && p.1.is_finite())
                .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
                .collect();
            if !se.markers_only && coords.len() > 1 {
                let _ = writeln!(
                    s,
                    r#"<polyline fill="none" stroke="{c}" stroke-width="1.6" points="{}"/>"#,
                    coords.join(" ")
                );
            }
            if se.markers_only || se.points.len() <= 40 {
                for p in &coords {
                    let (cx, cy) = p.split_once(',').unwrap_or(("0", "0"));
                    let _ = writeln!(s, r#"<circle cx="{cx}" cy="{cy}" r="2.6" fill="{c}"/>"#);
                }
            }
            let ly = t + 16.0 + 18.0 * i as f64;
            let _ = writeln!(
                s,
                r#"<line x1="{:.1}" x2="{:.1}" y1="{ly:.1}" y2="{ly:.1}" stroke="{c}" stroke-width="3"/><text x="{:.1}" y="{:.1}">{}</text>"#,
                w - r + 10.0,
                w - r + 30.0,
                w - r + 35.0,
                ly + 4.0,
                esc(&se.label)
            );
        }
        s.push_str("</svg>\n");
        s
    }
}

/// One attribute's value on one SVG line.
fn attr<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    line.split(&format!(" {name}=\"")).nth(1).and_then(|r| r.split('"').next())
}

/// The drawn coordinates of an SVG written by [`Chart::to_svg`] that lie outside its plot area
/// (markers and line vertices); `Err` when the SVG is not one of ours.
pub fn points_outside_axes(svg: &str) -> Result<Vec<(f64, f64)>, String> {
    let num = |line: &str, name: &str| -> Result<f64, String> {
        attr(line, name).and_then(|v| v.parse().ok()).ok_or_else(|| format!("no number `{name}` in {line}"))
    };
    let area = svg.lines().find(|l| l.starts_with("<rect x=")).ok_or("no plot area")?;
    let (x, y) = (num(area, "x")?, num(area, "y")?);
    let (x1, y1) = (x + num(area, "width")?, y + num(area, "height")?);
    let mut drawn = Vec::new();
    for line in svg.lines() {
        if line.starts_with("<circle") {
            drawn.push((num(line, "cx")?, num(line, "cy")?));
        } else if line.starts_with("<polyline") {
            for p in attr(line, "points").ok_or("polyline without points")?.split(' ') {
                let (a, b) = p.split_once(',').ok_or("bad point")?;
                drawn.push((a.parse().map_err(|_| "bad x")?, b.parse().map_err(|_| "bad y")?));
            }
        }
    }
    if drawn.is_empty() {
        return Ok(Vec::new());
    }
    Ok(drawn.into_iter().filter(|&(px, py)| !((x..=x1).contains(&px) && (y..=y1).contains(&py))).collect())
}

fn esc(t: &str) -> String {
    t.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svg_has_one_polyline_per_series_and_escapes_labels() {
        let c = Chart {
            title: "a < b".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            series: vec![
                Series { label: "one".into(), points: vec![(0.0, 1.0), (1.0, 2.0)], markers_only: false },
                Series { label: "two".into(), points: vec![(0.0, 3.0), (1.0, 0.5)], markers_only: false },
            ],
            y_range: None,
        };
        let svg = c.to_svg();
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("a &lt; b"));
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
    }

    #[test]
    fn data_beyond_a_fixed_range_extend_the_axis_and_stay_inside_it() {
        let c = Chart {
            title: "t".into(),
            x_label: "time (s)".into(),
            y_label: "Mb/s".into(),
            series: vec![
                Series { label: "line".into(), points: vec![(0.0, 10.0), (1.0, 474.0)], markers_only: false },
                Series { label: "dots".into(), points: vec![(0.5, -3.0), (0.7, 86.0)], markers_only: true },
            ],
            y_range: Some((0.0, 120.0)),
        };
        let svg = c.to_svg();
        assert_eq!(svg.matches("<circle").count(), 2 + 2, "{svg}");
        assert_eq!(points_outside_axes(&svg), Ok(vec![]));
        // The check sees a point drawn outside.
        let moved = svg.replacen("<circle cx=\"", "<circle cx=\"9", 1);
        assert_eq!(points_outside_axes(&moved).unwrap().len(), 1);
        // The top tick covers 474 (the axis was extended, not the point clamped to 120).
        assert!(svg.contains(">500</text>"), "{svg}");
    }
}
