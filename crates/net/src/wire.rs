//! The probe protocol's wire format, version 1 (documented in `docs/pathquick.md`).
//!
//! Every datagram starts with a 4-byte header: the magic `"HR"` (0x48 0x52), the version (1)
//! and a message type. Integers are big-endian. Sizes of probe packets are IP-level sizes (the
//! papers' `P_i`); the UDP payload is that minus the IP and UDP headers.
//!
//! ```text
//! type 1 HELLO      client → server   nonce u64, zero padding to exactly 64 bytes
//! type 2 CHALLENGE  server → client   nonce u64, cookie [16], max_rate u64 (bit/s),
//!                                     max_packets u16, max_size u16          (40 bytes)
//! type 3 START      client → server   nonce u64, cookie [16], train u32, method u8,
//!                                     spacing_ns u64, step u32, size u16, count u16 (49 bytes)
//!                                     [, burst u8]                          (50 bytes)
//!                   PathQuick: spacing = T_quick, step = ΔP, size = P_1, count = N
//!                   pathChirp: spacing = T_chirp, step = γ·10⁶, size = P, count = M
//!                   burst: packets of the train's last size sent back to back after it
//!                   (indices count, count + 1, …; at most MAX_BURST; absent = 0)
//! type 4 PROBE      server → client   train u32, index u16, count u16, send_offset_ns u64,
//!                                     zero padding to the packet's size (20-byte header)
//! type 5 END        server → client   train u32, sent u16, late u16, spacing_err_mean_ns u32,
//!                                     spacing_err_max_ns u32                 (20 bytes)
//! type 6 REJECT     server → client   train u32, reason u8, retry_after_ms u16, and when a cap
//!                                     refused: cap u8 (wire::CapKind), value u64 (11 or 20 bytes)
//! type 7 TOKEN      server → client   issued_ms u64, tag [16], lifetime_ms u32 (32 bytes)
//! type 8 TOKEN_START client → server  issued_ms u64, tag [16], nonce u64, train u32, method u8,
//!                                     spacing_ns u64, step u32, size u16, count u16 (57 bytes)
//!                                     [, burst u8]                          (58 bytes)
//! ```
//!
//! **The capacity burst** (issue 19, session 20) is an optional last byte of START and
//! TOKEN_START, as REJECT's cap is of REJECT: a client asks for a burst only with a train
//! whose last packets should show the capacity (`headroom_core::abw::autorange::Ladder`); a
//! server that predates it reads the 49 or 57 bytes it knows and sends no burst, and the client
//! then reads the capacity from the train alone. The END's `sent` counts the burst's packets.
//!
//! **Address-validation tokens** (types 7 and 8, for continuous monitoring; the idea of QUIC's
//! NEW_TOKEN, RFC 9000 §8.1.3): with every admitted train the server sends a TOKEN, a MAC of the
//! client's IP address and the token's issue time under the server's secret key. A later
//! TOKEN_START that echoes a token still within its lifetime gets its train without the
//! HELLO/CHALLENGE round trip; one with an expired, forged or other address's token is answered
//! with a CHALLENGE for its nonce (never larger than the TOKEN_START), after which the client
//! sends an ordinary START.
//!
//! The server answers an unverified address only with a CHALLENGE, never larger than the HELLO
//! that caused it (no amplification); PROBE, END and REJECT go only to an address that echoed a
//! valid cookie in a START.

use headroom_core::abw::{ChirpDesign, DesignError, Method, QuickDesign, TrainDesign};
use headroom_core::units::{Bytes, Dur, Rate};

pub const MAGIC: [u8; 2] = *b"HR";
pub const VERSION: u8 = 1;
pub const HELLO_LEN: usize = 64;
pub const CHALLENGE_LEN: usize = 40;
pub const START_LEN: usize = 49;
pub const PROBE_HEADER_LEN: usize = 20;
pub const END_LEN: usize = 20;
pub const REJECT_LEN: usize = 11;
/// A REJECT that names the cap that refused.
pub const REJECT_CAP_LEN: usize = 20;
pub const TOKEN_LEN: usize = 32;
pub const TOKEN_START_LEN: usize = 57;
/// The most packets a capacity burst may ask for.
pub const MAX_BURST: u8 = 16;

