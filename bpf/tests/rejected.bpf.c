/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * A congestion controller the kernel's verifier must refuse, for the loader's error-path test
 * (crates/bpf/tests/load.rs, compiled there with clang at test time; never built into headroom).
 *
 * tcp_congestion_ops programs may write only a few fields of the socket (snd_cwnd,
 * snd_ssthresh, the controller's private area, ...): bpf_tcp_ca's struct-access check refuses
 * the write to srtt_us below, so loading fails in the verifier with its log.
 */
#include "hr_tcp.h"

char _license[] SEC("license") = "Dual MIT/GPL";

SEC("struct_ops")
void BPF_PROG(hr_rejected_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_sk(sk)->srtt_us = acked;
}

SEC("struct_ops")
__u32 BPF_PROG(hr_rejected_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(hr_rejected_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops hr_rejected = {
	.cong_avoid = (void *)hr_rejected_cong_avoid,
	.ssthresh = (void *)hr_rejected_ssthresh,
	.undo_cwnd = (void *)hr_rejected_undo_cwnd,
	.flags = TCP_CONG_NON_RESTRICTED,
	.name = "hr_rejected",
};
