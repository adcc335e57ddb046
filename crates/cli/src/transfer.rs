//! `headroom send` and `headroom recv`: bulk transfer over the kernel's TCP, optionally with
//! ImTCP's inline measurement (`--measure`). See `docs/transfer.md`.
//!
//! Exit statuses: 0 done (also after SIGINT/SIGTERM, which end the transfer early and print
//! the partial report); 1 any error (unreachable host, refused connection, refused congestion
//! control, peer abort, protocol error); 2 bad arguments (clap); 3 the receiver counted
//! mismatched bytes (`--verify`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use clap::Args;
use headroom_core::cc::imtcp_bg::{ImtcpBgConfig, RttCur};
use headroom_core::imtcp::{ControlConfig, Estimate};
use headroom_core::units::{parse_positive, Bytes, Dur, Rate};
use headroom_net::transfer::{
    send, IntervalReport, Mode, Receiver, ReceiverConfig, SendLimit, SendOptions, SessionSummary, TransferReport,
    DEFAULT_TRANSFER_PORT,
};
use serde_json::{json, Value};

#[derive(Args, Debug)]
pub struct SendArgs {
    /// The receiver: HOST or HOST:PORT (default port 5301).
    pub host: String,
    /// Send for this long (default 10s).
    #[arg(long, conflicts_with = "bytes")]
    pub time: Option<Dur>,
    /// Send this much payload instead (e.g. 1GB, 64MiB).
    #[arg(long)]
    pub bytes: Option<Bytes>,
    /// Interval between reports (0 = none).
    #[arg(long, default_value = "1s")]
    pub interval: Dur,
    /// One JSON object at the end instead of text.
    #[arg(long, conflicts_with = "json_stream")]
    pub json: bool,
    /// One JSON line per interval, then one for the end.
    #[arg(long)]
    pub json_stream: bool,
    /// The receiver sends, this side receives.
    #[arg(long)]
    pub reverse: bool,
    /// The sender's kernel congestion control (TCP_CONGESTION), e.g. cubic, reno, bbr. Default:
    /// the system's, except that --measure and --background use cubic when the system's is
    /// bbr (whose internal pacing reshapes the measurement streams).
    #[arg(long)]
    pub cc: Option<String>,
    /// The receiver checks a keyed pseudo-random payload (corruption, loss, reordering).
    #[arg(long)]
    pub verify: bool,
    /// ImTCP's inline available-bandwidth measurement on the data (sender side).
    #[arg(long)]
    pub measure: bool,
    /// Background transfer: ImTCP-bg's limit on bytes in flight (measures inline too).
    #[arg(long, conflicts_with = "reverse")]
    pub background: bool,
    /// With --measure or --background the sending thread runs at real-time priority
    /// (SCHED_FIFO 10) where permitted (root, CAP_SYS_NICE or `ulimit -r`), because a stream
    /// sent late probes lower rates than planned and the estimate comes out too high (measured
    /// about +45 % on a loaded host, docs/results.md); where not permitted it warns and goes on. This turns that off.
    #[arg(long)]
    pub no_realtime: bool,
    /// ImTCP-bg's δ: reduce when RTT_cur / RTT_min exceeds it (Eq. 3).
    #[arg(long, default_value_t = 1.5)]
    pub delta: f64,
    /// ImTCP-bg as the paper states it (seed 000 Eqs. 1-4), without headroom's choices
    /// (`--rtt-cur 4 --measurement-allowance --linear-regrowth`, see docs/transfer.md).
    #[arg(long)]
    pub paper_rule: bool,
    /// ImTCP-bg's RTT_cur (Eq. 3): the smallest of the last N RTT samples (1 = the latest
    /// sample, the paper's reading) [default: 4, 1 with --paper-rule].
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=8))]
    pub rtt_cur: Option<u8>,
    /// ImTCP-bg's bound never below one measurement stream (N segments), so that estimates
    /// keep coming (headroom's option beyond the paper).
    #[arg(long)]
    pub measurement_floor: bool,
    /// ImTCP-bg's Eq. 4 also sets ssthresh, so the window regrows linearly after a reduction
    /// (the paper's rule changes cwnd only: slow start back up to maxcwnd until a loss; on
    /// unless --paper-rule).
    #[arg(long)]
    pub linear_regrowth: bool,
    /// ImTCP-bg's bound is Ā × RTT_min plus one measurement stream (N segments), the part of
    /// the window ImTCP's buffer holds while it stores a stream (on unless --paper-rule).
    #[arg(long)]
    pub measurement_allowance: bool,
    /// Packets per measurement stream (ImTCP's N).
    #[arg(long, default_value_t = 35)]
    pub stream_len: usize,
    /// Cap the kernel's pacing rate (SO_MAX_PACING_RATE, e.g. 20Mbps): TCP's internal pacing
    /// sends at most this fast, without fq (a constant-rate background; plain sends only, not
    /// with --measure, --background or --reverse).
    #[arg(long, value_parser = parse_positive::<Rate>, conflicts_with_all = ["measure", "background", "reverse"])]
    pub max_rate: Option<Rate>,
    /// Write only while fewer than this many bytes are unacknowledged (e.g. 64KB): a fixed
    /// in-flight limit over the kernel's TCP, enforced by the writer (plain sends only).
    #[arg(long, conflicts_with_all = ["measure", "background", "reverse"])]
    pub max_in_flight: Option<Bytes>,
    /// Give up connecting after this long.
    #[arg(long, default_value = "5s")]
    pub connect_timeout: Dur,
    /// After the last byte, give up on the receiver's account when it has reported no progress
    /// for this long (through split-TCP proxies the account comes when the receiver has got
    /// what the proxies buffered; the wait lasts while that data keeps arriving).
    #[arg(long, default_value = "60s")]
    pub account_wait: Dur,
}

