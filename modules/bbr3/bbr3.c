// SPDX-License-Identifier: GPL-2.0
/*
 * bbr3 -- BBRv3 written from the IETF draft draft-ietf-ccwg-bbr (its
 * pseudocode, "BBR Congestion Control", IETF CCWG), as an out-of-tree
 * tcp_congestion_ops module for stock kernels. bbr3plus.c includes this file
 * with a different name and a different default Startup pacing gain (BBRv3+,
 * Chu and Chiang 2025: gain = alpha * (ln beta)^gamma, alpha 3 instead of 4).
 * bbr2.c includes it with BBRv2's constants and BBR3_V2 = 1, which selects
 * BBRv2's rules where they differ (an approximation of Google's BBRv2 alpha;
 * bbr2.c lists each difference and its source; "BBR3_V2" marks them here).
 *
 * The model (draft section "Network Path Model Overview")
 * -------------------------------------------------------
 * BBR models the path with a delivery rate and a round-trip time:
 *   max_bw      windowed max of delivery-rate samples over the current and the
 *               previous ProbeBW cycle (long-term rate model);
 *   min_rtt     windowed min of RTT samples over 10 s;
 *   bdp         = bw * min_rtt;
 *   inflight_hi ("inflight_longterm") the inflight at which a bandwidth probe
 *               last saw more than loss_thresh_pct loss (long-term volume);
 *   bw_lo, inflight_lo ("bw_shortterm", "inflight_shortterm") short-term
 *               bounds cut by beta_pct per lossy round while not probing and
 *               reset when the next probe starts;
 *   bw          = min(max_bw, bw_lo), the rate that is paced;
 *   extra_acked windowed max of data ACKed beyond bw*interval (aggregation).
 * Pacing rate = pacing_gain * bw * (1 - 1 %); cwnd = cwnd_gain * bdp +
 * extra_acked, bounded by the volume caps of the current state.
 *
 * The state machine (draft section "State Machine")
 * -------------------------------------------------
 *   STARTUP   pacing 2.77 (bbr3) / 2.08 (bbr3plus), cwnd 2: double the rate
 *             every round until the bw plateaus for 3 rounds (+25 % test) or
 *             loss in recovery is too high (> 2 % of a round, >= 6 loss events).
 *   DRAIN     pacing 0.5 until inflight <= bdp (or 3 rounds).
 *   PROBE_BW  DOWN (0.9) -> CRUISE (1.0) -> REFILL (1.0, one round) ->
 *             UP (1.25, cwnd 2.25) -> DOWN ... The wait in CRUISE before the
 *             next REFILL is min(2-3 s random, min(bdp packets, 63) rounds),
 *             the "bw probing time scale" for Reno/CUBIC coexistence.
 *   PROBE_RTT every 5 s without a lower RTT sample: cwnd 0.5 * bdp for
 *             200 ms and one round, then back to PROBE_BW (CRUISE) or STARTUP.
 *
 * Stock-kernel approximations (their consequences and measurements:
 * README.md, "Stock-kernel approximations")
 * -------------------------------------------------------------------
 * The draft assumes per-packet transmit state (P.tx_in_flight, P.lost) and a
 * per-lost-packet callback. Google's BBRv3 kernel adds those to struct
 * tcp_skb_cb and tcp_congestion_ops; a module on a stock kernel cannot.
 *  1. RS.tx_in_flight (inflight when the ACKed packet P was sent) and
 *  2. RS.lost (C.lost now minus C.lost when P was sent) come from a ring of
 *     checkpoints, (tp->delivered, tp->lost) about 8 times per cwnd of
 *     delivery (bbr3_send_history.h): P.delivered (rs->prior_delivered)
 *     falls between two checkpoints, which bracket P.lost (interpolated by
 *     delivered) and P.tx_in_flight. Exact to within 1/8 of a flight, with
 *     no per-round reset, so the loss rate is the draft's, interval for
 *     interval.
 *  3. HandleLostPacket(P) runs once per ACK that marks rs->losses > 0, with
 *     the aggregate of that ACK's losses standing for "P" (InflightAtLoss uses
 *     rs->losses as P.size, and the send-time state of the ACKed packet,
 *     sent just after the lost ones, for theirs). Losses marked by RTO
 *     (tcp_enter_loss) are seen on the next ACK through tp->lost only.
 *  4. "Discontiguous lost ranges" for the Startup loss exit are counted as
 *     ACKs that newly marked losses (each ACK with rs->losses > 0 counts one).
 *  5. C.is_cwnd_limited is tcp_is_cwnd_limited(sk) (the kernel's own flag).
 *  6. Packet conservation in fast recovery (cwnd = inflight + acked for the
 *     first round; cwnd -= newly lost each ACK) follows the Linux BBR
 *     implementations; the draft delegates recovery to "the transport".
 *  7. Send quantum is left to the kernel (tcp_tso_autosize: pacing_rate >>
 *     sk_pacing_shift = ~1 ms, at least min_tso_segs() = 2 packets, i.e. the
 *     draft's SetSendQuantum); offload_budget = 3 * that quantum.
 *  8. Spurious recovery (HandleSpuriousLossDetection) is driven by the
 *     kernel's undo_cwnd() callback (DSACK/timestamp undo).
 *  9. ECN (the draft's optional ECN response) is not implemented.
 * 10. The max_bw filter is the draft's 2-slot window over cycle_count; the
 *     extra_acked filter is the kernel's win_minmax over round_count.
 * 11. Deviation bbr3-full-bw-on-max-bw (docs/algorithms.md), not an
 *     approximation: CheckFullBWReached() tests max_bw (the draft's prose
 *     and Linux BBR) instead of the pseudocode's RS.delivery_rate, which let
 *     Startup exit at ~5 % of the link rate in the emulated test VM.
 * 12. Now() is tp->tcp_mstamp (us), refreshed by the stack per packet/ACK.
 * 13. AdvanceMaxBwFilter() does not shift the window past a cycle without
 *     an accepted rate sample (bbr3_bw_filter.h): shifting would set
 *     max_bw = 0 (deviation bbr3-empty-cycle, docs/algorithms.md).
 *
 * If the per-socket state block cannot be allocated (kzalloc GFP_NOWAIT |
 * __GFP_NOWARN in init), the socket runs a Reno-like fallback, emits no
 * tracepoint and get_info reports zero gains: deviation bbr3-reno-fallback
 * (docs/algorithms.md; README.md, "Per-socket state, get_info and the
 * fallback"). The read-only parameter `fallbacks` counts such sockets and
 * cctest marks a run in which any occurred.
 */

#include <linux/module.h>
#include <linux/version.h>
#include <linux/slab.h>
#include <linux/random.h>
#include <linux/win_minmax.h>
#include <linux/inet_diag.h>
#include <net/tcp.h>
#include <net/inet_sock.h>

#include "cctest_param.h"
#include "cctest_compat.h"

#ifndef BBR3_NAME
/* Built as bbr3.ko: BBRv3 as the draft specifies it. */
#define BBR3_NAME bbr3
/* 4.000: alpha of 4 * (ln 2)^1 = 2.77, draft "BBR.StartupPacingGain" */
#define BBR3_DEFAULT_STARTUP_ALPHA_X1000 4000
/* run metadata (cctest copies it into meta.json): whose constants these are */
#define BBR3_DESCRIPTION "BBRv3 (draft-ietf-ccwg-bbr) with the IETF draft's constants, not Google's BBRv3 (no per-packet loss, no ECN, draft gains)"
#endif

/*
 * Defaults a variant file (bbr2.c) may set before including this one; here
 * the draft's. BBR3_V2 = 1 selects BBRv2's behaviour where it is not a
 * constant (bbr2.c lists each difference with its source).
 */
#ifndef BBR3_V2
#define BBR3_V2 0
#endif
#ifndef BBR3_DEFAULT_STARTUP_PACING_GAIN_X1000
#define BBR3_DEFAULT_STARTUP_PACING_GAIN_X1000 0	/* derive from alpha */
#endif
#ifndef BBR3_DEFAULT_STARTUP_CWND_GAIN_X1000
#define BBR3_DEFAULT_STARTUP_CWND_GAIN_X1000 0	/* = cwnd_gain_x1000 */
#endif
#ifndef BBR3_DEFAULT_DRAIN_PACING_GAIN_X1000
#define BBR3_DEFAULT_DRAIN_PACING_GAIN_X1000 500
#endif
#ifndef BBR3_DEFAULT_PROBE_DOWN_PACING_GAIN_X1000
#define BBR3_DEFAULT_PROBE_DOWN_PACING_GAIN_X1000 900
#endif
#ifndef BBR3_DEFAULT_PROBE_UP_CWND_GAIN_X1000
#define BBR3_DEFAULT_PROBE_UP_CWND_GAIN_X1000 2250
#endif
#ifndef BBR3_DEFAULT_UP_EXIT_PIF_GAIN_X1000
#define BBR3_DEFAULT_UP_EXIT_PIF_GAIN_X1000 0	/* the draft's plateau rule */
#endif
#ifndef BBR3_DEFAULT_STARTUP_FULL_LOSS_CNT
#define BBR3_DEFAULT_STARTUP_FULL_LOSS_CNT 6
#endif
#ifndef BBR3_DEFAULT_DRAIN_MAX_ROUNDS
#define BBR3_DEFAULT_DRAIN_MAX_ROUNDS 3
#endif

#if LINUX_VERSION_CODE < KERNEL_VERSION(5, 19, 0)
/* Before 5.19 (e.g. Ubuntu 22.04's 5.15) there are no snd_cwnd accessors. */
static inline u32 bbr3_compat_snd_cwnd(const struct tcp_sock *tp)
{
	return tp->snd_cwnd;
}

static inline void bbr3_compat_snd_cwnd_set(struct tcp_sock *tp, u32 val)
{
	tp->snd_cwnd = val;
}
#define tcp_snd_cwnd bbr3_compat_snd_cwnd
#define tcp_snd_cwnd_set bbr3_compat_snd_cwnd_set
#endif

#include "bbr3_bw_filter.h"
#include "bbr3_pacing.h"
#include "bbr3_send_history.h"

#define CREATE_TRACE_POINTS
#include "bbr3_trace.h"

#define BBR3_NAME_STR __stringify(BBR3_NAME)

/* Rates are packets per usec scaled by 2^24, as in Linux tcp_bbr. */
#define BW_SCALE	24
#define BW_UNIT		(1 << BW_SCALE)
/* Gains are fixed point with 1000 = 1.0 (the trace and params use _x1000). */
#define GAIN_UNIT	1000
/* "Infinity" for rates and volumes in packets. */
#define BBR3_INF	(~0U)

/* ------------------------------------------------------------------ */
/* Module parameters: every one a draft constant, unit in the name.     */
/* ------------------------------------------------------------------ */

