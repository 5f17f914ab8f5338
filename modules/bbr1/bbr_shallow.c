// SPDX-License-Identifier: GPL-2.0
/*
 * bbr_shallow - "BBR Shallow" (Claypool et al., "Sharing but not Caring:
 * TCP BBR and TCP CUBIC at the Network Bottleneck", AICT 2019; seed 004,
 * section IV-E.1).
 *
 * In shallow buffers (< 1.5 BDP) BBRv1's cwnd cap of 2 BDP in ProbeBW keeps
 * up to one extra BDP in flight that the buffer cannot hold, so BBR sees
 * steady loss and starves CUBIC.  The paper's fix is the smallest possible
 * change: a ProbeBW cwnd gain of 1.5 instead of 2.  Here that is only the
 * default of the core's cwnd_gain_x1000 parameter; Startup, Drain and
 * ProbeRTT keep BBR's gains.  No extra state, no hooks beyond tracing.
 */
#define BBR1_CC_NAME "bbr_shallow"
/* ProbeBW cwnd gain 1.5 (004, section IV-E.1). */
#define BBR1_DEFAULT_CWND_GAIN_X1000 1500
/* The papers' BBR had no ACK-aggregation allowance (module parameter). */
#define BBR1_DEFAULT_ACK_AGGREGATION 0
#include "bbr1_core.c"

#define CREATE_TRACE_POINTS
#include "bbr_shallow_trace.h"

static void shallow_trace(const struct sock *sk, const struct bbr1_tv *tv,
			  void *ext)
{
	trace_state(sk, tv);
}

static const struct bbr1_hooks bbr1_variant = {
	.trace = shallow_trace,
};

MODULE_DESCRIPTION("cctest BBR Shallow: BBRv1 with ProbeBW cwnd gain 1.5");