#[derive(Args, Debug)]
pub struct RecvArgs {
    /// Address to listen on.
    #[arg(long, default_value_t = format!("0.0.0.0:{DEFAULT_TRANSFER_PORT}"))]
    pub listen: String,
    /// Serve one transfer, then exit.
    #[arg(long)]
    pub one_off: bool,
    /// Most transfers at once.
    #[arg(long, default_value_t = 32)]
    pub max_clients: usize,
    /// Per-session interval reports on stderr (0 = none).
    #[arg(long, default_value = "0s")]
    pub interval: Dur,
    /// One JSON line per finished session instead of text.
    #[arg(long)]
    pub json: bool,
}

static STOP: OnceLock<Arc<AtomicBool>> = OnceLock::new();

extern "C" fn on_stop(_sig: libc::c_int) {
    if let Some(s) = STOP.get() {
        s.store(true, Ordering::SeqCst);
    }
}

/// SIGINT and SIGTERM set the stop flag (an atomic store, async-signal-safe).
fn stop_on_signals() -> Arc<AtomicBool> {
    let flag = STOP.get_or_init(|| Arc::new(AtomicBool::new(false))).clone();
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: installs a handler that only stores to an atomic.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_stop as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    flag
}

fn mbps(r: headroom_core::units::Rate) -> f64 {
    r.as_mbps()
}

fn estimate_json(e: &Estimate) -> Value {
    json!({
        "time_s": e.time.0 as f64 * 1e-9,
        "mbps": mbps(e.value),
        "range_mbps": [mbps(e.search_range.0), mbps(e.search_range.1)],
        "in_range": e.in_range,
    })
}

fn interval_json(r: &IntervalReport) -> Value {
    json!({
        "type": "interval",
        "start_s": r.start.as_secs_f64(),
        "end_s": r.end.as_secs_f64(),
        "bytes": r.bytes,
        "mbps": mbps(r.rate),
        "rtt_ms": r.rtt.map(|d| d.as_secs_f64() * 1e3),
        "cwnd_bytes": r.cwnd.map(|b| b.0),
        "retransmits": r.retransmits,
        "estimates": r.estimates.iter().map(estimate_json).collect::<Vec<_>>(),
        "smoothed_mbps": r.smoothed.map(mbps),
        "background_limit_bytes": r.limit.map(|b| b.0),
        "receiver_bytes": r.receiver_payload,
    })
}

