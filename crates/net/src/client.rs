//! The probe client: [`estimate`] asks a `headroom serve` peer for one or more trains, receives
//! them with kernel timestamps and runs the estimator of `headroom_core::abw`.
//!
//! The measured direction is **server → caller**: the server sends the train (only after the
//! caller proved, with the cookie round trip, that it receives at its address), the caller
//! timestamps and estimates — the paper's receiver-side estimation, without the answer packet
//! (the caller is the receiver).

use crate::timing::{enable_rx_timestamps, realtime_now, recv_timestamped};
use crate::wire::{ip_udp_overhead, Cap, Msg, RejectReason, TrainParams, PROBE_HEADER_LEN};
use headroom_core::abw::{
    estimate_train, excursion::combine, ChirpSpec, DesignError, EstimatorConfig, Method, Outcome, ProbeRecord,
    QuickSpec, TrainDesign, TrainEstimate, RAMP_DECREASE_FACTOR,
};
use headroom_core::units::{Bytes, Dur, Rate, Time};
use std::fmt;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::time::{Duration, Instant};

/// The default port of `headroom serve`.
pub const DEFAULT_PORT: u16 = 7447;

/// What the caller wants measured.
#[derive(Clone, Debug)]
pub struct EstimateOptions {
    pub method: Method,
    /// Lowest rate to probe; default: PathQuick with ΔP = 12 B from the smallest packet.
    pub b_min: Option<Rate>,
    /// Highest rate to probe (default 12 Mbit/s, the paper's range).
    pub b_max: Rate,
    /// Largest probe packet, IP level (default 1,500 B).
    pub max_size: Bytes,
    /// pathChirp's spread factor.
    pub gamma: f64,
    /// Trains to send; their results are combined (mean, majority label).
    pub repeat: u32,
    /// How long to wait for the server's answers (handshake, and after a train's last packet).
    pub timeout: Duration,
    /// Use exactly this train instead of designing one from the rates above.
    pub design: Option<TrainDesign>,
    pub estimator: EstimatorConfig,
    /// Judge each train at `handshake RTT + train length + judge_slack` after asking for it,
    /// with the packets that have arrived by then; `None` waits for the whole train (or
    /// `timeout`). See [`run_train`]'s doc.
    pub judge_slack: Option<Duration>,
}

impl Default for EstimateOptions {
    /// [`EstimateOptions::for_method`] of PathQuick.
    fn default() -> Self {
        EstimateOptions::for_method(Method::PathQuick)
    }
}

impl EstimateOptions {
    /// The defaults for one method. The estimator's differ from [`EstimatorConfig::default`]
    /// (the papers') in two measured ways (docs/pathquick.md, testbed section):
    /// - `delay_floor` 20 µs: on the namespace testbed an idle path's one-way delays wander by
    ///   ±10–20 µs from packet to packet (delay box, kernel timestamps); with a 5 µs floor such
    ///   wander started excursions that a larger `F` never ended.
    /// - PathQuick uses `F` = [`RAMP_DECREASE_FACTOR`] (5): judged from the same trains, its
    ///   median error on the testbed under 3, 6 and 9 Mbit/s of cross traffic was +1.18,
    ///   +1.68 and +1.83 Mbit/s with pathChirp's 1.5 and +0.72, +0.78 and +0.97 with 5.
    ///   pathChirp, the baseline, keeps its own 1.5.
    pub fn for_method(method: Method) -> EstimateOptions {
        EstimateOptions {
            method,
            b_min: None,
            b_max: Rate::from_mbps(12),
            max_size: Bytes(1500),
            gamma: 1.2,
            repeat: 1,
            timeout: Duration::from_secs(2),
            design: None,
            estimator: EstimatorConfig {
                delay_floor: Dur::from_micros(20),
                decrease_factor: match method {
                    Method::PathQuick => RAMP_DECREASE_FACTOR,
                    Method::PathChirp => EstimatorConfig::default().decrease_factor,
                },
                ..EstimatorConfig::default()
            },
            judge_slack: Some(Duration::from_millis(10)),
        }
    }
}

/// How much to trust an estimate.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Quality {
    pub trains: u32,
    pub conclusive: u32,
    pub packets: u32,
    pub received: u32,
    pub lost: u32,
    pub reordered: u32,
    pub duplicates: u32,
    /// Server-side send-time error: mean over all packets and worst packet.
    pub spacing_error_mean: Dur,
    pub spacing_error_max: Dur,
    /// Packets the server sent more than 50 µs late.
    pub late_packets: u32,
    /// Packets that arrived after their train was judged ([`TrainReport::after_deadline`]).
    pub after_deadline: u32,
    /// Every packet carried a kernel receive timestamp.
    pub kernel_timestamps: bool,
}

