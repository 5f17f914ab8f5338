// SPDX-License-Identifier: GPL-2.0
/*
 * bbr_cws - BBR Congestion Window Scaling (Song, Kim, Cho, "BBR-CWS:
 * Improving the Inter-Protocol Fairness of BBR", Electronics 2020;
 * seed 000, Algorithm 1).  How the paper's ambiguities are decided is
 * summarised in modules/README.md ("Algorithms and decisions") and listed
 * below.
 *
 * Idea.  Against CUBIC, BBRv1 keeps up to 2 BDP in flight whatever the
 * buffer; in a shallow buffer that is a standing overflow, and in a deep
 * one the queue CUBIC builds inflates BBR's RTprop.  BBR-CWS treats loss
 * as a sign of a wrong operating point:
 *
 *  - entering fast recovery it cuts cwnd to a third of what is in flight
 *    and holds packet conservation until recovery ends (lines 1-14), so
 *    the queue drains and, in a deep buffer, a lower RTprop appears;
 *  - an upper scaling factor usf in [0.2, 1] caps cwnd at usf * BBR's
 *    target (lines 16-21);
 *  - 3 RTTs after a loss: if no lower RTprop was measured, the buffer is
 *    shallow and BBR itself overfills it, so usf *= 0.9; if one was, usf
 *    goes back to 1 and the corrected RTprop does the work (lines 23-32);
 *  - every 3 loss-free RTTs usf grows by 0.01 to keep probing (33-37).
 *
 * Two readings of Recovery (hold_in_recovery): Algorithm 1 lines 16-21 let
 * cwnd regrow by the ACKed packets up to upper_cwnd during packet
 * conservation (0, the default); the prose of section 4 ("The congestion
 * window size is maintained until the lost packet is retransmitted and the
 * TCP_CA_Recovery state is exited") holds it at upper_cwnd / 3 (1).
 *
 * Decisions: "rtt" is the smoothed RTT; the recovery cut
 * replaces BBR's own recovery step (no loss subtraction, no restore of the
 * pre-recovery cwnd); conservation lasts until Recovery ends, not one
 * round; cwnd never goes below 4 packets; the reported/traced cwnd gain is
 * the state machine's gain times usf (the scale applied to the target).
 * Timestamps use the socket's microsecond clock (tp->tcp_mstamp) instead
 * of the paper's jiffies.
 *
 * An RTO without fast recovery first (TCP_CA_Loss entered from Open or
 * Disorder) is a loss too: section 4.1 names both TCP_CA_Recovery and
 * TCP_CA_Loss as "packet loss detected", so it starts the same 3-RTT
 * judgement of usf (deviation cws-rto-loss, docs/algorithms.md). It does
 * not get the /3 cut:
 * the kernel's RTO already set cwnd to the inflight + 1.
 */
#define BBR1_CC_NAME "bbr_cws"
#define BBR1_DEFAULT_CWND_GAIN_X1000 2000	/* BBRv1 ProbeBW cwnd gain */
/* The papers' BBR had no ACK-aggregation allowance (module parameter). */
#define BBR1_DEFAULT_ACK_AGGREGATION 0
#include "bbr1_core.c"

#define CREATE_TRACE_POINTS
#include "bbr_cws_trace.h"

/* usf decrease factor on an unexplained loss, x1000 (000 Alg. 1 line 26,
 * beta; text: default 0.9).
 */
CCTEST_PARAM_INT(beta_x1000, 900, 0, 1000,
		 "usf decrease factor x1000 (000 Alg.1 l.26: 0.9)");

/* usf increase per loss-free wait, x1000 (000 Alg. 1 line 35, delta;
 * text: 0.01).
 */
CCTEST_PARAM_INT(delta_x1000, 10, 0, 1000,
		 "usf increase step x1000 (000 Alg.1 l.35: 0.01)");

/* Lower bound of usf, x1000 (000 Alg. 1 lines 28-29: 0.2). */
CCTEST_PARAM_INT(usf_floor_x1000, 200, 1, 1000,
		 "usf lower bound x1000 (000 Alg.1 l.28: 0.2)");

/* Wait before judging a loss / between increases, in smoothed RTTs
 * (000 Alg. 1 lines 25 and 34: 3).
 */
CCTEST_PARAM_INT(wait_rtts, 3, 0, 1000,
		 "wait in smoothed RTTs (000 Alg.1 l.25,34: 3)");

/* Recovery cut: cwnd = inflight / recovery_div (000 Alg. 1 line 7: 3). */
CCTEST_PARAM_INT(recovery_div, 3, 1, 100,
		 "cwnd = inflight/div entering Recovery (000 Alg.1 l.7: 3)");

/* 0 = regrow up to upper_cwnd in Recovery (000 Alg. 1 l.16-21), 1 = hold
 * the cut until Recovery ends (000 section 4's prose).
 */
CCTEST_PARAM_INT(hold_in_recovery, 0, 0, 1,
		 "0 = cwnd regrows to upper_cwnd in Recovery (000 Alg.1 l.16-21), 1 = held at the cut (000 Sec.4 prose)");

struct cws {
	u64 loss_detected_us;	/* 0 = no loss pending (Alg. 1 l.5) */
	u64 last_action_us;	/* last usf change (l.27, l.37) */
	u32 usf_x1000;		/* upper_scaling_factor x1000 */
	u32 upper_cwnd;		/* cap on cwnd, packets (l.6, l.19) */
	u32 rto_losses;		/* RTO-only losses noted (traced) */
	u8 is_rtt_min_updated;	/* lower RTprop seen since the loss */
	u8 conserving;		/* packet_conservation (l.8, l.12) */
	u8 in_rto;		/* in TCP_CA_Loss, already noted */
};

