//! Property tests ("fuzzing") of the wire decoder and of the server's checks of START.
//!
//! Bounded in the test command by proptest's default case count (256 per property); run long
//! with e.g. `PROPTEST_CASES=2000000 cargo test --release -p headroom-net --test fuzz`.
//! Every numeric field is drawn from its full range, with 0, 1 and MAX drawn often.

use headroom_core::abw::Method;
use headroom_core::units::{Bytes, Dur, Rate};
use headroom_net::server::check_train;
use headroom_net::wire::{AddressToken, Cap, CapKind, Msg, RejectReason, TrainParams};
use headroom_net::ServerConfig;
use proptest::prelude::*;

fn u64s() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), Just(1), Just(u64::MAX), Just(u64::MAX - 1), Just(1 << 63), any::<u64>(), 0..100_000u64]
}
fn u32s() -> impl Strategy<Value = u32> {
    prop_oneof![Just(0u32), Just(1), Just(u32::MAX), any::<u32>(), 0..20_000_000u32]
}
fn u16s() -> impl Strategy<Value = u16> {
    prop_oneof![Just(0u16), Just(1), Just(u16::MAX), any::<u16>(), 0..3000u16]
}
fn methods() -> impl Strategy<Value = Method> {
    prop_oneof![Just(Method::PathQuick), Just(Method::PathChirp)]
}
fn params() -> impl Strategy<Value = TrainParams> {
    (methods(), u64s(), u32s(), u16s(), u16s(), any::<u8>()).prop_map(|(method, spacing, step, size, count, burst)| {
        TrainParams { method, spacing: Dur(spacing), step, size, count, burst }
    })
}
fn reasons() -> impl Strategy<Value = RejectReason> {
    (1u8..=5).prop_map(|v| RejectReason::from_u8(v).unwrap())
}
fn caps() -> impl Strategy<Value = Option<Cap>> {
    prop_oneof![
        Just(None),
        (1u8..=9, u64s()).prop_map(|(k, value)| Some(Cap { kind: CapKind::from_u8(k).unwrap(), value }))
    ]
}
fn msgs() -> impl Strategy<Value = Msg> {
    prop_oneof![
        u64s().prop_map(|nonce| Msg::Hello { nonce }),
        (u64s(), any::<[u8; 16]>(), u64s(), u16s(), u16s()).prop_map(
            |(nonce, cookie, max_rate_bps, max_packets, max_size)| {
                Msg::Challenge { nonce, cookie, max_rate_bps, max_packets, max_size }
            }
        ),
        (u64s(), any::<[u8; 16]>(), u32s(), params()).prop_map(|(nonce, cookie, train, params)| Msg::Start {
            nonce,
            cookie,
            train,
            params
        }),
        (u32s(), u16s(), u16s(), u64s()).prop_map(|(train, index, count, send_offset_ns)| Msg::Probe {
            train,
            index,
            count,
            send_offset_ns
        }),
        (u32s(), u16s(), u16s(), u32s(), u32s()).prop_map(
            |(train, sent, late, spacing_err_mean_ns, spacing_err_max_ns)| {
                Msg::End { train, sent, late, spacing_err_mean_ns, spacing_err_max_ns }
            }
        ),
        (u32s(), reasons(), u16s(), caps()).prop_map(|(train, reason, retry_after_ms, cap)| Msg::Reject {
            train,
            reason,
            retry_after_ms,
            cap
        }),
        (u64s(), any::<[u8; 16]>(), u32s()).prop_map(|(issued_ms, tag, lifetime_ms)| Msg::Token {
            token: AddressToken { issued_ms, tag },
            lifetime_ms
        }),
        (u64s(), any::<[u8; 16]>(), u64s(), u32s(), params()).prop_map(|(issued_ms, tag, nonce, train, params)| {
            Msg::TokenStart { token: AddressToken { issued_ms, tag }, nonce, train, params }
        }),
    ]
}
fn configs() -> impl Strategy<Value = ServerConfig> {
    (u64s(), 48u64..=1500, 3u16..=u16::MAX, u64s(), u64s()).prop_map(|(rate, size, packets, len, bytes)| ServerConfig {
        max_rate: Rate(rate.max(1)),
        max_size: Bytes(size),
        max_packets: packets.min(4000),
        max_train_length: Dur(len.max(1)),
        max_train_bytes: Bytes(bytes.max(1)),
        ..ServerConfig::default()
    })
}

proptest! {
    /// Arbitrary bytes, with and without a valid header, never panic the decoder.
    #[test]
    fn decode_never_panics(ty in 0u8..=8, body in proptest::collection::vec(any::<u8>(), 0..80), raw in any::<bool>()) {
        let mut b = if raw { Vec::new() } else { vec![b'H', b'R', 1, ty] };
        b.extend_from_slice(&body);
        let _ = Msg::decode(&b);
    }

    /// encode → decode is the identity for every message and every field value.
    #[test]
    fn round_trip(m in msgs()) {
        let mut buf = Vec::new();
        m.encode(&mut buf);
        prop_assert_eq!(Msg::decode(&buf), Ok(m));
    }

    /// The server's check of START never panics or wraps, and admits nothing over a cap.
    #[test]
    fn check_train_respects_every_cap(p in params(), config in prop_oneof![Just(ServerConfig::default()), configs()], v6 in any::<bool>()) {
        let overhead = if v6 { 48 } else { 28 };
        if let Ok(t) = check_train(&p, &config, overhead) {
            prop_assert_eq!(t.schedule.len(), p.count as usize);
            prop_assert!(p.count <= config.max_packets);
            prop_assert!(t.length <= config.max_train_length);
            prop_assert!(t.bytes <= config.max_train_bytes);
            prop_assert_eq!(t.schedule.iter().map(|q| q.size.0 as u128).sum::<u128>(), t.bytes.0 as u128);
            for w in t.schedule.windows(2) {
                prop_assert!(w[1].size <= config.max_size && w[1].size.0 >= overhead + 20);
                let gap = w[1].offset.0.checked_sub(w[0].offset.0);
                prop_assert!(gap.is_some_and(|g| g > 0), "gap {:?}", gap);
                let rate = w[1].size.0 as u128 * 8_000_000_000 / gap.unwrap() as u128;
                prop_assert!(rate <= config.max_rate.bps() as u128 && rate <= t.peak_rate.bps() as u128);
            }
            prop_assert!(t.peak_rate <= config.max_rate);
        }
    }
}
