// SPDX-License-Identifier: GPL-2.0
/*
 * bbr_modest - Modest BBR (Zhang, Cui, Tso, "Modest BBR: Enabling Better
 * Fairness for BBR Congestion Control", ISCC 2018; seed 002, Algorithm 1;
 * also re-stated as Algorithm 2 of seed 000).  How the paper's ambiguities
 * are decided is summarised in modules/README.md ("Algorithms and
 * decisions") and listed below.
 *
 * Idea.  BBRv1 ignores retransmissions, so next to CUBIC (or in a shallow
 * buffer) it keeps overflowing the queue.  Modest BBR takes retransmission
 * as yes/no feedback on whether its window is too aggressive and, in
 * ProbeBW only, searches for a window BIC-style:
 *
 *  - binary search (lines 1-19): on the first retransmission remember
 *    last_cwnd = cwnd, set min_win = Wmin * cwnd, max_win = midpoint of
 *    cwnd and min_win, cwnd = max_win.  Then once per round: retransmission
 *    -> max_win = midpoint, cwnd = max_win; none -> min_win = midpoint,
 *    cwnd = min_win; stop when max_win - min_win <= Smin;
 *  - linear increase (lines 20-24): "for each ACK" cwnd += Smin while
 *    cwnd <= last_cwnd; a retransmission goes back to binary search.
 *
 * The searched window only ever caps BBR's own cwnd (line 20: never above
 * what BBR estimates).  Pacing stays BBR's: Eq. 1 ("Pacing rate = BtlBw x
 * RTprop x Proportion") is dimensionally a window ("the size of inflight
 * packets is equal to BtlBw x RTprop") and Algorithm 1 sets only cwnd, so
 * the proportion P = cwnd / BBR target, clamped to [Wmin, Wmax], caps the
 * window.  Pacing at P x BBR's rate as well (scale_pacing = 1) is kept for
 * comparison: it makes the flow's own BtlBw estimate decay, since a flow
 * paced below its estimate measures less.
 *
 * Decisions (docs/algorithms.md, "bbr_modest"): feedback is evaluated once per packet-timed
 * round; line 7's "bin_p = 0" is a typo for 1 (seed 000); leaving ProbeBW
 * restores last_cwnd (as the cwnd ProbeRTT returns to) and resets the
 * search.  Three readings keep the window within [Wmin, 1] x BBR's, which
 * is what 002 section III-B calls Wmin and Wmax, the bounds of the
 * proportion:
 *  - the linear step is per ACK (line 21), bounded by last_cwnd, so the
 *    window is back at last_cwnd within a round trip (a once-per-round
 *    step would let each new search start from a shrunk window);
 *  - every search is anchored on BBR's own, uncapped cwnd target
 *    (last_cwnd = the target BBR's cwnd step last computed), never on the
 *    capped window: anchoring on the cap ratcheted the flow down, to a
 *    cwnd of 12-15 packets for a BDP of 34 against BBR;
 *  - the cap is never below Wmin x BBR's current target.
 * Once linear increase reaches last_cwnd the search is over and the cap is
 * released (phase 0): the paper's cwnd is BBR's, which BBR rewrites on
 * every ACK once the algorithm stops touching it.  With scale_pacing = 1,
 * P scales pacing only while a search/linear phase holds a cap; the
 * reported cwnd gain is BBR's gain times min(cap, target) / target.
 *
 * Which losses judge a search step (deviation modest-judged-window,
 * docs/algorithms.md; the code: bbr_modest_search.h). A cap set at
 * the start of round k governs the packets sent from then on; the ACKs of
 * round k are for packets sent before it, and the losses and repair
 * retransmissions they bring belong to the window before (at search entry:
 * the very congestion event that started the search). So a search step is
 * judged on the next round instead (k+1, whose ACKs are for packets sent
 * under the cap), and at its end (the start of k+2) the step is taken:
 * "retransmission occurs" = a loss was marked on an ACK of a packet sent
 * after the cap was set (rs->prior_delivered >= tp->delivered at the cap)
 * while no data sent before the cap was still outstanding (snd_una past
 * snd_nxt at the cap), so the lost packet was itself sent under the cap.
 * Repair retransmissions (total_retrans) do not count. A step thus
 * takes two rounds; one congestion event shrinks max_win once.
 */
#define BBR1_CC_NAME "bbr_modest"
#define BBR1_DEFAULT_CWND_GAIN_X1000 2000	/* BBRv1 ProbeBW cwnd gain */
#include "bbr1_core.c"
#include "bbr_modest_search.h"

#define CREATE_TRACE_POINTS
#include "bbr_modest_trace.h"

/* Upper bound of the proportion P, x1000 (002 section C / Table I: 1). */
CCTEST_PARAM_INT(wmax_x1000, 1000, 0, 4000,
		 "max window/pacing proportion x1000 (002 Tab.I: 1)");

/* Lower bound of P and search start min_win = Wmin * cwnd, x1000
 * (002 section C, Alg. 1 line 4: 0.75).
 */
CCTEST_PARAM_INT(wmin_x1000, 750, 0, 1000,
		 "min window proportion x1000 (002 Alg.1 l.4: 0.75)");