fn interval_text(r: &IntervalReport) -> String {
    let mut s = format!(
        "[{:6.2}-{:6.2} s] {:>10} B {:>9.2} Mbit/s",
        r.start.as_secs_f64(),
        r.end.as_secs_f64(),
        r.bytes,
        mbps(r.rate)
    );
    if let (Some(rtt), Some(cwnd)) = (r.rtt, r.cwnd) {
        s += &format!("  rtt {:6.2} ms  cwnd {:>8} B  retr {}", rtt.as_secs_f64() * 1e3, cwnd.0, r.retransmits);
    }
    if !r.estimates.is_empty() || r.smoothed.is_some() {
        let last = r.estimates.last().map_or("-".to_string(), |e| format!("{:.2}", mbps(e.value)));
        s += &format!(
            "  avail {last} Mbit/s ({} estimates, smoothed {})",
            r.estimates.len(),
            r.smoothed.map_or("-".to_string(), |v| format!("{:.2}", mbps(v)))
        );
    }
    if let Some(l) = r.limit {
        s += &format!("  limit {} B", l.0);
    }
    if let Some(p) = r.receiver_payload {
        s += &format!("  (last byte sent; the receiver has {p} B)");
    }
    s
}

pub fn report_json(r: &TransferReport) -> Value {
    let m = r.measure.map(|m| {
        json!({
            "pieces": m.pieces,
            "mss": m.mss,
            "streams_sent": m.control.streams_sent,
            "stream_failures": m.control.stream_failures,
            "off_schedule_streams": m.control.off_schedule_streams,
            "measurements": m.control.measurements,
            "stamps": m.tracker.stamps,
            "unmatched_stamps": m.tracker.unmatched,
            "pieces_without_ack_stamp": m.tracker.missing_ack,
            "pieces_without_send_stamp": m.tracker.missing_send,
            "merged_acks": m.tracker.merged_acks,
            "write_stalls": m.write_stalls,
            "parse_errors": m.parse_errors,
            "background_reductions": m.reductions,
            "background_losses": m.losses,
            "background_limit_bytes": m.last_limit,
        })
    });
    json!({
        "type": "end",
        "role": if r.sent { "sender" } else { "receiver" },
        "cc": r.cc,
        "bytes": r.bytes,
        "seconds": r.duration.as_secs_f64(),
        "mbps": mbps(r.rate),
        "acked_bytes": r.acked,
        "acked_mbps": r.acked_rate().map(mbps),
        "pacing_cap_mbps": r.pacing_cap.map(mbps),
        "received_bytes": r.received.map(|t| t.payload),
        "verified": r.verified,
        "mismatched_bytes": r.received.filter(|_| r.verified).map(|t| t.mismatched),
        "first_mismatch_offset": r.received.and_then(|t| t.first_bad),
        "retransmits": r.retransmits,
        "interrupted": r.interrupted,
        "estimates": r.estimates.iter().map(estimate_json).collect::<Vec<_>>(),
        "measure": m,
    })
}

fn report_text(r: &TransferReport) -> String {
    let mut s = format!(
        "{} {} B in {:.2} s = {:.2} Mbit/s",
        if r.sent { "sent" } else { "received" },
        r.bytes,
        r.duration.as_secs_f64(),
        mbps(r.rate)
    );
    if let Some(cc) = &r.cc {
        s += &format!(" ({cc})");
    }
    if r.sent {
        if let Some(a) = r.acked_rate() {
            s += &format!(", {:.2} Mbit/s acknowledged", mbps(a));
        }
        if let Some(p) = r.pacing_cap {
            s += &format!(", paced at most {:.2} Mbit/s", mbps(p));
        }
        s += &format!(", {} retransmits", r.retransmits);
        match r.received {
            Some(t) => s += &format!("; receiver got {} B", t.payload),
            // Only a stop while waiting for the receiver's trailer leaves it out (through
            // split-TCP proxies that wait lasts until their buffered data has arrived).
            None => {
                s += "; no account from the receiver: interrupted while waiting for it (it comes when the \
                      receiver has got every byte, later than the last byte sent when proxies on the path \
                      buffer data)"
            }
        }
    }
    if r.verified {
        match r.received {
            Some(t) if t.mismatched == 0 => s += ", verified: no mismatch",
            Some(t) => {
                s += &format!(
                    ", VERIFY FAILED: {} mismatched bytes, first at offset {}",
                    t.mismatched,
                    t.first_bad.unwrap_or(0)
                )
            }
            None => {}
        }
    }
    if r.interrupted {
        s += " (interrupted)";
    }
    if let Some(m) = r.measure {
        let vals: Vec<f64> = r.estimates.iter().map(|e| mbps(e.value)).collect();
        s += &format!(
            "\nmeasure: {} estimates, median {} Mbit/s; {} streams, {} failed, {} off schedule; {} pieces, {} stamps, {} merged ACKs, {} pieces without ACK stamp",
            vals.len(),
            headroom_core::stats::median(&vals).map_or("-".to_string(), |v| format!("{v:.2}")),
            m.control.streams_sent,
            m.control.stream_failures,
            m.control.off_schedule_streams,
            m.pieces,
            m.tracker.stamps,
            m.tracker.merged_acks,
            m.tracker.missing_ack
        );
    }
    s
}