/// An address-validation token as the client holds and echoes it: the server's issue time (ms
/// on the server's own clock) and the MAC that binds it to the client's IP address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddressToken {
    pub issued_ms: u64,
    pub tag: [u8; 16],
}

/// Why the server refused a train.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejectReason {
    /// Too many clients at once.
    Busy = 1,
    /// The train exceeds the rate, size, packet or length caps.
    OverCap = 2,
    /// Too many trains from this client recently.
    TooMany = 3,
    /// The train parameters do not make a valid design.
    BadDesign = 4,
    /// This client already has a train in flight.
    InFlight = 5,
}

impl RejectReason {
    pub fn from_u8(v: u8) -> Option<RejectReason> {
        Some(match v {
            1 => RejectReason::Busy,
            2 => RejectReason::OverCap,
            3 => RejectReason::TooMany,
            4 => RejectReason::BadDesign,
            5 => RejectReason::InFlight,
            _ => return None,
        })
    }

    pub fn describe(self) -> &'static str {
        match self {
            RejectReason::Busy => "server busy: too many concurrent clients",
            RejectReason::OverCap => "train exceeds the server's rate, size or length caps",
            RejectReason::TooMany => "too many trains from this client recently",
            RejectReason::BadDesign => "server found the train parameters invalid",
            RejectReason::InFlight => "a train to this client is already in flight",
        }
    }
}

/// A limit of the server, named in a refusal with its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapKind {
    /// Highest rate one gap of a train may probe (bit/s).
    Rate = 1,
    /// Sum of the highest rates of all trains in flight (bit/s).
    TotalRate = 2,
    /// Largest probe packet, IP level (bytes).
    PacketSize = 3,
    /// Smallest probe packet, IP level: IP and UDP headers plus the PROBE header (bytes).
    MinPacketSize = 4,
    /// Packets of one train.
    Packets = 5,
    /// Time from a train's first to its last packet (ns).
    TrainLength = 6,
    /// Bytes of one train, IP level.
    TrainBytes = 7,
    /// Clients with a train in flight at once.
    Clients = 8,
    /// Trains per client IP per window.
    TrainsPerWindow = 9,
}

impl CapKind {
    pub fn from_u8(v: u8) -> Option<CapKind> {
        use CapKind::*;
        [Rate, TotalRate, PacketSize, MinPacketSize, Packets, TrainLength, TrainBytes, Clients, TrainsPerWindow]
            .into_iter()
            .find(|k| *k as u8 == v)
    }
}

/// The cap that refused a train and its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cap {
    pub kind: CapKind,
    pub value: u64,
}

impl std::fmt::Display for Cap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = self.value;
        match self.kind {
            CapKind::Rate => write!(f, "highest probed rate {}", Rate(v)),
            CapKind::TotalRate => write!(f, "total sending rate of all trains in flight {}", Rate(v)),
            CapKind::PacketSize => write!(f, "largest packet {v} B"),
            CapKind::MinPacketSize => write!(f, "smallest packet {v} B (headers)"),
            CapKind::Packets => write!(f, "{v} packets per train"),
            CapKind::TrainLength => write!(f, "train length {}", Dur(v)),
            CapKind::TrainBytes => write!(f, "{v} B per train"),
            CapKind::Clients => write!(f, "{v} clients at once"),
            CapKind::TrainsPerWindow => write!(f, "{v} trains per client per window"),
        }
    }
}

/// The train a START asks for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TrainParams {
    pub method: Method,
    pub spacing: Dur,
    pub step: u32,
    pub size: u16,
    pub count: u16,
    /// Packets of the capacity burst after the train (0: none; module doc).
    pub burst: u8,
}

