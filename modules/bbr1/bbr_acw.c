// SPDX-License-Identifier: GPL-2.0
/*
 * bbr_acw - BBR Adaptive Congestion Window (Pan, Tan, Li, Li, "BBR-ACW:
 * Improved RTT Fairness of BBR", Electronics 2021; seed 001, Algorithm 1
 * and Eq. 1-2).  How the paper's ambiguities are decided is summarised in
 * modules/README.md ("Algorithms and decisions") and listed below.
 *
 * Idea.  With BBRv1's fixed cwnd gain of 2, a long-RTT flow's 2 BDP cap is
 * far larger in packets than a short-RTT flow's, so in a shared buffer the
 * long flow keeps more packets queued and takes most of the bandwidth.
 * BBR-ACW picks the ProbeBW cwnd gain from the link state the flow sees,
 * with d = a delivery-rate sample, p = RTprop, T = the RTT, I = d*T (what
 * is in flight) and Q = d*p (what the pipe holds):
 *
 *   I <= 1.25 Q (little queue; i.e. T <= 1.25 p):
 *       gain = 2 * alpha if no RTT in the last 3 rounds reached RTprop
 *       (line 6-7), else 2 (line 9)
 *   I > 1.25 Q and a loss (overload): gain = 2 * beta (line 12)
 *   otherwise: gain = 2 (line 14)
 *
 *   alpha = max(1, 2 (d - d_min) / (d_max - d_min))      (Eq. 1), in [1,2]
 *   beta  = T / (T + p)                                   (Eq. 2), in [.5,1)
 *
 * so a flow with a large share (high d) may keep a larger window while the
 * pipe is not overloaded, and under overload beta = (q + p) / (q + 2p),
 * with q the queueing delay, is near 0.5 for a long-RTT flow (q << p) and
 * near 1 for a short-RTT one: the long flow's window is cut the most.
 *
 * When to decide (decide).  The paper "updates I_i and Q_i through each
 * probe" and changes the gain "to adjust the number of packets sent in
 * next cycle"; it never says per ACK.  So by default (decide = 0) the
 * gain is chosen once per ProbeBW gain cycle, on the ACK that ends the
 * 1.25 probe phase, with T = the smoothed RTT then and "a loss" = one
 * during the cycle just evaluated, and it is held for the whole next
 * cycle.  decide = 1 chooses on every ACK (T = the ACK's RTT, a loss in
 * this round); decide = 2 once per round from the round's ACKs, with
 * hysteresis (below).  Both are kept for comparison.
 *
 * cut_needs_loss = 0 cuts on T > 1.25 p alone, the paper's "We hope to
 * reduce the size of CWND" under high load, without waiting for a loss.
 *
 * Decisions: Startup, Drain and ProbeRTT keep BBR's gains; d_max / d_min
 * are the max / min of the rate samples "observing under high load", i.e.
 * taken while the ACK's RTT exceeded RTprop, over the last 10 rounds
 * (app-limited samples excluded); d is the latest rate sample, clamped
 * into [d_min, d_max] (so alpha stays in [1, 2]); min_rtt3 is the min RTT
 * sample over the last 3 rounds; "2" is the core's ProbeBW gain
 * (cwnd_gain_x1000); p is the flow's own RTprop (the test is per flow).
 * No ACK-aggregation allowance (the papers' BBR had none).
 *
 * Once per round, with hysteresis (decide = 2; deviation acw-per-round,
 * docs/algorithms.md).  Each ACK only votes: its I <= 1.25 Q test, its
 * alpha and beta.  At the end of the round the gain for the next round is
 * decided from the votes: the low-queue case (gain 2 * mean alpha of the
 * low-queue ACKs, if no RTT sample of the last 3 rounds reached RTprop)
 * needs enter_share_pct of the ACKs to start and leave_share_pct to hold;
 * the overload case (gain 2 * mean beta of the overloaded ACKs) needs a
 * loss in the round and at most 100 - enter_share_pct low-queue ACKs to
 * start, and at most 100 - leave_share_pct to hold; otherwise gain 2.
 *
 * Every per-cycle decision and every change of a per-round gain emits the
 * tracepoint (its regime field is the branch taken); gain_changes counts
 * changes of the gain in every mode.
 */