/*
 * Every parameter is an unsigned int declared with CCTEST_PARAM_UINT (or
 * CCTEST_PARAM_UINT_OR_0 where 0 means "unset"; modules/common/cctest_param.h):
 * range-checked when it is set (insmod or sysfs), an out-of-range value
 * refused with -EINVAL, so no ACK ever sees one (a % 0 in softirq, a pacing
 * gain of 0, a ProbeRTT interval of 0, gains that overflow get_info's x256
 * fields). The range is written once, in that line, and ends the parameter's
 * description as "[range LO..HI]" (or "[range 0 or LO..HI]"), which is where
 * cctest reads it from (modinfo) to reject a scenario's value before
 * anything runs.
 */

/*
 * Gains are capped at 10.0 (10000): far above any gain the draft or paper
 * 003 uses, and << 8 (get_info's x256 unit) stays far inside a u32. Gains
 * are at least 0.1: a gain of 0 would stop pacing or sending.
 */

/* draft "BBR.StartupPacingGain" (2.77), paper 003 Algorithm 1; 0 = derive */
CCTEST_PARAM_UINT_OR_0(startup_pacing_gain_x1000,
		       BBR3_DEFAULT_STARTUP_PACING_GAIN_X1000, 1000, 10000,
		       "Startup pacing gain x1000; 0 = alpha*(ln beta)^gamma (default "
		       __stringify(BBR3_DEFAULT_STARTUP_PACING_GAIN_X1000) ")");
/* paper 003 Algorithm 1 alpha: 4 for BBRv3, 3 for BBRv3+ */
CCTEST_PARAM_UINT(startup_alpha_x1000, BBR3_DEFAULT_STARTUP_ALPHA_X1000, 100, 20000,
		  "Startup gain alpha x1000 (paper 003 Alg. 1)");
/* paper 003 Algorithm 1 beta (2); ln beta must be > 0 */
CCTEST_PARAM_UINT(startup_beta_x1000, 2000, 1001, 100000,
		  "Startup gain beta x1000 (paper 003 Alg. 1, default 2000)");
/* paper 003 Algorithm 1 gamma (1), an integer exponent */
CCTEST_PARAM_UINT(startup_gamma, 1, 1, 8,
		  "Startup gain exponent gamma (paper 003 Alg. 1, default 1)");
/* draft "BBR.DefaultCwndGain" (2): Startup, Drain, DOWN, CRUISE, REFILL */
CCTEST_PARAM_UINT(cwnd_gain_x1000, 2000, 100, 10000,
		  "Default cwnd gain x1000 (draft BBR.DefaultCwndGain, default 2000)");
/* Startup and Drain cwnd gain: the draft's is DefaultCwndGain (0 = that);
 * BBRv2's bbr_startup_cwnd_gain is 2.885 */
CCTEST_PARAM_UINT_OR_0(startup_cwnd_gain_x1000,
		       BBR3_DEFAULT_STARTUP_CWND_GAIN_X1000, 100, 10000,
		       "Startup and Drain cwnd gain x1000; 0 = cwnd_gain_x1000 (default "
		       __stringify(BBR3_DEFAULT_STARTUP_CWND_GAIN_X1000) ")");
/* draft "BBR.DrainPacingGain" (0.5); BBRv2 1/2.885 */
CCTEST_PARAM_UINT(drain_pacing_gain_x1000, BBR3_DEFAULT_DRAIN_PACING_GAIN_X1000,
		  100, 10000, "Drain pacing gain x1000 (default "
		  __stringify(BBR3_DEFAULT_DRAIN_PACING_GAIN_X1000) ")");
/* draft ProbeBW_DOWN pacing gain (0.90); BBRv2 0.75 */
CCTEST_PARAM_UINT(probe_down_pacing_gain_x1000,
		  BBR3_DEFAULT_PROBE_DOWN_PACING_GAIN_X1000, 100, 10000,
		  "ProbeBW_DOWN pacing gain x1000 (default "
		  __stringify(BBR3_DEFAULT_PROBE_DOWN_PACING_GAIN_X1000) ")");
/* draft ProbeBW_UP pacing gain (1.25) */
CCTEST_PARAM_UINT(probe_up_pacing_gain_x1000, 1250, 100, 10000,
		  "ProbeBW_UP pacing gain x1000 (draft, default 1250)");
/* draft ProbeBW_UP cwnd gain (2.25); BBRv2 keeps bbr_cwnd_gain (2) */
CCTEST_PARAM_UINT(probe_up_cwnd_gain_x1000, BBR3_DEFAULT_PROBE_UP_CWND_GAIN_X1000,
		  100, 10000, "ProbeBW_UP cwnd gain x1000 (default "
		  __stringify(BBR3_DEFAULT_PROBE_UP_CWND_GAIN_X1000) ")");
/*
 * When ProbeBW_UP ends without loss. 0: the draft's IsTimeToGoDown (the bw
 * plateaus for full_bw_rounds, unless cwnd-limited at inflight_hi). Nonzero:
 * BBRv2's rule (bbr2_update_cycle_phase, "is_queuing"): after one min_rtt
 * in UP, once inflight reaches this gain x the estimated BDP.
 */
CCTEST_PARAM_UINT_OR_0(up_exit_pif_gain_x1000, BBR3_DEFAULT_UP_EXIT_PIF_GAIN_X1000,
		       1000, 10000,
		       "ProbeBW_UP ends at this inflight/BDP after a min_rtt (BBRv2); 0 = on a bw plateau (draft) (default "
		       __stringify(BBR3_DEFAULT_UP_EXIT_PIF_GAIN_X1000) ")");
/* draft "BBR.ProbeRTTCwndGain" (0.5) */
CCTEST_PARAM_UINT(probe_rtt_cwnd_gain_x1000, 500, 100, 10000,
		  "ProbeRTT cwnd gain x1000 (draft, default 500)");
/* draft "BBR.LossThresh" (2 %) */
CCTEST_PARAM_UINT(loss_thresh_pct, 2, 0, 99,
		  "Per-round loss rate that ends a probe, percent (draft BBR.LossThresh, default 2)");
/* draft "BBR.Beta" (0.7): multiplicative decrease per lossy round */
CCTEST_PARAM_UINT(beta_pct, 70, 1, 100,
		  "Multiplicative decrease, percent (draft BBR.Beta, default 70)");
/* draft "BBR.Headroom" (0.15): share of inflight_hi left free in CRUISE */
CCTEST_PARAM_UINT(headroom_pct, 15, 0, 99,
		  "Headroom below inflight_hi, percent (draft BBR.Headroom, default 15)");
/* draft "BBR.PacingMarginPercent" (1) */
CCTEST_PARAM_UINT(pacing_margin_pct, 1, 0, 50,
		  "Pace this percent below bw (draft BBR.PacingMarginPercent, default 1)");
/* draft "BBR.ProbeRTTInterval" (5 s); 0 would be a permanent ProbeRTT */
CCTEST_PARAM_UINT(probe_rtt_interval_ms, 5000, 100, 3600000,
		  "ProbeRTT interval, ms (draft BBR.ProbeRTTInterval, default 5000)");
/* draft "BBR.ProbeRTTDuration" (200 ms) */
CCTEST_PARAM_UINT(probe_rtt_duration_ms, 200, 1, 10000,
		  "ProbeRTT duration, ms (draft BBR.ProbeRTTDuration, default 200)");
/* draft "BBR.MinRTTFilterLen" (10 s) */
CCTEST_PARAM_UINT(min_rtt_filter_len_ms, 10000, 100, 3600000,
		  "min_rtt filter window, ms (draft BBR.MinRTTFilterLen, default 10000)");
/* draft CheckFullBWReached: growth per round that counts as growing (25 %) */
CCTEST_PARAM_UINT(full_bw_growth_pct, 25, 1, 1000,
		  "bw growth per round that resets the plateau count, percent (draft, default 25)");
/* draft CheckFullBWReached: full_bw_count threshold (3) */
CCTEST_PARAM_UINT(full_bw_rounds, 3, 1, 100,
		  "Rounds without growth = bw plateau (draft, default 3)");
/* draft "BBRStartupFullLossCnt" (6); BBRv2 bbr_full_loss_cnt 8 */
CCTEST_PARAM_UINT(startup_full_loss_cnt, BBR3_DEFAULT_STARTUP_FULL_LOSS_CNT, 1, 1000,
		  "Loss events in a round to exit Startup (default "
		  __stringify(BBR3_DEFAULT_STARTUP_FULL_LOSS_CNT) ")");
/* draft CheckDrainDone (3 rounds); 0 = no limit (BBRv2 drains to the BDP) */
CCTEST_PARAM_UINT_OR_0(drain_max_rounds, BBR3_DEFAULT_DRAIN_MAX_ROUNDS, 1, 1000,
		       "Leave Drain after this many rounds at most; 0 = only once drained (default "
		       __stringify(BBR3_DEFAULT_DRAIN_MAX_ROUNDS) ")");
/* draft "BBR.ExtraAckedFilterLen" (10) */
CCTEST_PARAM_UINT(extra_acked_filter_rounds, 10, 1, 100,
		  "extra_acked max-filter window, rounds (draft, default 10)");
/* draft PickProbeWait: 2 s + random 0..1 s */
CCTEST_PARAM_UINT(bw_probe_wait_base_ms, 2000, 0, 3600000,
		  "Fixed part of the wall-clock wait between bw probes, ms (draft, default 2000)");
CCTEST_PARAM_UINT(bw_probe_wait_rand_ms, 1000, 0, 3600000,
		  "Random part of the wall-clock wait between bw probes, ms (draft, default 1000)");
/* draft IsRenoCoexistenceProbeTime cap (63 rounds) */
CCTEST_PARAM_UINT(reno_rounds_max, 63, 1, 100000,
		  "Max rounds between bw probes (Reno coexistence), rounds (draft, default 63)");
/* draft "BBR.MinPipeCwnd" (4 SMSS) */
CCTEST_PARAM_UINT(min_pipe_cwnd_pkts, 4, 1, 1000,
		  "Minimum cwnd, packets (draft BBR.MinPipeCwnd, default 4)");
/* test hook, not in the draft: new sockets act as if the allocation failed */
CCTEST_PARAM_UINT(force_fallback, 0, 0, 1,
		  "Test hook: 1 = new sockets use the allocation-failure fallback (default 0)");

/*
 * Sockets that ran the allocation-failure fallback since the module was
 * loaded. Read-only; cctest reads it after a run and marks the run.
 */
static atomic_long_t bbr3_fallbacks = ATOMIC_LONG_INIT(0);

static int bbr3_fallbacks_get(char *buf, const struct kernel_param *kp)
{
	return scnprintf(buf, PAGE_SIZE, "%ld\n", atomic_long_read(&bbr3_fallbacks));
}