impl TrainParams {
    pub fn from_design(d: &TrainDesign) -> Result<TrainParams, DesignError> {
        let too_big = |what: &str| DesignError(format!("{what} does not fit the wire format"));
        Ok(match d {
            TrainDesign::PathQuick(q) => TrainParams {
                method: Method::PathQuick,
                spacing: q.t_quick,
                step: u32::try_from(q.delta_p.0).map_err(|_| too_big("ΔP"))?,
                size: u16::try_from(q.p_1.0).map_err(|_| too_big("P_1"))?,
                count: u16::try_from(q.n).map_err(|_| too_big("N"))?,
                burst: 0,
            },
            TrainDesign::PathChirp(c) => TrainParams {
                method: Method::PathChirp,
                spacing: c.t_chirp,
                step: (c.gamma * 1e6).round() as u32,
                size: u16::try_from(c.size.0).map_err(|_| too_big("packet size"))?,
                count: u16::try_from(c.m).map_err(|_| too_big("M"))?,
                burst: 0,
            },
        })
    }

    /// The same train followed by a capacity burst of `burst` packets.
    pub fn with_burst(self, burst: u8) -> TrainParams {
        TrainParams { burst, ..self }
    }

    /// The design these parameters describe (validated only for shape; caps are the server's).
    pub fn design(&self) -> Result<TrainDesign, DesignError> {
        if self.spacing.0 == 0 || self.count < 3 || self.size == 0 {
            return Err(DesignError("train parameters: zero spacing or size, or fewer than 3 packets".into()));
        }
        Ok(match self.method {
            Method::PathQuick => {
                if self.step == 0 {
                    return Err(DesignError("train parameters: ΔP = 0".into()));
                }
                TrainDesign::PathQuick(QuickDesign {
                    t_quick: self.spacing,
                    p_1: Bytes(self.size as u64),
                    delta_p: Bytes(self.step as u64),
                    n: self.count as u32,
                })
            }
            Method::PathChirp => {
                let gamma = self.step as f64 / 1e6;
                if gamma <= 1.0 || gamma > 10.0 {
                    return Err(DesignError(format!("train parameters: spread factor {gamma} outside (1, 10]")));
                }
                let size = Bytes(self.size as u64);
                TrainDesign::PathChirp(ChirpDesign {
                    gamma,
                    size,
                    b_min: size.per(self.spacing),
                    m: self.count as u32,
                    t_chirp: self.spacing,
                })
            }
        })
    }
}

/// One decoded datagram.
#[derive(Clone, Debug, PartialEq)]
pub enum Msg {
    Hello { nonce: u64 },
    Challenge { nonce: u64, cookie: [u8; 16], max_rate_bps: u64, max_packets: u16, max_size: u16 },
    Start { nonce: u64, cookie: [u8; 16], train: u32, params: TrainParams },
    Probe { train: u32, index: u16, count: u16, send_offset_ns: u64 },
    End { train: u32, sent: u16, late: u16, spacing_err_mean_ns: u32, spacing_err_max_ns: u32 },
    Reject { train: u32, reason: RejectReason, retry_after_ms: u16, cap: Option<Cap> },
    Token { token: AddressToken, lifetime_ms: u32 },
    TokenStart { token: AddressToken, nonce: u64, train: u32, params: TrainParams },
}

/// Why a datagram was not understood.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], Malformed> {
        let s = self.b.get(self.at..self.at + N).ok_or(Malformed("truncated"))?;
        self.at += N;
        let mut out = [0u8; N];
        out.copy_from_slice(s);
        Ok(out)
    }
    fn u8(&mut self) -> Result<u8, Malformed> {
        Ok(self.take::<1>()?[0])
    }
    fn u16(&mut self) -> Result<u16, Malformed> {
        Ok(u16::from_be_bytes(self.take()?))
    }
    fn u32(&mut self) -> Result<u32, Malformed> {
        Ok(u32::from_be_bytes(self.take()?))
    }
    fn u64(&mut self) -> Result<u64, Malformed> {
        Ok(u64::from_be_bytes(self.take()?))
    }
    fn token(&mut self) -> Result<AddressToken, Malformed> {
        Ok(AddressToken { issued_ms: self.u64()?, tag: self.take()? })
    }
    fn train_params(&mut self) -> Result<TrainParams, Malformed> {
        let method = match self.u8()? {
            1 => Method::PathQuick,
            2 => Method::PathChirp,
            _ => return Err(Malformed("unknown method")),
        };
        let (spacing, step, size, count) = (Dur(self.u64()?), self.u32()?, self.u16()?, self.u16()?);
        // The burst byte is optional (module doc).
        let burst = if self.at < self.b.len() { self.u8()? } else { 0 };
        Ok(TrainParams { method, spacing, step, size, count, burst })
    }
}