#define BBR1_CC_NAME "bbr_acw"
#define BBR1_DEFAULT_CWND_GAIN_X1000 2000	/* the "2" of 001 Alg. 1 */
/* The papers' BBR had no ACK-aggregation allowance (module parameter). */
#define BBR1_DEFAULT_ACK_AGGREGATION 0
#include "bbr1_core.c"

#define CREATE_TRACE_POINTS
#include "bbr_acw_trace.h"

/* Queue threshold: I <= thresh * Q, x1000 (001 Alg. 1 lines 5, 11: 1.25). */
CCTEST_PARAM_INT(queue_thresh_x1000, 1250, 1000, 100000,
		 "I <= thresh*Q test x1000 (001 Alg.1 l.5: 1.25)");

/* Multiplier in alpha = max(1, k (d-dmin)/(dmax-dmin)), x1000 (001 Eq. 1: 2). */
CCTEST_PARAM_INT(alpha_scale_x1000, 2000, 0, 4000,
		 "alpha scale x1000 (001 Eq.1: 2)");

/* Window of the min RTT compared with RTprop, rounds (001 Alg. 1 l.4: 3). */
CCTEST_PARAM_INT(min_rtt_rounds, 3, 1, 1000,
		 "min_rtt window, rounds (001 Alg.1 l.4: 3)");

/* Window of d_max / d_min, rounds (001 Eq. 1; the project's choice: 10). */
CCTEST_PARAM_INT(rate_rounds, 10, 1, 1000,
		 "d_max/d_min window, rounds (001 Eq.1: 10)");

enum acw_decide { ACW_PER_CYCLE = 0, ACW_PER_ACK = 1, ACW_PER_ROUND = 2 };

/* When the gain is chosen: once per gain cycle at the end of the probe
 * (001 section 4.2, "through each probe" for the "next cycle"; default),
 * per ACK, or per round with hysteresis.
 */
CCTEST_PARAM_INT(decide, ACW_PER_CYCLE, 0, 2,
		 "0 = once per gain cycle at the probe's end, held a cycle (default), 1 = per ACK, 2 = per round with hysteresis");

/* 1 = the cut needs a loss (001 Alg. 1 l.11, has_loss; default), 0 = cut
 * on T > 1.25 p alone (001 section 4.2's "reduce the size of CWND").
 */
CCTEST_PARAM_INT(cut_needs_loss, 1, 0, 1,
		 "1 = cut only after a loss (001 Alg.1 l.11, default), 0 = cut on T > 1.25p alone");

/* Share of a round's ACKs that must agree to switch to a case, percent. */
CCTEST_PARAM_INT(enter_share_pct, 75, 50, 100,
		 "share of a round's ACKs that starts the boost/cut case, % (default 75)");

/* Share that keeps a case once in it (hysteresis), percent.  At least 1:
 * with 0 a case could be held on a round without one vote for it, whose
 * mean alpha or beta is 0/0 (in softirq).
 */
CCTEST_PARAM_INT(leave_share_pct, 50, 1, 100,
		 "share of a round's ACKs that holds the boost/cut case, % (default 50)");

enum acw_case { ACW_NEUTRAL = 0, ACW_BOOST = 1, ACW_CUT = 2 };

/* Min filters are max filters over the bitwise complement (only
 * minmax_running_max is exported by the kernel); an empty filter reads
 * as U32_MAX.
 */
