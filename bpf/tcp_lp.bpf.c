// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * TCP-LP, TCP Low Priority (Kuzmanovic & Knightly, "TCP-LP: A Distributed Algorithm for Low
 * Priority Data Transfer", IEEE INFOCOM 2003), as a Linux BPF tcp_congestion_ops. It follows
 * the algorithm of Linux's net/ipv4/tcp_lp.c (a kernel module this kernel does not build), with
 * the same constants, written anew for BPF.
 *
 * THE IDEA. A background flow should use only the bandwidth that best-effort (Reno/CUBIC)
 * flows leave unused. TCP-LP detects congestion *earlier* than loss-based flows, from the
 * one-way delay (OWD) of its own packets, and backs off then, so that a loss-based flow sees
 * almost no difference.
 *
 * THE ALGORITHM (paper §3, as tcp_lp.c implements it)
 *  - One-way delay from the timestamp option: owd = rcv_tsval * (1000 / remote_hz) -
 *    rcv_tsecr (ms). The receiver's clock rate remote_hz is estimated from the ratio of tsval
 *    and tsecr advances between ACKs, smoothed 63/64 old + 1/64 new (<< 6 fixed point).
 *  - owd_min and owd_max track the extremes (owd_max with a one-sample reserve, so that one
 *    outlier does not stretch the range); sowd is the smoothed OWD, 7/8 old + 1/8 new (<< 3).
 *  - Early congestion indication: sowd > owd_min + 15 % (owd_max - owd_min) (paper's delta).
 *    On an indication the flow halves cwnd -- or sets it to 1 if the previous indication is
 *    less than the *inference time-out* ago (3 x the latest RTT estimate now - tsecr).
 *  - Within the inference time-out after an indication, cwnd does not grow; otherwise Reno's
 *    increase (the kernel's tcp_reno_cong_avoid). Loss: Reno (ssthresh = cwnd / 2).
 *
 * THE PAPER'S RULE, NOT tcp_lp.c's (as crates/core/src/cc/lp.rs, LpRule::Paper; that file's
 * header has the simulator trace that found each point). tcp_lp.c, ported literally, reached 5 %
 * of an idle 50 Mbit/s link alone, and 12 % with the origin below:
 *  - tcp_lp.c resets owd_min/owd_max to (sowd, 2 sowd) on each indication ("FIXME"): the range
 *    becomes the whole one-way delay (propagation included), a threshold of about 1.5 ms on
 *    the testbed path, one or two ticks of the 1 ms timestamp clock. Here the extremes are kept
 *    over the connection's lifetime, as the paper's d_min/d_max.
 *  - Before any loss, the range is only the flow's own burst jitter (the threshold collapses
 *    when owd_max ~ owd_min; tcp_lp.c's very first sample is an indication). Indications are
 *    tested only after the first loss (the ssthresh hook: fast recovery, RTO, ECN), which
 *    calibrates owd_max with a full queue; before it the flow is Reno.
 *  - An indication counts only from an ACK echoing a segment sent after the last reduction
 *    (rcv_tsecr > last_drop), and not in loss recovery: ACKs of segments sent before it still
 *    carry the old queue, and tcp_lp.c counted them as a second indication (cwnd = 1).
 *  - A reduction also sets ssthresh to the new cwnd (at least 2), so that growth after the
 *    inference time-out is additive (the paper's pseudo-code), not a new slow start.
 *  - tcp_lp.c multiplies tsval by LP_RESOL / remote_hz in integer arithmetic: 0 as soon as the
 *    estimate exceeds 1000 Hz by one (jitter in the tsval/tsecr advances does that), and the OWD
 *    becomes |tsecr|, a clock reading. The factor is rounded to the nearest integer here.
 *
 * LINUX MAPPING AND CHOICES
 *  - Local time is the socket's clock tp->tcp_mstamp in ms (what tcp_lp.c's
 *    tcp_time_stamp_ts() is for the millisecond TCP timestamps Linux uses by default; with
 *    microsecond timestamps (TCP_USEC_TS routes) tcp_lp.c would use µs, this file keeps ms).
 *  - rcv_tsecr has the connection's tsoffset removed by the kernel, so it is on the same clock.
 *  - Without the timestamp option (rcv_tsval and rcv_tsecr zero) there is no OWD: no indication
 *    is ever raised and TCP-LP behaves like Reno.
 *  - DIFFERENCE from tcp_lp.c: the OWD is taken relative to the first sample, which is mapped
 *    to half the first RTT sample (owd_origin). Since Linux 4.10 each connection's timestamps
 *    carry a random offset, so tcp_lp.c's |tsval - tsecr| is an arbitrary 32-bit number: sowd
 *    (= owd << 3 in a u32) overflows, and the reset owd_max = 2 x sowd, which assumes an OWD of
 *    the path's order, makes the threshold meaningless. Measured here before this change: alone
 *    on an idle 50 Mbit/s path the literal port reached 5 % of the link.
 *
 * STATE: struct lp in icsk_ca_priv: eleven u32, 44 bytes per connection (104 available).
 */
#include "hr_tcp.h"

char _license[] SEC("license") = "Dual MIT/GPL";

#define LP_TS_HZ 1000U   /* the local timestamp clock, Hz */
#define LP_RESOL 1000U   /* OWD resolution, Hz */
#define LP_DELTA_PCT 15U /* indication threshold, % of the OWD range (paper: delta = 0.15) */
#define LP_INFER_MULT 3U /* inference time-out = 3 x RTT */

enum lp_flags {
	LP_VALID_RHZ = 1 << 0,  /* remote clock rate estimated */
	LP_VALID_OWD = 1 << 1,  /* OWD sample valid */
	LP_WITHIN_THR = 1 << 3, /* smoothed OWD below the threshold */
	LP_WITHIN_INF = 1 << 4, /* within the inference time-out of the last indication */
	LP_LOSS_SEEN = 1 << 5,  /* a loss calibrated the OWD range (paper rule, see above) */
};

struct lp {
	__u32 flag;
	__u32 sowd;        /* smoothed OWD << 3 */
	__u32 owd_min;
	__u32 owd_max;
	__u32 owd_max_rsv; /* reserve for owd_max */
	__u32 remote_hz;
	__u32 remote_ref_time; /* tsval at the previous estimate */
	__u32 local_ref_time;  /* tsecr at the previous estimate */
	__u32 last_drop;       /* ms of the last indication; 0: none */
	__u32 inference;       /* inference time-out, ms */
	__u32 owd_origin;      /* raw OWD that maps to 0; 0: not set yet (see above) */
};

_Static_assert(sizeof(struct lp) <= 104, "TCP-LP state must fit ICSK_CA_PRIV_SIZE");
_Static_assert(sizeof(struct lp) == 44, "the size the header comment reports");

static __always_inline struct lp *lp_of(struct sock *sk)
{
	return (struct lp *)inet_csk_ca(sk);
}

SEC("struct_ops")
void BPF_PROG(lp_init, struct sock *sk)
{
	struct lp *lp = lp_of(sk);

	lp->flag = 0;
	lp->sowd = 0;
	lp->owd_min = 0xffffffff;
	lp->owd_max = 0;
	lp->owd_max_rsv = 0;
	lp->remote_hz = 0;
	lp->remote_ref_time = 0;
	lp->local_ref_time = 0;
	lp->last_drop = 0;
	lp->inference = 0;
	lp->owd_origin = 0;
}

SEC("struct_ops")
void BPF_PROG(lp_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	if (!(lp_of(sk)->flag & LP_WITHIN_INF))
		tcp_reno_cong_avoid(sk, ack, acked);
}

/* The receiver's timestamp clock rate (Hz), smoothed 63/64 in << 6 fixed point. */
static __always_inline __u32 remote_hz_estimate(struct lp *lp, __u32 tsval, __u32 tsecr)
{
	__s64 rhz = (__s64)lp->remote_hz << 6;
	__s64 m;

	if (lp->remote_ref_time != 0 && lp->local_ref_time != 0 && tsval != lp->remote_ref_time &&
	    tsecr != lp->local_ref_time) {
		__u32 dv = tsval - lp->remote_ref_time, de = tsecr - lp->local_ref_time;
		/* |LP_TS_HZ * dv / de| with both differences read as signed 32-bit. */
		__u64 adv = (__s32)dv < 0 ? (__u64)(-(__s32)dv) : dv;
		__u64 ade = (__s32)de < 0 ? (__u64)(-(__s32)de) : de;

		m = (__s64)(LP_TS_HZ * adv / ade);
		if (rhz > 0) {
			m -= rhz >> 6;
			rhz += m;
		} else {
			rhz = m << 6;
		}
	}
	if ((rhz >> 6) > 0)
		lp->flag |= LP_VALID_RHZ;
	else
		lp->flag &= ~LP_VALID_RHZ;
	lp->remote_ref_time = tsval;
	lp->local_ref_time = tsecr;
	return (__u32)(rhz >> 6);
}

/* One OWD sample, ms (with the clocks' arbitrary offset); 0 when none. */
static __always_inline __u32 owd_sample(struct lp *lp, __u32 tsval, __u32 tsecr)
{
	__s64 owd = 0;

	lp->remote_hz = remote_hz_estimate(lp, tsval, tsecr);
	if ((lp->flag & LP_VALID_RHZ) && lp->remote_hz) {
		__u32 scale = (LP_RESOL + lp->remote_hz / 2) / lp->remote_hz; /* rounded, see above */

		owd = (__s64)tsval * scale - (__s64)tsecr * (LP_RESOL / LP_TS_HZ);
		if (owd < 0)
			owd = -owd;
	}
	if (owd > 0)
		lp->flag |= LP_VALID_OWD;
	else
		lp->flag &= ~LP_VALID_OWD;
	return (__u32)owd;
}

static __always_inline void rtt_sample(struct lp *lp, __u32 tsval, __u32 tsecr, __s32 rtt_us)
{
	__u32 mowd = owd_sample(lp, tsval, tsecr);

	if (!(lp->flag & LP_VALID_RHZ) || !(lp->flag & LP_VALID_OWD))
		return;
	/* Relative to the first sample, which counts as half the RTT (see the header). */
	if (lp->owd_origin == 0)
		lp->owd_origin = mowd - (__u32)rtt_us / 2000 - 1;
	mowd = mowd - lp->owd_origin;
	if ((__s32)mowd <= 0)
		mowd = 1;
	if (mowd < lp->owd_min)
		lp->owd_min = mowd;
	if (mowd > lp->owd_max) {
		if (mowd > lp->owd_max_rsv) {
			lp->owd_max = lp->owd_max_rsv == 0 ? mowd : lp->owd_max_rsv;
			lp->owd_max_rsv = mowd;
		} else {
			lp->owd_max = mowd;
		}
	}
	if (lp->sowd != 0)
		lp->sowd += mowd - (lp->sowd >> 3); /* 7/8 old + 1/8 new */
	else
		lp->sowd = mowd << 3;
}

SEC("struct_ops")
void BPF_PROG(lp_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct lp *lp = lp_of(sk);
	__u32 now = (__u32)(tp->tcp_mstamp / 1000);
	__u32 tsval = tp->rx_opt.rcv_tsval, tsecr = tp->rx_opt.rcv_tsecr, delta;

	if (tsval == 0 && tsecr == 0)
		return; /* no timestamp option: Reno */
	if (sample->rtt_us > 0)
		rtt_sample(lp, tsval, tsecr, sample->rtt_us);

	delta = now - tsecr;
	if ((__s32)delta > 0)
		lp->inference = LP_INFER_MULT * delta;
	if (lp->last_drop && now - lp->last_drop < lp->inference)
		lp->flag |= LP_WITHIN_INF;
	else
		lp->flag &= ~LP_WITHIN_INF;

	if ((lp->sowd >> 3) < lp->owd_min + LP_DELTA_PCT * (lp->owd_max - lp->owd_min) / 100)
		lp->flag |= LP_WITHIN_THR;
	else
		lp->flag &= ~LP_WITHIN_THR;
	if (lp->flag & LP_WITHIN_THR)
		return;
	/* The paper rule's conditions (header): a calibrated range, open state, a segment sent
	 * after the last reduction. */
	if (!(lp->flag & LP_LOSS_SEEN) || inet_csk(sk)->icsk_ca_state != TCP_CA_Open ||
	    (lp->last_drop && (__s32)(tsecr - lp->last_drop) <= 0))
		return;

	/* Early congestion indication. */
	if (lp->flag & LP_WITHIN_INF)
		tp->snd_cwnd = 1;
	else
		tp->snd_cwnd = HR_MAX(tp->snd_cwnd >> 1, 1U);
	tp->snd_ssthresh = HR_MAX(tp->snd_cwnd, 2U);
	lp->last_drop = now;
}

SEC("struct_ops")
__u32 BPF_PROG(lp_ssthresh, struct sock *sk)
{
	lp_of(sk)->flag |= LP_LOSS_SEEN;
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(lp_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

/* The name is rewritten per run by headroom's loader before the object is loaded. */
SEC(".struct_ops.link")
struct tcp_congestion_ops tcp_lp = {
	.init = (void *)lp_init,
	.ssthresh = (void *)lp_ssthresh,
	.cong_avoid = (void *)lp_cong_avoid,
	.pkts_acked = (void *)lp_pkts_acked,
	.undo_cwnd = (void *)lp_undo_cwnd,
	.flags = TCP_CONG_NON_RESTRICTED,
	.name = "lp",
};
