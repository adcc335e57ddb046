//! The probe client: [`estimate`] asks a `headroom serve` peer for one or more trains, receives
//! them with kernel timestamps and runs the estimator of `headroom_core::abw`.
//!
//! The measured direction is **server → caller**: the server sends the train (only after the
//! caller proved, with the cookie round trip, that it receives at its address), the caller
//! timestamps and estimates — the paper's receiver-side estimation, without the answer packet
//! (the caller is the receiver).

use crate::timing::{
    enable_rx_timestamps, realtime_now, recv_timestamped, request_receive_buffer, PROBE_RECEIVE_BUFFER,
};
use crate::wire::{
    ip_udp_overhead, ipv6_on_the_wire, AddressToken, Cap, Msg, RejectReason, TrainParams, PROBE_HEADER_LEN,
};
use headroom_core::abw::autorange::{overflow_drain, AutoRange, Ladder, LadderStep, DEFAULT_TOP, DISPERSION_NOISE};
use headroom_core::abw::dispersion;
use headroom_core::abw::shaper::{burst_after_earlier_trains, EarlierTrain, ShaperEstimate, SHAPER_DELTA_P};
use headroom_core::abw::train::PacingReport;
use headroom_core::abw::{
    excursion::combine, ChirpSpec, DesignError, EstimatorConfig, JudgePolicy, Method, Outcome, PacketFate, Poll,
    ProbeRecord, QuickDesign, QuickSpec, TrainDesign, TrainEstimate, TrainJudge, TrainPacket, RAMP_DECREASE_FACTOR,
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
    /// `timeout`). See [`TrainReceiver`]'s doc.
    pub judge_slack: Option<Duration>,
    /// When the server refuses a train for now (busy, a train in flight, or this client's
    /// trains-per-window budget spent), wait the `retry_after` it names and ask again, up to
    /// this much waiting in all; then keep the trains measured ([`Estimate::refused`]).
    pub retry_wait: Duration,
    /// Ignore `b_min`/`b_max` and find the range (issue 19): PathQuick sends coarse trains and
    /// then one designed around their result ([`headroom_core::abw::autorange`]); pathChirp
    /// sends one chirp over 1 Mbit/s to the top. The top is 500 Mbit/s or the server's cap.
    pub auto_range: bool,
    /// Auto-ranging's fine train with the shaper size step
    /// ([`headroom_core::abw::shaper::SHAPER_DELTA_P`], 3 B instead of 12 B): four times the bytes,
    /// so a bucket of up to 64 KB in front of a link twice its token rate empties within the
    /// train and reads as its token rate (`headroom probe --detect-shaper`). With 12 B the
    /// train carries about 54 KB beyond half its top rate; a larger bucket is not emptied and
    /// the train reads the link behind it.
    pub shaper_train: bool,
    /// Auto-ranging's fine train is made long enough for this standard deviation, as a fraction
    /// of the capacity, against Poisson cross traffic ([`AutoRange::with_target_sigma`]).
    pub target_sigma: f64,
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
    /// - PathQuick looks for token-bucket shapers in every train (`detect_shaper`,
    ///   `headroom_core::abw::shaper`; `headroom probe --no-detect-shaper` turns it off):
    ///   re-judged with and without detection, 1,944 testbed trains on plain 10, 12 and
    ///   100 Mbit/s links with Poisson cross traffic gave the same verdict, and the shaper
    ///   grid's buckets read within 10 % (docs/results.md, issue 19 session 6). Session 5 had
    ///   turned it off after the issue-4 check read 2.7–3.0 Mbit/s low with it on, one run
    ///   each; that check's trains, re-judged, hold no shaper (a false shaper on a FIFO would
    ///   read the train's share of the link, at least A: high, not low), and its median over 9
    ///   estimates ranged from −2.66 to −0.50 Mbit/s with detection off in one run of 45.
    ///   pathChirp, the baseline, does not look.
    /// - PathQuick's verdict comes from the queue-growth fit (`growth_fit`,
    ///   `headroom_core::abw::growth`): the first rise above the 20 µs floor comes about 20
    ///   packets past the crossing at 100 Mbit/s (docs/results.md, issue 19 session 4).
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
                growth_fit: method == Method::PathQuick,
                detect_shaper: method == Method::PathQuick,
                ..EstimatorConfig::default()
            },
            judge_slack: Some(Duration::from_millis(10)),
            // One window of `headroom serve`'s default budget (50 trains per 10 s), and a little.
            retry_wait: Duration::from_secs(12),
            auto_range: false,
            shaper_train: false,
            target_sigma: headroom_core::abw::autorange::TARGET_SIGMA,
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
    /// The capacity burst after the train as received (empty when none was asked for;
    /// `TrainJudge::with_burst`).
    pub burst: Vec<ProbeRecord>,
    /// Wall-clock time the train's estimate was ready (for `.instbw` lines).
    pub finished_at: Time,
    /// How long the judge waited after the train's inputs were complete before it judged (a
    /// train judged at a loss deadline: the END's grace, or the wait for an END that never
    /// came); a wait for the path asked after the train counts from its inputs, so this much of
    /// it has passed.
    pub judged_after_inputs: Duration,
    pub spacing_error_mean: Dur,
    pub spacing_error_max: Dur,
    pub late: u32,
}

/// A one-sided answer: the available bandwidth is outside the probed range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// Above the range: at least this (the train never saturated the path).
    AtLeast(Rate),
    /// Below the range: at most this (the train queued from its first gap).
    AtMost(Rate),
}

impl Bound {
    /// The bound of a range result; `None` for an estimate or an inconclusive train.
    pub fn of(o: &Outcome) -> Option<Bound> {
        match *o {
            Outcome::AboveRange { at_least } => Some(Bound::AtLeast(at_least)),
            Outcome::BelowRange { at_most } => Some(Bound::AtMost(at_most)),
            _ => None,
        }
    }

    pub fn rate(self) -> Rate {
        match self {
            Bound::AtLeast(r) | Bound::AtMost(r) => r,
        }
    }

    /// `at_least` or `at_most`.
    pub fn name(self) -> &'static str {
        match self {
            Bound::AtLeast(_) => "at_least",
            Bound::AtMost(_) => "at_most",
        }
    }
}

/// Trains asked for but refused by the server after [`EstimateOptions::retry_wait`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refused {
    pub reason: RejectReason,
    /// Trains not measured.
    pub missing: u32,
}