struct acw {
	struct minmax rtt_min_c;	/* ~RTT samples, min_rtt_rounds */
	struct minmax rate_max;		/* delivery rate, rate_rounds */
	struct minmax rate_min_c;	/* ~delivery rate, rate_rounds */
	u32 gain;			/* chosen ProbeBW gain, BBR_UNIT */
	u32 alpha_x1000;
	u32 beta_x1000;
	u32 gain_changes;		/* times the ProbeBW gain changed */
	u32 votes_low, votes_high;	/* this round: I <= / > 1.25 Q */
	u64 alpha_sum, beta_sum;	/* of the low / high votes, x1000 */
	u32 kase;			/* enum acw_case of the gain in force */
	u32 last_d;			/* latest valid delivery-rate sample */
	u8 loss_in_round;		/* has_loss (Alg. 1 line 11) */
	u8 loss_prev_round;		/* the voted round had a loss */
	u8 loss_in_cycle;		/* has_loss, per_cycle: this cycle */
	u8 cycle_seen;			/* the core's cycle_index last ACK */
};

#define ACW_NO_CYCLE 0xff	/* cycle_seen before the first ProbeBW ACK */

static u32 acw_param(int v, int lo, int hi)
{
	return clamp_t(int, v, lo, hi);
}

static void acw_init(struct sock *sk, void *ext)
{
	struct acw *a = ext;

	a->alpha_x1000 = 1000;
	a->beta_x1000 = 1000;
	a->cycle_seen = ACW_NO_CYCLE;
}

/* Eq. 1 with d clamped into [d_min, d_max]. */
static u32 acw_alpha_x1000(u32 d, u32 dmin, u32 dmax)
{
	u64 a;

	if (dmax <= dmin || dmax == 0 || dmin == U32_MAX)
		return 1000;
	d = clamp(d, dmin, dmax);
	a = div_u64((u64)acw_param(alpha_scale_x1000, 0, 4000) * (d - dmin),
		    dmax - dmin);
	return max_t(u32, 1000, a);
}

static void acw_apply(struct sock *sk, struct acw *a, u32 gain, bool trace)
{
	gain = clamp_t(u32, gain, 1, 2047);
	if (a->gain && gain != a->gain) {
		a->gain_changes++;
		if (trace)
			bbr1_trace_request(sk);
	}
	a->gain = gain;
	bbr1_ca(sk)->cwnd_gain = gain;
}

/* The cut (l.11) needs a loss unless cut_needs_loss = 0. */
static bool acw_may_cut(bool had_loss)
{
	return had_loss || !acw_param(cut_needs_loss, 0, 1);
}

/* End of a round: the next round's case and gain, from the votes. */
static void acw_decide_round(struct sock *sk, struct acw *a, u32 base,
			     bool rtt3_above)
{
	u32 n = a->votes_low + a->votes_high;
	u32 enter = acw_param(enter_share_pct, 50, 100);
	u32 hold = acw_param(leave_share_pct, 1, enter);
	u32 low_pct, kase = ACW_NEUTRAL, gain = base;

	if (!n) {
		if (a->gain)
			bbr1_ca(sk)->cwnd_gain = a->gain;
		return;			/* no votes: keep the gain */
	}
	low_pct = a->votes_low * 100 / n;
	if (rtt3_above && low_pct >= (a->kase == ACW_BOOST ? hold : enter))
		kase = ACW_BOOST;
	else if (acw_may_cut(a->loss_prev_round) &&
		 100 - low_pct >= (a->kase == ACW_CUT ? hold : enter))
		kase = ACW_CUT;
	/* hold >= 1 implies a vote for the case held; the divisors are
	 * checked anyway, as this runs in softirq
	 */
	if (kase == ACW_BOOST && a->votes_low)
		gain = base * div_u64(a->alpha_sum, a->votes_low) / 1000;
	else if (kase == ACW_CUT && a->votes_high)
		gain = base * div_u64(a->beta_sum, a->votes_high) / 1000;
	else
		kase = ACW_NEUTRAL;
	if (kase != a->kase)
		bbr1_trace_request(sk);
	a->kase = kase;
	acw_apply(sk, a, gain, true);
	a->votes_low = a->votes_high = 0;
	a->alpha_sum = a->beta_sum = 0;
}

