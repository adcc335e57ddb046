// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * BECC, the Bandwidth Estimation-based Congestion Control algorithm (Kugimoto & Amagai,
 * "帯域見積りに基づく輻輳回避アルゴリズム", IPSJ Journal 1997), as a Linux BPF
 * tcp_congestion_ops. The simulator's version is crates/core/src/cc/becc.rs; this file follows
 * its integer arithmetic and constants and lists below where it differs and why.
 *
 * THE PROBLEM (paper §2). With a maximum window far above the path's bandwidth-delay product,
 * Reno's cwnd grows past the bottleneck's buffer, loses many segments of one window, and on the
 * 1997 BSD stack waits for the retransmission timer: the "intermittent transfer".
 *
 * THE ALGORITHM. BECC keeps Reno (here: the kernel's own tcp_reno_* functions) and adds a third
 * window, the bandwidth window snd_swnd = maximum ACK rate x minimum RTT; the sender sends at
 * most min(rwnd, cwnd, snd_swnd).
 *  - Estimator (§3.2, eq. 1): every ACK adds the advance of the cumulative ACK to t_acked.
 *    Every ms_period = 30 ms, swnd_timer(): t_maxacked = max(t_maxacked, t_acked);
 *    t_msrd_th = 3/4 t_msrd_th + 1/4 t_acked/ms_period (bytes/s, by shifts); t_acked = 0.
 *  - Minimum RTT (§3.3): t_minrtt = min over RTT samples, read with a 1 ms clock.
 *  - On congestion (§3.4): at the 4th duplicate ACK, snd_swnd = t_maxacked * t_minrtt /
 *    ms_period (64-bit, multiplying first), at least 2 segments; t_maxacked = 0; mode
 *    NOT_UPDATE.
 *  - Periodic update (§3.4), every 1.5 s, swnd_update(): UPDATE_START: pre = swnd,
 *    swnd x= 1.25 (x + x>>2), expct_th = 1.125 t_msrd_th (x + x>>3), mode UPDATING. UPDATING:
 *    if t_msrd_th > expct_th grow again (pre = swnd, swnd x= 1.25, expct_th x= 1.125), else
 *    swnd = pre and mode UPDATE_START. NOT_UPDATE: only mode = UPDATE_START. tcp_output()
 *    sets NOT_UPDATE whenever swnd > cwnd (cwnd limits, probing is pointless).
 *
 * LINUX MAPPING AND DIFFERENCES FROM crates/core/src/cc/becc.rs
 *  - No timers: tcp_congestion_ops has none. Both periods are a grid on the socket's own clock
 *    (tp->tcp_mstamp, µs) anchored at the first ACK; every hook first runs, in time order, the
 *    ticks due at or before now (rate tick first on a tie) -- the simulator's "late timers"
 *    rule, so ACK bytes land in the period containing their arrival. Difference: at most
 *    BECC_MAX_CATCH_UP (64) ticks are replayed per ACK (a BPF loop must be bounded); a longer
 *    idle gap (> ~1.9 s) is skipped as the simulator skips gaps over 2^20 ticks: rate estimate
 *    zeroed, grid moved on with its phase, a probe in flight abandoned.
 *  - Bytes acknowledged: the kernel gives packets (ack_sample.pkts_acked); the advance of
 *    tp->snd_una since the previous ACK is the paper's "increase of the ACK number", so BECC
 *    keeps prior_una (one extra u32).
 *  - The 4th duplicate ACK: Linux has no BSD dupack counter in the CA interface (SACK/RACK
 *    decide when to retransmit). BECC sets the window when the connection enters fast
 *    recovery, set_state(TCP_CA_Recovery): the ACK that triggers the fast retransmit (the 3rd
 *    duplicate with classic Reno), one ACK before the paper's. t_maxacked covers completed
 *    30 ms periods only, so this changes the window only if a period boundary falls between the
 *    two ACKs. A retransmission timeout (TCP_CA_Loss) does not set it (as in the paper).
 *  - RTT samples: ack_sample.rtt_us (µs, from the kernel's send timestamps), quantised to the
 *    1 ms clock as floor(now/1ms) - floor(sent/1ms), as the simulator does.
 *  - The cap: a BPF controller can only write snd_cwnd (not a separate send window), so the
 *    bandwidth window is applied as cwnd <= snd_swnd / mss after Reno's increase (cong_avoid),
 *    on every ACK in the Open state, in undo_cwnd, and on entering recovery ssthresh <=
 *    snd_swnd / mss (PRR then reduces cwnd toward it; during recovery PRR governs). BSD's cwnd
 *    kept growing above snd_swnd; Linux's Reno does not grow a cwnd it does not use anyway
 *    (tcp_is_cwnd_limited), so the clamp is where Linux's own cwnd would stop. Consequently
 *    "snd_swnd > snd_cwnd" (tcp_output's check) is "cwnd below snd_swnd / mss" here: cwnd at
 *    the cap means the bandwidth window limits, and probing may go on.
 *  - One window per loss episode (the simulator's default guard, snd_max = tp->snd_nxt): Linux
 *    already enters recovery once per episode; the guard also covers recovery after an RTO.
 *
 * STATE: struct becc lives in icsk_ca_priv (ICSK_CA_PRIV_SIZE = 104 bytes): two u64 deadlines,
 * nine u32, two u8: 56 bytes per connection (the paper's BSD change: 40 bytes, §4.2.1; the
 * simulator's BeccState: 56). The state is also published, only when the bandwidth window or
 * the mode changes (not per ACK), to the socket-storage map becc_view, which user space reads
 * with the socket's fd (headroom's tests do).
 */
#include "hr_tcp.h"

char _license[] SEC("license") = "Dual MIT/GPL";

#define BECC_MS_PERIOD_US 30000ULL       /* §3.2: 30 ms */
#define BECC_UPDATE_PERIOD_US 1500000ULL /* §3.4: 1.5 s */
#define BECC_MSRD_SHIFT 2                /* eq. 1: alpha = 0.75 */
#define BECC_SWND_GROW_SHIFT 2           /* x 1.25 */
#define BECC_EXPCT_GROW_SHIFT 3          /* x 1.125 */
#define BECC_RTT_GRANULARITY_US 1000ULL  /* §3.3: 1 ms tcp_now */
#define BECC_MIN_SWND_SEGMENTS 2         /* floor (the paper is silent) */
#define BECC_MAX_CATCH_UP 64             /* ticks replayed per hook (see above) */

#define SWND_UNLIMITED 0xffffffffU
#define RTT_NONE 0xffffffffU

enum becc_mode { UPDATE_START = 0, UPDATING = 1, NOT_UPDATE = 2 };

#define MODE_MASK 0x3
#define RECOVER_VALID 0x4

struct becc {
	__u64 next_rate_tick; /* µs on tp->tcp_mstamp; 0 until anchored */
	__u64 next_update;
	__u32 snd_swnd; /* bytes; SWND_UNLIMITED before the first congestion */
	__u32 pre_snd_swnd;
	__u32 t_acked;    /* bytes acknowledged in the current ms_period */
	__u32 t_maxacked; /* largest t_acked since the window was last set */
	__u32 t_msrd_th;  /* smoothed actual transfer rate, bytes/s (eq. 1) */
	__u32 expct_th;   /* rate the current probe expects, bytes/s */
	__u32 t_minrtt;   /* µs, quantised to 1 ms; RTT_NONE before a sample */
	__u32 swnd_recover; /* snd_nxt when the window was last set */
	__u32 prior_una;  /* snd_una at the previous ACK (Linux gives packets, not bytes) */
	__u8 mode_flags;  /* bits 0-1: becc_mode; bit 2: swnd_recover valid */
	__u8 ca_state;    /* the last state set_state() saw */
};

_Static_assert(sizeof(struct becc) <= 104, "BECC state must fit ICSK_CA_PRIV_SIZE");
_Static_assert(sizeof(struct becc) == 56, "the size the header comment reports");

/* What user space can read back per socket (bpf_map_lookup_elem with the socket's fd). */
struct becc_view {
	__u32 snd_swnd;
	__u32 pre_snd_swnd;
	__u32 t_minrtt;
	__u32 t_msrd_th;
	__u32 expct_th;
	__u32 mode;
	__u32 sets;    /* windows set on congestion */
	__u32 changes; /* publications */
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct becc_view);
} becc_view SEC(".maps");

static __always_inline struct becc *becc_of(struct sock *sk)
{
	return (struct becc *)inet_csk_ca(sk);
}

static __always_inline __u32 becc_mode(const struct becc *s)
{
	return s->mode_flags & MODE_MASK;
}

static __always_inline void becc_set_mode(struct becc *s, __u32 m)
{
	s->mode_flags = (s->mode_flags & ~MODE_MASK) | m;
}

/* x + (x >> shift), saturating at limit. */
static __always_inline __u32 grow(__u32 x, int shift, __u32 limit)
{
	__u64 y = (__u64)x + (x >> shift);

	return y > limit ? limit : (__u32)y;
}

/* swnd_timer() (§3.2): close one ms_period. */
static __always_inline void swnd_timer(struct becc *s)
{
	__u64 sample = (__u64)s->t_acked * 1000000ULL / BECC_MS_PERIOD_US;
	__u32 x = s->t_msrd_th;

	if (s->t_acked > s->t_maxacked)
		s->t_maxacked = s->t_acked;
	if (sample > 0xffffffffULL)
		sample = 0xffffffffULL;
	s->t_msrd_th = x - (x >> BECC_MSRD_SHIFT) + ((__u32)sample >> BECC_MSRD_SHIFT);
	s->t_acked = 0;
}

/* swnd_update() (§3.4): the 1.5 s probe. */
static __always_inline void swnd_update(struct becc *s)
{
	__u32 mode = becc_mode(s);

	if (mode == NOT_UPDATE) {
		becc_set_mode(s, UPDATE_START);
	} else if (mode == UPDATE_START) {
		if (s->snd_swnd == SWND_UNLIMITED)
			return;
		s->pre_snd_swnd = s->snd_swnd;
		s->snd_swnd = grow(s->snd_swnd, BECC_SWND_GROW_SHIFT, SWND_UNLIMITED - 1);
		s->expct_th = grow(s->t_msrd_th, BECC_EXPCT_GROW_SHIFT, 0xffffffffU);
		becc_set_mode(s, UPDATING);
	} else if (s->t_msrd_th > s->expct_th) {
		s->pre_snd_swnd = s->snd_swnd;
		s->snd_swnd = grow(s->snd_swnd, BECC_SWND_GROW_SHIFT, SWND_UNLIMITED - 1);
		s->expct_th = grow(s->expct_th, BECC_EXPCT_GROW_SHIFT, 0xffffffffU);
	} else {
		s->snd_swnd = s->pre_snd_swnd;
		becc_set_mode(s, UPDATE_START);
	}
}

/* An idle gap too long to replay: empty periods drive t_msrd_th to zero; keep the grid phase. */
static __always_inline void skip_idle_gap(struct becc *s, __u64 now)
{
	__u64 r = s->next_rate_tick, n = s->next_update;

	s->t_acked = 0;
	s->t_msrd_th = 0;
	if (r <= now)
		s->next_rate_tick = r + (now - r) / BECC_MS_PERIOD_US * BECC_MS_PERIOD_US + BECC_MS_PERIOD_US;
	if (n <= now)
		s->next_update = n + (now - n) / BECC_UPDATE_PERIOD_US * BECC_UPDATE_PERIOD_US +
				 BECC_UPDATE_PERIOD_US;
	if (becc_mode(s) == UPDATING) {
		s->snd_swnd = s->pre_snd_swnd;
		becc_set_mode(s, UPDATE_START);
	}
}

/* Runs every tick due at or before now, in time order (rate tick first on a tie). */
static __always_inline void advance(struct becc *s, __u64 now)
{
	int i;

	if (s->next_rate_tick == 0) {
		s->next_rate_tick = now + BECC_MS_PERIOD_US;
		s->next_update = now + BECC_UPDATE_PERIOD_US;
		return;
	}
	for (i = 0; i < BECC_MAX_CATCH_UP; i++) {
		__u64 rate_due = s->next_rate_tick, update_due = s->next_update;

		if (HR_MIN(rate_due, update_due) > now)
			return;
		if (rate_due <= update_due) {
			swnd_timer(s);
			s->next_rate_tick = rate_due + BECC_MS_PERIOD_US;
		} else {
			swnd_update(s);
			s->next_update = update_due + BECC_UPDATE_PERIOD_US;
		}
	}
	if (HR_MIN(s->next_rate_tick, s->next_update) <= now)
		skip_idle_gap(s, now);
}

/* The bandwidth window in segments (at least 2). */
static __always_inline __u32 swnd_segments(const struct becc *s, const struct tcp_sock *tp)
{
	__u32 mss = tp->mss_cache ? tp->mss_cache : 1;
	__u32 pkts = s->snd_swnd / mss;

	return pkts < BECC_MIN_SWND_SEGMENTS ? BECC_MIN_SWND_SEGMENTS : pkts;
}

/* min3(rwnd, cwnd, snd_swnd): the kernel applies rwnd; BECC clamps cwnd. */
static __always_inline void apply_cap(struct becc *s, struct tcp_sock *tp)
{
	__u32 cap;

	if (s->snd_swnd == SWND_UNLIMITED)
		return;
	cap = swnd_segments(s, tp);
	if (tp->snd_cwnd > cap)
		tp->snd_cwnd = cap;
}

/* The check BECC adds to tcp_output(): probing is pointless while cwnd limits. */
static __always_inline void output_check(struct becc *s, const struct tcp_sock *tp)
{
	if (s->snd_swnd == SWND_UNLIMITED || tp->snd_cwnd < swnd_segments(s, tp))
		becc_set_mode(s, NOT_UPDATE);
}

static __always_inline void publish(struct sock *sk, const struct becc *s, int set)
{
	struct becc_view *v = bpf_sk_storage_get(&becc_view, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);

	if (!v)
		return;
	v->snd_swnd = s->snd_swnd;
	v->pre_snd_swnd = s->pre_snd_swnd;
	v->t_minrtt = s->t_minrtt;
	v->t_msrd_th = s->t_msrd_th;
	v->expct_th = s->expct_th;
	v->mode = becc_mode(s);
	v->sets += set;
	v->changes++;
}

SEC("struct_ops")
void BPF_PROG(becc_init, struct sock *sk)
{
	struct becc *s = becc_of(sk);

	s->next_rate_tick = 0;
	s->next_update = 0;
	s->snd_swnd = SWND_UNLIMITED;
	s->pre_snd_swnd = SWND_UNLIMITED;
	s->t_acked = 0;
	s->t_maxacked = 0;
	s->t_msrd_th = 0;
	s->expct_th = 0;
	s->t_minrtt = RTT_NONE;
	s->swnd_recover = 0;
	s->prior_una = tcp_sk(sk)->snd_una;
	s->mode_flags = UPDATE_START; /* §3.4: the update starts in UPDATE_START */
	s->ca_state = TCP_CA_Open;
}

/* Every ACK that reaches the retransmission queue: the estimator's input. */
SEC("struct_ops")
void BPF_PROG(becc_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct becc *s = becc_of(sk);
	__u64 now = tp->tcp_mstamp;
	__u32 una = tp->snd_una, acked, swnd = s->snd_swnd, mode = becc_mode(s);
	__s32 rtt = sample->rtt_us;

	advance(s, now);
	if ((s->mode_flags & RECOVER_VALID) && !seq_before(una, s->swnd_recover))
		s->mode_flags &= ~RECOVER_VALID;
	if (rtt >= 0) {
		__u64 sent = now - (__u64)rtt;
		__u64 ticks = now / BECC_RTT_GRANULARITY_US - sent / BECC_RTT_GRANULARITY_US;
		__u64 q = (ticks ? ticks : 1) * BECC_RTT_GRANULARITY_US;

		if (q < s->t_minrtt)
			s->t_minrtt = (__u32)q;
	}
	acked = una - s->prior_una;
	if ((__s32)acked > 0)
		s->t_acked = (__u64)s->t_acked + acked > 0xffffffffULL ? 0xffffffffU : s->t_acked + acked;
	s->prior_una = una;
	if (s->ca_state == TCP_CA_Open)
		apply_cap(s, tp);
	output_check(s, tp);
	if (swnd != s->snd_swnd || (mode == UPDATING) != (becc_mode(s) == UPDATING))
		publish(sk, s, 0);
}

SEC("struct_ops")
void BPF_PROG(becc_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct becc *s = becc_of(sk);

	tcp_reno_cong_avoid(sk, ack, acked);
	apply_cap(s, tp);
	output_check(s, tp);
}

SEC("struct_ops")
void BPF_PROG(becc_set_state, struct sock *sk, __u8 new_state)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct becc *s = becc_of(sk);
	__u64 w;

	s->ca_state = new_state;
	if (new_state == TCP_CA_Open) {
		apply_cap(s, tp);
		return;
	}
	if (new_state != TCP_CA_Recovery)
		return;
	/* The paper's 4th duplicate ACK (see the header). */
	advance(s, tp->tcp_mstamp);
	becc_set_mode(s, NOT_UPDATE);
	if ((s->mode_flags & RECOVER_VALID) || s->t_maxacked == 0 || s->t_minrtt == RTT_NONE) {
		publish(sk, s, 0);
		return;
	}
	w = (__u64)s->t_maxacked * s->t_minrtt / BECC_MS_PERIOD_US;
	w = HR_MAX(w, (__u64)tp->mss_cache * BECC_MIN_SWND_SEGMENTS);
	w = HR_MIN(w, (__u64)(SWND_UNLIMITED - 1));
	s->snd_swnd = (__u32)w;
	s->t_maxacked = 0;
	s->swnd_recover = tp->snd_nxt;
	s->mode_flags |= RECOVER_VALID;
	if (tp->snd_ssthresh > swnd_segments(s, tp))
		tp->snd_ssthresh = swnd_segments(s, tp);
	publish(sk, s, 1);
}

SEC("struct_ops")
__u32 BPF_PROG(becc_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(becc_undo_cwnd, struct sock *sk)
{
	struct becc *s = becc_of(sk);
	__u32 cwnd = tcp_reno_undo_cwnd(sk);

	if (s->snd_swnd != SWND_UNLIMITED)
		cwnd = HR_MIN(cwnd, swnd_segments(s, tcp_sk(sk)));
	return cwnd;
}

/* The name is rewritten per run by headroom's loader before the object is loaded. */
SEC(".struct_ops.link")
struct tcp_congestion_ops becc = {
	.init = (void *)becc_init,
	.ssthresh = (void *)becc_ssthresh,
	.cong_avoid = (void *)becc_cong_avoid,
	.set_state = (void *)becc_set_state,
	.pkts_acked = (void *)becc_pkts_acked,
	.undo_cwnd = (void *)becc_undo_cwnd,
	.flags = TCP_CONG_NON_RESTRICTED,
	.name = "becc",
};