/// One train's result.
#[derive(Clone, Debug)]
pub struct TrainReport {
    pub train: u32,
    pub estimate: TrainEstimate,
    /// From sending START to the estimate: the last packet of the train, or the judging
    /// deadline when packets were still queued (see [`EstimateOptions::judge_slack`]).
    pub elapsed: Duration,
    /// Packets that arrived after the judging deadline, left out of the estimate.
    pub after_deadline: u32,
    /// The train as received (lost packets have no receive time), for re-estimating it with
    /// other [`EstimatorConfig`]s.
    pub records: Vec<ProbeRecord>,
    /// Wall-clock time the train's estimate was ready (for `.instbw` lines).
    pub finished_at: Time,
    pub spacing_error_mean: Dur,
    pub spacing_error_max: Dur,
    pub late: u32,
}

/// The answer of [`estimate`].
#[derive(Clone, Debug)]
pub struct Estimate {
    /// The combined value (a range result's bound included); `None` when inconclusive.
    pub available_bandwidth: Option<Rate>,
    pub outcome: Outcome,
    pub probed_range: (Rate, Rate),
    /// Whole call, handshake included.
    pub elapsed: Duration,
    /// Mean time per train (START to estimate).
    pub elapsed_per_train: Duration,
    pub method: Method,
    pub quality: Quality,
    pub design: TrainDesign,
    /// Bytes of one train at the IP level.
    pub train_bytes: Bytes,
    pub server: SocketAddr,
    pub trains: Vec<TrainReport>,
}

/// Why no estimate could be made.
#[derive(Debug)]
pub enum ProbeError {
    /// The address did not resolve.
    Resolve(String),
    /// The server's host answered that nothing listens there (ICMP port unreachable) or the
    /// network is unreachable.
    Unreachable {
        server: SocketAddr,
        detail: String,
    },
    /// No answer in time.
    Timeout {
        server: SocketAddr,
        waiting_for: &'static str,
        after: Duration,
    },
    /// The server refused the train.
    Rejected {
        server: SocketAddr,
        reason: RejectReason,
        /// The cap that refused and its value, when the server names one.
        cap: Option<Cap>,
    },
    /// The requested train cannot be built.
    Design(DesignError),
    Io(io::Error),
}

impl fmt::Display for ProbeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeError::Resolve(s) => write!(f, "cannot resolve server address {s}"),
            ProbeError::Unreachable { server, detail } => {
                write!(f, "server {server} unreachable ({detail}); is `headroom serve` running there?")
            }
            ProbeError::Timeout { server, waiting_for, after } => write!(
                f,
                "no {waiting_for} from {server} within {:.1} s (server down, or UDP blocked on the path?)",
                after.as_secs_f64()
            ),
            ProbeError::Rejected { server, reason, cap } => {
                write!(f, "server {server} refused: {}", reason.describe())?;
                match cap {
                    Some(c) => write!(f, " (server's cap: {c})"),
                    None => Ok(()),
                }
            }
            ProbeError::Design(e) => write!(f, "{e}"),
            ProbeError::Io(e) => write!(f, "socket error: {e}"),
        }
    }
}

impl std::error::Error for ProbeError {}

impl From<DesignError> for ProbeError {
    fn from(e: DesignError) -> Self {
        ProbeError::Design(e)
    }
}

/// Resolves `HOST[:PORT]` (default port [`DEFAULT_PORT`]).
pub fn resolve(target: &str) -> Result<SocketAddr, ProbeError> {
    let with_port = if target.parse::<SocketAddr>().is_ok() {
        target.to_string()
    } else if target.parse::<std::net::IpAddr>().is_ok() {
        // A bare IPv6 or IPv4 address.
        SocketAddr::new(target.parse().map_err(|_| ProbeError::Resolve(target.into()))?, DEFAULT_PORT).to_string()
    } else if target.rsplit_once(':').map(|(_, p)| p.parse::<u16>().is_ok()).unwrap_or(false) {
        target.to_string()
    } else {
        format!("{target}:{DEFAULT_PORT}")
    };
    with_port
        .to_socket_addrs()
        .map_err(|e| ProbeError::Resolve(format!("`{target}`: {e}")))?
        .next()
        .ok_or_else(|| ProbeError::Resolve(format!("`{target}`: no address")))
}