/* has_loss (Alg. 1 l.11): per round, and per evaluated cycle. */
static void acw_note_loss(const struct bbr1 *b, const struct rate_sample *rs,
			  struct acw *a)
{
	if (b->round_start) {
		a->loss_prev_round = a->loss_in_round;
		a->loss_in_round = 0;
	}
	if (rs->losses > 0) {
		a->loss_in_round = 1;
		a->loss_in_cycle = 1;
	}
}

/* min_rtt3 (Alg. 1 l.4) and d_max / d_min (Eq. 1): the rate samples
 * "observing under high load", taken while the RTT (t) exceeded RTprop;
 * app-limited samples do not enter.
 */
static void acw_update_filters(const struct bbr1 *b,
			       const struct rate_sample *rs, struct acw *a,
			       u32 d, u32 t)
{
	u32 win = acw_param(rate_rounds, 1, 1000);

	if (rs->rtt_us >= 0)
		minmax_running_max(&a->rtt_min_c,
				   acw_param(min_rtt_rounds, 1, 1000),
				   b->rtt_cnt, ~(u32)rs->rtt_us);
	if (!d || rs->is_app_limited)
		return;
	a->last_d = d;
	if (b->min_rtt_us == ~0U || t <= b->min_rtt_us)
		return;
	minmax_running_max(&a->rate_max, win, b->rtt_cnt, d);
	minmax_running_max(&a->rate_min_c, win, b->rtt_cnt, ~d);
}

/* Outside ProbeBW BBR's own gains apply; the next ProbeBW starts afresh. */
static void acw_reset(struct acw *a)
{
	a->gain = 0;
	a->kase = ACW_NEUTRAL;
	a->loss_in_cycle = 0;
	a->cycle_seen = ACW_NO_CYCLE;
	a->votes_low = a->votes_high = 0;
	a->alpha_sum = a->beta_sum = 0;
}

/* alpha (Eq. 1) for the rate d and beta (Eq. 2) for the RTT t. */
static void acw_sample(struct acw *a, u32 d, u32 t, u32 p)
{
	a->alpha_x1000 = acw_alpha_x1000(d, ~minmax_get(&a->rate_min_c),
					 minmax_get(&a->rate_max));
	a->beta_x1000 = t ? div_u64((u64)t * 1000, (u64)t + p) : 1000;
}

/* decide = 2: the ACK only votes; the round's end decides. */
static void acw_vote(struct acw *a, bool low_queue)
{
	if (low_queue) {
		a->votes_low++;
		a->alpha_sum += a->alpha_x1000;
	} else {
		a->votes_high++;
		a->beta_sum += a->beta_x1000;
	}
}

/* Algorithm 1's branches: the case for this test, and its gain. */
static u32 acw_choose(const struct acw *a, u32 base, bool low_queue,
		      bool rtt3_above, bool had_loss, u32 *gain)
{
	*gain = base;
	if (low_queue && rtt3_above) {			/* l.5-7 */
		*gain = base * a->alpha_x1000 / 1000;
		return ACW_BOOST;
	}
	if (!low_queue && acw_may_cut(had_loss)) {	/* l.11-12 */
		*gain = base * a->beta_x1000 / 1000;
		return ACW_CUT;
	}
	return ACW_NEUTRAL;				/* l.9, l.14 */
}

/* decide = 1: Algorithm 1 on this ACK. */
static void acw_decide_ack(struct sock *sk, struct acw *a, u32 base,
			   bool low_queue, bool rtt3_above)
{
	u32 gain;

	a->kase = acw_choose(a, base, low_queue, rtt3_above, a->loss_in_round,
			     &gain);
	acw_apply(sk, a, gain, false);
}