static u32 cws_param(int v, u32 lo, u32 hi)
{
	return clamp_t(int, v, lo, hi);
}

static void cws_init(struct sock *sk, void *ext)
{
	struct cws *c = ext;

	c->usf_x1000 = 1000;
	c->last_action_us = tcp_sk(sk)->tcp_mstamp;
}

/* Lines 1-14: replaces BBR's recovery step.  True = skip the target. */
static bool cws_recovery(struct sock *sk, const struct rate_sample *rs,
			 void *ext, u32 acked, u32 *cwnd)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct cws *c = ext;
	u8 prev = bbr1_ca(sk)->prev_ca_state;
	u8 now = inet_csk(sk)->icsk_ca_state;
	u32 div = cws_param(recovery_div, 1, 100);

	if (now == TCP_CA_Recovery && prev != TCP_CA_Recovery) {
		if (!c->loss_detected_us)
			c->loss_detected_us = max_t(u64, tp->tcp_mstamp, 1);
		c->upper_cwnd = tcp_packets_in_flight(tp);
		*cwnd = c->upper_cwnd / div;
		c->conserving = 1;
		bbr1_trace_request(sk);
	} else if (now < TCP_CA_Recovery && prev >= TCP_CA_Recovery) {
		c->conserving = 0;
		bbr1_trace_request(sk);
	}
	/* Own flag, not prev: the core's set_state already records Loss. */
	if (now == TCP_CA_Loss && !c->in_rto) {
		c->in_rto = 1;
		if (!c->loss_detected_us) {	/* not already pending */
			c->loss_detected_us = max_t(u64, tp->tcp_mstamp, 1);
			c->rto_losses++;
			bbr1_trace_request(sk);
		}
	} else if (now != TCP_CA_Loss) {
		c->in_rto = 0;
	}
	return c->conserving;
}

/* Lines 18-21: upper_cwnd = target * usf; cwnd = min(cwnd + acked,
 * upper_cwnd), or in Recovery, with hold_in_recovery, the cut itself.  Outside conservation the core already applied
 * min(cwnd + acked, target), so only the usf cap remains.
 */
static u32 cws_cwnd_cap(struct sock *sk, void *ext, u32 cwnd, u32 target,
			u32 acked)
{
	struct cws *c = ext;

	if (!acked)
		return cwnd;
	if (c->conserving && cws_param(hold_in_recovery, 0, 1)) {
		cwnd = c->upper_cwnd / cws_param(recovery_div, 1, 100);
	} else if (c->conserving) {
		cwnd = min(cwnd + acked, c->upper_cwnd);
	} else if (target) {
		c->upper_cwnd = div_u64((u64)target * c->usf_x1000, 1000);
		cwnd = min(cwnd, c->upper_cwnd);
	}
	return max(cwnd, bbr1_cwnd_min_target);
}

/* Lines 23-37, once per ACK after cwnd was set. */
static void cws_scale(struct sock *sk, const struct rate_sample *rs,
		      void *ext)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct cws *c = ext;
	u64 now = tp->tcp_mstamp;
	u32 rtt = tp->srtt_us >> 3;
	u32 floor = cws_param(usf_floor_x1000, 1, 1000);
	u64 wait;

	if (!rtt)
		rtt = bbr1_ca(sk)->min_rtt_us == ~0U ? USEC_PER_MSEC :
						      bbr1_ca(sk)->min_rtt_us;
	wait = (u64)cws_param(wait_rtts, 0, 1000) * rtt;

	if (c->loss_detected_us) {
		if (now > c->loss_detected_us + wait) {
			if (!c->is_rtt_min_updated) {
				c->usf_x1000 = max_t(u32, floor,
					c->usf_x1000 *
					cws_param(beta_x1000, 0, 1000) /
					1000);
				c->last_action_us = now;
			} else {
				c->usf_x1000 = 1000;	/* "resets ... to 1" */
			}
			c->loss_detected_us = 0;
			c->is_rtt_min_updated = 0;
			bbr1_trace_request(sk);
		}
	} else if (now > c->last_action_us + wait) {
		c->usf_x1000 = min_t(u32, 1000, c->usf_x1000 +
				     cws_param(delta_x1000, 0, 1000));
		c->last_action_us = now;
	}
}

/* Footnote to Alg. 1: a lower RTprop while a loss is pending. */
static void cws_min_rtt_lowered(struct sock *sk, void *ext)
{
	struct cws *c = ext;

	if (c->loss_detected_us)
		c->is_rtt_min_updated = 1;
}

/* The scale applied to BBR's target: gain * usf. */
static u32 cws_report_cwnd_gain(const struct sock *sk, void *ext, u32 gain)
{
	const struct cws *c = ext;

	return DIV_ROUND_CLOSEST(gain * c->usf_x1000, 1000);
}

static void cws_trace(const struct sock *sk, const struct bbr1_tv *tv,
		      void *ext)
{
	const struct cws *c = ext;

	trace_state(sk, tv, c ? c->usf_x1000 : 1000, c ? c->upper_cwnd : 0,
		    c ? c->conserving : 0, c ? c->rto_losses : 0);
}

static const struct bbr1_hooks bbr1_variant = {
	.ext_size = sizeof(struct cws),
	.init = cws_init,
	.recovery = cws_recovery,
	.cwnd_cap = cws_cwnd_cap,
	.after_cwnd = cws_scale,
	.min_rtt_lowered = cws_min_rtt_lowered,
	.report_cwnd_gain = cws_report_cwnd_gain,
	.trace = cws_trace,
};

MODULE_DESCRIPTION("cctest BBR-CWS: BBRv1 with loss-driven cwnd upper scaling");