static const struct kernel_param_ops bbr3_counter_ops = {
	.get = bbr3_fallbacks_get,
};
module_param_cb(fallbacks, &bbr3_counter_ops, NULL, 0444);
MODULE_PARM_DESC(fallbacks, "Sockets that ran the allocation-failure fallback since load [read-only]");

/* ------------------------------------------------------------------ */
/* State                                                                */
/* ------------------------------------------------------------------ */

enum bbr3_mode {		/* tracepoint field "mode" */
	BBR3_STARTUP = 0,
	BBR3_DRAIN = 1,
	BBR3_PROBE_BW = 2,
	BBR3_PROBE_RTT = 3,
};

enum bbr3_phase {		/* tracepoint field "phase" (PROBE_BW only) */
	BBR3_BW_DOWN = 0,
	BBR3_BW_CRUISE = 1,
	BBR3_BW_REFILL = 2,
	BBR3_BW_UP = 3,
};

enum bbr3_ack_phase {		/* draft BBR.ack_phase */
	ACKS_INIT,
	ACKS_REFILLING,
	ACKS_PROBE_STARTING,
	ACKS_PROBE_FEEDBACK,
	ACKS_PROBE_STOPPING,
};

enum bbr3_undo {		/* draft BBR.undo_state */
	UNDO_NONE,
	UNDO_STARTUP,
	UNDO_PROBE_UP,
};

/* Per-socket state; too big for icsk_ca_priv, so kzalloc'ed in init. */
struct bbr3 {
	struct rcu_head rcu;		/* freed after inet_diag readers */
	u64 min_rtt_stamp;		/* draft BBR.min_rtt_stamp, us */
	u64 probe_rtt_min_stamp;	/* draft BBR.probe_rtt_min_stamp, us */
	u64 probe_rtt_done_stamp;	/* us, 0 = not set */
	u64 extra_acked_start;		/* draft extra_acked_interval_start, us */
	u64 cycle_stamp;		/* draft BBR.cycle_stamp, us */
	u64 bw_probe_wait_us;		/* draft BBR.bw_probe_wait */
	u64 up_start_us;		/* when ProbeBW_UP began (BBRv2 rule) */
	struct minmax extra_acked_filter; /* packets over round_count */

	u32 mode;			/* enum bbr3_mode */
	u32 phase;			/* enum bbr3_phase */
	u32 ack_phase;			/* enum bbr3_ack_phase */
	u32 undo_state;			/* enum bbr3_undo */

	u32 round_count;
	u32 next_round_delivered;
	u32 rounds_since_probe_up;
	u32 drain_start_round;
	u32 recovery_start_round;

	struct bbr3_bw_filter bw_filter; /* max_bw window: two ProbeBW cycles */
	u32 max_bw;			/* draft BBR.max_bw */
	u32 bw;				/* draft BBR.bw = min(max_bw, bw_lo) */
	u32 bw_lo;			/* draft BBR.bw_shortterm */
	u32 bw_latest;
	u32 inflight_latest;
	u32 inflight_hi;		/* draft BBR.inflight_longterm */
	u32 inflight_lo;		/* draft BBR.inflight_shortterm */
	u32 undo_bw_lo;
	u32 undo_inflight_lo;
	u32 undo_inflight_hi;

	u32 min_rtt_us;			/* draft BBR.min_rtt */
	u32 probe_rtt_min_us;		/* draft BBR.probe_rtt_min_delay */

	u32 prior_cwnd;
	u32 extra_acked_delivered;

	u32 full_bw;
	u32 full_bw_count;

	u32 bw_probe_up_acked;
	u32 probe_up_acked_per_inc;
	u32 bw_probe_up_rounds;

	u32 loss_round_delivered;
	u32 loss_round_lost_start;	/* tp->lost when this loss round began */
	u32 loss_events_in_round;	/* ACKs that marked losses this round */
	struct bbr3_hist hist;		/* send-time P.lost, P.tx_in_flight */

	u32 pacing_gain;		/* x1000, applied now */
	u32 cwnd_gain;			/* x1000, applied now */
	u32 startup_pacing_gain;	/* x1000, resolved at init */

	u8 prev_ca_state;
	u8 traced_mode;
	u8 traced_phase;
	u8 traced_any:1,
	   round_start:1,
	   loss_round_start:1,
	   loss_in_round:1,
	   full_bw_reached:1,
	   full_bw_now:1,
	   probe_rtt_round_done:1,
	   probe_rtt_expired:1;
	u8 idle_restart:1,
	   bw_probe_sample:1,
	   prev_probe_too_high:1,
	   prev_probe_precautionary:1,
	   packet_conservation:1;
};

/*
 * What lives in icsk_ca_priv: only the pointer to the block above.
 * inet_diag calls get_info under rcu_read_lock() without the socket lock,
 * while the socket may be closing (release) on another CPU: the pointer is
 * published with rcu_assign_pointer, read there with rcu_dereference, and
 * the block is freed with kfree_rcu, so get_info never reads freed memory.
 */
struct bbr3_priv {
	struct bbr3 __rcu *st;		/* NULL: allocation failed -> fallback */
};

/* One ACK's inputs, the draft's RS.* as far as a stock kernel gives them. */
struct bbr3_ack {
	u32 bw;			/* RS.delivery_rate, BW_UNIT scaled, 0 = none */
	u32 delivered;		/* RS.delivered */
	u32 newly_acked;	/* RS.newly_acked */
	u32 tx_in_flight;	/* approximation 1 */
	u32 lost;		/* approximation 2 */
	u32 losses;		/* packets marked lost on this ACK */
	long rtt_us;		/* RS.rtt, -1 if none */
	bool app_limited;	/* RS.is_app_limited */
	bool valid;		/* rs->prior_delivered is meaningful */
	u32 prior_delivered;
};

/*
 * The state, for the callbacks the stack makes with the socket locked
 * (ACK processing, init, release, ssthresh, undo, events): they are the
 * pointer's only writers, so no RCU read section is needed. get_info, the
 * one lockless reader, uses rcu_dereference itself.
 */
static struct bbr3 *bbr3_state(const struct sock *sk)
{
	const struct bbr3_priv *p = inet_csk_ca(sk);

	return rcu_dereference_protected(p->st, 1);
}

/* ------------------------------------------------------------------ */
/* Small helpers                                                       */
/* ------------------------------------------------------------------ */

static u32 bbr3_pct(u32 v, u32 pct)
{
	return (u32)div_u64((u64)v * pct, 100);
}

static u32 bbr3_beta(void)
{
	return min_t(u32, beta_pct, 100);
}

static u32 bbr3_min_pipe(void)
{
	return max_t(u32, min_pipe_cwnd_pkts, 1);
}

/* ln(x/1000) in Q16 for x > 1000, by the bit-wise binary logarithm. */
static u64 bbr3_ln_q16(u32 x1000)
{
	u64 v = div_u64((u64)x1000 << 16, 1000);	/* Q16 */
	u64 log2_q16;
	int n, i;

	n = ilog2(v) - 16;			/* integer part, v > 1.0 */
	v >>= n;				/* now in [1, 2) in Q16 */
	log2_q16 = (u64)n << 16;
	for (i = 15; i >= 0; i--) {
		v = (v * v) >> 16;
		if (v >= (2ULL << 16)) {
			v >>= 1;
			log2_q16 |= 1ULL << i;
		}
	}
	return (log2_q16 * 45426) >> 16;	/* * ln 2 (0.693147 in Q16) */
}

/*
 * Startup pacing gain x1000 (paper 003 Algorithm 1, draft
 * BBR.StartupPacingGain). startup_pacing_gain_x1000, when nonzero, wins;
 * otherwise alpha * (ln beta)^gamma, rounded to 0.01 (the precision of the
 * draft's 2.77 and the paper's 2.08), clamped to [1.0, 10.0]. Out-of-range
 * beta (<= 1.0) or gamma (0 or > 8) fall back to the draft's 2.77.
 */
static u32 bbr3_resolve_startup_gain(void)
{
	/* each parameter read once: sysfs may change it between two reads */
	u32 fixed = READ_ONCE(startup_pacing_gain_x1000);
	u32 alpha = READ_ONCE(startup_alpha_x1000);
	u32 beta = READ_ONCE(startup_beta_x1000);
	u32 gamma = READ_ONCE(startup_gamma);
	u64 lnp = 1ULL << 16, ln;
	u32 g, i;

	if (fixed)
		return clamp_t(u32, fixed, 1000, 10000);
	/* the parameter ops keep beta > 1000 and gamma in 1..8; stay safe anyway */
	if (beta <= 1000 || gamma < 1 || gamma > 8)
		return 2770;
	ln = bbr3_ln_q16(beta);
	for (i = 0; i < gamma; i++)
		lnp = (lnp * ln) >> 16;
	g = (u32)min_t(u64, ((u64)alpha * lnp) >> 16, 100000);
	g = (g + 5) / 10 * 10;
	return clamp_t(u32, g, 1000, 10000);
}

static u64 bbr3_now_us(const struct sock *sk)
{
	return tcp_sk(sk)->tcp_mstamp;
}

/* gain (x1000) * bdp in packets, rounded up; draft BDPMultiple(). */
static u32 bbr3_bdp_multiple(const struct sock *sk, const struct bbr3 *st,
			     u32 bw, u32 gain)
{
	u64 w;

	if (st->min_rtt_us == BBR3_INF)
		return TCP_INIT_CWND;	/* no valid RTT sample yet */
	w = (u64)bw * st->min_rtt_us;	/* packets << BW_SCALE */
	w = div_u64(w * gain, GAIN_UNIT);
	return (u32)min_t(u64, DIV_ROUND_UP_ULL(w, BW_UNIT), BBR3_INF - 1);
}

/* draft UpdateOffloadBudget(): 3 send quanta, a quantum ~1 ms of pacing. */
static u32 bbr3_offload_budget(const struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	u32 mss = max_t(u32, tp->mss_cache, 1);
	u64 q = READ_ONCE(sk->sk_pacing_rate) >> READ_ONCE(sk->sk_pacing_shift);

	q = clamp_t(u64, q, 2 * mss, 65536);
	return 3 * (u32)div_u64(q, mss);
}

/* draft QuantizationBudget() */
static u32 bbr3_quantization_budget(const struct sock *sk,
				    const struct bbr3 *st, u32 cap)
{
	cap = max(cap, bbr3_offload_budget(sk));
	cap = max(cap, bbr3_min_pipe());
	if (st->mode == BBR3_PROBE_BW && st->phase == BBR3_BW_UP)
		cap += 2;
	return cap;
}

/* draft Inflight(gain) with a given bw */
static u32 bbr3_inflight(const struct sock *sk, const struct bbr3 *st,
			 u32 bw, u32 gain)
{
	return bbr3_quantization_budget(sk, st,
					bbr3_bdp_multiple(sk, st, bw, gain));
}