/* I <= 1.25 Q, i.e. T <= 1.25 p (Alg. 1 l.5, l.11): little queue. */
static bool acw_low_queue(u32 t, u32 p, u32 thresh_x1000)
{
	return (u64)t * 1000 <= (u64)p * thresh_x1000;
}

/* decide = 0: did this ACK end the 1.25 probe phase? */
static bool acw_probe_ended(const struct bbr1 *b, struct acw *a)
{
	bool ended = a->cycle_seen == 0 && b->cycle_index != 0;

	a->cycle_seen = b->cycle_index;
	return ended;
}

/* decide = 0: at the probe's end, Algorithm 1 on the cycle just run (T =
 * srtt, a loss during it, d = the latest rate sample); the gain holds for
 * the whole next cycle.
 */
static void acw_decide_cycle(struct sock *sk, struct acw *a, u32 base,
			     u32 thresh, bool rtt3_above)
{
	u32 p = bbr1_ca(sk)->min_rtt_us, t = tcp_sk(sk)->srtt_us >> 3;
	u32 gain;

	if (!t || !a->last_d)
		return;				/* nothing measured yet */
	acw_sample(a, a->last_d, t, p);
	a->kase = acw_choose(a, base, acw_low_queue(t, p, thresh), rtt3_above,
			     a->loss_in_cycle, &gain);
	a->loss_in_cycle = 0;
	bbr1_trace_request(sk);
	acw_apply(sk, a, gain, false);
}

/* Per ACK, after the model: Algorithm 1, decided per cycle, per ACK or
 * per round (decide).
 */
static void acw_on_model(struct sock *sk, const struct rate_sample *rs,
			 void *ext)
{
	struct bbr1 *b = bbr1_ca(sk);
	struct acw *a = ext;
	u32 base = b->cwnd_gain;	/* the state machine's gain */
	u32 d = bbr1_rs_bw(rs), p = b->min_rtt_us;
	u32 t = rs->rtt_us >= 0 ? (u32)rs->rtt_us : tcp_sk(sk)->srtt_us >> 3;
	u32 thresh = acw_param(queue_thresh_x1000, 1000, 100000);
	u32 mode = acw_param(decide, 0, 2);
	bool rtt3_above, low_queue;

	acw_note_loss(b, rs, a);
	acw_update_filters(b, rs, a, d, t);
	if (b->mode != BBR1_PROBE_BW) {
		acw_reset(a);
		return;
	}
	if (!p || p == ~0U)
		return;				/* no RTprop: BBR's gain */
	rtt3_above = ~minmax_get(&a->rtt_min_c) > p;	/* l.4 */
	if (mode == ACW_PER_CYCLE && acw_probe_ended(b, a))
		acw_decide_cycle(sk, a, base, thresh, rtt3_above);
	else if (mode == ACW_PER_ROUND && b->round_start)
		acw_decide_round(sk, a, base, rtt3_above);
	if (a->gain)
		b->cwnd_gain = a->gain;	/* the core resets it per ACK */
	if (mode == ACW_PER_CYCLE || !d)
		return;			/* no rate sample: keep the gain */
	acw_sample(a, d, t, p);
	low_queue = acw_low_queue(t, p, thresh);
	if (mode == ACW_PER_ROUND)
		acw_vote(a, low_queue);
	else
		acw_decide_ack(sk, a, base, low_queue, rtt3_above);
}

static void acw_trace(const struct sock *sk, const struct bbr1_tv *tv,
		      void *ext)
{
	const struct acw *a = ext;

	trace_state(sk, tv, a ? a->alpha_x1000 : 1000,
		    a ? a->beta_x1000 : 1000, a ? a->kase : 0,
		    a ? a->gain_changes : 0);
}

static const struct bbr1_hooks bbr1_variant = {
	.ext_size = sizeof(struct acw),
	.init = acw_init,
	.on_model = acw_on_model,
	.trace = acw_trace,
};

MODULE_DESCRIPTION("cctest BBR-ACW: BBRv1 with adaptive ProbeBW cwnd gain");
