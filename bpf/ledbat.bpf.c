// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * LEDBAT, Low Extra Delay Background Transport (RFC 6817), as a Linux BPF tcp_congestion_ops.
 *
 * THE IDEA (RFC 6817 §2). A background flow should saturate an otherwise idle bottleneck but add
 * only a small, bounded queueing delay, and yield to loss-based flows. LEDBAT measures one-way
 * delay, takes its minimum over a long history as the base (propagation) delay, and steers the
 * queueing delay it observes, current - base, toward TARGET with a linear controller.
 *
 * THE ALGORITHM (RFC 6817 §2.4.2, the sender)
 *  - Every ACK gives a one-way delay sample (§2.4.1 / here: rcv_tsval - rcv_tsecr, the
 *    receiver's clock when it sent the ACK minus ours when we sent the echoed segment: the
 *    forward one-way delay plus an unknown but constant clock offset, which cancels in
 *    current - base).
 *  - base_delay = min over BASE_HISTORY = 10 one-minute buckets of the samples (update_base_delay).
 *  - current_delay = FILTER(last CURRENT_FILTER = 4 samples), FILTER = min (§3.4.2 allows it).
 *  - queuing_delay = current_delay - base_delay; off_target = (TARGET - queuing_delay) / TARGET;
 *    cwnd += GAIN * off_target * bytes_newly_acked * MSS / cwnd (GAIN = 1): at most one packet
 *    per RTT up, down as fast as the delay exceeds TARGET.
 *  - cwnd <= flightsize + ALLOWED_INCREASE (1) packet; cwnd >= MIN_CWND (2) packets.
 *    Linux calls cong_avoid after the ACK removed its packets, so flightsize is packets_out +
 *    acked; the rule only stops growth (an application- or receiver-limited flow does not
 *    inflate cwnd), it never shrinks cwnd below its value before the ACK.
 *  - Loss: cwnd = max(cwnd / 2, MIN_CWND), at most once per RTT (Linux's recovery episode).
 *
 * CHOICES THE RFC LEAVES OPEN
 *  - TARGET: const volatile ledbat_target_us, default 100 ms (the RFC's MUST-NOT-exceed value),
 *    set at load time by headroom's loader (`headroom cc load ledbat --ledbat-target-ms N`).
 *  - Slow start (§2.4.2 allows a more aggressive start): Reno slow start while the queueing
 *    delay is below TARGET / 2; the first delay above it ends slow start (ssthresh = cwnd).
 *  - Units: Linux's cwnd is in packets; the fractional part of the increase is kept in 1/1024
 *    packet (cwnd_frac), so bytes_newly_acked * MSS / cwnd becomes packets_acked * 1024 / cwnd.
 *  - Timestamps are Linux's 1 ms TCP timestamps: the delay resolution is 1 ms and both clocks
 *    are assumed to tick at 1 kHz (the RFC's clock-skew correction is not implemented). Samples
 *    are stored relative to the first one (+2^31) so that min() never wraps.
 *  - Without the timestamp option the flow has no delay samples and behaves like Reno.
 *
 * STATE: struct ledbat in icsk_ca_priv: 76 bytes per connection (104 available).
 */
#include "hr_tcp.h"

char _license[] SEC("license") = "Dual MIT/GPL";

/* Set by the loader before load (RFC 6817 TARGET, µs). */
const volatile __u32 ledbat_target_us = 100000;

#define BASE_HISTORY 10
#define CURRENT_FILTER 4
#define MIN_CWND 2
#define ALLOWED_INCREASE 1
#define FRAC_ONE 1024
#define MINUTE_US 60000000ULL
#define NO_SAMPLE 0xffffffffU
#define REL_BIAS 0x80000000U

#define HAVE_ORIGIN 0x1

struct ledbat {
	__u32 base[BASE_HISTORY];   /* per-minute minima, newest first, ms relative to origin;
				     * NO_SAMPLE: unused */
	__u32 cur[CURRENT_FILTER];  /* the last samples, newest first, same units */
	__u32 origin;               /* the first sample's raw value - REL_BIAS */
	__u32 last_minute;          /* minute of base[0] */
	__s32 cwnd_frac;            /* fractional cwnd change, 1/1024 packet */
	__u32 qdelay_ms;            /* last queueing delay, ms */
	__u8 flags;
};

_Static_assert(sizeof(struct ledbat) <= 104, "LEDBAT state must fit ICSK_CA_PRIV_SIZE");
_Static_assert(sizeof(struct ledbat) == 76, "the size the header comment reports");

static __always_inline struct ledbat *ledbat_of(struct sock *sk)
{
	return (struct ledbat *)inet_csk_ca(sk);
}

SEC("struct_ops")
void BPF_PROG(ledbat_init, struct sock *sk)
{
	struct ledbat *l = ledbat_of(sk);
	int i;

#pragma unroll
	for (i = 0; i < BASE_HISTORY; i++)
		l->base[i] = NO_SAMPLE;
#pragma unroll
	for (i = 0; i < CURRENT_FILTER; i++)
		l->cur[i] = NO_SAMPLE;
	l->origin = 0;
	l->last_minute = (__u32)(tcp_sk(sk)->tcp_mstamp / MINUTE_US);
	l->cwnd_frac = 0;
	l->qdelay_ms = 0;
	l->flags = 0;
}

static __always_inline __u32 min_of_base(const struct ledbat *l)
{
	__u32 m = NO_SAMPLE;
	int i;

#pragma unroll
	for (i = 0; i < BASE_HISTORY; i++)
		m = HR_MIN(m, l->base[i]);
	return m;
}

static __always_inline __u32 min_of_current(const struct ledbat *l)
{
	__u32 m = NO_SAMPLE;
	int i;

#pragma unroll
	for (i = 0; i < CURRENT_FILTER; i++)
		m = HR_MIN(m, l->cur[i]);
	return m;
}

/* Every ACK: one delay sample (RFC 6817 update_base_delay, update_current_delay). */
SEC("struct_ops")
void BPF_PROG(ledbat_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ledbat *l = ledbat_of(sk);
	__u32 tsval = tp->rx_opt.rcv_tsval, tsecr = tp->rx_opt.rcv_tsecr, raw, rel, minute;
	__u32 base, cur;
	int i;

	if (tsval == 0 && tsecr == 0)
		return;
	raw = tsval - tsecr;
	if (!(l->flags & HAVE_ORIGIN)) {
		l->origin = raw - REL_BIAS;
		l->flags |= HAVE_ORIGIN;
	}
	rel = raw - l->origin;

	/* Newest first; shifting with constant indices (the verifier refuses a variable offset
	 * into the socket). */
	minute = (__u32)(tp->tcp_mstamp / MINUTE_US);
	if (minute != l->last_minute) {
		l->last_minute = minute;
#pragma unroll
		for (i = BASE_HISTORY - 1; i > 0; i--)
			l->base[i] = l->base[i - 1];
		l->base[0] = rel;
	} else {
		l->base[0] = HR_MIN(l->base[0], rel);
	}
#pragma unroll
	for (i = CURRENT_FILTER - 1; i > 0; i--)
		l->cur[i] = l->cur[i - 1];
	l->cur[0] = rel;

	base = min_of_base(l);
	cur = min_of_current(l);
	l->qdelay_ms = cur > base ? cur - base : 0;
}

SEC("struct_ops")
void BPF_PROG(ledbat_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ledbat *l = ledbat_of(sk);
	__u32 target = ledbat_target_us ? ledbat_target_us : 1;
	__u64 qd_us = (__u64)l->qdelay_ms * 1000;
	__u32 cwnd = tp->snd_cwnd, max_allowed, steps;
	__u64 mag;

	if (!(l->flags & HAVE_ORIGIN)) {
		tcp_reno_cong_avoid(sk, ack, acked);
		return;
	}
	if (tcp_in_slow_start(tp)) {
		if (qd_us * 2 < target) {
			tcp_slow_start(tp, acked);
			return;
		}
		tp->snd_ssthresh = cwnd; /* delay reached TARGET / 2: leave slow start */
	}
	if (cwnd == 0)
		cwnd = 1;
	/* GAIN * off_target * acked / cwnd, in 1/1024 packet; off_target = (T - qd) / T. */
	if (qd_us <= target) {
		mag = (__u64)(target - qd_us) * acked * FRAC_ONE / ((__u64)target * cwnd);
		l->cwnd_frac += (__s32)HR_MIN(mag, (__u64)(1U << 30));
	} else {
		mag = (qd_us - target) * acked * FRAC_ONE / ((__u64)target * cwnd);
		l->cwnd_frac -= (__s32)HR_MIN(mag, (__u64)(1U << 30));
	}
	if (l->cwnd_frac >= FRAC_ONE) {
		steps = (__u32)l->cwnd_frac / FRAC_ONE;
		cwnd += steps;
		l->cwnd_frac -= (__s32)(steps * FRAC_ONE);
	} else if (l->cwnd_frac <= -FRAC_ONE) {
		steps = (__u32)(-l->cwnd_frac) / FRAC_ONE;
		cwnd = cwnd > steps + MIN_CWND ? cwnd - steps : MIN_CWND;
		l->cwnd_frac += (__s32)(steps * FRAC_ONE);
	}
	/* flightsize before this ACK = packets still out + the ones it acknowledged. */
	max_allowed = tp->packets_out + acked + ALLOWED_INCREASE;
	cwnd = HR_MIN(cwnd, HR_MAX(max_allowed, tp->snd_cwnd));
	cwnd = HR_MIN(cwnd, tp->snd_cwnd_clamp);
	tp->snd_cwnd = HR_MAX(cwnd, (__u32)MIN_CWND);
}

SEC("struct_ops")
__u32 BPF_PROG(ledbat_ssthresh, struct sock *sk)
{
	return HR_MAX(tcp_sk(sk)->snd_cwnd >> 1, (__u32)MIN_CWND);
}

SEC("struct_ops")
__u32 BPF_PROG(ledbat_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

/* The name is rewritten per run by headroom's loader before the object is loaded. */
SEC(".struct_ops.link")
struct tcp_congestion_ops ledbat = {
	.init = (void *)ledbat_init,
	.ssthresh = (void *)ledbat_ssthresh,
	.cong_avoid = (void *)ledbat_cong_avoid,
	.pkts_acked = (void *)ledbat_pkts_acked,
	.undo_cwnd = (void *)ledbat_undo_cwnd,
	.flags = TCP_CONG_NON_RESTRICTED,
	.name = "ledbat",
};