/* draft TargetInflight(): bdp unless congestion cut cwnd */
static u32 bbr3_target_inflight(const struct sock *sk, const struct bbr3 *st)
{
	u32 bdp = bbr3_bdp_multiple(sk, st, st->bw, GAIN_UNIT);

	return min(bdp, tcp_snd_cwnd(tcp_sk(sk)));
}

/* draft InflightWithHeadroom() */
static u32 bbr3_inflight_with_headroom(const struct bbr3 *st)
{
	u32 headroom;

	if (st->inflight_hi == BBR3_INF)
		return BBR3_INF;
	headroom = max_t(u32, 1, bbr3_pct(st->inflight_hi,
					  min_t(u32, headroom_pct, 100)));
	return max(st->inflight_hi > headroom ? st->inflight_hi - headroom : 0,
		   bbr3_min_pipe());
}

static bool bbr3_is_probing_bw(const struct bbr3 *st)
{
	return st->mode == BBR3_STARTUP ||
	       (st->mode == BBR3_PROBE_BW &&
		(st->phase == BBR3_BW_REFILL || st->phase == BBR3_BW_UP));
}

/* bytes per second for a BW_UNIT-scaled packet rate */
static u64 bbr3_bw_to_bytes_per_sec(const struct sock *sk, u32 bw)
{
	u64 r = (u64)bw * tcp_sk(sk)->mss_cache;

	return (r * USEC_PER_SEC) >> BW_SCALE;
}

/* draft loss test with RS.lost / RS.tx_in_flight (approximations 1, 2) */
static bool bbr3_is_inflight_too_high(const struct sock *sk, u32 lost,
				      u32 tx_in_flight)
{
	u32 thresh = min_t(u32, loss_thresh_pct, 99);

	if (lost > 0 && !tcp_is_sack(tcp_sk(sk)))
		return true;
	return (u64)lost * 100 > (u64)tx_in_flight * thresh;
}

/* ------------------------------------------------------------------ */
/* Observability                                                       */
/* ------------------------------------------------------------------ */

static u64 bbr3_bw_bps(const struct sock *sk, u32 bw)
{
	return bbr3_bw_to_bytes_per_sec(sk, bw) * 8;
}

/*
 * Emit tracepoint <cc>:state. Called on every mode/phase transition
 * (transition = true: emit only if mode or phase differ from the last
 * event) and at the end of every ACK (emit on a round start or a change):
 * at most one event per round trip per socket plus one per transition.
 */
static void bbr3_trace(struct sock *sk, struct bbr3 *st, bool transition)
{
	bool changed = !st->traced_any || st->traced_mode != st->mode ||
		       (st->mode == BBR3_PROBE_BW &&
			st->traced_phase != st->phase);

	if (!trace_state_enabled())
		return;
	if (!changed && (transition || !st->round_start))
		return;
	st->traced_any = 1;
	st->traced_mode = st->mode;
	st->traced_phase = st->phase;
	trace_state(sk, st->mode, st->phase, bbr3_bw_bps(sk, st->max_bw),
		    st->bw_lo == BBR3_INF ? 0 : bbr3_bw_bps(sk, st->bw_lo),
		    st->min_rtt_us == BBR3_INF ? 0 : st->min_rtt_us,
		    st->inflight_hi == BBR3_INF ? 0 : st->inflight_hi,
		    st->inflight_lo == BBR3_INF ? 0 : st->inflight_lo,
		    st->pacing_gain, st->cwnd_gain, tcp_snd_cwnd(tcp_sk(sk)));
}

/* ------------------------------------------------------------------ */
/* Mode and phase transitions                                          */
/* ------------------------------------------------------------------ */

/* Startup and Drain cwnd gain: the draft's default gain unless set */
static u32 bbr3_startup_cwnd_gain(void)
{
	u32 g = READ_ONCE(startup_cwnd_gain_x1000);

	return g ? g : READ_ONCE(cwnd_gain_x1000);
}

/* Set the gains of the current mode/phase (draft's table) and trace it. */
static void bbr3_set_gains(struct sock *sk, struct bbr3 *st)
{
	switch (st->mode) {
	case BBR3_STARTUP:
		st->pacing_gain = st->startup_pacing_gain;
		st->cwnd_gain = bbr3_startup_cwnd_gain();
		break;
	case BBR3_DRAIN:
		st->pacing_gain = drain_pacing_gain_x1000;
		st->cwnd_gain = bbr3_startup_cwnd_gain();
		break;
	case BBR3_PROBE_RTT:
		st->pacing_gain = GAIN_UNIT;
		st->cwnd_gain = probe_rtt_cwnd_gain_x1000;
		break;
	case BBR3_PROBE_BW:
	default:
		switch (st->phase) {
		case BBR3_BW_DOWN:
			st->pacing_gain = probe_down_pacing_gain_x1000;
			st->cwnd_gain = cwnd_gain_x1000;
			break;
		case BBR3_BW_UP:
			st->pacing_gain = probe_up_pacing_gain_x1000;
			st->cwnd_gain = probe_up_cwnd_gain_x1000;
			break;
		default:	/* CRUISE, REFILL */
			st->pacing_gain = GAIN_UNIT;
			st->cwnd_gain = cwnd_gain_x1000;
			break;
		}
	}
	bbr3_trace(sk, st, true);
}

/* draft StartRound() */
static void bbr3_start_round(const struct sock *sk, struct bbr3 *st)
{
	st->next_round_delivered = tcp_sk(sk)->delivered;
}

/* draft ResetFullBW() */
static void bbr3_reset_full_bw(struct bbr3 *st)
{
	st->full_bw = 0;
	st->full_bw_count = 0;
	st->full_bw_now = 0;
}

/* draft ResetCongestionSignals() */
static void bbr3_reset_congestion_signals(struct bbr3 *st)
{
	st->loss_in_round = 0;
	st->bw_latest = 0;
	st->inflight_latest = 0;
}

/* draft ResetShortTermModel() */
static void bbr3_reset_short_term_model(struct bbr3 *st)
{
	st->bw_lo = BBR3_INF;
	st->inflight_lo = BBR3_INF;
}

/* draft EnterStartup() */
static void bbr3_enter_startup(struct sock *sk, struct bbr3 *st)
{
	st->mode = BBR3_STARTUP;
	bbr3_set_gains(sk, st);
}

/* draft EnterDrain() */
static void bbr3_enter_drain(struct sock *sk, struct bbr3 *st)
{
	st->mode = BBR3_DRAIN;
	bbr3_set_gains(sk, st);
	st->drain_start_round = st->round_count;
	/* Leave slow start in the kernel's eyes (tcp_info, tcp_in_slow_start). */
	tcp_sk(sk)->snd_ssthresh = bbr3_inflight(sk, st, st->max_bw, GAIN_UNIT);
}

/* draft PickProbeWait() */
static void bbr3_pick_probe_wait(struct bbr3 *st)
{
	/* read once; the parameter ops keep it <= 3600000, so + 1 never wraps */
	u32 rand_range = READ_ONCE(bw_probe_wait_rand_ms);
	u32 rand_ms = rand_range ? get_random_u32() % (rand_range + 1) : 0;

	st->rounds_since_probe_up = get_random_u32() & 1;
	st->bw_probe_wait_us = ((u64)READ_ONCE(bw_probe_wait_base_ms) +
				rand_ms) * USEC_PER_MSEC;
}

/* draft StartProbeBW_DOWN() */
static void bbr3_start_bw_down(struct sock *sk, struct bbr3 *st)
{
	bbr3_reset_congestion_signals(st);
	st->probe_up_acked_per_inc = BBR3_INF;
	bbr3_pick_probe_wait(st);
	st->cycle_stamp = bbr3_now_us(sk);
	st->ack_phase = ACKS_PROBE_STOPPING;
	bbr3_start_round(sk, st);
	st->mode = BBR3_PROBE_BW;
	st->phase = BBR3_BW_DOWN;
	bbr3_set_gains(sk, st);
}

/* draft StartProbeBW_CRUISE() */
static void bbr3_start_bw_cruise(struct sock *sk, struct bbr3 *st)
{
	/* BBRv2 (bbr2_start_bw_probe_cruise): cruise no higher than inflight_hi */
	if (BBR3_V2 && st->inflight_lo != BBR3_INF)
		st->inflight_lo = min(st->inflight_lo, st->inflight_hi);
	st->phase = BBR3_BW_CRUISE;
	bbr3_set_gains(sk, st);
}

/* draft StartProbeBW_REFILL() */
static void bbr3_start_bw_refill(struct sock *sk, struct bbr3 *st)
{
	bbr3_reset_short_term_model(st);
	st->bw_probe_up_rounds = 0;
	st->bw_probe_up_acked = 0;
	st->prev_probe_precautionary = 0;
	st->ack_phase = ACKS_REFILLING;
	bbr3_start_round(sk, st);
	st->mode = BBR3_PROBE_BW;
	st->phase = BBR3_BW_REFILL;
	bbr3_set_gains(sk, st);
}

/* draft RaiseInflightLongtermSlope() */
static void bbr3_raise_inflight_hi_slope(struct sock *sk, struct bbr3 *st)
{
	u32 growth_this_round = 1U << min_t(u32, st->bw_probe_up_rounds, 30);

	st->bw_probe_up_rounds = min_t(u32, st->bw_probe_up_rounds + 1, 30);
	st->probe_up_acked_per_inc =
		max_t(u32, tcp_snd_cwnd(tcp_sk(sk)) / growth_this_round, 1);
}

/* draft StartProbeBW_UP() */
static void bbr3_start_bw_up(struct sock *sk, struct bbr3 *st,
			     const struct bbr3_ack *a)
{
	st->ack_phase = ACKS_PROBE_STARTING;
	bbr3_start_round(sk, st);
	bbr3_reset_full_bw(st);
	st->full_bw = a->bw;
	st->up_start_us = bbr3_now_us(sk);
	st->phase = BBR3_BW_UP;
	bbr3_set_gains(sk, st);
	bbr3_raise_inflight_hi_slope(sk, st);
}

/* draft EnterProbeBW() */
static void bbr3_enter_probe_bw(struct sock *sk, struct bbr3 *st)
{
	bbr3_start_bw_down(sk, st);
}

/* draft SaveCwnd() */
static void bbr3_save_cwnd(struct sock *sk, struct bbr3 *st)
{
	u32 cwnd = tcp_snd_cwnd(tcp_sk(sk));

	if (inet_csk(sk)->icsk_ca_state < TCP_CA_Recovery &&
	    st->mode != BBR3_PROBE_RTT)
		st->prior_cwnd = cwnd;
	else
		st->prior_cwnd = max(st->prior_cwnd, cwnd);
}