/// The answer of [`estimate`].
#[derive(Clone, Debug)]
pub struct Estimate {
    /// How the train was changed to fit the caps the server announced (`None`: as asked).
    pub fitted_to_caps: Option<String>,
    /// The combined estimate; `None` when the answer is a bound ([`Estimate::bound`]) or
    /// inconclusive.
    pub available_bandwidth: Option<Rate>,
    /// The answer when the available bandwidth is outside the probed range.
    pub bound: Option<Bound>,
    pub outcome: Outcome,
    /// Some trains of `repeat` were refused: the answer is made of the others.
    pub refused: Option<Refused>,
    pub probed_range: (Rate, Rate),
    /// Whole call, handshake included.
    pub elapsed: Duration,
    /// Mean time per train (START to estimate).
    pub elapsed_per_train: Duration,
    pub method: Method,
    pub quality: Quality,
    pub design: TrainDesign,
    /// Auto-ranging's coarse trains, before the trains of the answer ([`Estimate::trains`]);
    /// in a tracking [`ProbeSession`], also a tracked fine train that read out of range.
    pub ranging: Vec<TrainReport>,
    /// How the client's address was proved before the first train.
    pub handshake: Handshake,
    /// The session's round trip to the server, from its last HELLO/CHALLENGE (zero before any):
    /// what auto-ranging's ladder counts each further train as costing
    /// (`Ladder::with_round_trip`), and what a replay of the estimate needs.
    pub round_trip: Duration,
    /// A token-bucket shaper seen by the answer's trains (more than half of them; the mean of
    /// their rates and bursts) or, when auto-ranging stopped at it, by a coarse train.
    pub shaper: Option<ShaperEstimate>,
    /// Bytes of one train at the IP level.
    pub train_bytes: Bytes,
    pub server: SocketAddr,
    pub trains: Vec<TrainReport>,
    /// How long the path needs before it is probed again: the answer's train lost packets to
    /// a full buffer, whose backlog drains at the available bandwidth
    /// (`headroom_core::abw::autorange::Ladder::backlog_drain`); zero otherwise. A
    /// [`ProbeSession`] waits it out before its next estimate; a caller of [`estimate_addr`]
    /// that probes again should too.
    pub recovery: Duration,
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
        /// When the server said to ask again.
        retry_after: Duration,
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
            ProbeError::Rejected { server, reason, cap, .. } => {
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

/// Resolves `HOST[:PORT]` (default port [`DEFAULT_PORT`]) to its first address.
pub fn resolve(target: &str) -> Result<SocketAddr, ProbeError> {
    resolve_all(target)?.into_iter().next().ok_or_else(|| ProbeError::Resolve(format!("`{target}`: no address")))
}

/// Every address `HOST[:PORT]` resolves to (both families for `localhost`), in the resolver's
/// order. A port must be in 1–65535.
pub fn resolve_all(target: &str) -> Result<Vec<SocketAddr>, ProbeError> {
    // A numeric port after the last ':' (not part of a bare IPv6 address) must fit.
    if target.parse::<std::net::IpAddr>().is_err() {
        if let Some((_, port)) = target.rsplit_once(':') {
            if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) {
                match port.parse::<u16>() {
                    Ok(p) if p > 0 => {}
                    _ => {
                        return Err(ProbeError::Resolve(format!("`{target}`: port {port} is not in 1–65535")));
                    }
                }
            }
        }
    }
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
    let addrs: Vec<SocketAddr> =
        with_port.to_socket_addrs().map_err(|e| ProbeError::Resolve(format!("`{target}`: {e}")))?.collect();
    if addrs.is_empty() {
        return Err(ProbeError::Resolve(format!("`{target}`: no address")));
    }
    Ok(addrs)
}

/// The train `options` ask for, for a path of the given address family.
pub fn design_for(options: &EstimateOptions, v6: bool) -> Result<TrainDesign, DesignError> {
    if let Some(d) = &options.design {
        return Ok(d.clone());
    }
    let smallest = Bytes(ip_udp_overhead(v6) + PROBE_HEADER_LEN as u64);
    if let Some(b) = options.b_min {
        if b >= options.b_max {
            return Err(DesignError(format!(
                "B_min {b} is not below B_max {} (lower --bmin or raise --bmax)",
                options.b_max
            )));
        }
    }
    if options.max_size.0 <= smallest.0 {
        return Err(DesignError(format!(
            "packet size {} B is too small: a probe packet holds the IP and UDP headers and a {}-byte probe \
             header ({} B), and the train needs larger ones after it",
            options.max_size.0, PROBE_HEADER_LEN, smallest.0
        )));
    }
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
    let design = design_from_spec(options, smallest)?;
    // The estimator reads nothing from fewer than L + 1 packets (a busy period).
    let need = options.estimator.busy_period.max(1) + 1;
    if (design.packets() as usize) < need {
        return Err(DesignError(format!(
            "the train for {}–{} has {} packets, the estimator needs at least {need} (widen the range: lower \
             --bmin or raise --bmax)",
            options.b_min.map_or("B_min".into(), |r| r.to_string()),
            options.b_max,
            design.packets()
        )));
    }
    Ok(design)
}

fn design_from_spec(options: &EstimateOptions, smallest: Bytes) -> Result<TrainDesign, DesignError> {
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
/// Each address the name resolves to is tried in turn (`localhost`: `::1` and `127.0.0.1`)
/// until one answers the handshake; the last error is returned if none does.
pub fn estimate(target: &str, options: &EstimateOptions) -> Result<Estimate, ProbeError> {
    estimate_addrs(&resolve_all(target)?, options)
}

/// [`estimate`] for already resolved addresses: each is tried in turn until one answers the
/// handshake.
pub fn estimate_addrs(addrs: &[SocketAddr], options: &EstimateOptions) -> Result<Estimate, ProbeError> {
    first_estimate(addrs, options).map(|(_, e)| e)
}

/// The first estimate of a [`ProbeSession`] to the first of `addrs` that answers the
/// handshake (each is tried in turn; the last error is returned if none does), and the session
/// for the estimates after it.
pub fn first_estimate(addrs: &[SocketAddr], options: &EstimateOptions) -> Result<(ProbeSession, Estimate), ProbeError> {
    let mut last = None;
    for &server in addrs {
        // Designed before the handshake, so a train that cannot be built fails without traffic.
        design_for(options, ipv6_on_the_wire(server))?;
        match ProbeSession::open(server).and_then(|mut s| s.estimate(options).map(|e| (s, e))) {
            Err(e @ (ProbeError::Unreachable { .. } | ProbeError::Timeout { waiting_for: "challenge", .. })) => {
                last = Some(e)
            }
            // Nothing answered: an address family this host cannot use.
            Err(ProbeError::Io(e)) if e.kind() == io::ErrorKind::AddrNotAvailable => last = Some(ProbeError::Io(e)),
            other => return other,
        }
    }
    Err(last.unwrap_or_else(|| ProbeError::Resolve("no address".into())))
}

/// The caps a server announces in its CHALLENGE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerCaps {
    pub max_rate: Rate,
    pub max_packets: u16,
    pub max_size: Bytes,
}

/// The train `options` ask for, made to fit the caps the server announced: a top rate above
/// `max_rate` is lowered to it and a largest packet above `max_size` shrunk to it (the design is
/// redone, so PathQuick keeps its equal spacing and growing sizes); a train that still has more
/// packets than `max_packets` is refused here, naming the cap, instead of by the server. Returns
/// the design and, when it was changed, a sentence saying how.
pub fn design_within_caps(
    options: &EstimateOptions,
    v6: bool,
    caps: Option<ServerCaps>,
) -> Result<(TrainDesign, Option<String>), ProbeError> {
    let design = design_for(options, v6)?;
    let Some(caps) = caps.filter(|_| options.design.is_none()) else { return Ok((design, None)) };
    let mut fitted = options.clone();
    let mut changes = Vec::new();
    if caps.max_rate > Rate::ZERO && design.probed_range().1 > caps.max_rate {
        fitted.b_max = caps.max_rate;
        changes.push(format!("top rate {} lowered to the server's cap {}", design.probed_range().1, caps.max_rate));
    }
    if caps.max_size > Bytes::ZERO && options.max_size > caps.max_size {
        fitted.max_size = caps.max_size;
        changes.push(format!("largest packet {} shrunk to the server's cap {}", options.max_size, caps.max_size));
    }
    let design = if changes.is_empty() { design } else { design_for(&fitted, v6)? };
    if design.packets() > u32::from(caps.max_packets) {
        return Err(ProbeError::Design(DesignError(format!(
            "the train has {} packets, above the server's cap of {} (raise --bmin or lower --bmax)",
            design.packets(),
            caps.max_packets
        ))));
    }
    let note = (!changes.is_empty()).then(|| format!("train fitted to the server's caps: {}", changes.join("; ")));
    Ok((design, note))
}

/// [`estimate`] for an already resolved address (one [`ProbeSession`], one estimate).
pub fn estimate_addr(server: SocketAddr, options: &EstimateOptions) -> Result<Estimate, ProbeError> {
    first_estimate(&[server], options).map(|(_, e)| e)
}

/// How an estimate proved the client's address before its first train.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handshake {
    /// A HELLO/CHALLENGE round trip before the first START.
    Challenge,
    /// An address-validation token from an earlier train: the first train was asked for at once
    /// (train + RTT per estimate).
    Token,
    /// The held token was refused (expired, or the address changed): the server's CHALLENGE
    /// cost the round trip after all.
    TokenRefused,
}