fn put_train(out: &mut Vec<u8>, train: u32, params: &TrainParams) {
    out.extend_from_slice(&train.to_be_bytes());
    out.push(match params.method {
        Method::PathQuick => 1,
        Method::PathChirp => 2,
    });
    out.extend_from_slice(&params.spacing.0.to_be_bytes());
    out.extend_from_slice(&params.step.to_be_bytes());
    out.extend_from_slice(&params.size.to_be_bytes());
    out.extend_from_slice(&params.count.to_be_bytes());
    if params.burst > 0 {
        out.push(params.burst);
    }
}

fn header(out: &mut Vec<u8>, ty: u8) {
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.push(ty);
}

impl Msg {
    /// Decodes one datagram.
    pub fn decode(b: &[u8]) -> Result<Msg, Malformed> {
        if b.len() < 4 || b[0..2] != MAGIC {
            return Err(Malformed("bad magic"));
        }
        if b[2] != VERSION {
            return Err(Malformed("unsupported version"));
        }
        let mut r = Reader { b, at: 4 };
        let m = match b[3] {
            1 => {
                if b.len() != HELLO_LEN {
                    return Err(Malformed("HELLO must be exactly 64 bytes"));
                }
                Msg::Hello { nonce: r.u64()? }
            }
            2 => Msg::Challenge {
                nonce: r.u64()?,
                cookie: r.take()?,
                max_rate_bps: r.u64()?,
                max_packets: r.u16()?,
                max_size: r.u16()?,
            },
            3 => {
                let nonce = r.u64()?;
                let cookie = r.take()?;
                let train = r.u32()?;
                Msg::Start { nonce, cookie, train, params: r.train_params()? }
            }
            4 => Msg::Probe { train: r.u32()?, index: r.u16()?, count: r.u16()?, send_offset_ns: r.u64()? },
            5 => Msg::End {
                train: r.u32()?,
                sent: r.u16()?,
                late: r.u16()?,
                spacing_err_mean_ns: r.u32()?,
                spacing_err_max_ns: r.u32()?,
            },
            6 => {
                let train = r.u32()?;
                let reason = RejectReason::from_u8(r.u8()?).ok_or(Malformed("unknown reject reason"))?;
                let retry_after_ms = r.u16()?;
                // Version-1 servers before the cap field send 11 bytes.
                let cap = if b.len() >= REJECT_CAP_LEN {
                    let kind = CapKind::from_u8(r.u8()?).ok_or(Malformed("unknown cap"))?;
                    Some(Cap { kind, value: r.u64()? })
                } else {
                    None
                };
                Msg::Reject { train, reason, retry_after_ms, cap }
            }
            7 => Msg::Token { token: r.token()?, lifetime_ms: r.u32()? },
            8 => {
                let token = r.token()?;
                let nonce = r.u64()?;
                let train = r.u32()?;
                Msg::TokenStart { token, nonce, train, params: r.train_params()? }
            }
            _ => return Err(Malformed("unknown message type")),
        };
        Ok(m)
    }

