//! `headroom probe --interval DUR [--count N] [--json-stream]`: continuous monitoring of the
//! available bandwidth on one [`ProbeSession`] (issue 19).
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

pub fn run(a: &ProbeArgs, opts: &EstimateOptions) -> anyhow::Result<()> {
    let addrs = resolve_all(&a.target).with_context(|| format!("probing {}", a.target))?;
    install_stop_signals();
    let interval = a.interval.map(|d| Duration::from_nanos(d.0));
    let count = if interval.is_some() { a.count.unwrap_or(u64::MAX) } else { 1 };
    let mut session: Option<ProbeSession> = None;
    let (mut answered, mut failed, mut tries) = (0u64, 0u64, 0u64);
    let mut next_start = Instant::now();
    for seq in 0..count {
        if !sleep_until(next_start) {
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
                if a.json_stream {
                    emit(&stream_line(seq, &e))?;
                } else {
                    print_notes(&e);
                    emit(&format!("#{seq} {}", plain_line(&e)))?;
                }
            }
            // Bad arguments will not get better by waiting.
            Err(e @ ProbeError::Design(_)) => return Err(anyhow!(e)).context(format!("probing {}", a.target)),
            Err(e) => {
                failed += 1;
                if a.json_stream {
                    emit(&json!({"seq": seq, "time_unix_s": unix_now_s(), "error": e.to_string()}).to_string())?;
                } else {
                    eprintln!("headroom probe: #{seq}: {e}");
                }
            }
        }
    }
    if answered == 0 {
        return Err(anyhow!("no estimate in {tries} tries ({failed} failed)"));
    }
    Ok(())
}
