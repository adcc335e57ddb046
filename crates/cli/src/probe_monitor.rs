//! `headroom probe --interval DUR [--count N] [--json-stream | --watch]`: continuous monitoring
//! of the available bandwidth on one [`ProbeSession`] (issue 19); `--watch` draws it live
//! ([`crate::probe_watch`]).
//!
//! Estimates start every `--interval`, start to start; one that takes longer than the interval
//! delays the next, and the missed starts are not made up (no bursts of estimates after a
//! stall). The first estimate shakes hands (HELLO/CHALLENGE); the later ones ask for their
//! trains with the server's address-validation token, so each costs train + RTT
//! (`headroom_net::client::ProbeSession`). An estimate that fails (the server silent for a
//! while, a refusal) is reported and monitoring goes on; bad arguments stop it at once. Ctrl-C
//! (SIGINT) or SIGTERM ends it after the estimate under way.
//!
//! `--json-stream` writes one compact JSON object per estimate, each on its own line and
//! flushed at once: the fields of `--json` plus `seq` (0, 1, …) and `time_unix_s` (when the
//! estimate was ready); a failed estimate is `{"seq", "time_unix_s", "error"}`.

use crate::probe::{estimate_json, install_stop_signals, plain_line, print_notes, ProbeArgs, STOP_SIGNAL};
use crate::probe_watch::{self, TerminalGuard, WatchHistory};
use anyhow::{anyhow, Context};
use headroom_net::client::resolve_all;
use headroom_net::timing::realtime_now;
use headroom_net::{first_estimate, Estimate, EstimateOptions, ProbeError, ProbeSession};
use serde_json::json;
use std::io::Write;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

fn stopped() -> bool {
    STOP_SIGNAL.load(Ordering::Relaxed) != 0
}

/// Sleeps until `t` in steps short enough to notice a stop signal; `false` when stopped.
fn sleep_until(t: Instant) -> bool {
    loop {
        if stopped() {
            return false;
        }
        let left = t.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

/// One line of the stream.
fn emit(line: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    out.flush()?;
    Ok(())
}

fn unix_now_s() -> f64 {
    realtime_now().as_secs_f64()
}

/// The `--json-stream` line of an estimate.
pub(crate) fn stream_line(seq: u64, e: &Estimate) -> String {
    let mut v = estimate_json(e);
    v["seq"] = json!(seq);
    v["time_unix_s"] = json!(unix_now_s());
    v.to_string()
}

/// Where the estimates go: plain lines, the JSON stream, or the live view.
enum Sink {
    Plain,
    JsonStream,
    Watch { guard: Box<TerminalGuard>, history: WatchHistory, started: Instant },
}

impl Sink {
    fn estimate(&mut self, seq: u64, e: &Estimate) -> anyhow::Result<()> {
        match self {
            Sink::Plain => {
                print_notes(e);
                emit(&format!("#{seq} {}", plain_line(e)))
            }
            Sink::JsonStream => emit(&stream_line(seq, e)),
            Sink::Watch { guard, history, started } => {
                history.push_estimate(started.elapsed().as_secs_f64(), seq, e);
                guard.draw(history)
            }
        }
    }

    fn failure(&mut self, seq: u64, e: &ProbeError) -> anyhow::Result<()> {
        match self {
            Sink::Plain => {
                eprintln!("headroom probe: #{seq}: {e}");
                Ok(())
            }
            Sink::JsonStream => {
                emit(&json!({"seq": seq, "time_unix_s": unix_now_s(), "error": e.to_string()}).to_string())
            }
            Sink::Watch { guard, history, started } => {
                history.push_failure(started.elapsed().as_secs_f64(), seq, e.to_string());
                guard.draw(history)
            }
        }
    }

    /// Waits until `t`; `false` when the user or a signal stopped monitoring. The live view
    /// redraws its clock and reads the keys meanwhile.
    fn wait_until(&mut self, t: Instant) -> anyhow::Result<bool> {
        let Sink::Watch { guard, history, started } = self else {
            return Ok(sleep_until(t));
        };
        loop {
            history.now_s = started.elapsed().as_secs_f64();
            guard.draw(history)?;
            let left = t.saturating_duration_since(Instant::now());
            if stopped() || guard.quit_requested(left.min(probe_watch::REDRAW))? {
                return Ok(false);
            }
            if left.is_zero() {
                return Ok(true);
            }
        }
    }

    /// Closes the live view and leaves its record on the normal screen.
    fn finish(self, last: Option<&Estimate>) {
        if let Sink::Watch { guard, mut history, started } = self {
            history.now_s = started.elapsed().as_secs_f64();
            drop(guard);
            if let Some(e) = last {
                println!("{}", plain_line(e));
            }
            println!("{}", probe_watch::summary(&history));
        }
    }
}

pub fn run(a: &ProbeArgs, opts: &EstimateOptions) -> anyhow::Result<()> {
    let addrs = resolve_all(&a.target).with_context(|| format!("probing {}", a.target))?;
    install_stop_signals();
    // The live view probes every second unless told otherwise.
    let interval = a.interval.map(|d| Duration::from_nanos(d.0)).or(a.watch.then_some(Duration::from_secs(1)));
    let count = if interval.is_some() { a.count.unwrap_or(u64::MAX) } else { 1 };
    let mut sink = if a.watch {
        let history = WatchHistory::new(&a.target, opts.method.name());
        Sink::Watch { guard: Box::new(TerminalGuard::enter()?), history, started: Instant::now() }
    } else if a.json_stream {
        Sink::JsonStream
    } else {
        Sink::Plain
    };
    let mut session: Option<ProbeSession> = None;
    let (mut answered, mut failed, mut tries) = (0u64, 0u64, 0u64);
    let mut last: Option<Estimate> = None;
    let mut next_start = Instant::now();
    let outcome = (|| -> anyhow::Result<()> {
        for seq in 0..count {
            if !sink.wait_until(next_start)? {
                break;
            }
            let started = Instant::now();
            tries += 1;
            if let Some(i) = interval {
                next_start = started + i;
            }
            let result = match session.as_mut() {
                Some(s) => s.estimate(opts),
                None => first_estimate(&addrs, opts).map(|(s, e)| {
                    session = Some(s);
                    e
                }),
            };
            match result {
                Ok(e) => {
                    if e.available_bandwidth.is_some() || e.bound.is_some() {
                        answered += 1;
                    }
                    sink.estimate(seq, &e)?;
                    last = Some(e);
                }
                // Bad arguments will not get better by waiting.
                Err(e @ ProbeError::Design(_)) => return Err(anyhow!(e)).context(format!("probing {}", a.target)),
                Err(e) => {
                    failed += 1;
                    sink.failure(seq, &e)?;
                }
            }
        }
        Ok(())
    })();
    sink.finish(last.as_ref());
    outcome?;
    if answered == 0 {
        return Err(anyhow!("no estimate in {tries} tries ({failed} failed)"));
    }
    Ok(())
}
