//! A small SVG chart writer: enough for the papers' figures, with no plotting dependency.
//! Deterministic output (fixed number formatting, no clock, no hash order).
//!
//! What it draws, and why (the figures must not mislead):
//! - lines, dashed lines (the paper's values), grey dashed reference lines (ratio = 1), shaded
//!   bands (the spread over seeds) and point clouds (scatter), each series in its own colour;
//!   scatter points are translucent and each point series has its own symbol (circle, square,
//!   triangle, diamond, cross), which the legend shows;
//! - axes that cover every point: a fixed (paper's) range is extended by data beyond it, never
//!   clipped; a categorical x axis (categories at x = 0, 1, ...) and a logarithmic x axis (for
//!   heavy-tailed CDFs, so that the bulk of the data is not squeezed against the origin);
//! - a legend beside the plot whose width follows its longest label, so no label is cut;
//! - one or more panels stacked in one SVG ([`panels_svg`]), for figures the paper splits.
//!
//! Every data element carries `class="d"`; the plot area of each panel is the `<rect>` with
//! `class="area"` before it. [`points_outside_axes`] reads these back to check a drawn figure.

use std::fmt::Write as _;

use headroom_core::stats::Sorted;

/// How a series is drawn.
#[derive(Clone, Debug, PartialEq)]
pub enum Mark {
    /// A solid line (with a dot per vertex when there are at most 40).
    Line,
    /// A dashed line in the series' colour (e.g. the paper's digitised values).
    Dashed,
    /// A grey dashed line (a reference such as ratio = 1 or the ideal estimate).
    Reference,
    /// Translucent point symbols, no line (a scatter).
    Points,
    /// A translucent band between the series' points (lower edge) and these (upper edge).
    Band { upper: Vec<(f64, f64)> },
}

/// One series of a chart.
#[derive(Clone, Debug)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    pub mark: Mark,
    /// Colour index (into the palette); the series' position when `None`, so that a band can
    /// take the colour of the line it surrounds.
    pub colour: Option<usize>,
}

impl Series {
    fn new(label: impl Into<String>, points: Vec<(f64, f64)>, mark: Mark) -> Series {
        Series { label: label.into(), points, mark, colour: None }
    }

    pub fn line(label: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series::new(label, points, Mark::Line)
    }

    pub fn dashed(label: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series::new(label, points, Mark::Dashed)
    }

    pub fn reference(label: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series::new(label, points, Mark::Reference)
    }

    pub fn points(label: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series::new(label, points, Mark::Points)
    }

    /// A band from `(x, low, high)` triples.
    pub fn band(label: impl Into<String>, spread: &[(f64, f64, f64)]) -> Series {
        let lower = spread.iter().map(|p| (p.0, p.1)).collect();
        let upper = spread.iter().map(|p| (p.0, p.2)).collect();
        Series::new(label, lower, Mark::Band { upper })
    }

    /// A band between two edges drawn point by point, e.g. the spread over seeds of a CDF
    /// (the lowest and the highest seed's value at each cumulative fraction).
    pub fn band_between(label: impl Into<String>, lower: Vec<(f64, f64)>, upper: Vec<(f64, f64)>) -> Series {
        Series::new(label, lower, Mark::Band { upper })
    }

    /// The spread over seeds of a CDF: at each cumulative fraction 2 %, 4 %, ..., 98 %, the
    /// lowest and the highest seed's value (the nearest order statistic of each seed's sorted
    /// sample), as a band. Seeds without values are left out.
    pub fn cdf_spread(label: impl Into<String>, per_seed: &[Sorted]) -> Series {
        let levels: Vec<f64> = (1..50).map(|i| f64::from(i) / 50.0).collect();
        let edge = |pick: fn(f64, f64) -> f64| -> Vec<(f64, f64)> {
            levels
                .iter()
                .map(|&q| (per_seed.iter().map(|t| t.quantile(q).unwrap_or(f64::NAN)).fold(f64::NAN, pick), q))
                .collect()
        };
        Series::band_between(label, edge(f64::min), edge(f64::max))
    }

    /// The same series in palette colour `k`.
    pub fn colour(mut self, k: usize) -> Series {
        self.colour = Some(k);
        self
    }