/* Search resolution and linear step, packets (002 Alg. 1 l.15, l.22: 1). */
CCTEST_PARAM_INT(smin_pkts, 1, 1, 1000,
		 "min step, packets (002 Alg.1 l.15,22: 1)");

/* 0 = pace as BBR (Algorithm 1 sets only cwnd; default), 1 = pace at
 * P x BBR's rate too (Eq. 1 read as a rate).
 */
CCTEST_PARAM_INT(scale_pacing, 0, 0, 1,
		 "1 = also scale the pacing rate by the proportion P (Eq.1 read as a rate), 0 = cap cwnd only (default)");

static u32 modest_param(int v, int lo, int hi)
{
	return clamp_t(int, v, lo, hi);
}

static bool modest_capping(const struct sock *sk, const struct modest *m)
{
	return m->phase != MODEST_NONE && bbr1_ca(sk)->mode == BBR1_PROBE_BW;
}

/* The cap in force: the searched window, never below Wmin x BBR's target. */
static u32 modest_cap_now(const struct modest *m)
{
	return max(m->cap, modest_wmin_of(m->target,
					   modest_param(wmin_x1000, 0, 1000)));
}

/* P = cap / target, clamped to [Wmin, Wmax]; 1 when not capping. */
static u32 modest_proportion_x1000(const struct sock *sk,
				   const struct modest *m)
{
	u32 lo = modest_param(wmin_x1000, 0, 1000);
	u32 hi = modest_param(wmax_x1000, lo, 4000);

	if (!modest_capping(sk, m) || !m->target)
		return 1000;
	return clamp_t(u32, div_u64((u64)modest_cap_now(m) * 1000, m->target),
		       lo, hi);
}

/* Per ACK in ProbeBW: Algorithm 1 (bbr_modest_search.h) on the socket's
 * counters.
 */
static void modest_on_model(struct sock *sk, const struct rate_sample *rs,
			    void *ext)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct bbr1 *b = bbr1_ca(sk);
	struct modest_ack a = {
		.losses = rs->losses,
		.prior_delivered = rs->prior_delivered,
		.prior_valid = rs->prior_mstamp != 0,
		.round_start = b->round_start,
		.delivered = tp->delivered,
		.snd_una = tp->snd_una,
		.snd_nxt = tp->snd_nxt,
		.bbr_cwnd = max(bbr1_cwnd(tp), b->prior_cwnd),
	};

	if (b->mode != BBR1_PROBE_BW)
		return;
	if (modest_on_ack(ext, &a, modest_param(wmin_x1000, 0, 1000),
			  modest_param(smin_pkts, 1, 1000)))
		bbr1_trace_request(sk);
}

/* Line 20: the searched window caps BBR's cwnd, never raises it. */
static u32 modest_cwnd_cap(struct sock *sk, void *ext, u32 cwnd, u32 target,
			   u32 acked)
{
	struct modest *m = ext;

	if (target)
		m->target = target;
	if (!modest_capping(sk, m))
		return cwnd;
	return max(min(cwnd, modest_cap_now(m)), bbr1_cwnd_min_target);
}

/* scale_pacing = 1 only: pace at P times BBR's rate. */
static u32 modest_pacing_gain(const struct sock *sk, void *ext, u32 gain)
{
	if (!modest_param(scale_pacing, 0, 1))
		return gain;
	return gain * modest_proportion_x1000(sk, ext) / 1000;
}

static u32 modest_report_cwnd_gain(const struct sock *sk, void *ext, u32 gain)
{
	const struct modest *m = ext;

	u32 cap = modest_cap_now(m);

	if (!modest_capping(sk, m) || !m->target || cap >= m->target)
		return gain;
	return div_u64((u64)gain * cap, m->target);
}

/* Leaving ProbeBW: ProbeRTT returns to last_cwnd; the search restarts. */
static void modest_mode_change(struct sock *sk, void *ext, u32 from, u32 to)
{
	struct bbr1 *b = bbr1_ca(sk);
	struct modest *m = ext;

	if (to == BBR1_PROBE_BW)	/* judge only ProbeBW's own losses */
		modest_mark(m, tcp_sk(sk)->delivered, tcp_sk(sk)->snd_nxt);
	if (from != BBR1_PROBE_BW || m->phase == MODEST_NONE)
		return;
	b->prior_cwnd = max(b->prior_cwnd, m->last_cwnd);
	m->phase = MODEST_NONE;
	bbr1_trace_request(sk);
}

static void modest_trace(const struct sock *sk, const struct bbr1_tv *tv,
			 void *ext)
{
	const struct modest *m = ext;

	if (!m) {
		trace_state(sk, tv, 0, 0, 0, 1000);
		return;
	}
	trace_state(sk, tv, m->phase, m->min_win, m->max_win,
		    modest_proportion_x1000(sk, m));
}

static const struct bbr1_hooks bbr1_variant = {
	.ext_size = sizeof(struct modest),
	.on_model = modest_on_model,
	.cwnd_cap = modest_cwnd_cap,
	.pacing_gain = modest_pacing_gain,
	.report_cwnd_gain = modest_report_cwnd_gain,
	.mode_change = modest_mode_change,
	.trace = modest_trace,
};

MODULE_DESCRIPTION("cctest Modest BBR: BBRv1 with retransmission-driven window search");
