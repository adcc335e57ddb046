//! `headroom probe HOST --watch`: the live view of continuous monitoring (issue 19).
//!
//! The PathQuick paper shows its implementation's estimation screen (§4.4.3, Fig. 7) without
//! describing it; this view draws what a user watching a path needs, in a terminal (so it works
//! over SSH), redrawn after every estimate and at least every [`REDRAW`]:
//!
//! * a header: the server, the method, the latest verdict and its cost (time per estimate,
//!   trains, handshake), and a token-bucket shaper when one was read;
//! * a chart over the monitoring time (s) of the **estimate** (Mbit/s, a line through the
//!   estimates), the **probed range** of each estimate (its lower and upper edge), and the
//!   **bounds**: an estimate above the probed range is drawn at its `at least` rate and one below
//!   it at its `at most` rate, as separate point series, so a bound is never mistaken for an
//!   estimate. The y axis runs from 0 to a rounded value above every drawn point
//!   ([`WatchHistory::y_top`]): nothing is clipped;
//! * a table of the latest estimates, newest first, with failures (a silent server, a refusal)
//!   in it as well;
//! * the keys: `q`, Esc or Ctrl-C end monitoring after the estimate under way.
//!
//! The terminal is put in raw mode on the alternate screen and restored on every exit (end of
//! `--count`, a key, an error, a signal, a panic: [`TerminalGuard`]); afterwards the last
//! estimate's plain line and a summary are printed on the normal screen, so the session leaves a
//! record in the scroll-back. `--watch` needs a terminal on stdout; for a monitoring system use
//! `--json-stream`.
//!
//! The drawing is split from the terminal: [`WatchHistory`] holds what was measured and
//! [`draw`] renders it on any ratatui backend, which the tests use to check the screen.

use headroom_core::abw::Outcome;
use headroom_core::units::Rate;
use headroom_net::Estimate;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::crossterm::terminal::{disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen};
use ratatui::crossterm::{cursor, execute};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Block, Borders, Cell, Chart, Dataset, GraphType, Paragraph, Row, Table};
use ratatui::Frame;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// The longest time between two redraws while waiting for the next estimate.
pub const REDRAW: Duration = Duration::from_millis(250);

fn mbps(r: Rate) -> f64 {
    r.bps() as f64 / 1e6
}

/// What one estimate said, reduced to what the view draws.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// The available bandwidth, Mbit/s.
    Estimate(f64),
    /// Above the probed range: at least this, Mbit/s.
    AtLeast(f64),
    /// Below the probed range: at most this, Mbit/s.
    AtMost(f64),
    /// A train was judged but gave no answer, and why.
    Inconclusive(String),
    /// The estimate failed (no answer from the server, a refusal), and why.
    Failed(String),
}

impl Verdict {
    pub fn of(o: &Outcome) -> Verdict {
        match o {
            Outcome::Estimate(r) => Verdict::Estimate(mbps(*r)),
            Outcome::AboveRange { at_least } => Verdict::AtLeast(mbps(*at_least)),
            Outcome::BelowRange { at_most } => Verdict::AtMost(mbps(*at_most)),
            Outcome::Inconclusive { reason } => Verdict::Inconclusive(reason.to_string()),
        }
    }

    /// The rate the chart draws it at, Mbit/s; `None` when there is nothing to draw.
    pub fn rate(&self) -> Option<f64> {
        match *self {
            Verdict::Estimate(r) | Verdict::AtLeast(r) | Verdict::AtMost(r) => Some(r),
            Verdict::Inconclusive(_) | Verdict::Failed(_) => None,
        }
    }

    /// How the table and the header say it.
    pub fn describe(&self) -> String {
        match self {
            Verdict::Estimate(r) => format!("{r:.2} Mbit/s"),
            Verdict::AtLeast(r) => format!("above range: ≥ {r:.2} Mbit/s"),
            Verdict::AtMost(r) => format!("below range: ≤ {r:.2} Mbit/s"),
            Verdict::Inconclusive(why) => format!("inconclusive: {why}"),
            Verdict::Failed(why) => format!("failed: {why}"),
        }
    }
}