fn dur(d: Dur) -> Duration {
    Duration::from_nanos(d.0)
}

pub fn send_options(a: &SendArgs) -> Result<SendOptions> {
    if a.stream_len < 4 {
        bail!("--stream-len must be at least 4");
    }
    if a.account_wait.0 == 0 {
        bail!("--account-wait must be positive");
    }
    let limit = match (a.bytes, a.time) {
        (Some(b), _) if b.0 == 0 => bail!("--bytes must be positive"),
        (Some(b), _) => SendLimit::Bytes(b.0),
        (None, Some(t)) if t.0 == 0 => bail!("--time must be positive"),
        (None, Some(t)) => SendLimit::Time(dur(t)),
        (None, None) => SendLimit::Time(Duration::from_secs(10)),
    };
    let mut c = ControlConfig::default();
    c.measurement.stream_len = a.stream_len;
    // Linux receivers delay ACKs (every second full segment): ImTCP §3.5.1.
    c.measurement.delayed_ack = true;
    let mode = if a.background {
        let n = a.stream_len as u32;
        let mut bg = if a.paper_rule { ImtcpBgConfig::default() } else { ImtcpBgConfig::headroom(a.stream_len) };
        bg.delta = a.delta;
        match a.rtt_cur {
            Some(1) => bg.rtt_cur = RttCur::Latest,
            Some(k) => bg.rtt_cur = RttCur::MinOfLast(k),
            None => {}
        }
        if a.measurement_floor {
            bg.measurement_floor = Some(n);
        }
        if a.measurement_allowance {
            bg.measurement_allowance = Some(n);
        }
        if a.linear_regrowth {
            bg.reduction_sets_ssthresh = true;
        }
        bg.validate().map_err(|e| anyhow!("background: {e}"))?;
        Mode::Background(Box::new(c), bg)
    } else if a.measure {
        Mode::Measure(Box::new(c))
    } else {
        Mode::Bulk
    };
    Ok(SendOptions {
        limit,
        interval: (a.interval.0 > 0).then(|| dur(a.interval)),
        reverse: a.reverse,
        cc: a.cc.clone(),
        verify: a.verify,
        mode,
        connect_timeout: dur(a.connect_timeout),
        stop: None,
        account_wait: dur(a.account_wait),
        max_pacing_rate: a.max_rate,
        max_in_flight: a.max_in_flight,
    })
}

/// Does this side send an inline measurement (--measure or --background, not --reverse)?
fn measuring(a: &SendArgs) -> bool {
    (a.measure || a.background) && !a.reverse
}

/// Kernel congestion controls that pace a socket themselves (`sk_pacing_status`): they send a
/// measurement stream at their pacing rate, not at the planned gaps.
const PACING_CCS: [&str; 2] = ["bbr", "bbr2"];

/// The congestion control `send` uses: `--cc`, or for an inline measurement (--measure,
/// --background) on a system whose default paces (`system`), cubic instead; with a note for
/// the user when it chose or when the choice defeats the measurement.
fn sender_cc(a: &SendArgs, system: Option<&str>) -> (Option<String>, Option<String>) {
    let measuring = measuring(a);
    match (&a.cc, system) {
        (Some(cc), _) if measuring && PACING_CCS.contains(&cc.as_str()) => (
            Some(cc.clone()),
            Some(format!("warning: --cc {cc} paces the socket itself and reshapes the measurement streams; use cubic or reno")),
        ),
        (None, Some(sys)) if measuring && PACING_CCS.contains(&sys) => (
            Some("cubic".into()),
            Some(format!("the system's congestion control is {sys}, which paces and reshapes the measurement streams: sending with cubic (--cc to choose)")),
        ),
        (cc, _) => (cc.clone(), None),
    }
}

