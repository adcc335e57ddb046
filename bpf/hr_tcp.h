/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Shared helpers for headroom's BPF congestion controllers in bpf/.
 *
 * The controllers are `struct tcp_congestion_ops` implemented as BPF struct_ops and registered
 * with SEC(".struct_ops.link") and TCP_CONG_NON_RESTRICTED, so that any socket may select one
 * with setsockopt(TCP_CONGESTION). They must never become the system default
 * (net.ipv4.tcp_congestion_control): headroom's loader never touches that sysctl.
 *
 * vmlinux.h is generated at build time from the running kernel's BTF (crates/bpf/build.rs).
 * Reno's three functions are the kernel's own, called as kfuncs (allowed for tcp_ca programs
 * since Linux 5.13).
 */
#ifndef HR_TCP_H
#define HR_TCP_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

/* From include/net/tcp.h (a #define, so not in the BTF). */
#define TCP_CONG_NON_RESTRICTED 0x1
#define TCP_INFINITE_SSTHRESH 0x7fffffff

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;
extern __u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked) __ksym;

static __always_inline struct tcp_sock *tcp_sk(const struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct inet_connection_sock *inet_csk(const struct sock *sk)
{
	return (struct inet_connection_sock *)sk;
}

static __always_inline void *inet_csk_ca(const struct sock *sk)
{
	return (void *)inet_csk(sk)->icsk_ca_priv;
}

static __always_inline int tcp_in_slow_start(const struct tcp_sock *tp)
{
	return tp->snd_cwnd < tp->snd_ssthresh;
}

/* 32-bit sequence-space comparisons (include/net/tcp.h). */
static __always_inline int seq_before(__u32 a, __u32 b)
{
	return (__s32)(a - b) < 0;
}

#define HR_MIN(a, b) ((a) < (b) ? (a) : (b))
#define HR_MAX(a, b) ((a) > (b) ? (a) : (b))

#endif