/// One point of the history.
#[derive(Clone, Debug, PartialEq)]
pub struct WatchPoint {
    /// Seconds since monitoring started, when the estimate was ready.
    pub at_s: f64,
    pub seq: u64,
    pub verdict: Verdict,
    /// The probed range, Mbit/s (`None` for a failed estimate).
    pub probed: Option<(f64, f64)>,
    /// Time per estimate (handshake included), ms.
    pub elapsed_ms: f64,
}

/// Everything measured so far, and the header's facts.
#[derive(Clone, Debug)]
pub struct WatchHistory {
    pub server: String,
    pub method: String,
    pub points: Vec<WatchPoint>,
    /// The latest estimate's cost and extras, for the header.
    pub last_detail: String,
    /// Seconds since monitoring started, at the last redraw (the chart's x axis reaches it).
    pub now_s: f64,
}

impl WatchHistory {
    pub fn new(server: &str, method: &str) -> WatchHistory {
        WatchHistory {
            server: server.to_string(),
            method: method.to_string(),
            points: Vec::new(),
            last_detail: String::new(),
            now_s: 0.0,
        }
    }

    pub fn push_estimate(&mut self, at_s: f64, seq: u64, e: &Estimate) {
        let shaper = e.shaper.map_or(String::new(), |sh| {
            format!(" | shaper: rate {:.2} Mbit/s, burst {:.1} KB", mbps(sh.rate), sh.burst.0 as f64 / 1e3)
        });
        self.last_detail = format!(
            "{:.1} ms per estimate, {} train{}, handshake {}{shaper}",
            e.elapsed.as_secs_f64() * 1e3,
            e.quality.trains,
            if e.quality.trains == 1 { "" } else { "s" },
            e.handshake.name()
        );
        self.server = e.server.to_string();
        self.points.push(WatchPoint {
            at_s,
            seq,
            verdict: Verdict::of(&e.outcome),
            probed: Some((mbps(e.probed_range.0), mbps(e.probed_range.1))),
            elapsed_ms: e.elapsed.as_secs_f64() * 1e3,
        });
        self.now_s = self.now_s.max(at_s);
    }

    pub fn push_failure(&mut self, at_s: f64, seq: u64, why: String) {
        self.points.push(WatchPoint { at_s, seq, verdict: Verdict::Failed(why), probed: None, elapsed_ms: 0.0 });
        self.now_s = self.now_s.max(at_s);
    }

    /// The chart's x range, s: from the start to now, at least 10 s wide.
    pub fn x_range(&self) -> (f64, f64) {
        let last = self.points.iter().map(|p| p.at_s).fold(self.now_s, f64::max);
        (0.0, last.max(10.0))
    }

    /// The chart's y top, Mbit/s: the next 1-2-5 step above every drawn value (estimates,
    /// bounds and probed-range edges) with 5 % room, so no point is drawn on or past the top.
    pub fn y_top(&self) -> f64 {
        let highest = self
            .points
            .iter()
            .flat_map(|p| p.verdict.rate().into_iter().chain(p.probed.map(|(_, hi)| hi)))
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max);
        nice_ceiling(highest * 1.05).max(1.0)
    }

    /// The chart's series: (estimates, at-least bounds, at-most bounds, range lows, range highs).
    #[allow(clippy::type_complexity)]
    pub fn series(&self) -> (Vec<(f64, f64)>, Vec<(f64, f64)>, Vec<(f64, f64)>, Vec<(f64, f64)>, Vec<(f64, f64)>) {
        let (mut est, mut above, mut below, mut lo, mut hi) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for p in &self.points {
            match p.verdict {
                Verdict::Estimate(r) => est.push((p.at_s, r)),
                Verdict::AtLeast(r) => above.push((p.at_s, r)),
                Verdict::AtMost(r) => below.push((p.at_s, r)),
                _ => {}
            }
            if let Some((l, h)) = p.probed {
                lo.push((p.at_s, l));
                hi.push((p.at_s, h));
            }
        }
        (est, above, below, lo, hi)
    }
}

/// The smallest 1, 2 or 5 × 10^k at or above `v` (`v` > 0).
pub fn nice_ceiling(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let decade = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * decade).find(|c| *c >= v * (1.0 - 1e-12)).unwrap_or(10.0 * decade)
}

fn axis_labels(lo: f64, hi: f64) -> Vec<Span<'static>> {
    let mid = (lo + hi) / 2.0;
    [lo, mid, hi]
        .iter()
        .map(|v| Span::raw(if *v >= 100.0 || v.fract() == 0.0 { format!("{v:.0}") } else { format!("{v:.1}") }))
        .collect()
}

