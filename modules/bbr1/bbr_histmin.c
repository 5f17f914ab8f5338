// SPDX-License-Identifier: GPL-2.0
/*
 * bbr_histmin - BBRv1 with a historical-minimum RTprop (Claypool et al.,
 * "Sharing but not Caring: TCP BBR and TCP CUBIC at the Network
 * Bottleneck", AICT 2019; seed 004, section IV-E.2).
 *
 * Idea.  Against CUBIC, BBR's ProbeRTT often cannot drain the queue CUBIC
 * keeps, so when the 10 s RTprop filter expires BBR adopts a queue-inflated
 * RTprop, overestimates the BDP and queues (and loses) more.  The paper
 * proposes keeping the historical minimum and accepting a higher RTprop
 * only when it is "consistently higher for many RTprop probes", so that a
 * real route change is still followed.
 *
 * Decisions (modules/README.md, "Algorithms and decisions"): on filter expiry RTprop keeps
 * its old value; each ProbeRTT episode's minimum RTT sample is compared to
 * it; after agree_probes (K = 3) consecutive episodes whose minimum was
 * higher, RTprop becomes the lowest of those K minima (the most
 * conservative higher value they agree on).  Any episode that measures
 * RTprop or lower ends the streak, as does any lower sample at any time
 * (the core takes lower samples itself, as BBR does).  An episode opens
 * when ProbeRTT begins and its minimum is over every RTT sample of it,
 * whether or not the expiry ACK carried one; an expiry without a ProbeRTT
 * (right after idle) is not counted.
 *
 * "Higher" means beyond a tolerance band: an episode minimum within
 * tolerance_pct above RTprop is measurement noise (a ProbeRTT's 200 ms
 * minimum is rarely the 10 s minimum to the microsecond) and agrees with
 * the history, so it ends the streak like an equal sample (deviation
 * histmin-tolerance, docs/algorithms.md). The paper's second trigger, "drastically higher for a
 * single probe" (a route change), raises RTprop after one episode whose
 * minimum is at least drastic_x1000/1000 times RTprop. The paper gives no
 * number: the default, 10x, is above the queue-inflated minima measured
 * against CUBIC here (5x in a 5 BDP buffer), so a standing queue does not
 * pass for a route change; 0 turns the trigger off.
 */
#define BBR1_CC_NAME "bbr_histmin"
#define BBR1_DEFAULT_CWND_GAIN_X1000 2000	/* BBRv1 ProbeBW cwnd gain */
#include "bbr1_core.c"
#include "bbr_histmin_episode.h"

#define CREATE_TRACE_POINTS
#include "bbr_histmin_trace.h"

/* Consecutive higher ProbeRTT minima needed to raise RTprop (K; 004 IV-E.2
 * "consistently higher for many RTprop probes"; the project chose 3).
 */
CCTEST_PARAM_INT(agree_probes, 3, 1, 1000,
		 "consecutive higher ProbeRTT minima that raise RTprop (K, default 3)");

/* Band above RTprop within which an episode minimum still agrees with the
 * history, percent of RTprop (deviation histmin-tolerance; default 10 %).
 */
CCTEST_PARAM_INT(tolerance_pct, 10, 0, 1000,
		 "episode minima up to this % above RTprop agree with it (default 10)");

/* A single episode minimum at least this many times RTprop (x1000) raises
 * RTprop at once (004 IV-E.2 "drastically higher for a single probe");
 * 0 = off (default 10000, i.e. 10x).
 */
CCTEST_PARAM_INT(drastic_x1000, 10000, 0, 1000000,
		 "one episode minimum >= this x RTprop (x1000) raises RTprop; 0 = off (default 10000)");

/* Expiry: RTprop stays; the episode opens when ProbeRTT begins. */
static u32 histmin_min_rtt_expired(struct sock *sk, void *ext, u32 old_us,
				   u32 sample_us)
{
	return histmin_expired(ext, old_us, sample_us);
}

static void histmin_min_rtt_lowered(struct sock *sk, void *ext)
{
	histmin_lowered(ext);
	bbr1_trace_request(sk);
}

/* During ProbeRTT, the episode's minimum follows the samples. */
static void histmin_on_model(struct sock *sk, const struct rate_sample *rs,
			     void *ext)
{
	/* on the ACK that entered ProbeRTT too: on_model runs after it */
	if (bbr1_ca(sk)->mode == BBR1_PROBE_RTT)
		histmin_sample(ext, rs->rtt_us);
}

/* Entering ProbeRTT opens an episode; leaving it judges the episode. */
static void histmin_mode_change(struct sock *sk, void *ext, u32 from, u32 to)
{
	const struct histmin_rule rule = {
		.agree = clamp_t(int, agree_probes, 1, 1000),
		.tolerance_pct = clamp_t(int, tolerance_pct, 0, 1000),
		.drastic_x1000 = clamp_t(int, drastic_x1000, 0, 1000000),
	};

	if (to == BBR1_PROBE_RTT)
		histmin_open(ext);
	else if (from == BBR1_PROBE_RTT &&
		 histmin_close(ext, &bbr1_ca(sk)->min_rtt_us, &rule))
		bbr1_trace_request(sk);
}

static void histmin_trace(const struct sock *sk, const struct bbr1_tv *tv,
			  void *ext)
{
	const struct histmin *h = ext;

	u32 probe_min = h && h->probe_min_us != HISTMIN_NO_SAMPLE ?
			h->probe_min_us : 0;

	trace_state(sk, tv, probe_min, h ? h->streak : 0,
		    h ? h->raised : 0);
}

static const struct bbr1_hooks bbr1_variant = {
	.ext_size = sizeof(struct histmin),
	.on_model = histmin_on_model,
	.min_rtt_lowered = histmin_min_rtt_lowered,
	.min_rtt_expired = histmin_min_rtt_expired,
	.mode_change = histmin_mode_change,
	.trace = histmin_trace,
};

MODULE_DESCRIPTION("cctest BBR histmin: BBRv1 keeping the historical minimum RTprop");