/* draft RestoreCwnd() */
static void bbr3_restore_cwnd(struct sock *sk, struct bbr3 *st)
{
	struct tcp_sock *tp = tcp_sk(sk);

	tcp_snd_cwnd_set(tp, min(max(tcp_snd_cwnd(tp), st->prior_cwnd),
				 tp->snd_cwnd_clamp));
}

/* draft SaveStateUponLoss() */
static void bbr3_save_state_upon_loss(struct sock *sk, struct bbr3 *st)
{
	bbr3_save_cwnd(sk, st);
	st->undo_state = UNDO_NONE;
	st->undo_bw_lo = st->bw_lo;
	st->undo_inflight_lo = st->inflight_lo;
	st->undo_inflight_hi = st->inflight_hi;
}

/* ------------------------------------------------------------------ */
/* Model updates                                                       */
/* ------------------------------------------------------------------ */

/* draft UpdateRound() */
static void bbr3_update_round(struct sock *sk, struct bbr3 *st,
			      const struct bbr3_ack *a)
{
	st->round_start = 0;
	if (!a->valid)
		return;
	if (!before(a->prior_delivered, st->next_round_delivered)) {
		bbr3_start_round(sk, st);
		st->round_count++;
		st->rounds_since_probe_up++;
		st->round_start = 1;
		st->packet_conservation = 0;
	}
}

/* draft UpdateMaxBw() (round counting is done first, in bbr3_main) */
static void bbr3_update_max_bw(struct bbr3 *st, const struct bbr3_ack *a)
{
	if (a->bw > 0 && (a->bw >= st->max_bw || !a->app_limited)) {
		bbr3_bw_filter_update(&st->bw_filter, a->bw);
		st->max_bw = bbr3_bw_filter_max(&st->bw_filter);
	}
}

/*
 * draft AdvanceMaxBwFilter(): cycle_count++ on a 2-cycle window. A cycle
 * without an accepted sample does not advance it (bbr3_bw_filter.h), so the
 * round-start ACK that ends a cycle never zeroes max_bw when it carries no
 * rate sample itself (deviation bbr3-empty-cycle, docs/algorithms.md).
 */
static void bbr3_advance_max_bw_filter(struct bbr3 *st)
{
	bbr3_bw_filter_advance(&st->bw_filter);
	st->max_bw = bbr3_bw_filter_max(&st->bw_filter);
}

/* draft NoteLoss() */
static void bbr3_note_loss(struct sock *sk, struct bbr3 *st,
			   const struct bbr3_ack *a)
{
	const struct tcp_sock *tp = tcp_sk(sk);

	if (!st->loss_in_round) {	/* first loss in this round trip */
		st->loss_round_delivered = tp->delivered;
		st->loss_round_lost_start = tp->lost - a->losses;
		st->loss_events_in_round = 0;
		bbr3_save_state_upon_loss(sk, st);
	}
	st->loss_in_round = 1;
	st->loss_events_in_round++;
}

/* draft HandleInflightTooHigh() */
static void bbr3_handle_inflight_too_high(struct sock *sk, struct bbr3 *st,
					  const struct bbr3_ack *a,
					  u32 tx_in_flight)
{
	st->prev_probe_too_high = 1;
	st->bw_probe_sample = 0;	/* only react once per bw probe */
	if (!a->app_limited)
		st->inflight_hi = max(tx_in_flight,
				      bbr3_pct(bbr3_target_inflight(sk, st),
					       bbr3_beta()));
	if (st->mode == BBR3_PROBE_BW && st->phase == BBR3_BW_UP) {
		bbr3_start_bw_down(sk, st);
		st->undo_state = UNDO_PROBE_UP;
	}
}

/* draft InflightAtLoss(); "P" is this ACK's batch of losses (approx. 3) */
static u32 bbr3_inflight_at_loss(const struct bbr3_ack *a)
{
	u32 thresh = min_t(u32, loss_thresh_pct, 99);
	u32 size = a->losses;
	u32 inflight_prev = a->tx_in_flight > size ? a->tx_in_flight - size : 0;
	u32 lost_prev = a->lost > size ? a->lost - size : 0;
	s64 lost_prefix;

	lost_prefix = div_s64((s64)thresh * inflight_prev -
			      (s64)lost_prev * 100, 100 - thresh);
	if (lost_prefix < 0)
		lost_prefix = 0;
	return (u32)min_t(s64, (s64)inflight_prev + lost_prefix, BBR3_INF - 1);
}

/* draft HandleLostPacket(), once per ACK that marked losses (approx. 3) */
static void bbr3_handle_lost(struct sock *sk, struct bbr3 *st,
			     const struct bbr3_ack *a)
{
	bbr3_note_loss(sk, st, a);
	if (!st->bw_probe_sample)
		return;	/* not a packet sent while probing bandwidth */
	if (bbr3_is_inflight_too_high(sk, a->lost, a->tx_in_flight))
		bbr3_handle_inflight_too_high(sk, st, a,
					      bbr3_inflight_at_loss(a));
}

/* draft UpdateLatestDeliverySignals() */
static void bbr3_update_latest_delivery_signals(struct sock *sk,
						struct bbr3 *st,
						const struct bbr3_ack *a)
{
	st->loss_round_start = 0;
	st->bw_latest = max(st->bw_latest, a->bw);
	st->inflight_latest = max(st->inflight_latest, a->delivered);
	if (a->valid && !before(a->prior_delivered, st->loss_round_delivered)) {
		st->loss_round_delivered = tcp_sk(sk)->delivered;
		st->loss_round_start = 1;
	}
}

/* draft AdvanceLatestDeliverySignals() */
static void bbr3_advance_latest_delivery_signals(struct bbr3 *st,
						 const struct bbr3_ack *a)
{
	if (st->loss_round_start) {
		st->bw_latest = a->bw;
		st->inflight_latest = a->delivered;
	}
}

/*
 * draft CheckStartupHighLoss(), evaluated at the end of each loss round
 * (before the round's loss counters are reset): in recovery for a full
 * round, loss of the round above loss_thresh_pct, and at least
 * startup_full_loss_cnt loss events (approx. 4), or any loss without SACK.
 */
static void bbr3_check_startup_high_loss(struct sock *sk, struct bbr3 *st,
					 const struct bbr3_ack *a)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	u32 lost = tp->lost - st->loss_round_lost_start;
	bool too_high;

	if (st->full_bw_reached || st->mode != BBR3_STARTUP || !st->loss_in_round)
		return;
	if (inet_csk(sk)->icsk_ca_state < TCP_CA_Recovery)
		return;
	if (!tcp_is_sack(tp)) {
		too_high = true;
	} else {
		if (st->round_count <= st->recovery_start_round)
			return;	/* not yet a full round in recovery */
		too_high = st->loss_events_in_round >= startup_full_loss_cnt &&
			   bbr3_is_inflight_too_high(sk, lost, a->tx_in_flight);
	}
	if (!too_high)
		return;
	st->undo_state = UNDO_STARTUP;
	st->full_bw_reached = 1;
	if (BBR3_V2)	/* bbr2_handle_queue_too_high_in_startup: Inflight(max_bw, 1) */
		st->inflight_hi = bbr3_inflight(sk, st, st->max_bw, GAIN_UNIT);
	else
		st->inflight_hi = max(bbr3_bdp_multiple(sk, st, st->bw, GAIN_UNIT),
				      st->inflight_latest);
	bbr3_enter_drain(sk, st);
}

/* draft InitLowerBounds() + LossLowerBounds() */
static void bbr3_adapt_lower_bounds(struct sock *sk, struct bbr3 *st)
{
	if (bbr3_is_probing_bw(st))
		return;
	if (!st->loss_in_round)
		return;
	if (st->bw_lo == BBR3_INF)
		st->bw_lo = st->max_bw;
	if (st->inflight_lo == BBR3_INF)
		st->inflight_lo = tcp_snd_cwnd(tcp_sk(sk));
	st->bw_lo = max(st->bw_latest, bbr3_pct(st->bw_lo, bbr3_beta()));
	st->inflight_lo = max(st->inflight_latest,
			      bbr3_pct(st->inflight_lo, bbr3_beta()));
}

/* draft UpdateCongestionSignals() (UpdateMaxBw's UpdateRound ran before) */
static void bbr3_update_congestion_signals(struct sock *sk, struct bbr3 *st,
					   const struct bbr3_ack *a)
{
	bbr3_update_max_bw(st, a);
	if (!st->loss_round_start)
		return;	/* wait until end of round trip */
	bbr3_check_startup_high_loss(sk, st, a);
	bbr3_adapt_lower_bounds(sk, st);
	st->loss_in_round = 0;
	st->loss_events_in_round = 0;
	st->loss_round_lost_start = tcp_sk(sk)->lost;
}

/* draft UpdateACKAggregation() */
static void bbr3_update_ack_aggregation(struct sock *sk, struct bbr3 *st,
					const struct bbr3_ack *a)
{
	u64 now = bbr3_now_us(sk);
	u64 interval = now > st->extra_acked_start ?
		       now - st->extra_acked_start : 0;
	u64 expected = ((u64)st->bw * interval) >> BW_SCALE;
	u32 extra, win;

	if (!a->newly_acked)
		return;
	if (st->extra_acked_delivered <= expected) {
		st->extra_acked_delivered = 0;
		st->extra_acked_start = now;
		expected = 0;
	}
	st->extra_acked_delivered += a->newly_acked;
	extra = st->extra_acked_delivered > expected ?
		(u32)(st->extra_acked_delivered - expected) : 0;
	extra = min(extra, tcp_snd_cwnd(tcp_sk(sk)));
	win = st->full_bw_reached ? max_t(u32, extra_acked_filter_rounds, 1) : 1;
	minmax_running_max(&st->extra_acked_filter, win, st->round_count, extra);
}

/*
 * draft CheckFullBWReached(). The draft's pseudocode tests RS.delivery_rate;
 * its prose ("looks for a plateau in the BBR.max_bw estimate") and the Linux
 * BBR implementations test max_bw. A single round-start sample is noisy
 * (delayed ACKs, a CPU-starved VM), and with it Startup was seen to exit at
 * 5 % of the link rate, so this tests max_bw (deviation
 * bbr3-full-bw-on-max-bw, docs/algorithms.md).
 */
static void bbr3_check_full_bw_reached(struct bbr3 *st,
				       const struct bbr3_ack *a)
{
	if (st->full_bw_now || !st->round_start || a->app_limited)
		return;
	if ((u64)st->max_bw * 100 >=
	    (u64)st->full_bw * (100 + full_bw_growth_pct)) {
		bbr3_reset_full_bw(st);
		st->full_bw = st->max_bw;
		return;
	}
	st->full_bw_count++;
	st->full_bw_now = st->full_bw_count >= full_bw_rounds;
	if (st->full_bw_now)
		st->full_bw_reached = 1;
}