/// The train `options` ask for, for a path of the given address family.
pub fn design_for(options: &EstimateOptions, v6: bool) -> Result<TrainDesign, DesignError> {
    if let Some(d) = &options.design {
        return Ok(d.clone());
    }
    let smallest = Bytes(ip_udp_overhead(v6) + PROBE_HEADER_LEN as u64);
    let top_spacing = options.max_size.time_at(options.b_max);
    let floor_rate = Bytes(smallest.0 + 1).per(top_spacing);
    if let Some(b) = options.b_min {
        if options.method == Method::PathQuick && b < floor_rate {
            return Err(DesignError(format!(
                "B_min {b} is too low for B_max {}: with {}-byte packets at most and a {}-byte smallest \
                 probe, PathQuick's lowest rate is at least {floor_rate} (raise --bmin or lower --bmax)",
                options.b_max, options.max_size.0, smallest.0
            )));
        }
    }
    let quick = QuickSpec {
        b_max: Some(options.b_max),
        p_n: Some(options.max_size),
        p_1: Some(smallest),
        delta_p: if options.b_min.is_none() { Some(Bytes(12)) } else { None },
        b_min: options.b_min,
        max_size: options.max_size,
        min_size: smallest,
        ..QuickSpec::default()
    }
    .solve();
    match options.method {
        Method::PathQuick => Ok(TrainDesign::PathQuick(quick?)),
        Method::PathChirp => {
            let b_min = match (options.b_min, &quick) {
                (Some(r), _) => r,
                (None, Ok(q)) => q.b_min(),
                (None, Err(e)) => return Err(e.clone()),
            };
            Ok(TrainDesign::PathChirp(
                ChirpSpec {
                    gamma: options.gamma,
                    size: options.max_size,
                    b_min,
                    b_max: options.b_max,
                    max_size: options.max_size,
                }
                .design()?,
            ))
        }
    }
}

fn io_err(server: SocketAddr, waiting_for: &'static str, after: Duration, e: io::Error) -> ProbeError {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => ProbeError::Timeout { server, waiting_for, after },
        io::ErrorKind::ConnectionRefused => ProbeError::Unreachable { server, detail: "connection refused".into() },
        _ => match e.raw_os_error() {
            Some(libc::EHOSTUNREACH) | Some(libc::ENETUNREACH) => {
                ProbeError::Unreachable { server, detail: e.to_string() }
            }
            _ => ProbeError::Io(e),
        },
    }
}

/// A nonce from the OS random source; the clock only if that fails (the nonce matches answers
/// to requests, the server's cookie is what proves the address).
fn random_nonce() -> u64 {
    let mut b = [0u8; 8];
    match getrandom::fill(&mut b) {
        Ok(()) => u64::from_be_bytes(b),
        Err(_) => realtime_now().0,
    }
}

/// Estimates the available bandwidth from the server at `target` (`HOST[:PORT]`) to here.
pub fn estimate(target: &str, options: &EstimateOptions) -> Result<Estimate, ProbeError> {
    let server = resolve(target)?;
    estimate_addr(server, options)
}