pub fn run_send(a: SendArgs) -> Result<()> {
    let mut opts = send_options(&a)?;
    let system = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").ok();
    let (cc, note) = sender_cc(&a, system.as_deref().map(str::trim));
    opts.cc = cc;
    if let Some(n) = note {
        eprintln!("headroom send: {n}");
    }
    if measuring(&a) && !a.no_realtime {
        if let Err(e) = crate::probe::try_realtime() {
            eprintln!(
                "headroom send: warning: no real-time priority ({e}): on a busy host the measurement \
                 streams can leave late and the estimates read high (see \"off schedule\" in the report)"
            );
        }
    }
    opts.stop = Some(stop_on_signals());
    let stream = a.json_stream;
    let quiet = a.json;
    let mut on_interval = |r: &IntervalReport| {
        if stream {
            println!("{}", interval_json(r));
        } else if !quiet {
            println!("{}", interval_text(r));
        }
    };
    let r = send(&a.host, &opts, &mut on_interval).map_err(|e| anyhow!("send to {}: {e}", a.host))?;
    if a.json || a.json_stream {
        println!("{}", report_json(&r));
    } else {
        println!("{}", report_text(&r));
    }
    if r.verified && r.received.is_some_and(|t| t.mismatched > 0) {
        std::process::exit(3);
    }
    Ok(())
}

pub fn run_recv(a: RecvArgs) -> Result<()> {
    let addr: SocketAddr = a.listen.parse().map_err(|e| anyhow!("--listen {}: {e}", a.listen))?;
    if a.max_clients == 0 {
        bail!("--max-clients must be at least 1");
    }
    let cfg = ReceiverConfig {
        max_clients: a.max_clients,
        one_off: a.one_off,
        interval: (a.interval.0 > 0).then(|| dur(a.interval)),
    };
    let rx = Receiver::bind(addr, cfg).map_err(|e| anyhow!("cannot listen on {addr}: {e}"))?;
    eprintln!("headroom recv: listening on {} (TCP)", rx.local_addr()?);
    let stop = stop_on_signals();
    let json = a.json;
    let out = Arc::new(Mutex::new(()));
    let o2 = out.clone();
    let on_interval = Arc::new(move |peer: SocketAddr, r: &IntervalReport| {
        let _g = o2.lock();
        eprintln!("{peer} {}", interval_text(r));
    });
    let on_session = Arc::new(move |s: &SessionSummary| {
        let _g = out.lock();
        match (&s.result, json) {
            (Ok(r), true) => {
                let mut v = report_json(r);
                v["peer"] = json!(s.peer.to_string());
                println!("{v}");
            }
            (Ok(r), false) => println!("{}: {}", s.peer, report_text(r)),
            (Err(e), true) => println!("{}", json!({"type": "error", "peer": s.peer.to_string(), "error": e})),
            (Err(e), false) => println!("{}: error: {e}", s.peer),
        }
    });
    rx.serve(stop, on_interval, on_session).map_err(|e| anyhow!("recv: {e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct S {
        #[command(flatten)]
        a: SendArgs,
    }

    fn args(extra: &[&str]) -> SendArgs {
        S::try_parse_from([&["send", "h"], extra].concat()).unwrap().a
    }

    #[test]
    fn measuring_on_a_pacing_system_default_sends_with_cubic_and_says_so() {
        let (cc, note) = sender_cc(&args(&["--measure"]), Some("bbr"));
        assert_eq!(cc.as_deref(), Some("cubic"));
        assert!(note.unwrap().contains("bbr"));
        let (cc, note) = sender_cc(&args(&["--background"]), Some("bbr"));
        assert_eq!((cc.as_deref(), note.is_some()), (Some("cubic"), true));
        // a non-pacing default, or a plain bulk transfer: the system's choice, silently
        assert_eq!(sender_cc(&args(&["--measure"]), Some("cubic")), (None, None));
        assert_eq!(sender_cc(&args(&[]), Some("bbr")), (None, None));
        // the user's explicit choice stands, with a warning when it defeats the measurement
        let (cc, note) = sender_cc(&args(&["--measure", "--cc", "bbr"]), Some("cubic"));
        assert_eq!(cc.as_deref(), Some("bbr"));
        assert!(note.unwrap().starts_with("warning"));
        assert_eq!(sender_cc(&args(&["--measure", "--cc", "reno"]), Some("bbr")), (Some("reno".into()), None));
    }
}
