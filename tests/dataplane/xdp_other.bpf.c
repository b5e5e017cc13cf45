// SPDX-License-Identifier: BSD-3-Clause
/* An XDP program that is not sigmad's, for test_dp_afxdp.sh's refusal case. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int other_prog(struct xdp_md *ctx)
{
	(void)ctx;
	return XDP_PASS;
}

char _license[] SEC("license") = "BSD";