/// Renders the view of `h` on `f`.
pub fn draw(f: &mut Frame, h: &WatchHistory) {
    // The header first, then the chart; the table gets what is left above a 6-row chart.
    let table_rows = f.area().height.saturating_sub(4 + 6).min(8);
    let [header, chart, table] =
        Layout::vertical([Constraint::Length(4), Constraint::Fill(1), Constraint::Length(table_rows)]).areas(f.area());

    let latest = h.points.last();
    let verdict = latest.map_or("waiting for the first estimate".to_string(), |p| p.verdict.describe());
    let head = vec![
        Line::from(vec![
            Span::styled(format!("{} → {}", h.method, h.server), Style::default().add_modifier(Modifier::BOLD)),
            Span::raw(format!("   {} estimates, {:.0} s", h.points.len(), h.now_s)),
        ]),
        Line::from(vec![
            Span::raw("latest: "),
            Span::styled(verdict, Style::default().fg(Color::Green).add_modifier(Modifier::BOLD)),
        ]),
        Line::from(h.last_detail.clone()),
    ];
    f.render_widget(
        Paragraph::new(head)
            .block(Block::default().borders(Borders::BOTTOM).title(" headroom probe --watch   (q quits) ")),
        header,
    );

    let (est, above, below, lo, hi) = h.series();
    let (x0, x1) = h.x_range();
    let y1 = h.y_top();
    // Drawn in this order, so an estimate lies over a range edge at the same place.
    let series = |data, marker, graph_type, color| {
        Dataset::default().marker(marker).graph_type(graph_type).style(Style::default().fg(color)).data(data)
    };
    let datasets = vec![
        series(&hi, Marker::Dot, GraphType::Scatter, Color::DarkGray),
        series(&lo, Marker::Dot, GraphType::Scatter, Color::DarkGray),
        series(&above, Marker::Block, GraphType::Scatter, Color::Yellow),
        series(&below, Marker::Block, GraphType::Scatter, Color::Magenta),
        series(&est, Marker::Braille, GraphType::Line, Color::Green),
    ];
    let key = |text: &'static str, color: Color| Span::styled(text, Style::default().fg(color));
    let legend = Line::from(vec![
        Span::raw(" available bandwidth over time: "),
        key("⣀ estimate", Color::Green),
        Span::raw("  "),
        key("█ above range (≥)", Color::Yellow),
        Span::raw("  "),
        key("█ below range (≤)", Color::Magenta),
        Span::raw("  "),
        key("• probed range (edges)", Color::DarkGray),
        Span::raw(" "),
    ]);
    let plot = Chart::new(datasets)
        .block(Block::default().borders(Borders::ALL).title(legend))
        .x_axis(Axis::default().title("time (s)").bounds([x0, x1]).labels(axis_labels(x0, x1)))
        .y_axis(Axis::default().title("Mbit/s").bounds([0.0, y1]).labels(axis_labels(0.0, y1)))
        // The legend is the block's title: inside the plot it would hide points.
        .legend_position(None);
    f.render_widget(plot, chart);

    let rows = h.points.iter().rev().take(table.height.saturating_sub(2) as usize).map(|p| {
        Row::new(vec![
            Cell::from(format!("#{}", p.seq)),
            Cell::from(format!("{:.1}", p.at_s)),
            Cell::from(p.verdict.describe()),
            Cell::from(p.probed.map_or("–".to_string(), |(l, u)| format!("{l:.2}–{u:.2}"))),
            Cell::from(if p.elapsed_ms > 0.0 { format!("{:.1}", p.elapsed_ms) } else { "–".to_string() }),
        ])
    });
    let widths = [
        Constraint::Length(6),
        Constraint::Length(8),
        Constraint::Min(24),
        Constraint::Length(18),
        Constraint::Length(8),
    ];
    f.render_widget(
        Table::new(rows, widths)
            .header(
                Row::new(vec!["seq", "t (s)", "verdict", "probed Mbit/s", "ms"])
                    .style(Style::default().add_modifier(Modifier::BOLD)),
            )
            .block(Block::default().borders(Borders::TOP).title(" latest estimates ")),
        table,
    );
}