/// [`estimate`] for an already resolved address.
pub fn estimate_addr(server: SocketAddr, options: &EstimateOptions) -> Result<Estimate, ProbeError> {
    let t0 = Instant::now();
    let design = design_for(options, server.is_ipv6())?;
    let params = TrainParams::from_design(&design)?;
    let schedule = design.schedule();
    let bind: SocketAddr = if server.is_ipv6() {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    };
    let sock = UdpSocket::bind(bind).map_err(ProbeError::Io)?;
    sock.connect(server).map_err(|e| io_err(server, "connection", Duration::ZERO, e))?;
    let kernel_ts_on = enable_rx_timestamps(&sock).is_ok();
    let mut buf = vec![0u8; 65_536];
    let mut out = Vec::with_capacity(64);

    // Handshake: HELLO until a CHALLENGE with our nonce, three tries.
    let nonce = random_nonce();
    let per_try = options.timeout / 3;
    let mut cookie = None;
    let mut handshake_rtt = Duration::ZERO;
    'tries: for _ in 0..3 {
        Msg::Hello { nonce }.encode(&mut out);
        sock.send(&out).map_err(|e| io_err(server, "challenge", options.timeout, e))?;
        let hello_sent = Instant::now();
        let deadline = hello_sent + per_try;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                continue 'tries;
            }
            sock.set_read_timeout(Some(left)).map_err(ProbeError::Io)?;
            match sock.recv(&mut buf) {
                Ok(n) => {
                    if let Ok(Msg::Challenge { nonce: got, cookie: c, .. }) = Msg::decode(&buf[..n]) {
                        if got == nonce {
                            cookie = Some(c);
                            handshake_rtt = hello_sent.elapsed();
                            break 'tries;
                        }
                    }
                }
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => continue 'tries,
                Err(e) => return Err(io_err(server, "challenge", options.timeout, e)),
            }
        }
    }
    let cookie = cookie.ok_or(ProbeError::Timeout { server, waiting_for: "challenge", after: options.timeout })?;

    let mut reports = Vec::new();
    let mut all_kernel = kernel_ts_on;
    let train_timeout = Duration::from_nanos(design.train_length().0) + options.timeout;
    let judge_after =
        options.judge_slack.map(|slack| handshake_rtt + Duration::from_nanos(design.train_length().0) + slack);
    let base_train = (nonce as u32) & 0x7fff_ffff;
    for r in 0..options.repeat.max(1) {
        let train = base_train.wrapping_add(r);
        let mut attempts = 0;
        let report = loop {
            attempts += 1;
            match run_train(
                &sock,
                server,
                nonce,
                cookie,
                train,
                &params,
                &schedule,
                train_timeout,
                judge_after,
                options,
                &mut buf,
                &mut out,
            ) {
                Ok((rep, kernel)) => {
                    all_kernel &= kernel;
                    break rep;
                }
                // The previous train may still be draining on the server: retry briefly.
                Err(ProbeError::Rejected { reason: RejectReason::InFlight | RejectReason::Busy, .. })
                    if attempts < 5 =>
                {
                    std::thread::sleep(Duration::from_millis(100 * attempts));
                }
                Err(e) => return Err(e),
            }
        };
        reports.push(report);
    }

    let outcomes: Vec<Outcome> = reports.iter().map(|r| r.estimate.outcome.clone()).collect();
    let outcome = if outcomes.len() == 1 { outcomes[0].clone() } else { combine(&outcomes) };
    let mut q = Quality { trains: reports.len() as u32, kernel_timestamps: all_kernel, ..Quality::default() };
    let mut probed = (Rate(u64::MAX), Rate::ZERO);
    let mut err_sum = 0u64;
    for rep in &reports {
        let e = &rep.estimate;
        q.conclusive += e.outcome.value().is_some() as u32;
        q.packets += e.packets;
        q.received += e.received;
        q.lost += e.lost;
        q.reordered += e.reordered;
        q.duplicates += e.duplicates;
        q.late_packets += rep.late;
        q.after_deadline += rep.after_deadline;
        q.spacing_error_max = q.spacing_error_max.max(rep.spacing_error_max);
        err_sum += rep.spacing_error_mean.0;
        if e.probed.1 > Rate::ZERO {
            probed.0 = probed.0.min(e.probed.0);
            probed.1 = probed.1.max(e.probed.1);
        }
    }
    q.spacing_error_mean = Dur(err_sum / reports.len().max(1) as u64);
    if probed.1 == Rate::ZERO {
        probed = design.probed_range();
    }
    let per_train = reports.iter().map(|r| r.elapsed).sum::<Duration>() / reports.len().max(1) as u32;
    Ok(Estimate {
        available_bandwidth: outcome.value(),
        outcome,
        probed_range: probed,
        elapsed: t0.elapsed(),
        elapsed_per_train: per_train,
        method: design.method(),
        quality: q,
        train_bytes: design.bytes(),
        design,
        server,
        trains: reports,
    })
}