    /// Every (x, y) the series draws.
    fn all_points(&self) -> impl Iterator<Item = &(f64, f64)> {
        let upper: &[(f64, f64)] = match &self.mark {
            Mark::Band { upper } => upper,
            _ => &[],
        };
        self.points.iter().chain(upper).filter(|p| p.0.is_finite() && p.1.is_finite())
    }
}

/// The empirical CDF of a sorted sample as at most about 400 points `(value, (i + 1) / n)`
/// (every `n / 400`-th order statistic, the smallest first).
pub fn cdf_points(sorted: &Sorted) -> Vec<(f64, f64)> {
    let step = (sorted.len() / 400).max(1);
    sorted.iter().enumerate().step_by(step).map(|(i, t)| (*t, (i + 1) as f64 / sorted.len() as f64)).collect()
}

/// A chart (one panel) with axes, ticks, a legend and its series.
#[derive(Clone, Debug, Default)]
pub struct Chart {
    pub title: String,
    /// The x quantity with its unit, e.g. "time (s)".
    pub x_label: String,
    /// The y quantity with its unit, e.g. "estimate (Mb/s)".
    pub y_label: String,
    pub series: Vec<Series>,
    /// The y range to show (the paper's); computed from the data when `None`. Data beyond it
    /// extend the axis: no point is ever clipped.
    pub y_range: Option<(f64, f64)>,
    /// A categorical x axis: category `k` is drawn at x = k and labelled with this name.
    pub x_categories: Vec<String>,
    /// A logarithmic x axis (for positive data; x <= 0 is drawn at the axis' left edge and
    /// counted in a note on the panel).
    pub x_log: bool,
    /// Keep `y_range` even when data lie beyond it: such points are drawn on the plot area's
    /// edge with an open triangle pointing out, and a note on the panel counts them and gives
    /// the extreme value (for a few outliers that would squash the rest of the figure).
    pub y_mark_outside: bool,
}