/// Columns and rows drawn on a terminal that reports no size.
pub const FALLBACK_SIZE: (u16, u16) = (80, 24);

/// Raw mode and the alternate screen for as long as it lives; restored on drop (and by the
/// panic hook it installs, so a panic does not leave the user's terminal unusable).
pub struct TerminalGuard {
    pub terminal: ratatui::DefaultTerminal,
}

fn restore() {
    let _ = disable_raw_mode();
    let _ = execute!(std::io::stdout(), LeaveAlternateScreen, cursor::Show);
}

impl TerminalGuard {
    /// Takes over the terminal; an error (not a terminal, raw mode refused) leaves it as it was.
    pub fn enter() -> anyhow::Result<TerminalGuard> {
        if !std::io::stdout().is_terminal() {
            anyhow::bail!(
                "--watch draws on a terminal and stdout is not one; record estimates with --json-stream instead"
            );
        }
        enable_raw_mode().map_err(|e| anyhow::anyhow!("--watch: cannot put the terminal in raw mode: {e}"))?;
        if let Err(e) = execute!(std::io::stdout(), EnterAlternateScreen, cursor::Hide) {
            restore();
            anyhow::bail!("--watch: cannot switch to the alternate screen: {e}");
        }
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
        let backend = ratatui::backend::CrosstermBackend::new(std::io::stdout());
        // A pseudo-terminal nobody gave a size (`script` without a terminal, some container
        // consoles) reports 0 × 0, and ratatui would draw nothing at all: draw 80 × 24 there.
        let no_size = ratatui::crossterm::terminal::size().is_ok_and(|(w, h)| w == 0 || h == 0);
        let terminal = if no_size {
            let viewport = ratatui::Viewport::Fixed(ratatui::layout::Rect::new(0, 0, FALLBACK_SIZE.0, FALLBACK_SIZE.1));
            ratatui::Terminal::with_options(backend, ratatui::TerminalOptions { viewport })
        } else {
            ratatui::Terminal::new(backend)
        };
        match terminal {
            Ok(terminal) => Ok(TerminalGuard { terminal }),
            Err(e) => {
                restore();
                Err(anyhow::anyhow!("--watch: {e}"))
            }
        }
    }

    pub fn draw(&mut self, h: &WatchHistory) -> anyhow::Result<()> {
        self.terminal.draw(|f| draw(f, h))?;
        Ok(())
    }