    /// Encodes into `out` (cleared first). PROBE is encoded without its padding; see
    /// [`encode_probe`].
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.clear();
        match self {
            Msg::Hello { nonce } => {
                header(out, 1);
                out.extend_from_slice(&nonce.to_be_bytes());
                out.resize(HELLO_LEN, 0);
            }
            Msg::Challenge { nonce, cookie, max_rate_bps, max_packets, max_size } => {
                header(out, 2);
                out.extend_from_slice(&nonce.to_be_bytes());
                out.extend_from_slice(cookie);
                out.extend_from_slice(&max_rate_bps.to_be_bytes());
                out.extend_from_slice(&max_packets.to_be_bytes());
                out.extend_from_slice(&max_size.to_be_bytes());
            }
            Msg::Start { nonce, cookie, train, params } => {
                header(out, 3);
                out.extend_from_slice(&nonce.to_be_bytes());
                out.extend_from_slice(cookie);
                put_train(out, *train, params);
            }
            Msg::Token { token, lifetime_ms } => {
                header(out, 7);
                out.extend_from_slice(&token.issued_ms.to_be_bytes());
                out.extend_from_slice(&token.tag);
                out.extend_from_slice(&lifetime_ms.to_be_bytes());
            }
            Msg::TokenStart { token, nonce, train, params } => {
                header(out, 8);
                out.extend_from_slice(&token.issued_ms.to_be_bytes());
                out.extend_from_slice(&token.tag);
                out.extend_from_slice(&nonce.to_be_bytes());
                put_train(out, *train, params);
            }
            Msg::Probe { train, index, count, send_offset_ns } => {
                header(out, 4);
                out.extend_from_slice(&train.to_be_bytes());
                out.extend_from_slice(&index.to_be_bytes());
                out.extend_from_slice(&count.to_be_bytes());
                out.extend_from_slice(&send_offset_ns.to_be_bytes());
            }
            Msg::End { train, sent, late, spacing_err_mean_ns, spacing_err_max_ns } => {
                header(out, 5);
                out.extend_from_slice(&train.to_be_bytes());
                out.extend_from_slice(&sent.to_be_bytes());
                out.extend_from_slice(&late.to_be_bytes());
                out.extend_from_slice(&spacing_err_mean_ns.to_be_bytes());
                out.extend_from_slice(&spacing_err_max_ns.to_be_bytes());
            }
            Msg::Reject { train, reason, retry_after_ms, cap } => {
                header(out, 6);
                out.extend_from_slice(&train.to_be_bytes());
                out.push(*reason as u8);
                out.extend_from_slice(&retry_after_ms.to_be_bytes());
                if let Some(c) = cap {
                    out.push(c.kind as u8);
                    out.extend_from_slice(&c.value.to_be_bytes());
                }
            }
        }
    }
}

/// Writes a PROBE of `payload_len` UDP payload bytes into `buf` (which must be at least that
/// long and at least [`PROBE_HEADER_LEN`]); the padding is zeros. Returns the slice to send.
pub fn encode_probe(
    buf: &mut [u8],
    payload_len: usize,
    train: u32,
    index: u16,
    count: u16,
    send_offset_ns: u64,
) -> &[u8] {
    let len = payload_len.max(PROBE_HEADER_LEN).min(buf.len());
    buf[0..2].copy_from_slice(&MAGIC);
    buf[2] = VERSION;
    buf[3] = 4;
    buf[4..8].copy_from_slice(&train.to_be_bytes());
    buf[8..10].copy_from_slice(&index.to_be_bytes());
    buf[10..12].copy_from_slice(&count.to_be_bytes());
    buf[12..20].copy_from_slice(&send_offset_ns.to_be_bytes());
    buf[PROBE_HEADER_LEN..len].fill(0);
    &buf[..len]
}

/// Whether datagrams to or from `addr` travel as IPv6. An IPv4-mapped address (`::ffff:a.b.c.d`,
/// what a dual-stack `[::]` socket sees of an IPv4 peer) travels as IPv4, with IPv4's 28 header
/// bytes, although the socket is an IPv6 one.
pub fn ipv6_on_the_wire(addr: std::net::SocketAddr) -> bool {
    addr.ip().to_canonical().is_ipv6()
}