/* draft CheckStartupDone() (the loss exit runs at loss-round end above) */
static void bbr3_check_startup_done(struct sock *sk, struct bbr3 *st)
{
	if (st->mode == BBR3_STARTUP && st->full_bw_reached)
		bbr3_enter_drain(sk, st);
}

/* draft CheckDrainDone() */
static void bbr3_check_drain_done(struct sock *sk, struct bbr3 *st)
{
	u32 max_rounds = READ_ONCE(drain_max_rounds);	/* 0: no limit */

	if (st->mode != BBR3_DRAIN)
		return;
	if (tcp_packets_in_flight(tcp_sk(sk)) <=
		    bbr3_inflight(sk, st, st->bw, GAIN_UNIT) ||
	    (max_rounds && st->round_count > st->drain_start_round + max_rounds))
		bbr3_enter_probe_bw(sk, st);
}

/* draft ProbeInflightLongtermUpward() */
static void bbr3_probe_inflight_hi_upward(struct sock *sk, struct bbr3 *st,
					  const struct bbr3_ack *a)
{
	u32 delta;

	if (!tcp_is_cwnd_limited(sk) ||
	    tcp_snd_cwnd(tcp_sk(sk)) < st->inflight_hi) {
		/* BBRv2 (bbr2_probe_inflight_hi_upward) drops unused credit */
		if (BBR3_V2)
			st->bw_probe_up_acked = 0;
		return;	/* not fully using inflight_hi, so don't grow it */
	}
	st->bw_probe_up_acked += a->newly_acked;
	if (st->probe_up_acked_per_inc != BBR3_INF &&
	    st->bw_probe_up_acked >= st->probe_up_acked_per_inc) {
		delta = st->bw_probe_up_acked / st->probe_up_acked_per_inc;
		st->bw_probe_up_acked -= delta * st->probe_up_acked_per_inc;
		st->inflight_hi = min_t(u64, (u64)st->inflight_hi + delta,
					BBR3_INF - 1);
	}
	if (st->round_start)
		bbr3_raise_inflight_hi_slope(sk, st);
}

/* draft AdaptLongTermModel(); true if it decided a state transition */
static bool bbr3_adapt_long_term_model(struct sock *sk, struct bbr3 *st,
				       const struct bbr3_ack *a)
{
	if (st->ack_phase == ACKS_PROBE_STARTING && st->round_start)
		st->ack_phase = ACKS_PROBE_FEEDBACK;	/* probe samples begin */
	if (st->ack_phase == ACKS_PROBE_STOPPING && st->round_start) {
		/* end of samples from the bw probing phase */
		st->bw_probe_sample = 0;
		st->ack_phase = ACKS_INIT;
		if (st->mode == BBR3_PROBE_BW && !a->app_limited)
			bbr3_advance_max_bw_filter(st);
		/* Precautionary Bandwidth Probing: Acceleration */
		if (st->mode == BBR3_PROBE_BW && st->prev_probe_precautionary &&
		    !st->prev_probe_too_high) {
			bbr3_start_bw_refill(sk, st);
			return true;
		}
	}
	if (!bbr3_is_inflight_too_high(sk, a->lost, a->tx_in_flight)) {
		/* Loss rate is safe. Adjust upper bounds upward. */
		if (st->inflight_hi == BBR3_INF)
			return false;
		if (a->tx_in_flight > st->inflight_hi)
			st->inflight_hi = a->tx_in_flight;
		if (st->mode == BBR3_PROBE_BW && st->phase == BBR3_BW_UP)
			bbr3_probe_inflight_hi_upward(sk, st, a);
	}
	return false;
}

/* draft IsRenoCoexistenceProbeTime() */
static bool bbr3_is_reno_coexistence_probe_time(const struct sock *sk,
						const struct bbr3 *st)
{
	u32 rounds = min(bbr3_target_inflight(sk, st), reno_rounds_max);

	return st->rounds_since_probe_up >= rounds;
}

/* draft IsTimeToProbeBW() */
static bool bbr3_is_time_to_probe_bw(struct sock *sk, struct bbr3 *st)
{
	if (bbr3_now_us(sk) > st->cycle_stamp + st->bw_probe_wait_us ||
	    bbr3_is_reno_coexistence_probe_time(sk, st)) {
		bbr3_start_bw_refill(sk, st);
		return true;
	}
	return false;
}

/* draft IsTimeToCruise() */
static bool bbr3_is_time_to_cruise(const struct sock *sk,
				   const struct bbr3 *st)
{
	u32 inflight = tcp_packets_in_flight(tcp_sk(sk));

	if (inflight > bbr3_inflight_with_headroom(st))
		return false;	/* not enough headroom */
	if (inflight > bbr3_inflight(sk, st, st->max_bw, GAIN_UNIT))
		return false;	/* inflight > estimated bdp */
	return true;
}

/* draft IsTimeToGoDown() */
static bool bbr3_is_time_to_go_down(struct sock *sk, struct bbr3 *st,
				    const struct bbr3_ack *a)
{
	u32 pif = READ_ONCE(up_exit_pif_gain_x1000);
	u32 inflight = tcp_packets_in_flight(tcp_sk(sk));

	if (st->prev_probe_too_high && inflight >= st->inflight_hi) {
		st->prev_probe_precautionary = 1;
		return true;
	}
	if (pif) {
		/* BBRv2 ("is_queuing"): a min_rtt into UP with inflight at
		 * pif x BDP, a queue is building: go down */
		return st->min_rtt_us != BBR3_INF &&
		       bbr3_now_us(sk) > st->up_start_us + st->min_rtt_us &&
		       inflight >= bbr3_inflight(sk, st, st->max_bw, pif);
	}
	if (tcp_is_cwnd_limited(sk) &&
	    tcp_snd_cwnd(tcp_sk(sk)) >= st->inflight_hi) {
		bbr3_reset_full_bw(st);	/* bw is limited by inflight_hi */
		st->full_bw = a->bw;
	} else if (st->full_bw_now) {
		return true;	/* we estimate we've fully used path bw */
	}
	return false;
}

/* draft UpdateProbeBWCyclePhase() */
static void bbr3_update_probe_bw_cycle_phase(struct sock *sk, struct bbr3 *st,
					     const struct bbr3_ack *a)
{
	if (!st->full_bw_reached)
		return;
	if (bbr3_adapt_long_term_model(sk, st, a))
		return;
	if (st->mode != BBR3_PROBE_BW)
		return;

	switch (st->phase) {
	case BBR3_BW_DOWN:
		if (bbr3_is_time_to_probe_bw(sk, st))
			return;
		if (bbr3_is_time_to_cruise(sk, st))
			bbr3_start_bw_cruise(sk, st);
		break;
	case BBR3_BW_CRUISE:
		bbr3_is_time_to_probe_bw(sk, st);
		break;
	case BBR3_BW_REFILL:
		/* After one round of REFILL, start UP */
		if (st->round_start) {
			st->bw_probe_sample = 1;
			bbr3_start_bw_up(sk, st, a);
		}
		break;
	case BBR3_BW_UP:
		if (bbr3_is_time_to_go_down(sk, st, a)) {
			st->prev_probe_too_high = 0;	/* no high loss (yet) */
			bbr3_start_bw_down(sk, st);
		}
		break;
	}
}

/* draft UpdateMinRTT() */
static void bbr3_update_min_rtt(struct sock *sk, struct bbr3 *st,
				const struct bbr3_ack *a)
{
	u64 now = bbr3_now_us(sk);

	st->probe_rtt_expired = now > st->probe_rtt_min_stamp +
				(u64)probe_rtt_interval_ms * USEC_PER_MSEC;
	if (a->rtt_us >= 0 &&
	    ((u32)a->rtt_us < st->probe_rtt_min_us || st->probe_rtt_expired)) {
		st->probe_rtt_min_us = (u32)a->rtt_us;
		st->probe_rtt_min_stamp = now;
	}
	if (st->probe_rtt_min_us < st->min_rtt_us ||
	    now > st->min_rtt_stamp +
		  (u64)min_rtt_filter_len_ms * USEC_PER_MSEC) {
		st->min_rtt_us = st->probe_rtt_min_us;
		st->min_rtt_stamp = st->probe_rtt_min_stamp;
	}
}

/* draft ProbeRTTCwnd() */
static u32 bbr3_probe_rtt_cwnd(const struct sock *sk, const struct bbr3 *st)
{
	return max(bbr3_bdp_multiple(sk, st, st->bw, probe_rtt_cwnd_gain_x1000),
		   bbr3_min_pipe());
}

/* draft MarkConnectionAppLimited(), as Linux tcp_bbr does it */
static void bbr3_mark_app_limited(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);

	tp->app_limited = (tp->delivered + tcp_packets_in_flight(tp)) ? : 1;
}

/* draft ExitProbeRTT() */
static void bbr3_exit_probe_rtt(struct sock *sk, struct bbr3 *st)
{
	bbr3_reset_short_term_model(st);
	if (st->full_bw_reached) {
		bbr3_start_bw_down(sk, st);
		bbr3_start_bw_cruise(sk, st);
	} else {
		bbr3_enter_startup(sk, st);
	}
}

/* draft CheckProbeRTTDone() */
static void bbr3_check_probe_rtt_done(struct sock *sk, struct bbr3 *st)
{
	u64 now = bbr3_now_us(sk);

	if (st->probe_rtt_done_stamp && now > st->probe_rtt_done_stamp) {
		st->probe_rtt_min_stamp = now;	/* schedule next ProbeRTT */
		bbr3_restore_cwnd(sk, st);
		bbr3_exit_probe_rtt(sk, st);
	}
}

/* draft HandleProbeRTT() */
static void bbr3_handle_probe_rtt(struct sock *sk, struct bbr3 *st)
{
	bbr3_mark_app_limited(sk);	/* ignore low rate samples */
	if (!st->probe_rtt_done_stamp &&
	    tcp_packets_in_flight(tcp_sk(sk)) <= bbr3_probe_rtt_cwnd(sk, st)) {
		st->probe_rtt_done_stamp = bbr3_now_us(sk) +
			(u64)probe_rtt_duration_ms * USEC_PER_MSEC;
		st->probe_rtt_round_done = 0;
		bbr3_start_round(sk, st);
	} else if (st->probe_rtt_done_stamp) {
		if (st->round_start)
			st->probe_rtt_round_done = 1;
		if (st->probe_rtt_round_done)
			bbr3_check_probe_rtt_done(sk, st);
	}
}