    /// Waits up to `timeout` for a key; `true` when the user asked to quit.
    pub fn quit_requested(&mut self, timeout: Duration) -> anyhow::Result<bool> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if !event::poll(left)? {
                return Ok(false);
            }
            if let Event::Key(k) = event::read()? {
                if k.kind != KeyEventKind::Press {
                    continue;
                }
                let ctrl_c = k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
                if ctrl_c || matches!(k.code, KeyCode::Char('q') | KeyCode::Esc) {
                    return Ok(true);
                }
            }
            if left.is_zero() {
                return Ok(false);
            }
        }
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// The summary printed on the normal screen after the view closes.
pub fn summary(h: &WatchHistory) -> String {
    let mut est: Vec<f64> =
        h.points.iter().filter_map(|p| if let Verdict::Estimate(r) = p.verdict { Some(r) } else { None }).collect();
    est.sort_by(f64::total_cmp);
    let bounds = h.points.iter().filter(|p| matches!(p.verdict, Verdict::AtLeast(_) | Verdict::AtMost(_))).count();
    let failed = h.points.iter().filter(|p| matches!(p.verdict, Verdict::Failed(_) | Verdict::Inconclusive(_))).count();
    let range = match (est.first(), est.last()) {
        (Some(lo), Some(hi)) => format!(", median {:.2} Mbit/s (min {lo:.2}, max {hi:.2})", est[est.len() / 2]),
        _ => String::new(),
    };
    format!(
        "headroom probe --watch: {} estimates in {:.1} s: {} estimates{range}, {bounds} bounds, {failed} without an answer",
        h.points.len(),
        h.now_s,
        est.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    fn point(at_s: f64, seq: u64, verdict: Verdict, probed: (f64, f64)) -> WatchPoint {
        WatchPoint { at_s, seq, verdict, probed: Some(probed), elapsed_ms: 120.0 }
    }

    fn history() -> WatchHistory {
        let mut h = WatchHistory::new("192.0.2.1:7447", "PathQuick");
        h.points.push(point(1.0, 0, Verdict::Estimate(42.5), (1.0, 100.0)));
        h.points.push(point(2.0, 1, Verdict::AtLeast(230.0), (10.0, 230.0)));
        h.points.push(point(3.0, 2, Verdict::AtMost(3.0), (3.0, 60.0)));
        h.points.push(WatchPoint {
            at_s: 4.0,
            seq: 3,
            verdict: Verdict::Failed("no answer".into()),
            probed: None,
            elapsed_ms: 0.0,
        });
        h.now_s = 4.0;
        h
    }

    fn screen(h: &WatchHistory, w: u16, ht: u16) -> String {
        let mut t = Terminal::new(TestBackend::new(w, ht)).unwrap();
        t.draw(|f| draw(f, h)).unwrap();
        let buf = t.backend().buffer().clone();
        (0..ht).map(|y| (0..w).map(|x| buf[(x, y)].symbol().to_string()).collect::<String>() + "\n").collect()
    }

    #[test]
    fn nice_ceiling_is_the_next_1_2_5_step() {
        assert_eq!(nice_ceiling(0.7), 1.0);
        assert_eq!(nice_ceiling(1.0), 1.0);
        assert_eq!(nice_ceiling(1.3), 2.0);
        assert_eq!(nice_ceiling(241.5), 500.0);
        assert_eq!(nice_ceiling(50.0), 50.0);
        assert_eq!(nice_ceiling(51.0), 100.0);
    }

    #[test]
    fn the_axes_hold_every_drawn_point() {
        let h = history();
        let (x0, x1) = h.x_range();
        let y1 = h.y_top();
        let (est, above, below, lo, hi) = h.series();
        let all: Vec<_> = [est, above, below, lo, hi].concat();
        assert_eq!(all.len(), 3 + 6, "three verdicts and the two edges of three ranges");
        for (x, y) in all {
            assert!(x >= x0 && x <= x1 && y >= 0.0 && y < y1, "({x}, {y}) outside [{x0}, {x1}] × [0, {y1})");
        }
        // The 230 Mbit/s bound sets the top: a clamped axis would cut it.
        assert_eq!(y1, 500.0);
    }

    #[test]
    fn bounds_are_their_own_series_not_estimates() {
        let (est, above, below, _, _) = history().series();
        assert_eq!(est, vec![(1.0, 42.5)]);
        assert_eq!(above, vec![(2.0, 230.0)]);
        assert_eq!(below, vec![(3.0, 3.0)]);
    }

    #[test]
    fn the_screen_shows_the_latest_verdict_the_legend_and_the_table() {
        let text = screen(&history(), 110, 30);
        assert!(text.contains("PathQuick → 192.0.2.1:7447"), "{text}");
        assert!(text.contains("latest: failed: no answer"), "{text}");
        assert!(text.contains("available bandwidth"), "{text}");
        assert!(text.contains("█ above range (≥)") && text.contains("⣀ estimate"), "the legend: {text}");
        // The two bounds are drawn as blocks besides the legend's two.
        assert!(text.matches('█').count() >= 4, "the bounds are not drawn: {text}");
        assert!(text.contains("#2") && text.contains("below range: ≤ 3.00 Mbit/s"), "{text}");
        assert!(text.contains("42.50 Mbit/s"), "{text}");
        assert!(text.contains("500"), "the y axis's top label: {text}");
        assert!(text.contains("time (s)") && text.contains("Mbit/s"), "{text}");
    }

    #[test]
    fn a_small_terminal_still_draws_without_panicking() {
        let text = screen(&history(), 30, 12);
        assert!(text.contains("latest"), "{text}");
    }

    #[test]
    fn the_summary_counts_estimates_bounds_and_failures() {
        let mut h = history();
        h.points.push(point(5.0, 4, Verdict::Estimate(40.0), (1.0, 100.0)));
        h.points.push(point(6.0, 5, Verdict::Estimate(45.0), (1.0, 100.0)));
        h.now_s = 6.0;
        let s = summary(&h);
        assert!(s.contains("6 estimates in 6.0 s: 3 estimates, median 42.50 Mbit/s (min 40.00, max 45.00), 2 bounds, 1 without an answer"), "{s}");
    }
}