impl Handshake {
    pub fn name(self) -> &'static str {
        match self {
            Handshake::Challenge => "challenge",
            Handshake::Token => "token",
            Handshake::TokenRefused => "token_refused",
        }
    }
}

/// A token the client holds, and until when its own clock trusts it.
#[derive(Clone, Copy, Debug)]
struct HeldToken {
    token: AddressToken,
    /// Receipt + lifetime − [`TOKEN_MARGIN`]: the server's clock started before ours saw the token.
    usable_until: Instant,
}

/// A token is not used in its last second (the server measured its age from before our receipt).
const TOKEN_MARGIN: Duration = Duration::from_secs(1);
/// A cookie is valid in its epoch and the next (`headroom serve`: 30 s each), so at least 30 s.
const COOKIE_TRUSTED: Duration = Duration::from_secs(30);

/// One client socket to one server, for many estimates (`headroom probe --interval`).
///
/// The first train is preceded by the HELLO/CHALLENGE round trip; every admitted train brings
/// an address-validation token (`crate::wire`, TOKEN), and later trains ask with it
/// (TOKEN_START), so each estimate after the first costs its trains + RTT, without the
/// handshake's RTT. The token is bound to the client's IP address and lives
/// `headroom serve`'s token lifetime (10 min by default); the client stops using it
/// `TOKEN_MARGIN` before that. A refused token is answered with a CHALLENGE, and the train
/// is asked for again with its cookie ([`Handshake::TokenRefused`]).
///
/// **Tracking with auto-ranging.** After an auto-ranged estimate `A`, the session's next
/// estimate starts with the fine train designed around `A` (the same rule as after a coarse
/// train, [`AutoRange::fine`]); only when that train reads a bound or is inconclusive does it
/// fall back to the coarse ladder. A one-shot [`estimate_addr`] never tracks.
pub struct ProbeSession {
    server: SocketAddr,
    sock: UdpSocket,
    kernel_ts_on: bool,
    nonce: u64,
    cookie: Option<([u8; 16], Instant)>,
    token: Option<HeldToken>,
    caps: Option<ServerCaps>,
    handshake_rtt: Duration,
    next_train: u32,
    track: Option<QuickDesign>,
    /// The capacity the last auto-ranging ladder found (`Ladder::capacity`): a tracked fine
    /// train's estimate is refined with it as the ladder's answer is.
    capacity: Option<Rate>,
    /// No train before this: the last estimate's [`Estimate::recovery`].
    recovered_at: Option<Instant>,
    buf: Vec<u8>,
    out: Vec<u8>,
}

/// What proves the address in a START.
#[derive(Clone, Copy)]
enum Credential {
    Cookie([u8; 16]),
    Token(AddressToken),
}

/// Auto-ranging as `options` ask (the client's, and `headroom probe-replay`'s): the fine
/// train's target spread and, when looking for shapers, at most the shaper size step.
pub fn auto_range_plan(options: &EstimateOptions, top: Rate, smallest: Bytes, largest: Bytes) -> AutoRange {
    let plan = AutoRange::new(top, smallest, largest).with_target_sigma(options.target_sigma);
    if options.shaper_train {
        plan.with_fine_delta_p(SHAPER_DELTA_P)
    } else {
        plan
    }
}