/* draft CheckProbeRTT() */
static void bbr3_check_probe_rtt(struct sock *sk, struct bbr3 *st,
				 const struct bbr3_ack *a)
{
	if (st->mode != BBR3_PROBE_RTT && st->probe_rtt_expired &&
	    !st->idle_restart) {
		/* draft order: EnterProbeRTT() then SaveCwnd(), so SaveCwnd
		 * sees ProbeRTT and keeps max(prior_cwnd, cwnd) */
		st->mode = BBR3_PROBE_RTT;	/* EnterProbeRTT() */
		bbr3_set_gains(sk, st);
		bbr3_save_cwnd(sk, st);
		st->probe_rtt_done_stamp = 0;
		st->ack_phase = ACKS_PROBE_STOPPING;
		bbr3_start_round(sk, st);
	}
	if (st->mode == BBR3_PROBE_RTT)
		bbr3_handle_probe_rtt(sk, st);
	if (a->delivered > 0)
		st->idle_restart = 0;
}

/* draft BoundBWForModel() */
static void bbr3_bound_bw_for_model(struct bbr3 *st)
{
	st->bw = min(st->max_bw, st->bw_lo);
}

/* ------------------------------------------------------------------ */
/* Control parameters                                                  */
/* ------------------------------------------------------------------ */

static unsigned long bbr3_rate_bytes_per_sec(const struct sock *sk, u32 bw,
					     u32 gain)
{
	/* payload bytes (mss_cache), as the draft, Linux bbr and BBRv3 pace */
	u64 rate = (u64)bw * tcp_sk(sk)->mss_cache;

	rate = div_u64(rate * gain, GAIN_UNIT);
	rate *= USEC_PER_SEC / 100 * (100 - min_t(u32, pacing_margin_pct, 99));
	rate >>= BW_SCALE;
	return (unsigned long)min_t(u64, rate, READ_ONCE(sk->sk_max_pacing_rate));
}

/* What the choice of a pacing rate (bbr3_pacing.h) reads: the model's bw,
 * the rate bw x gain gives and the rate in force.
 */
static struct bbr3_pacing bbr3_pacing_at(const struct sock *sk,
					 const struct bbr3 *st, u32 gain)
{
	return (struct bbr3_pacing){
		.bw = st->bw,
		.rate = bbr3_rate_bytes_per_sec(sk, st->bw, gain),
		.in_force = READ_ONCE(sk->sk_pacing_rate),
		.full_bw_reached = st->full_bw_reached,
	};
}

/* draft SetPacingRateWithGain() */
static void bbr3_set_pacing_rate_with_gain(struct sock *sk, struct bbr3 *st,
					   u32 gain)
{
	struct bbr3_pacing p = bbr3_pacing_at(sk, st, gain);

	WRITE_ONCE(sk->sk_pacing_rate, bbr3_pacing_rate_choice(&p));
}

/* draft InitPacingRate() */
static void bbr3_init_pacing_rate(struct sock *sk, struct bbr3 *st)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u32 rtt_us = tp->srtt_us ? max(tp->srtt_us >> 3, 1U) : USEC_PER_MSEC;
	u64 bw = div_u64((u64)tcp_snd_cwnd(tp) * BW_UNIT, rtt_us);

	WRITE_ONCE(sk->sk_pacing_rate,
		   bbr3_rate_bytes_per_sec(sk, (u32)min_t(u64, bw, BBR3_INF),
					   st->startup_pacing_gain));
}

/* draft BoundCwndForModel() */
static u32 bbr3_bound_cwnd_for_model(const struct bbr3 *st, u32 cwnd)
{
	u32 cap = BBR3_INF;

	if (st->mode == BBR3_PROBE_BW && st->phase != BBR3_BW_CRUISE)
		cap = st->inflight_hi;
	else if (st->mode == BBR3_PROBE_RTT ||
		 (st->mode == BBR3_PROBE_BW && st->phase == BBR3_BW_CRUISE))
		cap = bbr3_inflight_with_headroom(st);
	cap = min(cap, st->inflight_lo);
	cap = max(cap, bbr3_min_pipe());
	return min(cwnd, cap);
}

/*
 * Loss recovery (approximation 6): on entering fast recovery, packet
 * conservation for one round (cwnd = inflight + newly acked); every ACK
 * subtracts newly marked losses; on leaving recovery, draft RestoreCwnd().
 * Returns true if cwnd is fixed for this ACK by packet conservation.
 */
static bool bbr3_recovery_cwnd(struct sock *sk, struct bbr3 *st,
			       const struct bbr3_ack *a, u32 *cwnd)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u8 state = inet_csk(sk)->icsk_ca_state, prev = st->prev_ca_state;
	u32 inflight = tcp_packets_in_flight(tp);

	if (BBR3_V2) {
		/* BBRv2 (tcp_bbr2.c bbr_set_cwnd, bbr2_set_state): no packet
		 * conservation, the loss response is the model's bounds; only a
		 * cwnd an RTO collapsed is restored, as the Loss state ends */
		if (state == TCP_CA_Recovery && prev != TCP_CA_Recovery)
			st->recovery_start_round = st->round_count;
		else if (prev == TCP_CA_Loss && state != TCP_CA_Loss)
			*cwnd = max(*cwnd, st->prior_cwnd);
		st->prev_ca_state = state;
		return false;
	}
	if (a->losses > 0)
		*cwnd = max_t(s32, (s32)*cwnd - (s32)a->losses, 1);

	if (state == TCP_CA_Recovery && prev != TCP_CA_Recovery) {
		/* draft OnEnterFastRecovery(): SaveCwnd ran in ssthresh() */
		st->packet_conservation = 1;
		st->recovery_start_round = st->round_count;
		bbr3_start_round(sk, st);	/* conservation lasts a round */
		*cwnd = inflight + a->newly_acked;
	} else if (prev >= TCP_CA_Recovery && state < TCP_CA_Recovery) {
		st->packet_conservation = 0;
		*cwnd = max(*cwnd, st->prior_cwnd);	/* RestoreCwnd() */
	}
	st->prev_ca_state = state;

	if (st->packet_conservation) {
		*cwnd = max(*cwnd, inflight + a->newly_acked);
		return true;
	}
	return false;
}

/* draft SetCwnd() with UpdateMaxInflight() */
static void bbr3_set_cwnd(struct sock *sk, struct bbr3 *st,
			  const struct bbr3_ack *a)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u32 cwnd = tcp_snd_cwnd(tp);
	u32 max_inflight;

	if (!a->newly_acked && !a->losses)
		goto bound;
	if (bbr3_recovery_cwnd(sk, st, a, &cwnd))
		goto bound;

	max_inflight = bbr3_bdp_multiple(sk, st, st->bw, st->cwnd_gain);
	max_inflight += minmax_get(&st->extra_acked_filter);
	max_inflight = bbr3_quantization_budget(sk, st, max_inflight);

	if (st->full_bw_reached)
		cwnd = min(cwnd + a->newly_acked, max_inflight);
	else if (cwnd < max_inflight || tp->delivered < TCP_INIT_CWND)
		cwnd = cwnd + a->newly_acked;
	cwnd = max(cwnd, bbr3_min_pipe());
bound:
	if (st->mode == BBR3_PROBE_RTT)		/* BoundCwndForProbeRTT() */
		cwnd = min(cwnd, bbr3_probe_rtt_cwnd(sk, st));
	cwnd = bbr3_bound_cwnd_for_model(st, cwnd);
	tcp_snd_cwnd_set(tp, min(max(cwnd, 1U), tp->snd_cwnd_clamp));
}

/* ------------------------------------------------------------------ */
/* Fallback when the state block could not be allocated: Reno-like.    */
/* ------------------------------------------------------------------ */

static void bbr3_fallback_control(struct sock *sk, const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u64 rate;

	if (inet_csk(sk)->icsk_ca_state >= TCP_CA_Recovery) {
		tcp_snd_cwnd_set(tp, max(min(tcp_snd_cwnd(tp), tp->snd_ssthresh), 2U));
	} else if (rs->acked_sacked > 0) {
		tcp_reno_cong_avoid(sk, 0, rs->acked_sacked);
	}
	/* Like the kernel's tcp_update_pacing_rate(): 2x in SS, 1.2x after. */
	rate = (u64)tp->mss_cache * ((USEC_PER_SEC / 100) << 3);
	rate *= tcp_snd_cwnd(tp) < tp->snd_ssthresh / 2 ? 200 : 120;
	rate *= max(tcp_snd_cwnd(tp), tp->packets_out);
	if (likely(tp->srtt_us))
		rate = div_u64(rate, tp->srtt_us);
	WRITE_ONCE(sk->sk_pacing_rate,
		   (unsigned long)min_t(u64, rate, READ_ONCE(sk->sk_max_pacing_rate)));
}

/* ------------------------------------------------------------------ */
/* tcp_congestion_ops callbacks                                        */
/* ------------------------------------------------------------------ */

/*
 * RS.lost and RS.tx_in_flight of this ACK (approximations 1 and 2): the
 * send-time state of its newest ACKed packet, P.delivered =
 * rs->prior_delivered, from the checkpoint ring (bbr3_send_history.h). An
 * ACK without a valid rate sample names no packet; one sent a flight ago
 * (C.delivered was then about C.delivered - inflight) stands for it. Where
 * the ring has no inflight for the packet, the inflight before this ACK
 * stands in.
 */
static void bbr3_send_state(struct sock *sk, struct bbr3 *st,
			    const struct rate_sample *rs, struct bbr3_ack *a)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	u32 p_delivered = a->valid ? a->prior_delivered :
				     tp->delivered - rs->prior_in_flight;
	u32 tx = 0;

	bbr3_hist_on_ack(&st->hist, rs->prior_in_flight, tp->delivered,
			 tp->lost, tcp_snd_cwnd(tp) / BBR3_HIST_PER_FLIGHT);
	bbr3_hist_lookup(&st->hist, p_delivered, &a->lost, &tx);
	a->tx_in_flight = tx ? tx : rs->prior_in_flight;
}