/// IP + UDP header bytes for an address family.
pub fn ip_udp_overhead(v6: bool) -> u64 {
    if v6 {
        48
    } else {
        28
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv4_mapped_peer_travels_as_ipv4() {
        let on = |a: &str| ipv6_on_the_wire(a.parse().unwrap());
        assert!(!on("127.0.0.1:7447"));
        assert!(!on("[::ffff:127.0.0.1]:7447"), "a dual-stack socket's IPv4 peer");
        assert!(on("[::1]:7447"));
        assert!(on("[2001:db8::1]:7447"));
    }

    #[test]
    fn round_trips_and_lengths() {
        let params = TrainParams {
            method: Method::PathChirp,
            spacing: Dur(114_538_462),
            step: 1_200_000,
            size: 1489,
            count: 28,
            burst: 0,
        };
        // A START that asks for a capacity burst carries one byte more.
        let bursting = params.with_burst(10);
        let msgs = [
            (Msg::Hello { nonce: 7 }, HELLO_LEN),
            (
                Msg::Challenge { nonce: 7, cookie: [9; 16], max_rate_bps: 1_000_000, max_packets: 500, max_size: 1500 },
                CHALLENGE_LEN,
            ),
            (Msg::Start { nonce: 7, cookie: [1; 16], train: 3, params }, START_LEN),
            (Msg::Start { nonce: 7, cookie: [1; 16], train: 3, params: bursting }, START_LEN + 1),
            (Msg::Probe { train: 3, index: 4, count: 28, send_offset_ns: 99 }, PROBE_HEADER_LEN),
            (Msg::End { train: 3, sent: 28, late: 1, spacing_err_mean_ns: 5, spacing_err_max_ns: 50 }, END_LEN),
            (Msg::Reject { train: 3, reason: RejectReason::Busy, retry_after_ms: 100, cap: None }, REJECT_LEN),
            (
                Msg::Reject {
                    train: 3,
                    reason: RejectReason::OverCap,
                    retry_after_ms: 0,
                    cap: Some(Cap { kind: CapKind::TrainLength, value: u64::MAX }),
                },
                REJECT_CAP_LEN,
            ),
            (Msg::Token { token: AddressToken { issued_ms: 5, tag: [3; 16] }, lifetime_ms: 600_000 }, TOKEN_LEN),
            (
                Msg::TokenStart { token: AddressToken { issued_ms: 5, tag: [3; 16] }, nonce: 8, train: 4, params },
                TOKEN_START_LEN,
            ),
            (
                Msg::TokenStart {
                    token: AddressToken { issued_ms: 5, tag: [3; 16] },
                    nonce: 8,
                    train: 4,
                    params: bursting,
                },
                TOKEN_START_LEN + 1,
            ),
        ];
        let mut buf = Vec::new();
        for (m, len) in msgs {
            m.encode(&mut buf);
            assert_eq!(buf.len(), len, "{m:?}");
            assert_eq!(Msg::decode(&buf).unwrap(), m);
        }
        let mut hello = Vec::new();
        Msg::Hello { nonce: 1 }.encode(&mut hello);
        Msg::Challenge { nonce: 1, cookie: [0; 16], max_rate_bps: 0, max_packets: 0, max_size: 0 }.encode(&mut buf);
        assert!(buf.len() <= hello.len(), "the challenge must not amplify");
        let mut token_start = Vec::new();
        Msg::TokenStart { token: AddressToken { issued_ms: 0, tag: [0; 16] }, nonce: 1, train: 0, params }
            .encode(&mut token_start);
        assert!(buf.len() <= token_start.len(), "the retry challenge must not amplify");
        let mut pb = vec![0xffu8; 1500];
        let p = encode_probe(&mut pb, 1472, 3, 4, 28, 99).to_vec();
        assert_eq!(p.len(), 1472);
        assert!(p[PROBE_HEADER_LEN..].iter().all(|&b| b == 0));
        assert_eq!(Msg::decode(&p).unwrap(), Msg::Probe { train: 3, index: 4, count: 28, send_offset_ns: 99 });
        let d = params.design().unwrap();
        assert_eq!(TrainParams::from_design(&d).unwrap(), params);
    }

    #[test]
    fn rejects_garbage() {
        for b in [&b""[..], b"HR", b"XX\x01\x01", b"HR\x02\x01", b"HR\x01\x09", b"HR\x01\x01short", b"HR\x01\x03\0\0"] {
            assert!(Msg::decode(b).is_err(), "{b:?}");
        }
    }
}