impl ProbeSession {
    /// A socket connected to `server`; nothing is sent yet.
    pub fn open(server: SocketAddr) -> Result<ProbeSession, ProbeError> {
        let bind: SocketAddr = if server.is_ipv6() {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        } else {
            (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
        };
        let sock = UdpSocket::bind(bind).map_err(ProbeError::Io)?;
        sock.connect(server).map_err(|e| io_err(server, "connection", Duration::ZERO, e))?;
        let kernel_ts_on = enable_rx_timestamps(&sock).is_ok();
        // Best effort: without it the probes still arrive, and losses are counted per train.
        let _ = request_receive_buffer(&sock, PROBE_RECEIVE_BUFFER);
        let nonce = random_nonce();
        Ok(ProbeSession {
            server,
            sock,
            kernel_ts_on,
            nonce,
            cookie: None,
            token: None,
            caps: None,
            handshake_rtt: Duration::ZERO,
            next_train: (nonce as u32) & 0x7fff_ffff,
            track: None,
            capacity: None,
            recovered_at: None,
            buf: vec![0u8; 65_536],
            out: Vec::with_capacity(64),
        })
    }

    pub fn server(&self) -> SocketAddr {
        self.server
    }

    /// Whether the next train can be asked for without a handshake.
    pub fn holds_token(&self) -> bool {
        self.token.is_some_and(|t| Instant::now() < t.usable_until)
    }

    /// HELLO until a CHALLENGE with our nonce, three tries.
    fn handshake(&mut self, options: &EstimateOptions) -> Result<(), ProbeError> {
        let (server, sock, buf, out) = (self.server, &self.sock, &mut self.buf, &mut self.out);
        let per_try = options.timeout / 3;
        'tries: for _ in 0..3 {
            Msg::Hello { nonce: self.nonce }.encode(out);
            sock.send(out).map_err(|e| io_err(server, "challenge", options.timeout, e))?;
            let hello_sent = Instant::now();
            let deadline = hello_sent + per_try;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    continue 'tries;
                }
                sock.set_read_timeout(Some(left)).map_err(ProbeError::Io)?;
                match sock.recv(buf) {
                    Ok(n) => {
                        if let Ok(Msg::Challenge { nonce: got, cookie: c, max_rate_bps, max_packets, max_size }) =
                            Msg::decode(&buf[..n])
                        {
                            if got == self.nonce {
                                self.cookie = Some((c, Instant::now()));
                                self.caps = Some(ServerCaps {
                                    max_rate: Rate(max_rate_bps),
                                    max_packets,
                                    max_size: Bytes(max_size as u64),
                                });
                                self.handshake_rtt = hello_sent.elapsed();
                                return Ok(());
                            }
                        }
                    }
                    Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                        continue 'tries
                    }
                    Err(e) => return Err(io_err(server, "challenge", options.timeout, e)),
                }
            }
        }
        Err(ProbeError::Timeout { server, waiting_for: "challenge", after: options.timeout })
    }

    /// The credential for the next START: a usable token, else a cookie still surely valid.
    fn credential(&self) -> Option<Credential> {
        let now = Instant::now();
        if let Some(t) = self.token.filter(|t| now < t.usable_until) {
            return Some(Credential::Token(t.token));
        }
        self.cookie.filter(|(_, at)| now.duration_since(*at) < COOKIE_TRUSTED).map(|(c, _)| Credential::Cookie(c))
    }

    /// One train of `design`, followed by a capacity burst of `burst` packets (0: none), waiting
    /// out the server's "not now" within `retry_wait` in all (`waited` carries the waiting
    /// across the trains of one estimate).
    fn run_one(
        &mut self,
        options: &EstimateOptions,
        design: &TrainDesign,
        burst: u8,
        waited: &mut Duration,
        handshake: &mut Handshake,
    ) -> Result<TrainRun, ProbeError> {
        let server = self.server;
        let params = TrainParams::from_design(design)?.with_burst(burst);
        let schedule = design.schedule();
        let train_timeout = Duration::from_nanos(design.train_length().0) + options.timeout;
        let judge_after =
            options.judge_slack.map(|slack| self.handshake_rtt + Duration::from_nanos(design.train_length().0) + slack);
        // The cut follows the server: no earlier than `judge_slack` after the last packet's
        // arrival predicted from the send times the packets carry (a server that started late,
        // or fell behind under load, does not get its train cut).
        let policy = JudgePolicy {
            cut_after_sender: options.judge_slack.map(dur),
            ..JudgePolicy::socket_receiver(judge_after.map(dur), dur(train_timeout))
        };
        loop {
            let cred = match self.credential() {
                Some(c) => c,
                None => {
                    self.handshake(options)?;
                    self.credential().expect("a fresh cookie")
                }
            };
            let train = self.next_train;
            self.next_train = self.next_train.wrapping_add(1) & 0x7fff_ffff;
            let receiver = TrainReceiver::new(train, &schedule, policy, options.estimator).with_burst(burst as u32);
            let mut link = TrainLink {
                sock: &self.sock,
                server,
                nonce: self.nonce,
                cred,
                buf: &mut self.buf,
                out: &mut self.out,
                token: None,
                retry_cookie: None,
            };
            let r = link.run_train(&params, receiver, train_timeout);
            let (token, retry_cookie) = (link.token, link.retry_cookie);
            if let Some((token, lifetime)) = token {
                let usable_until = Instant::now() + lifetime.saturating_sub(TOKEN_MARGIN);
                self.token = Some(HeldToken { token, usable_until });
            }
            if let Some(c) = retry_cookie {
                self.cookie = Some((c, Instant::now()));
                if *handshake == Handshake::Token {
                    *handshake = Handshake::TokenRefused;
                }
            }
            match r {
                Ok(done) => return Ok(TrainRun::Done(done)),
                // Refused for now (the previous train still draining, the server full, this
                // client's budget spent): wait as told, within `retry_wait` in all.
                Err(ProbeError::Rejected {
                    reason: reason @ (RejectReason::InFlight | RejectReason::Busy | RejectReason::TooMany),
                    retry_after,
                    cap,
                    ..
                }) => {
                    let wait = retry_after.max(Duration::from_millis(50));
                    if *waited + wait > options.retry_wait {
                        return Ok(TrainRun::Refused(ProbeError::Rejected { server, reason, retry_after, cap }));
                    }
                    std::thread::sleep(wait);
                    *waited += wait;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// One estimate (its auto-ranging trains, then `repeat` trains), on this session's socket.
    pub fn estimate(&mut self, options: &EstimateOptions) -> Result<Estimate, ProbeError> {
        // The last estimate's answer overflowed the path's buffer: its backlog drains first.
        if let Some(at) = self.recovered_at.take() {
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
        }
        let t0 = Instant::now();
        let server = self.server;
        let v6 = ipv6_on_the_wire(server);
        design_for(options, v6)?;
        let mut handshake = if self.credential().is_some_and(|c| matches!(c, Credential::Token(_))) {
            Handshake::Token
        } else {
            Handshake::Challenge
        };
        if self.credential().is_none() {
            self.handshake(options)?;
        }
        let repeat = options.repeat.max(1);
        let mut waited = Duration::ZERO;
        let mut all_kernel = self.kernel_ts_on;
        let mut ranging = Vec::new();
        let caps = self.caps;
        let top = caps.map_or(DEFAULT_TOP, |c| c.max_rate.min(DEFAULT_TOP).max(Rate::from_mbps(1)));
        let largest = caps.map_or(options.max_size, |c| options.max_size.min(c.max_size));
        let smallest = Bytes(ip_udp_overhead(v6) + PROBE_HEADER_LEN as u64);
        let auto_quick = options.auto_range && options.design.is_none() && options.method == Method::PathQuick;
        // A tracked fine train whose answer is in range is the estimate itself.
        let mut tracked = None;
        let mut recovery = Duration::ZERO;
        if let Some(fine) = self.track.take().filter(|_| auto_quick) {
            let design = TrainDesign::PathQuick(fine);
            match self.run_one(options, &design, 0, &mut waited, &mut handshake)? {
                TrainRun::Done((mut rep, kernel)) if matches!(rep.estimate.outcome, Outcome::Estimate(_)) => {
                    all_kernel &= kernel;
                    if let Some(o) = reread(options, &design, &rep.estimate, &rep.records, self.capacity) {
                        rep.estimate.outcome = o;
                    }
                    tracked = Some((design, rep));
                }
                TrainRun::Done((rep, kernel)) => {
                    all_kernel &= kernel;
                    ranging.push(rep);
                }
                TrainRun::Refused(e) => return Err(e),
            }
        }
        let (design, fitted_to_caps) = if let Some((d, _)) = &tracked {
            (d.clone(), None)
        } else if options.auto_range && options.design.is_none() {
            match options.method {
                Method::PathChirp => {
                    let wide = EstimateOptions {
                        b_min: Some(Rate::from_mbps(1)),
                        b_max: top,
                        max_size: largest,
                        ..options.clone()
                    };
                    (design_for(&wide, v6)?, None)
                }
                Method::PathQuick => {
                    // The ladder (`Ladder`): coarse trains judged whole, the fine train cut at
                    // the deadline, at most one retry after the queue it built has drained.
                    let plan = auto_range_plan(options, top, smallest, largest);
                    // Every further train costs a round trip: with it the ladder may skip one.
                    let mut ladder = Ladder::from_plan(plan, options.estimator.max_loss_fraction)
                        .with_round_trip(dur(self.handshake_rtt));
                    let whole = EstimateOptions { judge_slack: None, ..options.clone() };
                    // The shaper train is judged whole too: a token bucket delays its tail by
                    // (bytes − burst) / token rate, and that tail is the queue growth at the
                    // token rate the detector reads. Cut at the deadline, a 188 KB train behind a
                    // 10 Mbit/s, 64 KB bucket was judged on its first 42–82 KB and the shaper
                    // went unseen in 1–4 of 5 estimates per run (issue 19 session 11; before
                    // session 10 the deadline never fired while a tail kept coming).
                    let answer_options = if options.shaper_train { &whole } else { options };
                    let mut sent: Vec<(QuickDesign, TrainReport)> = Vec::new();
                    let mut step = ladder.first()?;
                    // How long the judge of the last train waited after its inputs: part of a
                    // wait the ladder asks for the path.
                    let mut waited_after_inputs = Duration::ZERO;
                    let answer = loop {
                        match step {
                            LadderStep::Answer(i) => break i,
                            LadderStep::Train { design, whole: judge_whole, wait, burst } => {
                                std::thread::sleep(Duration::from_nanos(wait.0).saturating_sub(waited_after_inputs));
                                let run_options = if judge_whole { &whole } else { answer_options };
                                let train = TrainDesign::PathQuick(design);
                                // Within the wire's limit and the packets the server allows.
                                let room = caps.map_or(u32::MAX, |c| u32::from(c.max_packets).saturating_sub(design.n));
                                let burst = burst.min(room).min(u32::from(crate::wire::MAX_BURST)) as u8;
                                let rep = match self.run_one(run_options, &train, burst, &mut waited, &mut handshake)? {
                                    TrainRun::Done((rep, kernel)) => {
                                        all_kernel &= kernel;
                                        rep
                                    }
                                    TrainRun::Refused(e) => return Err(e),
                                };
                                ladder.on_burst(&rep.burst);
                                waited_after_inputs = rep.judged_after_inputs;
                                step = ladder.on_verdict(&design, &rep.estimate, &rep.records)?;
                                sent.push((design, rep));
                            }
                        }
                    };
                    let mut answer_train = None;
                    for (i, (d, rep)) in sent.into_iter().enumerate() {
                        if i == answer {
                            answer_train = Some((d, rep));
                        } else {
                            ranging.push(rep);
                        }
                    }
                    let (fine, mut rep) = answer_train.expect("the ladder answers with a train it sent");
                    // The answer re-read from its busy gaps with the coarse trains' capacity.
                    if let Some(o) = ladder.refined() {
                        rep.estimate.outcome = o.clone();
                    }
                    // A shaper's bucket the coarse trains drained before the answer's train.
                    if let Some(sh) = rep.estimate.shaper {
                        let earlier: Vec<EarlierTrain> = ranging.iter().filter_map(earlier_train).collect();
                        rep.estimate.shaper = Some(ShaperEstimate {
                            burst: burst_after_earlier_trains(sh, &rep.records, &earlier),
                            ..sh
                        });
                    }
                    self.capacity = ladder.capacity();
                    recovery = Duration::from_nanos(ladder.backlog_drain().0).saturating_sub(waited_after_inputs);
                    tracked = Some((TrainDesign::PathQuick(fine), rep));
                    (TrainDesign::PathQuick(fine), None)
                }
            }
        } else {
            design_within_caps(options, v6, caps)?
        };

        let mut reports = Vec::new();
        let mut refused = None;
        let mut r = 0;
        let design = match tracked {
            Some((d, rep)) => {
                reports.push(rep);
                r = 1;
                d
            }
            None => design,
        };
        while r < repeat {
            match self.run_one(options, &design, 0, &mut waited, &mut handshake)? {
                TrainRun::Done((mut rep, kernel)) => {
                    all_kernel &= kernel;
                    if let Some(o) = reread(options, &design, &rep.estimate, &rep.records, self.capacity) {
                        rep.estimate.outcome = o;
                    }
                    reports.push(rep);
                }
                TrainRun::Refused(e) => {
                    if reports.is_empty() {
                        return Err(e);
                    }
                    if let ProbeError::Rejected { reason, .. } = e {
                        refused = Some(Refused { reason, missing: repeat - r });
                    }
                    break;
                }
            }
            r += 1;
        }

        let outcomes: Vec<Outcome> = reports.iter().map(|r| r.estimate.outcome.clone()).collect();
        let outcome = if outcomes.len() == 1 { outcomes[0].clone() } else { combine(&outcomes) };
        let shaper = combine_shapers(&reports);
        // Not behind a shaper: a train around its rate would not empty the bucket again.
        if let (true, None, Outcome::Estimate(a), TrainDesign::PathQuick(q)) = (auto_quick, shaper, &outcome, &design) {
            self.track = auto_range_plan(options, top, smallest, largest).fine(*a, q.resolution()).ok();
        }
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
        // The last train of the estimate lost packets to a full buffer (pathChirp's chirp, a
        // fixed-range train): its backlog too.
        if let Some(last) = reports.last().filter(|r| r.estimate.lost > 0) {
            let drain = Duration::from_nanos(overflow_drain(&last.records).0);
            recovery = recovery.max(drain.saturating_sub(last.judged_after_inputs));
        }
        self.recovered_at = (!recovery.is_zero()).then(|| Instant::now() + recovery);
        Ok(Estimate {
            fitted_to_caps,
            available_bandwidth: match outcome {
                Outcome::Estimate(r) => Some(r),
                _ => None,
            },
            bound: Bound::of(&outcome),
            outcome,
            refused,
            probed_range: probed,
            elapsed: t0.elapsed(),
            elapsed_per_train: per_train,
            method: design.method(),
            quality: q,
            train_bytes: design.bytes(),
            design,
            ranging,
            handshake,
            round_trip: self.handshake_rtt,
            shaper,
            server,
            trains: reports,
            recovery,
        })
    }
}

/// A PathQuick train's estimate re-read from its busy gaps with the capacity known
/// ([`dispersion::refine_train`]): `capacity`, the one the session's last ladder found, else the
/// one the train's own receive gaps show ([`dispersion::capacity`]). What [`ProbeSession`]
/// answers for a train that was not auto-ranging's answer (a fixed-range or tracked train), and
/// what `headroom probe-replay` applies. The fixed-range train (`--bmax`, the paper's shape over
/// `[B_max/25, B_max]`) queues from its crossing to its end, and its gaps there show the
/// capacity as a coarse train's do; with it, the fit's error at 12 Mbit/s and 50 % Poisson load
/// halves in the packet-level harness (median |error| 13.6 → 6.0 % of `C`, docs/results.md,
/// issue 19 session 10). `None` for pathChirp or without the queue-growth fit (the papers'
/// judges stay as the papers have them), when no capacity shows, or when the re-reading does
/// not apply (not an estimate, a shaper).
pub fn reread(
    options: &EstimateOptions,
    design: &TrainDesign,
    estimate: &TrainEstimate,
    records: &[ProbeRecord],
    capacity: Option<Rate>,
) -> Option<Outcome> {
    if !matches!(design, TrainDesign::PathQuick(_)) || !options.estimator.growth_fit {
        return None;
    }
    let c = capacity.or_else(|| dispersion::capacity(records, DISPERSION_NOISE))?;
    dispersion::refine_train(estimate, records, c)
}

/// A train of this estimate that took tokens from a shaper's bucket before the answer's train
/// ([`burst_after_earlier_trains`]): one that saw no shaper and lost no packet, as its first
/// arrival and the bytes that arrived; `None` for any other.
fn earlier_train(rep: &TrainReport) -> Option<EarlierTrain> {
    // The capacity burst took tokens from the bucket too (issue 19, session 20).
    let packets = || rep.records.iter().chain(&rep.burst);
    if rep.estimate.shaper.is_some() || packets().any(|r| r.recv_time.is_none()) {
        return None;
    }
    Some(EarlierTrain {
        first_arrival: rep.records.iter().filter_map(|r| r.recv_time).min()?,
        bytes: Bytes(packets().map(|r| r.size.0).sum()),
    })
}

/// The shaper of an estimate: seen by more than half of its trains, their mean rate and burst.
fn combine_shapers(reports: &[TrainReport]) -> Option<ShaperEstimate> {
    // Only trains whose verdict stands (a badly paced train is inconclusive whatever it showed).
    let seen: Vec<ShaperEstimate> = reports
        .iter()
        .filter(|r| matches!(r.estimate.outcome, Outcome::Estimate(_)))
        .filter_map(|r| r.estimate.shaper)
        .collect();
    if seen.is_empty() || 2 * seen.len() <= reports.len() {
        return None;
    }
    let n = seen.len() as u64;
    Some(ShaperEstimate {
        rate: Rate(seen.iter().map(|s| s.rate.bps()).sum::<u64>() / n),
        burst: Bytes(seen.iter().map(|s| s.burst.0).sum::<u64>() / n),
        knee_rate: Rate(seen.iter().map(|s| s.knee_rate.bps()).sum::<u64>() / n),
    })
}

/// One train's end in [`ProbeSession::estimate`]: judged (and whether every timestamp was the
/// kernel's), or refused after the retry budget. One lives per train and is matched at once,
/// so the report is not boxed.
#[allow(clippy::large_enum_variant)]
enum TrainRun {
    Done((TrainReport, bool)),
    Refused(ProbeError),
}

fn dur(d: Duration) -> Dur {
    Dur(d.as_nanos().min(u64::MAX as u128) as u64)
}

/// The caller's side of one train, without the socket: turns the train's datagrams into core's
/// [`TrainJudge`] events and the judged train into a [`TrainReport`]. Its clock (`now`) is the
/// time since START was sent; receive timestamps are the kernel's (or the caller's) and only
/// enter the records.
///
/// **When the train is judged** ([`JudgePolicy::socket_receiver`], rules in
/// `headroom_core::abw::train`): when every packet has arrived or, with a cut deadline
/// (handshake RTT + train length + [`EstimateOptions::judge_slack`] after START), at that
/// moment, whichever comes first. A train above the available bandwidth queues behind itself,
/// so its last packets arrive late (15–35 ms on the paper's 12 Mbit/s path at 9 Mbit/s of
/// cross traffic); they probe rates past the knee, which the estimate does not need. Packets not
/// yet arrived at the cut deadline are left out of the train (it is judged as if it had ended
/// with the last packet received, not as a tail loss) and counted in
/// [`TrainReport::after_deadline`]. The cut deadline follows the server
/// ([`JudgePolicy::cut_after_sender`]), and a cut train is an estimate only when the part
/// received shows the knee (`headroom_core::abw::train::cut_short`), otherwise inconclusive;
/// so is a train the server's END reports as badly paced (`pacing_fault`). Without a cut, the train is judged whole, missing packets
/// lost, 2 ms after the server's END or at the overall timeout. After judging, the client still
/// waits up to 50 ms for the END (its spacing report); that wait is not part of
/// [`TrainReport::elapsed`].
pub struct TrainReceiver {
    train: u32,
    judge: TrainJudge,
    /// The END's spacing report: mean and worst send-time error (ns), late packets; and the
    /// packets it says were sent.
    end: Option<(u32, u32, u16, u16)>,
    /// The train's own packet count: an END that counts no more comes from a server that sent
    /// no burst (one that predates it).
    packets: usize,
    kernel: bool,
}

impl TrainReceiver {
    /// The train is followed by a capacity burst of `packets` (`TrainJudge::with_burst`).
    pub fn with_burst(mut self, packets: u32) -> TrainReceiver {
        self.judge = self.judge.with_burst(packets);
        self
    }

    /// A receiver for train number `train` of `schedule`.
    pub fn new(train: u32, schedule: &[TrainPacket], policy: JudgePolicy, estimator: EstimatorConfig) -> TrainReceiver {
        TrainReceiver {
            train,
            judge: TrainJudge::new(schedule, Time::ZERO, policy, estimator),
            end: None,
            packets: schedule.len(),
            kernel: true,
        }
    }

    /// The judge, for its state.
    pub fn judge(&self) -> &TrainJudge {
        &self.judge
    }

    /// One decoded datagram, arrived at `now`, stamped `at` (by the kernel if `kernel`).
    /// Datagrams of other trains are ignored; the server's refusal of this one is an error.
    pub fn on_message(&mut self, now: Time, msg: &Msg, at: Time, kernel: bool) -> Result<(), Refusal> {
        match *msg {
            Msg::Probe { train, index, send_offset_ns, .. } if train == self.train => {
                let fate = self.judge.on_packet(now, index as u32, Some(Time(send_offset_ns)), at);
                // Only the packets judged need a kernel timestamp.
                self.kernel &= kernel || fate != PacketFate::Accepted;
            }
            Msg::End { train, sent, spacing_err_mean_ns, spacing_err_max_ns, late } if train == self.train => {
                self.end = Some((spacing_err_mean_ns, spacing_err_max_ns, late, sent));
                self.judge.on_end(now);
                self.judge.on_pacing(PacingReport {
                    late: late as u32,
                    mean_error: Dur(spacing_err_mean_ns as u64),
                    max_error: Dur(spacing_err_max_ns as u64),
                });
            }
            Msg::Reject { train, reason, retry_after_ms, cap } if train == self.train => {
                return Err(Refusal { reason, retry_after: Duration::from_millis(retry_after_ms as u64), cap })
            }
            _ => {} // stale packets of an earlier train, or noise
        }
        Ok(())
    }

    /// Time is `now`: judge if a deadline passed; keep listening (until when) or stop.
    pub fn poll(&mut self, now: Time) -> Poll {
        self.judge.poll(now)
    }

    /// The report of the judged train (`finished_at`: the wall-clock time it is made) and
    /// whether every accepted packet had a kernel timestamp; `None` when nothing of the train
    /// came in (or it is not judged yet).
    pub fn finish(self, finished_at: Time) -> Option<(TrainReport, bool)> {
        if self.judge.silent() {
            return None;
        }
        let v = self.judge.verdict()?;
        let (mean, max, late, sent) = self.end.unwrap_or((0, 0, 0, u16::MAX));
        // A server that sent no burst: nothing of it was lost (`earlier_train` counts a lost
        // packet as a bucket that may have run dry).
        let burst = if (sent as usize) <= self.packets { Vec::new() } else { v.burst };
        Some((
            TrainReport {
                train: self.train,
                estimate: v.estimate,
                elapsed: Duration::from_nanos(v.judgement.ready_at.0),
                judged_after_inputs: Duration::from_nanos(
                    v.judgement.decided_at.saturating_since(v.judgement.ready_at).0,
                ),
                after_deadline: v.after_judging,
                records: v.records,
                burst,
                finished_at,
                spacing_error_mean: Dur(mean as u64),
                spacing_error_max: Dur(max as u64),
                late: late as u32,
            },
            self.kernel,
        ))
    }
}

/// The server's REJECT of a train.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub reason: RejectReason,
    pub retry_after: Duration,
    /// The cap that refused and its value, when the server names one.
    pub cap: Option<Cap>,
}

/// One train's exchange on the session's socket: the credential its START carries, and what
/// the server gave back besides the train (a fresh token; a CHALLENGE when the token was refused).
struct TrainLink<'a> {
    sock: &'a UdpSocket,
    server: SocketAddr,
    nonce: u64,
    cred: Credential,
    buf: &'a mut [u8],
    out: &'a mut Vec<u8>,
    /// The TOKEN that came with the train, and its lifetime.
    token: Option<(AddressToken, Duration)>,
    /// The cookie of the CHALLENGE that answered a refused token.
    retry_cookie: Option<[u8; 16]>,
}

impl TrainLink<'_> {
    fn send_start(&mut self, train: u32, params: &TrainParams, timeout: Duration) -> Result<Instant, ProbeError> {
        let (nonce, params) = (self.nonce, *params);
        match self.cred {
            Credential::Cookie(cookie) => Msg::Start { nonce, cookie, train, params },
            Credential::Token(token) => Msg::TokenStart { token, nonce, train, params },
        }
        .encode(self.out);
        let started = Instant::now();
        self.sock.send(self.out).map_err(|e| io_err(self.server, "train", timeout, e))?;
        Ok(started)
    }

    /// Asks for one train and feeds what arrives to `rx` until it says done (see
    /// [`TrainReceiver`] for when the train is judged). A CHALLENGE for our nonce in answer to a
    /// token means the token was refused: the START is sent again with its cookie, once, and
    /// the train's clock restarts there.
    fn run_train(
        &mut self,
        params: &TrainParams,
        mut rx: TrainReceiver,
        timeout: Duration,
    ) -> Result<(TrainReport, bool), ProbeError> {
        let server = self.server;
        let mut started = self.send_start(rx.train, params, timeout)?;
        // The judge's origin on the clock of the receive stamps (CLOCK_REALTIME).
        let mut started_stamp = realtime_now();
        let clock = |started: Instant| Time(dur(started.elapsed()).0);
        let hard_stop = Time(dur(timeout).0);
        // Deadlines are applied as of the last moment the socket was found empty, and before
        // each datagram as of its arrival (its receive stamp): a client that was not scheduled
        // for a while reads what queued meanwhile before judging (those packets arrived in
        // time), and a datagram that arrived after a deadline finds the train judged. Only the
        // overall timeout applies regardless, so a flood cannot hold the loop.
        //
        // Until session 10 only an empty socket advanced the deadlines. A read timeout is
        // rounded up to a jiffy (SO_RCVTIMEO; 4 ms at HZ = 250), so while a train's packets kept
        // coming faster than that the socket was never found empty and the cut deadline never
        // fired: on the testbed at 12 Mbit/s with 6 Mbit/s of cross traffic every train was
        // judged whole, 187–203 ms after its START, against a cut at 184 ms (issue 19).
        let mut drained_at = Time::ZERO;
        loop {
            let now = clock(started);
            let until = match rx.poll(if now >= hard_stop { now } else { drained_at }) {
                Poll::Done => break,
                // The policy always has a give-up deadline; without one, poll again at once.
                Poll::Wait { until } => until.unwrap_or(now),
            };
            let wait = Duration::from_nanos(until.saturating_since(now).0).max(Duration::from_micros(10));
            self.sock.set_read_timeout(Some(wait)).map_err(ProbeError::Io)?;
            let (len, at, kernel) = match recv_timestamped(self.sock, self.buf) {
                Ok(x) => x,
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    drained_at = clock(started);
                    continue; // the loop's head decides: judge now, or give up
                }
                Err(e) => return Err(io_err(server, "train", timeout, e)),
            };
            match Msg::decode(&self.buf[..len]) {
                Ok(Msg::Token { token, lifetime_ms }) => {
                    self.token = Some((token, Duration::from_millis(lifetime_ms as u64)));
                }
                Ok(Msg::Challenge { nonce, cookie, .. })
                    if nonce == self.nonce && matches!(self.cred, Credential::Token(_)) =>
                {
                    self.retry_cookie = Some(cookie);
                    self.cred = Credential::Cookie(cookie);
                    started = self.send_start(rx.train, params, timeout)?;
                    started_stamp = realtime_now();
                    drained_at = Time::ZERO;
                }
                Ok(msg) => {
                    // When it arrived on the judge's clock (never after now: a stepped wall clock).
                    let arrived = Time(at.0.saturating_sub(started_stamp.0)).min(clock(started));
                    if rx.poll(arrived.max(drained_at)) == Poll::Done {
                        break;
                    }
                    rx.on_message(arrived, &msg, at, kernel).map_err(|r| ProbeError::Rejected {
                        server,
                        reason: r.reason,
                        retry_after: r.retry_after,
                        cap: r.cap,
                    })?;
                }
                Err(_) => {}
            }
        }
        rx.finish(realtime_now()).ok_or(ProbeError::Timeout { server, waiting_for: "probe train", after: timeout })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_that_sent_no_burst_leaves_none_lost() {
        // A 30-packet train asked with a burst of 3 from a server that predates bursts: its END
        // counts 30. The train is judged at the END's grace, and no burst packet is "lost".
        let schedule = TrainDesign::PathQuick(QuickDesign {
            t_quick: Dur::from_millis(1),
            p_1: Bytes(48),
            delta_p: Bytes(40),
            n: 30,
        })
        .schedule();
        let policy = JudgePolicy::socket_receiver(None, Dur::from_secs(2));
        let run = |end_sent: u16| {
            let mut rx = TrainReceiver::new(7, &schedule, policy, EstimatorConfig::default()).with_burst(3);
            for (i, p) in schedule.iter().enumerate() {
                let at = Time(p.offset.0 + 1_000_000);
                let probe = Msg::Probe { train: 7, index: i as u16, count: 30, send_offset_ns: p.offset.0 };
                rx.on_message(at, &probe, at, true).unwrap();
            }
            let end = Msg::End { train: 7, sent: end_sent, late: 0, spacing_err_mean_ns: 0, spacing_err_max_ns: 0 };
            rx.on_message(Time(40_000_000), &end, Time(40_000_000), true).unwrap();
            assert_eq!(rx.poll(Time(50_000_000)), Poll::Done);
            rx.finish(Time::ZERO).unwrap().0
        };
        let old_server = run(30);
        assert!(old_server.burst.is_empty(), "{:?}", old_server.burst);
        assert_eq!(old_server.estimate.lost, 0);
        assert!(earlier_train(&old_server).is_some(), "the train still counts against a bucket");
        // A server that sent the burst (END 33) whose packets never came: they were lost.
        let lost = run(33);
        assert_eq!(lost.burst.iter().filter(|r| r.recv_time.is_none()).count(), 3);
        assert!(earlier_train(&lost).is_none());
    }

    #[test]
    fn an_earlier_trains_tokens_include_its_capacity_burst() {
        // A 3-packet train of 1,000 B, then a burst of two: the bucket gave 5,000 B of tokens.
        let record = |index: u32, recv: Option<u64>| ProbeRecord {
            index,
            send_time: Time(index as u64 * 1_000_000),
            recv_time: recv.map(Time),
            size: Bytes(1000),
        };
        let records: Vec<ProbeRecord> = (0..3).map(|i| record(i, Some(5_000_000 + i as u64 * 1_000_000))).collect();
        let estimate = headroom_core::abw::estimate_train(&records, &EstimatorConfig::default());
        let report = |burst: Vec<ProbeRecord>| TrainReport {
            train: 1,
            estimate: estimate.clone(),
            elapsed: Duration::ZERO,
            judged_after_inputs: Duration::ZERO,
            after_deadline: 0,
            records: records.clone(),
            burst,
            finished_at: Time::ZERO,
            spacing_error_mean: Dur::ZERO,
            spacing_error_max: Dur::ZERO,
            late: 0,
        };
        let with = earlier_train(&report(vec![record(3, Some(7_010_000)), record(4, Some(7_020_000))])).unwrap();
        assert_eq!(with.bytes, Bytes(5000));
        assert_eq!(with.first_arrival, Time(5_000_000));
        assert_eq!(earlier_train(&report(Vec::new())).unwrap().bytes, Bytes(3000), "no burst asked");
        // A burst packet lost: the bucket's queue may have overflowed, so the train is not
        // counted, as with a train packet lost.
        assert!(earlier_train(&report(vec![record(3, Some(7_010_000)), record(4, None)])).is_none());
    }

    #[test]
    fn the_probe_socket_gets_a_receive_buffer_for_a_whole_train_up_to_what_it_may() {
        let session = ProbeSession::open("127.0.0.1:9".parse().unwrap()).unwrap();
        let got = crate::timing::receive_buffer(&session.sock).unwrap();
        // The kernel reports twice the size asked (its bookkeeping). With CAP_NET_ADMIN the
        // force option passes net.core.rmem_max; without it the size is capped there.
        let rmem_max: usize = std::fs::read_to_string("/proc/sys/net/core/rmem_max").unwrap().trim().parse().unwrap();
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let expected = if root { PROBE_RECEIVE_BUFFER } else { PROBE_RECEIVE_BUFFER.min(rmem_max) };
        assert!(
            got >= 2 * expected,
            "SO_RCVBUF {got} B, asked {PROBE_RECEIVE_BUFFER} (rmem_max {rmem_max}, root {root})"
        );
    }
}
