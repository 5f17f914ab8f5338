// SPDX-License-Identifier: GPL-2.0
/*
 * bbr1 - cctest's BBRv1 with every hook off.
 *
 * This is the shared core (bbr1_core.c) on its own: it must behave like
 * the kernel's tcp_bbr, and exists so that a comparison between "bbr" and
 * a variant can be repeated as "bbr1" vs the variant, isolating the
 * variant's change from any difference between our core and the kernel's.
 * Its only hook emits tracepoint:bbr1:state.
 */
#define BBR1_CC_NAME "bbr1"
#define BBR1_DEFAULT_CWND_GAIN_X1000 2000	/* BBRv1 ProbeBW cwnd gain */
#include "bbr1_core.c"

#define CREATE_TRACE_POINTS
#include "bbr1_trace.h"

static void bbr1_plain_trace(const struct sock *sk, const struct bbr1_tv *tv,
			     void *ext)
{
	trace_state(sk, tv);
}

static const struct bbr1_hooks bbr1_variant = {
	.trace = bbr1_plain_trace,
};

MODULE_DESCRIPTION("cctest BBRv1 core (no variant hooks)");