/* draft UpdateOnACK(): the per-ACK table of contents */
static void bbr3_main(struct sock *sk, const struct rate_sample *rs)
{
	struct bbr3 *st = bbr3_state(sk);
	struct bbr3_ack a = {};

	if (unlikely(!st)) {
		bbr3_fallback_control(sk, rs);
		return;
	}

	/* GenerateRateSample(): the kernel did it; take what it gives. */
	a.valid = rs->delivered >= 0 && rs->prior_mstamp;
	a.prior_delivered = rs->prior_delivered;
	a.delivered = rs->delivered > 0 ? rs->delivered : 0;
	a.newly_acked = rs->acked_sacked;
	a.losses = rs->losses > 0 ? rs->losses : 0;
	a.rtt_us = rs->rtt_us;
	a.app_limited = rs->is_app_limited;
	if (rs->delivered > 0 && rs->interval_us > 0)
		a.bw = (u32)min_t(u64, div64_long((u64)rs->delivered * BW_UNIT,
						  rs->interval_us), BBR3_INF - 1);

	bbr3_update_round(sk, st, &a);	/* UpdateMaxBw()'s UpdateRound() */
	bbr3_send_state(sk, st, rs, &a);	/* approximations 1 and 2 */
	if (a.losses)
		bbr3_handle_lost(sk, st, &a);	/* HandleLostPacket(), approx. 3 */

	/* UpdateModelAndState() */
	bbr3_update_latest_delivery_signals(sk, st, &a);
	bbr3_update_congestion_signals(sk, st, &a);
	bbr3_update_ack_aggregation(sk, st, &a);
	bbr3_check_full_bw_reached(st, &a);
	bbr3_check_startup_done(sk, st);
	bbr3_check_drain_done(sk, st);
	if (a.newly_acked)
		bbr3_update_probe_bw_cycle_phase(sk, st, &a);
	bbr3_update_min_rtt(sk, st, &a);
	bbr3_check_probe_rtt(sk, st, &a);
	bbr3_advance_latest_delivery_signals(st, &a);
	bbr3_bound_bw_for_model(st);

	/* UpdateControlParameters(); SetSendQuantum() is the kernel's */
	bbr3_set_pacing_rate_with_gain(sk, st, st->pacing_gain);
	bbr3_set_cwnd(sk, st, &a);

	bbr3_trace(sk, st, false);
}

#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 10, 0)
static void bbr3_cong_control(struct sock *sk, u32 ack, int flag,
			      const struct rate_sample *rs)
{
	bbr3_main(sk, rs);
}
#else
static void bbr3_cong_control(struct sock *sk, const struct rate_sample *rs)
{
	bbr3_main(sk, rs);
}
#endif

/* draft OnInit() */
static void bbr3_init(struct sock *sk)
{
	struct bbr3_priv *p = inet_csk_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbr3 *st;
	u64 now;

	RCU_INIT_POINTER(p->st, NULL);
	st = READ_ONCE(force_fallback) ? NULL :
	     kzalloc(sizeof(*st), GFP_NOWAIT | __GFP_NOWARN);
	cmpxchg(&sk->sk_pacing_status, SK_PACING_NONE, SK_PACING_NEEDED);
	if (!st) {
		atomic_long_inc(&bbr3_fallbacks);
		return;		/* Reno-like fallback, see header comment */
	}

	now = bbr3_now_us(sk);
	st->startup_pacing_gain = bbr3_resolve_startup_gain();
	st->min_rtt_us = tp->srtt_us ? max(tp->srtt_us >> 3, 1U) : BBR3_INF;
	st->min_rtt_stamp = now;
	st->probe_rtt_min_us = st->min_rtt_us;
	st->probe_rtt_min_stamp = now;
	st->extra_acked_start = now;
	st->inflight_hi = BBR3_INF;
	st->probe_up_acked_per_inc = BBR3_INF;
	st->undo_state = UNDO_NONE;
	st->ack_phase = ACKS_INIT;
	st->prev_ca_state = TCP_CA_Open;
	minmax_reset(&st->extra_acked_filter, 0, 0);
	bbr3_reset_congestion_signals(st);
	bbr3_reset_short_term_model(st);
	st->next_round_delivered = tp->delivered;	/* InitRoundCounting() */
	st->loss_round_delivered = tp->delivered;
	st->loss_round_lost_start = tp->lost;
	bbr3_hist_reset(&st->hist, tp->delivered, tp->lost);
	bbr3_reset_full_bw(st);
	bbr3_enter_startup(sk, st);
	bbr3_init_pacing_rate(sk, st);
	rcu_assign_pointer(p->st, st);	/* visible to get_info fully set up */
}

static void bbr3_release(struct sock *sk)
{
	struct bbr3_priv *p = inet_csk_ca(sk);
	struct bbr3 *st = bbr3_state(sk);

	RCU_INIT_POINTER(p->st, NULL);
	if (st)
		kfree_rcu(st, rcu);	/* a get_info may still be reading it */
}

/* Entering fast recovery or RTO: draft SaveCwnd()/SaveStateUponLoss(). */
static u32 bbr3_ssthresh(struct sock *sk)
{
	struct bbr3 *st = bbr3_state(sk);

	if (!st)
		return tcp_reno_ssthresh(sk);
	bbr3_save_state_upon_loss(sk, st);
	return tcp_sk(sk)->snd_ssthresh;
}

/* draft HandleSpuriousLossDetection() on the kernel's undo */
static u32 bbr3_undo_cwnd(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbr3 *st = bbr3_state(sk);

	if (!st)
		return tcp_reno_undo_cwnd(sk);
	st->loss_in_round = 0;
	bbr3_reset_full_bw(st);
	st->bw_lo = max(st->bw_lo, st->undo_bw_lo);
	st->inflight_lo = max(st->inflight_lo, st->undo_inflight_lo);
	st->inflight_hi = max(st->inflight_hi, st->undo_inflight_hi);
	if (BBR3_V2) {
		/* bbr2_undo_cwnd: the bounds and the cwnd saved at the loss come
		 * back; Startup or a probe is not resumed */
		st->undo_state = UNDO_NONE;
		return st->prior_cwnd ? st->prior_cwnd : tcp_snd_cwnd(tp);
	}
	if (st->undo_state == UNDO_STARTUP && st->mode != BBR3_STARTUP) {
		st->full_bw_reached = 0;
		if (st->mode != BBR3_PROBE_RTT)
			bbr3_enter_startup(sk, st);
	} else if (st->undo_state == UNDO_PROBE_UP &&
		   !(st->mode == BBR3_PROBE_BW && st->phase == BBR3_BW_UP)) {
		if (st->mode != BBR3_PROBE_RTT)
			bbr3_start_bw_refill(sk, st);
	}
	st->undo_state = UNDO_NONE;
	return max(tcp_snd_cwnd(tp), st->prior_cwnd);	/* RestoreCwnd() */
}

/* RTO: draft OnEnterRTO(); the kernel already sets cwnd = inflight + 1. */
static void bbr3_set_state(struct sock *sk, u8 new_state)
{
	struct bbr3 *st = bbr3_state(sk);

	if (!st)
		return;
	if (new_state == TCP_CA_Loss) {
		st->prev_ca_state = TCP_CA_Loss;
		st->recovery_start_round = st->round_count;
		if (!st->loss_in_round) {
			st->loss_in_round = 1;
			st->loss_round_delivered = tcp_sk(sk)->delivered;
		}
		/* bbr2_set_state: the RTO restarts the full-pipe estimate, and
		 * a short-term volume bound starts at the cwnd before it */
		if (BBR3_V2) {
			st->full_bw = 0;
			if (!bbr3_is_probing_bw(st) &&
			    st->inflight_lo == BBR3_INF && st->prior_cwnd)
				st->inflight_lo = st->prior_cwnd;
		}
	}
}

/* draft HandleRestartFromIdle() */
static void bbr3_cwnd_event(struct sock *sk, enum tcp_ca_event event)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbr3 *st = bbr3_state(sk);

	if (!st || event != CA_EVENT_TX_START || !tp->app_limited)
		return;
	st->idle_restart = 1;
	st->extra_acked_start = tp->tcp_mstamp;
	st->extra_acked_delivered = 0;
	if (st->mode == BBR3_PROBE_BW) {
		struct bbr3_pacing p = bbr3_pacing_at(sk, st, GAIN_UNIT);

		WRITE_ONCE(sk->sk_pacing_rate, bbr3_idle_restart_rate(&p));
	} else if (st->mode == BBR3_PROBE_RTT) {
		bbr3_check_probe_rtt_done(sk, st);
	}
}
CCTEST_TX_START_HOOK_DEFINE(bbr3_cwnd_event)

/* draft SetSendQuantum() lower bound of 2 packets (kernel tcp_tso_autosize) */
static u32 bbr3_min_tso_segs(struct sock *sk)
{
	return 2;
}

static u32 bbr3_sndbuf_expand(struct sock *sk)
{
	return 3;	/* as Linux tcp_bbr: room for gains above 2 */
}

static size_t bbr3_get_info(struct sock *sk, u32 ext, int *attr,
			    union tcp_cc_info *info)
{
	if (ext & (1 << (INET_DIAG_BBRINFO - 1)) ||
	    ext & (1 << (INET_DIAG_VEGASINFO - 1))) {
		const struct bbr3_priv *p = inet_csk_ca(sk);
		struct bbr3 *st;
		u64 bw = 0;
		u32 min_rtt = 0, pg = 0, cg = 0;

		/* lockless: the socket may be releasing its state right now */
		rcu_read_lock();
		st = rcu_dereference(p->st);
		if (st) {
			bw = bbr3_bw_to_bytes_per_sec(sk, st->max_bw);
			min_rtt = st->min_rtt_us == BBR3_INF ? 0 : st->min_rtt_us;
			/* the gains applied now, x1000 -> x256 (<< 8) */
			pg = (u32)DIV_ROUND_CLOSEST_ULL((u64)st->pacing_gain << 8,
							GAIN_UNIT);
			cg = (u32)DIV_ROUND_CLOSEST_ULL((u64)st->cwnd_gain << 8,
							GAIN_UNIT);
		}
		rcu_read_unlock();
		memset(&info->bbr, 0, sizeof(info->bbr));
		info->bbr.bbr_bw_lo = (u32)bw;
		info->bbr.bbr_bw_hi = (u32)(bw >> 32);
		info->bbr.bbr_min_rtt = min_rtt;
		info->bbr.bbr_pacing_gain = pg;
		info->bbr.bbr_cwnd_gain = cg;
		*attr = INET_DIAG_BBRINFO;
		return sizeof(info->bbr);
	}
	return 0;
}

static struct tcp_congestion_ops bbr3_ops __read_mostly = {
	.flags		= TCP_CONG_NON_RESTRICTED,
	.name		= BBR3_NAME_STR,
	.owner		= THIS_MODULE,
	.init		= bbr3_init,
	.release	= bbr3_release,
	.cong_control	= bbr3_cong_control,
	.sndbuf_expand	= bbr3_sndbuf_expand,
	.undo_cwnd	= bbr3_undo_cwnd,
	.cwnd_event	= bbr3_cwnd_event,
	CCTEST_TX_START_HOOK(bbr3_cwnd_event)
	.ssthresh	= bbr3_ssthresh,
	.min_tso_segs	= bbr3_min_tso_segs,
	.get_info	= bbr3_get_info,
	.set_state	= bbr3_set_state,
};

static int __init bbr3_register(void)
{
	BUILD_BUG_ON(sizeof(struct bbr3_priv) > ICSK_CA_PRIV_SIZE);
	return tcp_register_congestion_control(&bbr3_ops);
}

static void __exit bbr3_unregister(void)
{
	tcp_unregister_congestion_control(&bbr3_ops);
}

module_init(bbr3_register);
module_exit(bbr3_unregister);

MODULE_AUTHOR("cctest");
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION(BBR3_DESCRIPTION);