const COLOURS: [&str; 8] = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
const GREY: &str = "#555555";
/// Point symbols, in the order point series take them.
const SYMBOLS: usize = 5;
/// Width and height of one panel's plot area, and the margins around it.
const PLOT_W: f64 = 520.0;
const PLOT_H: f64 = 365.0;
const LEFT: f64 = 75.0;
const PANEL_TOP: f64 = 30.0;
const PANEL_BOTTOM: f64 = 50.0;
/// A generous average glyph width of the 12 px sans-serif font (for the legend's width).
const CHAR_W: f64 = 7.2;

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
        let s = format!("{v:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// The 1-2-5 values of a decade at or below `v` (`up` false) or at or above it (`up` true).
fn one_two_five(v: f64, up: bool) -> f64 {
    let mag = 10f64.powf(v.log10().floor());
    let steps = [1.0, 2.0, 5.0, 10.0];
    if up {
        steps.iter().map(|s| s * mag).find(|c| *c >= v * (1.0 - 1e-12)).unwrap_or(10.0 * mag)
    } else {
        steps.iter().rev().map(|s| s * mag).find(|c| *c <= v * (1.0 + 1e-12)).unwrap_or(mag)
    }
}

fn esc(t: &str) -> String {
    t.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// An SVG path of point symbol `k` centred on (x, y); the path starts with `M x,y`.
fn symbol_path(k: usize, x: f64, y: f64) -> String {
    match k % SYMBOLS {
        0 => format!("M{x:.1},{y:.1}m-3,0a3,3 0 1,0 6,0a3,3 0 1,0 -6,0z"),
        1 => format!("M{x:.1},{y:.1}m-2.8,-2.8h5.6v5.6h-5.6z"),
        2 => format!("M{x:.1},{y:.1}m0,-3.6l3.2,5.6h-6.4z"),
        3 => format!("M{x:.1},{y:.1}m0,-3.8l3.8,3.8l-3.8,3.8l-3.8,-3.8z"),
        _ => format!("M{x:.1},{y:.1}m-3,-3l6,6m0,-6l-6,6"),
    }
}

/// The x and y ranges of a panel's axes (covering every point) and its tick positions.
struct Axes {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
    x_ticks: Vec<(f64, String)>,
    y_ticks: Vec<(f64, String)>,
    /// Points at x <= 0 on a logarithmic axis (drawn at its left edge).
    nonpositive_x: usize,
}

impl Chart {
    fn axes(&self) -> Axes {
        let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, 0.0f64, f64::MIN);
        let mut nonpositive_x = 0;
        for &(x, y) in self.series.iter().flat_map(|s| s.all_points()) {
            if self.x_log && x <= 0.0 {
                nonpositive_x += 1;
            } else {
                x0 = x0.min(x);
                x1 = x1.max(x);
            }
            y0 = y0.min(y);
            y1 = y1.max(y);
        }
        let empty = y1 == f64::MIN;
        // A fixed range is the paper's; data beyond it extend the axis instead of being
        // clipped (nothing is drawn outside the axes, and nothing silently at their edge).
        if let Some((a, b)) = self.y_range {
            (y0, y1) = if empty || self.y_mark_outside { (a, b) } else { (a.min(y0), b.max(y1)) };
        }
        if empty {
            y1 = y1.max(1.0);
        }
        if y1 <= y0 {
            y1 = y0 + 1.0;
        }
        let ystep = nice_step(y1 - y0);
        y0 = (y0 / ystep + 1e-9).floor() * ystep;
        y1 = (y1 / ystep - 1e-9).ceil() * ystep;
        let mut y_ticks = Vec::new();
        let mut k = 0;
        while y0 + k as f64 * ystep <= y1 + 1e-9 * ystep {
            let v = y0 + k as f64 * ystep;
            y_ticks.push((v, fmt_tick(v)));
            k += 1;
        }
        let mut x_ticks = Vec::new();
        if !self.x_categories.is_empty() {
            let n = self.x_categories.len() as f64;
            (x0, x1) = ((-0.5f64).min(x0 - 0.5), (n - 0.5).max(x1 + 0.5));
            x_ticks = self.x_categories.iter().enumerate().map(|(k, c)| (k as f64, c.clone())).collect();
        } else if self.x_log {
            if x0 > x1 {
                (x0, x1) = (1.0, 10.0);
            }
            (x0, x1) = (one_two_five(x0, false), one_two_five(x1, true));
            if x1 <= x0 {
                x1 = x0 * 10.0;
            }
            let decades = (x1 / x0).log10();
            let mults: &[f64] = if decades > 3.0 { &[1.0] } else { &[1.0, 2.0, 5.0] };
            let mut mag = 10f64.powf(x0.log10().floor());
            while mag <= x1 * (1.0 + 1e-9) {
                for m in mults {
                    let v = m * mag;
                    if v >= x0 * (1.0 - 1e-9) && v <= x1 * (1.0 + 1e-9) {
                        x_ticks.push((v, fmt_tick(v)));
                    }
                }
                mag *= 10.0;
            }
        } else {
            if x0 > x1 {
                (x0, x1) = (0.0, 1.0);
            }
            if x1 <= x0 {
                x1 = x0 + 1.0;
            }
            let xstep = nice_step(x1 - x0);
            let mut v = (x0 / xstep - 1e-9).ceil() * xstep;
            while v <= x1 + 1e-9 * xstep {
                x_ticks.push((v, fmt_tick(v)));
                v += xstep;
            }
        }
        Axes { x0, x1, y0, y1, x_ticks, y_ticks, nonpositive_x }
    }

    /// The widest legend label, in characters.
    fn legend_chars(&self) -> usize {
        self.series.iter().map(|s| s.label.chars().count()).max().unwrap_or(0)
    }

    /// Draws this panel with its plot area's top-left corner at (LEFT, `top`).
    fn draw(&self, s: &mut String, top: f64, legend_x: f64) {
        let ax = self.axes();
        let (l, t, r, b) = (LEFT, top, LEFT + PLOT_W, top + PLOT_H);
        let xv = |x: f64| {
            if self.x_log {
                (x.max(ax.x0).log10() - ax.x0.log10()) / (ax.x1.log10() - ax.x0.log10())
            } else {
                (x - ax.x0) / (ax.x1 - ax.x0)
            }
        };
        let px = |x: f64| l + xv(x) * PLOT_W;
        // Only with `y_mark_outside` can a y lie beyond the axis; it is drawn on the edge and
        // marked below.
        let py = |y: f64| b - ((y.clamp(ax.y0, ax.y1) - ax.y0) / (ax.y1 - ax.y0)) * PLOT_H;
        if !self.title.is_empty() {
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="13">{}</text>"#,
                (l + r) / 2.0,
                t - 9.0,
                esc(&self.title)
            );
        }
        for (v, label) in &ax.y_ticks {
            let y = py(*v);
            let _ = writeln!(
                s,
                r##"<line x1="{l:.1}" x2="{r:.1}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                l - 6.0,
                y + 4.0,
                esc(label)
            );
        }
        for (v, label) in &ax.x_ticks {
            let x = px(*v);
            let _ = writeln!(
                s,
                r##"<line x1="{x:.1}" x2="{x:.1}" y1="{t:.1}" y2="{b:.1}" stroke="#eee"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                b + 16.0,
                esc(label)
            );
        }
        let _ = writeln!(
            s,
            r#"<rect class="area" x="{l:.1}" y="{t:.1}" width="{PLOT_W:.1}" height="{PLOT_H:.1}" fill="none" stroke="black"/>"#
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            (l + r) / 2.0,
            b + 36.0,
            esc(&self.x_label)
        );
        let _ = writeln!(
            s,
            r#"<text transform="translate(18 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
            (t + b) / 2.0,
            esc(&self.y_label)
        );
        if ax.nonpositive_x > 0 {
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" font-size="11">{} point(s) at x &lt;= 0 drawn at the left edge</text>"#,
                l + 6.0,
                t + 14.0,
                ax.nonpositive_x
            );
        }
        let fmt = |p: &(f64, f64)| format!("{:.1},{:.1}", px(p.0), py(p.1));
        let finite = |p: &&(f64, f64)| p.0.is_finite() && p.1.is_finite();
        let mut symbol = 0;
        // Bands first, so that lines and points lie on top of them.
        let order = self
            .series
            .iter()
            .enumerate()
            .filter(|(_, se)| matches!(se.mark, Mark::Band { .. }))
            .chain(self.series.iter().enumerate().filter(|(_, se)| !matches!(se.mark, Mark::Band { .. })));
        let mut legend = vec![String::new(); self.series.len()];
        for (i, se) in order {
            let c = match se.mark {
                Mark::Reference => GREY,
                _ => COLOURS[se.colour.unwrap_or(i) % COLOURS.len()],
            };
            let coords: Vec<String> = se.points.iter().filter(finite).map(fmt).collect();
            let ly = t + 16.0 + 18.0 * i as f64;
            let (k0, k1) = (legend_x, legend_x + 22.0);
            let key = match &se.mark {
                Mark::Line | Mark::Dashed | Mark::Reference => {
                    let dash = match se.mark {
                        Mark::Line => "",
                        Mark::Dashed => r#" stroke-dasharray="6 3""#,
                        _ => r#" stroke-dasharray="3 3""#,
                    };
                    if coords.len() > 1 {
                        let _ = writeln!(
                            s,
                            r#"<polyline class="d" fill="none" stroke="{c}" stroke-width="1.6"{dash} points="{}"/>"#,
                            coords.join(" ")
                        );
                    }
                    let dots = se.mark == Mark::Line && coords.len() <= 40;
                    for p in coords.iter().filter(|_| dots || coords.len() == 1) {
                        let (cx, cy) = p.split_once(',').unwrap_or(("0", "0"));
                        let _ = writeln!(s, r#"<circle class="d" cx="{cx}" cy="{cy}" r="2.6" fill="{c}"/>"#);
                    }
                    format!(
                        r#"<line x1="{k0:.1}" x2="{k1:.1}" y1="{ly:.1}" y2="{ly:.1}" stroke="{c}" stroke-width="2.5"{dash}/>"#
                    )
                }
                Mark::Points => {
                    let k = symbol;
                    symbol += 1;
                    let paint = if k % SYMBOLS == 4 {
                        format!(r#"fill="none" stroke="{c}" stroke-width="1.3" stroke-opacity="0.6""#)
                    } else {
                        format!(
                            r#"fill="{c}" fill-opacity="0.45" stroke="{c}" stroke-opacity="0.8" stroke-width="0.6""#
                        )
                    };
                    for p in se.points.iter().filter(finite) {
                        let _ = writeln!(s, r#"<path class="d" d="{}" {paint}/>"#, symbol_path(k, px(p.0), py(p.1)));
                    }
                    format!(r#"<path d="{}" {paint}/>"#, symbol_path(k, (k0 + k1) / 2.0, ly))
                }
                Mark::Band { upper } => {
                    let up: Vec<String> = upper.iter().filter(finite).rev().map(fmt).collect();
                    if !coords.is_empty() {
                        let _ = writeln!(
                            s,
                            r#"<polygon class="d" fill="{c}" fill-opacity="0.18" stroke="none" points="{} {}"/>"#,
                            coords.join(" "),
                            up.join(" ")
                        );
                    }
                    format!(
                        r#"<rect x="{k0:.1}" y="{:.1}" width="22" height="10" fill="{c}" fill-opacity="0.18"/>"#,
                        ly - 5.0
                    )
                }
            };
            legend[i] = format!(r#"{key}<text x="{:.1}" y="{:.1}">{}</text>"#, k1 + 6.0, ly + 4.0, esc(&se.label));
        }
        for line in legend {
            let _ = writeln!(s, "{line}");
        }
        self.mark_outside(s, &ax, &px, &py, t);
    }

    /// The marks and the note for points beyond a kept y range (see `y_mark_outside`).
    fn mark_outside(&self, s: &mut String, ax: &Axes, px: &dyn Fn(f64) -> f64, py: &dyn Fn(f64) -> f64, t: f64) {
        let (mut above, mut below) = (Vec::new(), Vec::new());
        for (i, se) in self.series.iter().enumerate() {
            let c = COLOURS[se.colour.unwrap_or(i) % COLOURS.len()];
            for &(x, y) in se.all_points() {
                if y > ax.y1 {
                    above.push(y);
                    let (cx, cy) = (px(x), py(y));
                    let _ = writeln!(
                        s,
                        r#"<path class="d" d="M{cx:.1},{cy:.1}m0,0l4,7h-8z" fill="white" stroke="{c}" stroke-width="1.2"/>"#
                    );
                } else if y < ax.y0 {
                    below.push(y);
                    let (cx, cy) = (px(x), py(y));
                    let _ = writeln!(
                        s,
                        r#"<path class="d" d="M{cx:.1},{cy:.1}m0,0l4,-7h-8z" fill="white" stroke="{c}" stroke-width="1.2"/>"#
                    );
                }
            }
        }
        let mut notes = Vec::new();
        if let Some(max) = above.iter().copied().reduce(f64::max) {
            notes.push(format!(
                "{} point(s) above {} drawn on the top edge (max {max:.1})",
                above.len(),
                fmt_tick(ax.y1)
            ));
        }
        if let Some(min) = below.iter().copied().reduce(f64::min) {
            notes.push(format!(
                "{} point(s) below {} drawn on the bottom edge (min {min:.1})",
                below.len(),
                fmt_tick(ax.y0)
            ));
        }
        for (k, n) in notes.iter().enumerate() {
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" font-size="11">{}</text>"#,
                LEFT + 6.0,
                t + 28.0 + 13.0 * k as f64,
                esc(n)
            );
        }
    }

    /// The chart as an SVG document (one panel).
    pub fn to_svg(&self) -> String {
        let mut panel = self.clone();
        let title = std::mem::take(&mut panel.title);
        panels_svg(&title, &[panel])
    }
}

/// Several charts as panels of one SVG figure, stacked top to bottom under `title`, with one
/// legend width (the widest panel's) so that their plot areas line up.
pub fn panels_svg(title: &str, panels: &[Chart]) -> String {
    let legend_chars = panels.iter().map(Chart::legend_chars).max().unwrap_or(0);
    let legend_x = LEFT + PLOT_W + 12.0;
    let w = (legend_x + 28.0 + CHAR_W * legend_chars as f64 + 10.0).max(LEFT + PLOT_W + 30.0).ceil();
    let head = 34.0;
    let panel_h = PANEL_TOP + PLOT_H + PANEL_BOTTOM;
    let h = head + panel_h * panels.len() as f64;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(s, r#"<text x="{:.1}" y="22" text-anchor="middle" font-size="15">{}</text>"#, w / 2.0, esc(title));
    for (k, p) in panels.iter().enumerate() {
        p.draw(&mut s, head + PANEL_TOP + panel_h * k as f64, legend_x);
    }
    s.push_str("</svg>\n");
    s
}

/// One attribute's value on one SVG line.
fn attr<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    line.split(&format!(" {name}=\"")).nth(1).and_then(|r| r.split('"').next())
}

/// The drawn coordinates of an SVG written by this module that lie outside their panel's plot
/// area (line vertices, markers, band corners); `Err` when the SVG is not one of ours (a data
/// element before any plot area, or one that cannot be read).
pub fn points_outside_axes(svg: &str) -> Result<Vec<(f64, f64)>, String> {
    let num = |line: &str, name: &str| -> Result<f64, String> {
        attr(line, name).and_then(|v| v.parse().ok()).ok_or_else(|| format!("no number `{name}` in {line}"))
    };
    let pair = |p: &str| -> Result<(f64, f64), String> {
        let (a, b) = p.split_once(',').ok_or_else(|| format!("bad point `{p}`"))?;
        Ok((a.parse().map_err(|_| format!("bad x `{p}`"))?, b.parse().map_err(|_| format!("bad y `{p}`"))?))
    };
    let mut area: Option<(f64, f64, f64, f64)> = None;
    let mut outside = Vec::new();
    for line in svg.lines() {
        if line.starts_with("<rect class=\"area\"") {
            let (x, y) = (num(line, "x")?, num(line, "y")?);
            area = Some((x, y, x + num(line, "width")?, y + num(line, "height")?));
            continue;
        }
        if !line.contains(" class=\"d\"") {
            continue;
        }
        let (x0, y0, x1, y1) = area.ok_or_else(|| format!("data before any plot area: {line}"))?;
        let mut drawn = Vec::new();
        if line.starts_with("<circle") {
            drawn.push((num(line, "cx")?, num(line, "cy")?));
        } else if line.starts_with("<path") {
            let d = attr(line, "d").ok_or("path without d")?;
            let centre = d.strip_prefix('M').and_then(|r| r.split('m').next()).ok_or("path not starting with M")?;
            drawn.push(pair(centre)?);
        } else if line.starts_with("<polyline") || line.starts_with("<polygon") {
            for p in attr(line, "points").ok_or("no points")?.split(' ') {
                drawn.push(pair(p)?);
            }
        } else {
            return Err(format!("unknown data element: {line}"));
        }
        outside.extend(drawn.into_iter().filter(|&(px, py)| !((x0..=x1).contains(&px) && (y0..=y1).contains(&py))));
    }
    Ok(outside)
}

/// The number of data elements (`class="d"`) of an SVG written by this module.
#[cfg(test)]
fn data_elements(svg: &str) -> usize {
    svg.lines().filter(|l| l.contains(" class=\"d\"")).count()
}

/// The number of bands (drawn as `<polygon class="d"`) of an SVG written by this module.
#[cfg(test)]
pub(crate) fn bands(svg: &str) -> usize {
    svg.lines().filter(|l| l.starts_with("<polygon class=\"d\"")).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(series: Vec<Series>) -> Chart {
        Chart {
            title: "t".into(),
            x_label: "time (s)".into(),
            y_label: "rate (Mb/s)".into(),
            series,
            ..Default::default()
        }
    }

    #[test]
    fn svg_has_one_polyline_per_line_and_escapes_labels() {
        let mut c = chart(vec![
            Series::line("one", vec![(0.0, 1.0), (1.0, 2.0)]),
            Series::line("two", vec![(0.0, 3.0), (1.0, 0.5)]),
        ]);
        c.title = "a < b".into();
        let svg = c.to_svg();
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("a &lt; b"));
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert_eq!(svg, c.to_svg(), "deterministic");
    }

    #[test]
    fn data_beyond_a_fixed_range_extend_the_axis_and_stay_inside_it() {
        let mut c = chart(vec![
            Series::line("line", vec![(0.0, 10.0), (1.0, 474.0)]),
            Series::points("dots", vec![(0.5, -3.0), (0.7, 86.0)]),
        ]);
        c.y_range = Some((0.0, 120.0));
        let svg = c.to_svg();
        assert_eq!(data_elements(&svg), 1 + 2 + 2, "{svg}");
        assert_eq!(points_outside_axes(&svg), Ok(vec![]));
        // The check sees a point drawn outside.
        let moved = svg.replacen("<path class=\"d\" d=\"M", "<path class=\"d\" d=\"M9", 1);
        assert_eq!(points_outside_axes(&moved).unwrap().len(), 1);
        let moved = svg.replacen("<circle class=\"d\" cx=\"", "<circle class=\"d\" cx=\"9", 1);
        assert_eq!(points_outside_axes(&moved).unwrap().len(), 1);
        // The top tick covers 474 (the axis was extended, not the point clamped to 120), and
        // the bottom one -3.
        assert!(svg.contains(">500</text>"), "{svg}");
        assert!(svg.contains(">-100</text>"), "{svg}");
    }

    #[test]
    fn a_kept_range_marks_the_points_beyond_it() {
        let mut c = chart(vec![Series::line("estimate", vec![(0.0, 10.0), (1.0, 474.0), (2.0, 30.0)])]);
        c.y_range = Some((0.0, 120.0));
        c.y_mark_outside = true;
        let svg = c.to_svg();
        assert!(svg.contains(">120</text>") && !svg.contains(">500</text>"), "{svg}");
        assert!(svg.contains("1 point(s) above 120 drawn on the top edge (max 474.0)"), "{svg}");
        assert_eq!(svg.matches("l4,7h-8z").count(), 1);
        assert_eq!(points_outside_axes(&svg), Ok(vec![]));
    }

    #[test]
    fn a_band_beyond_a_kept_range_stays_on_the_plot_area_and_is_marked() {
        let mut c = chart(vec![
            Series::band("spread", &[(10.0, 1.0, 1.5), (20.0, 2.0, 8.5), (30.0, 0.5, 1.2)]).colour(0),
            Series::line("mean", vec![(10.0, 1.2), (20.0, 4.0), (30.0, 0.9)]).colour(0),
            Series::reference("goal: 1.05", vec![(10.0, 1.05), (30.0, 1.05)]),
        ]);
        c.y_range = Some((0.8, 2.0));
        c.y_mark_outside = true;
        let svg = c.to_svg();
        assert_eq!(bands(&svg), 1);
        assert_eq!(points_outside_axes(&svg), Ok(vec![]));
        // Above: the band's 8.5 and the line's 4; below: the band's 0.5.
        assert!(svg.contains("2 point(s) above 2 drawn on the top edge (max 8.5)"), "{svg}");
        assert!(svg.contains("1 point(s) below 0.8 drawn on the bottom edge (min 0.5)"), "{svg}");
    }

    #[test]
    fn the_spread_of_cdfs_runs_from_the_lowest_to_the_highest_seed() {
        let seeds: Vec<Sorted> = vec![
            (1..=100).map(f64::from).collect(),
            (1..=100).map(|i| f64::from(i) * 2.0).collect(),
            Sorted::new(Vec::new()),
        ];
        let band = Series::cdf_spread("spread", &seeds);
        let Mark::Band { upper } = &band.mark else { panic!("not a band") };
        assert_eq!(band.points.len(), 49);
        // At each fraction q the lower edge is the first seed's, the upper the second's; the
        // seed without values is left out.
        for ((lo, hi), k) in band.points.iter().zip(upper).zip(1..) {
            let q = f64::from(k) / 50.0;
            assert_eq!((lo.1, hi.1), (q, q));
            assert_eq!(lo.0, seeds[0].quantile(q).unwrap());
            assert_eq!(hi.0, seeds[1].quantile(q).unwrap());
        }
        let pts = cdf_points(&(1..=1000).map(f64::from).collect());
        assert_eq!((pts.len(), pts[0], pts[1]), (500, (1.0, 0.001), (3.0, 0.003)));
    }

    #[test]
    fn point_series_get_their_own_symbols_in_the_plot_and_the_legend() {
        let c = chart(vec![
            Series::points("a", vec![(1.0, 1.0), (2.0, 2.0)]),
            Series::points("b", vec![(1.0, 2.0)]),
            Series::reference("ideal", vec![(0.0, 0.0), (3.0, 3.0)]),
        ]);
        let svg = c.to_svg();
        let circle = symbol_path(0, 0.0, 0.0);
        let square = symbol_path(1, 0.0, 0.0);
        let tail = |p: &str| p.split_once('m').unwrap().1.to_string();
        // Two circles and a square in the plot, one of each in the legend.
        assert_eq!(svg.matches(&tail(&circle)).count(), 3, "{svg}");
        assert_eq!(svg.matches(&tail(&square)).count(), 2, "{svg}");
        assert!(svg.contains("fill-opacity=\"0.45\""));
        assert!(svg.contains("stroke-dasharray=\"3 3\"") && svg.contains(GREY));
    }

    #[test]
    fn the_legend_is_as_wide_as_its_longest_label() {
        let short = chart(vec![Series::line("a", vec![(0.0, 1.0), (1.0, 2.0)])]).to_svg();
        let label = "ImTCP (reno), 5 seeds pooled, a long label";
        let long = chart(vec![Series::line(label, vec![(0.0, 1.0), (1.0, 2.0)])]).to_svg();
        let width = |svg: &str| attr(svg.lines().next().unwrap(), "width").unwrap().parse::<f64>().unwrap();
        let text_x: f64 = long
            .lines()
            .find(|l| l.contains(label))
            .and_then(|l| l.split("<text x=\"").nth(1))
            .and_then(|r| r.split('"').next())
            .unwrap()
            .parse()
            .unwrap();
        assert!(width(&long) >= text_x + CHAR_W * label.len() as f64, "{long}");
        assert!(width(&long) > width(&short));
    }

    #[test]
    fn categories_bands_and_log_axes() {
        let mut c = chart(vec![
            Series::band("spread", &[(0.0, 1.0, 3.0), (1.0, 2.0, 4.0), (2.0, 0.5, 2.5)]).colour(0),
            Series::line("mean", vec![(0.0, 2.0), (1.0, 3.0), (2.0, 1.5)]),
        ]);
        c.x_categories = vec!["40 ms".into(), "adaptive".into(), "10 ms".into()];
        let svg = c.to_svg();
        assert!(svg.contains(">40 ms</text>") && svg.contains(">adaptive</text>"), "{svg}");
        assert_eq!(svg.matches("<polygon class=\"d\"").count(), 1);
        assert_eq!(points_outside_axes(&svg), Ok(vec![]));
        // The band is drawn before (under) the line, in the line's colour.
        assert!(svg.find("<polygon").unwrap() < svg.find("<polyline").unwrap());
        assert!(svg.contains(&format!("<polygon class=\"d\" fill=\"{}\"", COLOURS[0])));

        let mut c = chart(vec![Series::line("cdf", vec![(0.18, 0.01), (0.7, 0.5), (11.2, 1.0)])]);
        c.x_log = true;
        let svg = c.to_svg();
        for t in [">0.1</text>", ">1</text>", ">10</text>", ">20</text>"] {
            assert!(svg.contains(t), "{t}: {svg}");
        }
        assert!(!svg.contains(">50</text>"));
        assert_eq!(points_outside_axes(&svg), Ok(vec![]));
        c.series[0].points.push((0.0, 0.0));
        assert!(c.to_svg().contains("1 point(s) at x &lt;= 0"));
    }

    #[test]
    fn panels_are_checked_against_their_own_plot_area() {
        let a = chart(vec![Series::line("a", vec![(0.0, 1.0), (1.0, 2.0)])]);
        let b = chart(vec![Series::points("b", vec![(0.0, 100.0), (1.0, 200.0)])]);
        let svg = panels_svg("two", &[a, b]);
        assert_eq!(svg.matches("<rect class=\"area\"").count(), 2);
        assert_eq!(points_outside_axes(&svg), Ok(vec![]));
        // A point of the second panel moved into the first panel's area is outside its own.
        let first_area_y: f64 =
            attr(svg.lines().find(|l| l.starts_with("<rect class")).unwrap(), "y").unwrap().parse().unwrap();
        let line = svg.lines().find(|l| l.starts_with("<path class=\"d\"")).unwrap();
        let d = attr(line, "d").unwrap();
        let (x, _) = d[1..].split('m').next().unwrap().split_once(',').unwrap();
        let moved = svg.replace(d, &format!("M{x},{:.1}m0,0", first_area_y + 10.0));
        assert_eq!(points_outside_axes(&moved).unwrap().len(), 1);
        assert!(points_outside_axes("<svg>\n<circle class=\"d\" cx=\"1\" cy=\"1\"/>\n</svg>").is_err());
    }
}