/// Asks for one train and collects it.
///
/// **When the train is judged.** The estimate is made when every packet has arrived or, with
/// `judge_after` (handshake RTT + train length + [`EstimateOptions::judge_slack`]), at that
/// moment after START, whichever comes first. A train above the available bandwidth queues
/// behind itself, so its last packets arrive late (15–35 ms on the paper's 12 Mbit/s path at
/// 9 Mbit/s of cross traffic); they probe rates past the knee, which the estimate does not
/// need. Packets not yet arrived at the deadline are left out of the train (it is judged as if
/// it had ended with the last packet received, not as a tail loss) and counted in
/// [`TrainReport::after_deadline`]. After judging, the client still waits up to 50 ms for the
/// server's END (its spacing report); that wait is not part of [`TrainReport::elapsed`].
#[allow(clippy::too_many_arguments)]
fn run_train(
    sock: &UdpSocket,
    server: SocketAddr,
    nonce: u64,
    cookie: [u8; 16],
    train: u32,
    params: &TrainParams,
    schedule: &[headroom_core::abw::TrainPacket],
    timeout: Duration,
    judge_after: Option<Duration>,
    options: &EstimateOptions,
    buf: &mut [u8],
    out: &mut Vec<u8>,
) -> Result<(TrainReport, bool), ProbeError> {
    let n = schedule.len();
    let mut got: Vec<Option<(u64, Time)>> = vec![None; n];
    let mut duplicates = 0u32;
    let mut kernel = true;
    let mut received = 0usize;
    let mut end: Option<(u32, u32, u16)> = None;
    Msg::Start { nonce, cookie, train, params: *params }.encode(out);
    let started = Instant::now();
    sock.send(out).map_err(|e| io_err(server, "train", timeout, e))?;
    let mut deadline = started + timeout;
    let judge_at = judge_after.map(|d| started + d);
    let mut last = started;
    // When the estimate's inputs were closed: all packets in, or the judging deadline.
    let mut judged_at: Option<Instant> = None;
    let mut cut = false;
    let mut after_deadline = 0u32;
    loop {
        let now = Instant::now();
        if judged_at.is_none() {
            if received == n {
                judged_at = Some(last);
            } else if let Some(j) = judge_at.filter(|&j| now >= j) {
                judged_at = Some(j);
                cut = true;
            }
            if judged_at.is_some() {
                // The estimate is ready; give the END (sent right after the last probe) a
                // moment to bring the server's spacing error, without counting that wait.
                deadline = deadline.min(now + Duration::from_millis(50));
            }
        }
        if (judged_at.is_some() && end.is_some()) || now >= deadline {
            break;
        }
        let wake = match (judged_at, judge_at) {
            (None, Some(j)) => deadline.min(j),
            _ => deadline,
        };
        sock.set_read_timeout(Some(wake.saturating_duration_since(now).max(Duration::from_micros(10))))
            .map_err(ProbeError::Io)?;
        let (len, at, k) = match recv_timestamped(sock, buf) {
            Ok(x) => x,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                continue; // the loop's head decides: judge now, or give up
            }
            Err(e) => return Err(io_err(server, "train", timeout, e)),
        };
        match Msg::decode(&buf[..len]) {
            Ok(Msg::Probe { train: t, index, send_offset_ns, .. }) if t == train => {
                let i = index as usize;
                if i < n {
                    if got[i].is_some() {
                        duplicates += 1;
                    } else if judged_at.is_some() {
                        after_deadline += 1;
                    } else {
                        got[i] = Some((send_offset_ns, at));
                        received += 1;
                        kernel &= k;
                        last = Instant::now();
                    }
                }
            }
            Ok(Msg::End { train: t, spacing_err_mean_ns, spacing_err_max_ns, late, .. }) if t == train => {
                end = Some((spacing_err_mean_ns, spacing_err_max_ns, late));
                if judged_at.is_none() {
                    last = Instant::now(); // losses: the train is over when its END is in
                }
                // Anything still queued in the socket arrives within a moment.
                deadline = deadline.min(Instant::now() + Duration::from_millis(2));
            }
            Ok(Msg::Reject { train: t, reason, cap, .. }) if t == train => {
                return Err(ProbeError::Rejected { server, reason, cap });
            }
            _ => {} // stale packets of an earlier train, or noise
        }
    }
    if received == 0 && end.is_none() {
        return Err(ProbeError::Timeout { server, waiting_for: "probe train", after: timeout });
    }
    // A cut train ends with its last packet received; packets after it were still on their way.
    let judged_len = if cut { got.iter().rposition(|g| g.is_some()).map_or(0, |i| i + 1) } else { n };
    let records: Vec<ProbeRecord> = schedule[..judged_len]
        .iter()
        .enumerate()
        .map(|(i, p)| match got[i] {
            Some((send, recv)) => {
                ProbeRecord { index: i as u32, send_time: Time(send), recv_time: Some(recv), size: p.size }
            }
            // Lost: the scheduled send time stands in for the one the packet carried.
            None => ProbeRecord { index: i as u32, send_time: Time(p.offset.0), recv_time: None, size: p.size },
        })
        .collect();
    let mut estimate = estimate_train(&records, &options.estimator);
    estimate.duplicates += duplicates;
    let (mean, max, late) = end.unwrap_or((0, 0, 0));
    Ok((
        TrainReport {
            train,
            estimate,
            elapsed: judged_at.unwrap_or(last).duration_since(started),
            after_deadline,
            records,
            finished_at: realtime_now(),
            spacing_error_mean: Dur(mean as u64),
            spacing_error_max: Dur(max as u64),
            late: late as u32,
        },
        kernel,
    ))
}
