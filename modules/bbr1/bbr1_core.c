// SPDX-License-Identifier: GPL-2.0
/*
 * bbr1_core.c - cctest's BBRv1 core, shared by bbr1 and the v1 variants.
 *
 * NOT a standalone object.  Every module (bbr1.c, bbr_cws.c, bbr_acw.c,
 * bbr_modest.c, bbr_shallow.c, bbr_histmin.c) #includes this file once, so
 * the core is compiled privately into each .ko and Kbuild never links one
 * object into several modules.  Before the #include a module defines
 *
 *   BBR1_CC_NAME                   congestion control name ("bbr_cws")
 *   BBR1_DEFAULT_CWND_GAIN_X1000   default ProbeBW cwnd gain (2000 = BBR)
 *   BBR1_DEFAULT_ACK_AGGREGATION   1 (default) = the cwnd target includes
 *                                  the ACK-aggregation allowance, 0 = not
 *
 * and after it the hook table `bbr1_variant` (struct bbr1_hooks) and the
 * module's tracepoint (bbr1_trace_common.h).
 *
 * The model follows the algorithm's published description: Cardwell et al.,
 * "BBR: Congestion-Based Congestion Control", ACM Queue 14(5), 2016, and
 * draft-cardwell-iccrg-bbr-congestion-control-00 (2017).  The functions
 * carry the draft's names (BBRUpdateBtlBw -> bbr1_update_btlbw, ...) and
 * the per-ACK entry point reads like the draft's BBRUpdateOnACK:
 *
 *   update the model and the state machine
 *     round counting, BtlBw (windowed max of delivery rate, 10 rounds),
 *     ACK aggregation, ProbeBW gain cycle, full pipe, Drain, RTprop
 *     (windowed min of RTT, 10 s) and ProbeRTT
 *   update the control parameters
 *     pacing rate = pacing_gain * BtlBw, cwnd toward cwnd_gain * BDP
 *
 * The modes:
 *   STARTUP   gain 2/ln 2 = 2.885, the smallest that doubles the delivery
 *             rate per round; over when BtlBw grew < 25 % in 3 rounds.
 *   DRAIN     pacing gain ln 2 / 2 until the inflight is down to one BDP.
 *   PROBE_BW  cwnd gain 2 (parameter), pacing gain cycling through
 *             1.25, 0.75 and six phases of 1, each about one RTprop long,
 *             starting at a random phase other than 0.75.
 *   PROBE_RTT after 10 s without a lower RTT sample: at most 4 packets in
 *             flight for 200 ms and one round, then RTprop is fresh.
 *
 * Credit.  This core is the project's "bbr1" and must behave like Linux's
 * own BBRv1 (the "bbr" baseline), so it follows Linux's net/ipv4/tcp_bbr.c
 * (by Neal Cardwell, Yuchung Cheng, Van Jacobson and Soheil Hassas
 * Yeganeh, Google; GPL-2.0 like this file) closely in places: the layout
 * of struct bbr1 (its bitfield widths), the policer detector
 * (bbr1_policer_sample: its constants, order and guards), the recovery
 * step (bbr1_modulate_cwnd_for_recovery), bbr1_set_cwnd, inflight at the
 * earliest departure time (bbr1_inflight_at_edt), the ACK-aggregation
 * measurement with its 2^20 epoch reset, and the undo, ssthresh,
 * set_state and cwnd_event callbacks.  The comments and names are ours
 * (the names follow the draft); the behaviour and much of the structure
 * are tcp_bbr.c's.  Besides the draft it implements the kernel module's
 * refinements (modules/README.md, "bbr1 and kernel bbr"):
 *   - pacing 1 % below the model's rate, so queues drain over time;
 *   - a send quantum of about 1 ms of data (at most 64 KB, the legacy GSO
 *     size), of which the cwnd budgets three, rounded to an even count,
 *     plus two packets during the 1.25 phase;
 *   - inflight judged at the earliest departure time of the next packet
 *     (what the path drains until then is not counted);
 *   - an ACK-aggregation allowance: the most data ACKed beyond what BtlBw
 *     explains within an ACK epoch, the max of two 5-round windows, capped
 *     at 100 ms of BtlBw, added to the cwnd once the pipe is full;
 *   - a token-bucket policer detector: two lossy intervals (>= 20 % loss,
 *     4..16 rounds) with rates within 1/8 (or 4 kbit/s) of each other mean
 *     a policer, and the flow then paces at their mean rate for 48 rounds;
 *   - RTprop taken only when strictly lower (or the filter expired and the
 *     ACK was not delayed);
 *   - loss: cwnd drops by the newly lost packets, the first round of fast
 *     recovery conserves packets, leaving recovery restores the cwnd saved
 *     on entry; an RTO counts as a round end and a lossy policer sample.
 *
 * Hooks (struct bbr1_hooks): a variant gets a small kzalloc'ed state block
 * (ext) and may adjust the cwnd gain, the pacing gain, replace the loss
 * response, cap the final cwnd, overrule a rise of RTprop when its filter
 * expires, and run per-ACK logic.  Without the block (allocation failed)
 * the hooks do not run and the socket is plain BBR.
 *
 * Storage: icsk_ca_priv (104 bytes) holds the core and the ext pointer, so
 * the two microsecond time stamps are their low 32 bits; differences are
 * taken modulo 2^32 and clamped at 0 (exact for gaps below 35 minutes).
 */
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/version.h>
#include <linux/slab.h>
#include <linux/rcupdate.h>
#include <linux/random.h>
#include <linux/inet_diag.h>
#include <linux/win_minmax.h>
#include <net/tcp.h>
#include <net/inet_sock.h>

#include "cctest_param.h"
#include "cctest_compat.h"

#ifndef BBR1_CC_NAME
#error "define BBR1_CC_NAME before including bbr1_core.c"
#endif
#ifndef BBR1_DEFAULT_CWND_GAIN_X1000
#define BBR1_DEFAULT_CWND_GAIN_X1000 2000
#endif
#ifndef BBR1_DEFAULT_ACK_AGGREGATION
#define BBR1_DEFAULT_ACK_AGGREGATION 1
#endif

#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 10, 0)
#define BBR1_CONG_CONTROL_ARGS \
	struct sock *sk, u32 ack, int flag, const struct rate_sample *rs
#else
#define BBR1_CONG_CONTROL_ARGS struct sock *sk, const struct rate_sample *rs
#endif

/* Rates are packets per microsecond in 8.24 fixed point: a u32 spans
 * ~715 bit/s to ~3 Tbit/s at 1500-byte packets.
 */
#define BW_SCALE 24
#define BW_UNIT (1 << BW_SCALE)

/* Gains are 8.8 fixed point (256 = 1.0). */
#define BBR_SCALE 8
#define BBR_UNIT (1 << BBR_SCALE)

enum bbr1_machine_state {	/* tracepoint field "mode" */
	BBR1_STARTUP = 0,
	BBR1_DRAIN = 1,
	BBR1_PROBE_BW = 2,
	BBR1_PROBE_RTT = 3,
};

/* Per-socket state (the draft's BBR.* variables); fits icsk_ca_priv.
 * Variants read mode, min_rtt_us, rtt_cnt, round_start, prior_cwnd,
 * prev_ca_state and cwnd_gain.
 */
struct bbr1 {
	struct minmax btlbw_filter;	/* BtlBw: max rate over 10 rounds */
	u32 min_rtt_us;			/* RTprop, ~0U until a sample */
	u32 rtprop_stamp;		/* jiffies when RTprop was taken */
	u32 probe_rtt_done_at;		/* jiffies ProbeRTT may end; 0 unset */
	u32 rtt_cnt;			/* round_count */
	u32 next_round_delivered;	/* tp->delivered that ends the round */
	u32 cycle_stamp;		/* us (low 32 bits): phase start */
	u32 prior_cwnd;			/* cwnd to restore */
	u32 full_bw;			/* BtlBw at the last 25 % growth */
	u32 policed_bw;			/* policer: rate of the last interval */
	u32 policer_delivered0;		/* policer interval start: delivered */
	u32 policer_lost0;		/* ... tp->lost */
	u32 policer_ms0;		/* ... delivery time, ms */
	u32 agg_epoch_start;		/* us (low 32 bits): ACK epoch start */
	u16 agg_excess[2];		/* max excess ACKed, two windows */
	u32 agg_epoch_acked:20,		/* packets ACKed in the epoch */
	    agg_window_rounds:5,	/* age of the current window */
	    agg_window:1,		/* index of the current window */
	    spare_a:6;
	u32 mode:2,			/* enum bbr1_machine_state */
	    prev_ca_state:3,		/* icsk_ca_state at the previous ACK */
	    packet_conservation:1,	/* first round of fast recovery */
	    round_start:1,		/* this ACK began a round */
	    idle_restart:1,		/* sending resumed after idle */
	    probe_rtt_round_done:1,	/* a round passed at the ProbeRTT cwnd */
	    filled_pipe:1,		/* Startup found the pipe full */
	    full_bw_count:2,		/* rounds without 25 % growth */
	    cycle_index:3,		/* phase in the gain cycle */
	    has_rtt:1,			/* pacing was set from a real RTT */
	    policer_sampling:1,		/* a policer interval is open */
	    policer_rounds:7,		/* rounds in it / rounds policed */
	    policed:1,			/* pace at policed_bw */
	    trace_mode:2,		/* mode at the last trace event */
	    trace_req:1,		/* a hook asked for a trace event */
	    spare_b:4;
	u32 pacing_gain:11,		/* the mode's pacing gain */
	    cwnd_gain:11,		/* cwnd gain in use (after the hook) */
	    spare_c:10;
	void *ext;			/* variant state; NULL = plain BBR */
};

/* Values every module's tracepoint reports (filled by the core). */
struct bbr1_tv {
	u32 mode;
	u64 bw_bps;
	u32 min_rtt_us;
	u32 pacing_gain_x1000;
	u32 cwnd_gain_x1000;
	u32 cwnd;
};

/* The variant's hook table.  Every member is optional.  Hooks that take
 * `ext` are only called when the variant's state block exists (or the
 * variant asked for none: ext_size == 0, ext == NULL).
 */
struct bbr1_hooks {
	size_t ext_size;	/* bytes of per-socket variant state */
	/* after the core initialised itself */
	void (*init)(struct sock *sk, void *ext);
	/* per ACK, after the model (filters, mode, gains) was updated */
	void (*on_model)(struct sock *sk, const struct rate_sample *rs,
			 void *ext);
	/* cwnd gain to apply, given the state machine's (BBR_UNIT) */
	u32 (*cwnd_gain)(struct sock *sk, void *ext, u32 gain);
	/* pacing gain to pace with, given the state machine's */
	u32 (*pacing_gain)(const struct sock *sk, void *ext, u32 gain);
	/* replaces BBR's loss-recovery step; true = skip the target step */
	bool (*recovery)(struct sock *sk, const struct rate_sample *rs,
			 void *ext, u32 acked, u32 *cwnd);
	/* final say on cwnd (target = 0 when the target step was skipped) */
	u32 (*cwnd_cap)(struct sock *sk, void *ext, u32 cwnd, u32 target,
			u32 acked);
	/* per ACK, after cwnd was set */
	void (*after_cwnd)(struct sock *sk, const struct rate_sample *rs,
			   void *ext);
	/* the RTprop filter took a strictly lower sample */
	void (*min_rtt_lowered)(struct sock *sk, void *ext);
	/* the RTprop filter expired and would take a higher sample: returns
	 * the RTprop to keep instead (sample_us = BBR's own choice)
	 */
	u32 (*min_rtt_expired)(struct sock *sk, void *ext, u32 old_us,
			       u32 sample_us);
	/* the state machine moved from one mode to another */
	void (*mode_change)(struct sock *sk, void *ext, u32 from, u32 to);
	/* cwnd gain to report (ss, trace) if it differs from the stored one */
	u32 (*report_cwnd_gain)(const struct sock *sk, void *ext, u32 gain);
	/* emit the module's tracepoint */
	void (*trace)(const struct sock *sk, const struct bbr1_tv *tv,
		      void *ext);
};

/* Defined by the including module after this file. */
static const struct bbr1_hooks bbr1_variant;

/* ---- module parameters ---------------------------------------------- */

/* Every parameter of the v1 family is an int declared with CCTEST_PARAM_INT
 * (modules/common/cctest_param.h): checked against its range when it is set
 * (a value outside it is refused with -EINVAL, so an ACK never sees it), the
 * range ending its description as "[range LO..HI]" for cctest to read.
 */

/* ProbeBW cwnd gain x1000: BBRv1 2000; bbr_shallow 1500 (004 section
 * IV-E.1).  At most what the 11-bit gain field holds (7996 -> 2047/256).
 */
CCTEST_PARAM_INT(cwnd_gain_x1000, BBR1_DEFAULT_CWND_GAIN_X1000, 1, 7996,
		 "ProbeBW cwnd gain x1000 (BBRv1: 2000)");

/* The ACK-aggregation allowance (Linux 4.19+, below) in the cwnd target:
 * kernel bbr has it, the seed papers' kernels did not, so the variants
 * whose idea is a cap or a gain on the target (bbr_cws, bbr_shallow,
 * bbr_acw) leave it out by default (docs/algorithms.md, "Rules for every
 * variant").
 */
CCTEST_PARAM_INT(ack_aggregation, BBR1_DEFAULT_ACK_AGGREGATION, 0, 1,
		 "1 = add the ACK-aggregation allowance to the cwnd target (kernel bbr), 0 = not (the papers' BBR)");

/* ---- the algorithm's constants (ACM Queue 2016, draft-00) ----------- */

#define BBR1_GAIN_CYCLE_LEN 8
/* BtlBw window: a gain cycle plus two rounds. */
#define BBR1_BTLBW_ROUNDS (BBR1_GAIN_CYCLE_LEN + 2)
#define BBR1_RTPROP_WINDOW_S 10
#define BBR1_PROBE_RTT_MS 200
/* 2/ln 2 = 2.885 and its inverse, in BBR_UNIT. */
#define BBR1_STARTUP_GAIN (BBR_UNIT * 2885 / 1000 + 1)
#define BBR1_DRAIN_GAIN (BBR_UNIT * 1000 / 2885)
/* Startup's plateau test: 25 % more in 3 rounds. */
#define BBR1_GROWTH_X (BBR_UNIT * 5 / 4)
#define BBR1_PLATEAU_ROUNDS 3
/* Pace 1 % below the model's rate. */
#define BBR1_PACING_MARGIN_PCT 1
/* Below 1.2 Mbit/s one-segment bursts, else at least two. */
#define BBR1_SMALL_BURST_BPS 1200000
#define BBR1_MAX_QUANTUM_SEGS 127

/* Minimum cwnd: two delayed-ACK pairs in flight (draft: BBRMinPipeCwnd). */
static const u32 bbr1_cwnd_min_target = 4;

/* ProbeBW pacing gains, BBR_UNIT: probe, drain the probe's queue, cruise. */
static const u16 bbr1_gain_cycle[BBR1_GAIN_CYCLE_LEN] = {
	BBR_UNIT * 5 / 4, BBR_UNIT * 3 / 4,
	BBR_UNIT, BBR_UNIT, BBR_UNIT, BBR_UNIT, BBR_UNIT, BBR_UNIT,
};

/* Policer detection: intervals of 4..16 rounds, lossy at >= 50/256 (~20 %)
 * of delivered, rates "equal" within 1/8 or 4 kbit/s; 48 rounds policed.
 */
#define BBR1_POLICER_MIN_ROUNDS 4
#define BBR1_POLICER_MAX_ROUNDS (4 * BBR1_POLICER_MIN_ROUNDS)
#define BBR1_POLICER_LOSS_X 50
#define BBR1_POLICER_RATIO_X (BBR_UNIT / 8)
#define BBR1_POLICER_DIFF_BYTES_PER_S (4000 / 8)
#define BBR1_POLICED_ROUNDS 48

/* ACK aggregation: windows of 5 rounds, allowance at most 100 ms of
 * BtlBw, an epoch restarts after 2^20 packets.
 */
#define BBR1_AGG_WINDOW_ROUNDS 5
#define BBR1_AGG_MAX_US (100 * USEC_PER_MSEC)
#define BBR1_AGG_EPOCH_MAX_ACKED (1U << 20)

/* ---- accessors the variants use --------------------------------------- */

static inline struct bbr1 *bbr1_ca(const struct sock *sk)
{
	return (struct bbr1 *)inet_csk_ca(sk);
}

static inline u32 bbr1_cwnd(const struct tcp_sock *tp)
{
	return tp->snd_cwnd;
}

/* Delivery rate of a rate sample (BW_UNIT), 0 when it has none. */
static inline u32 bbr1_rs_bw(const struct rate_sample *rs)
{
	if (rs->delivered <= 0 || rs->interval_us <= 0)
		return 0;
	return (u32)min_t(u64, div_u64((u64)rs->delivered << BW_SCALE,
				       rs->interval_us), U32_MAX);
}

/* A hook asks for a trace event on this ACK (e.g. a phase change). */
static inline void bbr1_trace_request(struct sock *sk)
{
	bbr1_ca(sk)->trace_req = 1;
}

/* ---- the variant's state block ----------------------------------------- */

/* get_info (inet_diag) reads the block under RCU without the socket lock:
 * it is published only once initialised and freed with kfree_rcu.
 */
struct bbr1_ext_box {
	struct rcu_head rcu;
	u64 data[] __aligned(sizeof(u64));	/* the variant's ext_size bytes */
};

static inline void *bbr1_ext(const struct sock *sk)
{
	return READ_ONCE(bbr1_ca(sk)->ext);
}

/* Do hooks run with this state pointer?  Without one only if none is
 * needed.
 */
static inline bool bbr1_hooks_on_ext(const void *ext)
{
	return bbr1_variant.ext_size == 0 || ext;
}

static inline bool bbr1_hooks_on(const struct sock *sk)
{
	return bbr1_hooks_on_ext(bbr1_ext(sk));
}

/* ---- small helpers ------------------------------------------------------- */

static inline void bbr1_put_cwnd(struct tcp_sock *tp, u32 packets)
{
	tp->snd_cwnd = packets;
}

/* Microseconds from a 32-bit stamp to the latest delivery, never < 0. */
static inline u32 bbr1_us_since(const struct tcp_sock *tp, u32 stamp)
{
	s32 gap = (s32)((u32)tp->delivered_mstamp - stamp);

	return gap > 0 ? gap : 0;
}

static inline u32 bbr1_x1000_to_unit(int x1000)
{
	return DIV_ROUND_CLOSEST((u32)max(x1000, 0) * BBR_UNIT, 1000);
}

static inline u32 bbr1_unit_to_x1000(u32 g)
{
	return DIV_ROUND_CLOSEST(g * 1000, BBR_UNIT);
}

/* BtlBw, the filter's maximum. */
static inline u32 bbr1_btlbw(const struct sock *sk)
{
	return minmax_get(&bbr1_ca(sk)->btlbw_filter);
}

/* The rate the model acts on: the policed rate while one is in force. */
static inline u32 bbr1_model_bw(const struct sock *sk)
{
	const struct bbr1 *b = bbr1_ca(sk);

	return b->policed ? b->policed_bw : bbr1_btlbw(sk);
}

/* Rate (BW_UNIT) times gain as bytes per second, the pacing margin off.
 * Multiplying by the MSS and the gain before scaling keeps precision; the
 * product stays in a u64 up to ~2.9 Tbit/s at gain 2.89.
 */
static u64 bbr1_bytes_per_sec(const struct sock *sk, u64 bw, u32 gain)
{
	u64 bytes_per_us = (bw * tcp_sk(sk)->mss_cache * gain) >> BBR_SCALE;

	return (bytes_per_us * (USEC_PER_SEC / 100 *
				(100 - BBR1_PACING_MARGIN_PCT))) >> BW_SCALE;
}

/* A rate (BW_UNIT) as bytes per second, without margin, for reports. */
static u64 bbr1_bw_to_bytes(const struct sock *sk, u32 bw)
{
	u64 bytes_per_us = (u64)bw * tcp_sk(sk)->mss_cache;

	return (bytes_per_us * USEC_PER_SEC) >> BW_SCALE;
}

static u64 bbr1_bw_to_bps(const struct sock *sk, u32 bw)
{
	return bbr1_bw_to_bytes(sk, bw) * 8;
}

static void bbr1_set_mode(struct sock *sk, u32 mode)
{
	struct bbr1 *b = bbr1_ca(sk);
	u32 from = b->mode;

	b->mode = mode;
	if (from != mode && bbr1_variant.mode_change && bbr1_hooks_on(sk))
		bbr1_variant.mode_change(sk, bbr1_ext(sk), from, mode);
}

/* ---- pacing (draft: BBRSetPacingRate, BBRSetSendQuantum) --------------- */

/* Pacing gain in force: the mode's, as the variant adjusts it. */
static u32 bbr1_eff_pacing_gain_ext(const struct sock *sk, void *ext)
{
	u32 gain = bbr1_ca(sk)->pacing_gain;

	if (bbr1_variant.pacing_gain && bbr1_hooks_on_ext(ext))
		gain = bbr1_variant.pacing_gain(sk, ext, gain);
	return gain;
}

static u32 bbr1_eff_pacing_gain(const struct sock *sk)
{
	return bbr1_eff_pacing_gain_ext(sk, bbr1_ext(sk));
}

static unsigned long bbr1_rate_to_pacing(struct sock *sk, u32 bw, u32 gain)
{
	u64 max_rate = READ_ONCE(sk->sk_max_pacing_rate);

	return min(bbr1_bytes_per_sec(sk, bw, gain), max_rate);
}

/* Before the first delivery-rate sample: Startup's gain times the initial
 * window per smoothed RTT (1 ms when none is known yet).
 */
static void bbr1_init_pacing_rate(struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	u32 srtt_us = tp->srtt_us >> 3;
	u32 nominal;

	bbr1_ca(sk)->has_rtt = tp->srtt_us != 0;
	if (!tp->srtt_us)
		srtt_us = USEC_PER_MSEC;
	nominal = div_u64((u64)bbr1_cwnd(tp) << BW_SCALE, max(srtt_us, 1U));
	WRITE_ONCE(sk->sk_pacing_rate,
		   bbr1_rate_to_pacing(sk, nominal, BBR1_STARTUP_GAIN));
}

/* Until the pipe is full the rate may only rise (a low early sample must
 * not slow Startup); afterwards it follows the model.
 */
static void bbr1_set_pacing_rate_with_gain(struct sock *sk, u32 bw, u32 gain)
{
	struct bbr1 *b = bbr1_ca(sk);
	unsigned long rate = bbr1_rate_to_pacing(sk, bw, gain);

	if (unlikely(!b->has_rtt) && tcp_sk(sk)->srtt_us)
		bbr1_init_pacing_rate(sk);
	if (rate > READ_ONCE(sk->sk_pacing_rate) || b->filled_pipe)
		WRITE_ONCE(sk->sk_pacing_rate, rate);
}

/* Segments TSO may put in one burst: one below 1.2 Mbit/s, else two. */
static u32 bbr1_min_burst_segs(struct sock *sk)
{
	unsigned long rate = READ_ONCE(sk->sk_pacing_rate);

	return rate >= BBR1_SMALL_BURST_BPS / 8 ? 2 : 1;
}

/* The largest burst the cwnd budget plans for: the classic 64 KB GSO
 * limit.  Since 5.19 GSO_MAX_SIZE allows BIG TCP (512 KB) and kernel bbr
 * budgets with GSO_LEGACY_MAX_SIZE; older headers have only GSO_MAX_SIZE,
 * which is 64 KB there.  With 512 KB the quantum would be 127 segments
 * instead of 45 above ~0.5 Gbit/s of pacing.
 */
#ifdef GSO_LEGACY_MAX_SIZE
#define BBR1_TSO_BUDGET_BYTES GSO_LEGACY_MAX_SIZE
#else
#define BBR1_TSO_BUDGET_BYTES GSO_MAX_SIZE
#endif
static_assert(BBR1_TSO_BUDGET_BYTES == 65536, "TSO budget must be 64 KB");

/* Send quantum in packets: what the pacing rate sends in ~1 ms
 * (rate >> sk_pacing_shift), within one 64 KB burst.
 */
static u32 bbr1_send_quantum(struct sock *sk)
{
	u32 room = BBR1_TSO_BUDGET_BYTES - 1 - MAX_TCP_HEADER;
	u64 per_ms = READ_ONCE(sk->sk_pacing_rate) >>
		     READ_ONCE(sk->sk_pacing_shift);
	u32 segs = (u32)min_t(u64, per_ms, room) / tcp_sk(sk)->mss_cache;

	return clamp(segs, bbr1_min_burst_segs(sk), (u32)BBR1_MAX_QUANTUM_SEGS);
}

/* ---- inflight targets (draft: BBRInflight, BBRUpdateTargetCwnd) -------- */

/* gain * BtlBw * RTprop in packets, rounded up so a fraction of a packet
 * never shrinks the window; the initial window until RTprop is known.
 */
static u32 bbr1_bdp_with_gain(const struct sock *sk, u32 bw, u32 gain)
{
	u32 rtprop = bbr1_ca(sk)->min_rtt_us;
	u64 scaled;

	if (unlikely(rtprop == ~0U))
		return TCP_INIT_CWND;
	scaled = ((u64)bw * rtprop * gain) >> BBR_SCALE;
	return (u32)DIV_ROUND_UP_ULL(scaled, BW_UNIT);
}

/* Room for three send quanta (sender qdisc, NIC, receiver's GRO/delayed
 * ACK), an even count (delayed ACKs come in pairs), and during the 1.25
 * probe two packets more so that small BDPs still probe above one BDP.
 */
static u32 bbr1_add_quanta(struct sock *sk, u32 packets)
{
	const struct bbr1 *b = bbr1_ca(sk);
	u32 total = round_up(packets + 3 * bbr1_send_quantum(sk), 2);

	if (b->mode == BBR1_PROBE_BW && b->cycle_index == 0)
		total += 2;
	return total;
}

static u32 bbr1_inflight(struct sock *sk, u32 bw, u32 gain)
{
	return bbr1_add_quanta(sk, bbr1_bdp_with_gain(sk, bw, gain));
}

/* The inflight when the next packet may leave (its earliest departure
 * time): what the path drains until then no longer counts, and while
 * probing above 1.0 one more quantum is about to be sent.
 */
static u32 bbr1_inflight_at_edt(struct sock *sk, u32 inflight)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	u64 wait_ns = 0;
	u32 drained;

	if (tp->tcp_wstamp_ns > tp->tcp_clock_cache)
		wait_ns = tp->tcp_wstamp_ns - tp->tcp_clock_cache;
	drained = ((u64)bbr1_model_bw(sk) * div_u64(wait_ns, NSEC_PER_USEC))
		  >> BW_SCALE;
	if (bbr1_ca(sk)->pacing_gain > BBR_UNIT)
		inflight += bbr1_send_quantum(sk);
	return inflight > drained ? inflight - drained : 0;
}

/* ACK-aggregation allowance, once the pipe is full: the larger window's
 * max excess, at most 100 ms of BtlBw.
 */
static u32 bbr1_aggregation_allowance(const struct sock *sk)
{
	const struct bbr1 *b = bbr1_ca(sk);
	u32 excess = max(b->agg_excess[0], b->agg_excess[1]);
	u32 ceiling;

	if (!b->filled_pipe || !READ_ONCE(ack_aggregation))
		return 0;
	ceiling = div_u64((u64)bbr1_model_bw(sk) * BBR1_AGG_MAX_US, BW_UNIT);
	return min(excess, ceiling);
}

/* The cwnd BBR steers to for bw and gain. */
static u32 bbr1_update_target_cwnd(struct sock *sk, u32 bw, u32 gain)
{
	return bbr1_add_quanta(sk, bbr1_bdp_with_gain(sk, bw, gain) +
				   bbr1_aggregation_allowance(sk));
}

/* ---- the state machine ------------------------------------------------- */

static void bbr1_enter_startup(struct sock *sk)
{
	bbr1_set_mode(sk, BBR1_STARTUP);
}

/* Cycle phases last one RTprop; the phase clock is the delivery time. */
static void bbr1_advance_cycle_phase(struct sock *sk)
{
	struct bbr1 *b = bbr1_ca(sk);

	b->cycle_index = (b->cycle_index + 1) % BBR1_GAIN_CYCLE_LEN;
	b->cycle_stamp = (u32)tcp_sk(sk)->delivered_mstamp;
}

/* Start the gain cycle at a random phase, never at 0.75 (no queue to
 * drain yet): the phase before one of the 7 others, then advance.
 */
static void bbr1_enter_probe_bw(struct sock *sk)
{
	struct bbr1 *b = bbr1_ca(sk);
	u32 skip = (u32)(((u64)get_random_u32() * 7) >> 32);

	bbr1_set_mode(sk, BBR1_PROBE_BW);
	b->cycle_index = BBR1_GAIN_CYCLE_LEN - 1 - skip;
	bbr1_advance_cycle_phase(sk);
}

static void bbr1_enter_drain(struct sock *sk)
{
	bbr1_set_mode(sk, BBR1_DRAIN);
	/* Reported by tcp_info: the BDP Startup found. */
	tcp_sk(sk)->snd_ssthresh = bbr1_inflight(sk, bbr1_btlbw(sk), BBR_UNIT);
}

/* Is the current ProbeBW phase over?  1.0 phases last one RTprop; the
 * 1.25 probe also waits until the inflight reached 1.25 BDP (or a loss
 * says it will not); the 0.75 drain ends early once the inflight is down
 * to one BDP.
 */
static bool bbr1_is_next_cycle_phase(struct sock *sk,
				     const struct rate_sample *rs)
{
	struct bbr1 *b = bbr1_ca(sk);
	bool one_rtprop = bbr1_us_since(tcp_sk(sk), b->cycle_stamp) >
			  b->min_rtt_us;
	u32 gain = b->pacing_gain;
	u32 inflight;

	if (gain == BBR_UNIT)
		return one_rtprop;
	inflight = bbr1_inflight_at_edt(sk, rs->prior_in_flight);
	if (gain < BBR_UNIT)
		return one_rtprop ||
		       inflight <= bbr1_inflight(sk, bbr1_btlbw(sk), BBR_UNIT);
	if (!one_rtprop)
		return false;
	return rs->losses > 0 ||
	       inflight >= bbr1_inflight(sk, bbr1_btlbw(sk), gain);
}

static void bbr1_check_cycle_phase(struct sock *sk,
				   const struct rate_sample *rs)
{
	if (bbr1_ca(sk)->mode != BBR1_PROBE_BW)
		return;
	if (bbr1_is_next_cycle_phase(sk, rs))
		bbr1_advance_cycle_phase(sk);
}

/* Startup fills the pipe once three rounds in a row (with rate samples
 * that are not app-limited) fail to raise BtlBw by 25 %.
 */
static void bbr1_check_full_pipe(struct sock *sk, const struct rate_sample *rs)
{
	struct bbr1 *b = bbr1_ca(sk);
	u32 btlbw = bbr1_btlbw(sk), growth_floor;

	if (b->filled_pipe || !b->round_start || rs->is_app_limited)
		return;
	growth_floor = ((u64)b->full_bw * BBR1_GROWTH_X) >> BBR_SCALE;
	if (btlbw >= growth_floor) {
		b->full_bw = btlbw;	/* still growing */
		b->full_bw_count = 0;
		return;
	}
	b->full_bw_count++;
	if (b->full_bw_count >= BBR1_PLATEAU_ROUNDS)
		b->filled_pipe = 1;
}

static void bbr1_check_drain(struct sock *sk)
{
	struct bbr1 *b = bbr1_ca(sk);
	u32 inflight;

	if (b->mode == BBR1_STARTUP && b->filled_pipe)
		bbr1_enter_drain(sk);
	if (b->mode != BBR1_DRAIN)
		return;
	inflight = bbr1_inflight_at_edt(sk, tcp_packets_in_flight(tcp_sk(sk)));
	if (inflight <= bbr1_inflight(sk, bbr1_btlbw(sk), BBR_UNIT))
		bbr1_enter_probe_bw(sk);
}

/* ---- cwnd memory (draft: BBRSaveCwnd, BBRRestoreCwnd) ------------------- */

/* Remember the cwnd to come back to.  In recovery or ProbeRTT the current
 * cwnd is a temporary cut, so it can only raise what is remembered.
 */
static void bbr1_save_cwnd(struct sock *sk)
{
	struct bbr1 *b = bbr1_ca(sk);
	u32 now = bbr1_cwnd(tcp_sk(sk));
	bool cut = b->prev_ca_state >= TCP_CA_Recovery ||
		   b->mode == BBR1_PROBE_RTT;

	b->prior_cwnd = cut ? max(b->prior_cwnd, now) : now;
}

static void bbr1_restore_cwnd(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);

	bbr1_put_cwnd(tp, max(bbr1_cwnd(tp), bbr1_ca(sk)->prior_cwnd));
}

/* ---- ProbeRTT (draft: BBRCheckProbeRTT, BBRHandleProbeRTT) -------------- */

static void bbr1_enter_probe_rtt(struct sock *sk)
{
	struct bbr1 *b = bbr1_ca(sk);
	u32 from = b->mode;

	/* The mode first, so the saved cwnd can only grow: ProbeRTT may be
	 * entered during recovery.  The hook runs after the save so that a
	 * variant can raise what will be restored.
	 */
	b->mode = BBR1_PROBE_RTT;
	bbr1_save_cwnd(sk);
	b->probe_rtt_done_at = 0;
	if (bbr1_variant.mode_change && bbr1_hooks_on(sk))
		bbr1_variant.mode_change(sk, bbr1_ext(sk), from, BBR1_PROBE_RTT);
}

/* Back to ProbeBW if Startup had filled the pipe, else to Startup. */
static void bbr1_exit_probe_rtt(struct sock *sk)
{
	if (bbr1_ca(sk)->filled_pipe)
		bbr1_enter_probe_bw(sk);
	else
		bbr1_enter_startup(sk);
}

/* ProbeRTT is over once its 200 ms have passed (and a round, checked by
 * the caller): RTprop counts as fresh and the saved cwnd returns.
 */
static void bbr1_maybe_exit_probe_rtt(struct sock *sk)
{
	struct bbr1 *b = bbr1_ca(sk);

	if (!b->probe_rtt_done_at || !after(tcp_jiffies32, b->probe_rtt_done_at))
		return;
	b->rtprop_stamp = tcp_jiffies32;
	bbr1_restore_cwnd(sk);
	bbr1_exit_probe_rtt(sk);
}

/* Hold the inflight at the minimum for 200 ms and one full round. */
static void bbr1_handle_probe_rtt(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbr1 *b = bbr1_ca(sk);
	u32 inflight = tcp_packets_in_flight(tp);

	/* The flow is its own bottleneck now: mark the rate samples of this
	 * stretch app-limited so they cannot lower BtlBw.
	 */
	tp->app_limited = tp->delivered + inflight ? : 1;

	if (b->probe_rtt_done_at) {
		b->probe_rtt_round_done |= b->round_start;
		if (b->probe_rtt_round_done)
			bbr1_maybe_exit_probe_rtt(sk);
		return;
	}
	if (inflight > bbr1_cwnd_min_target)
		return;		/* still draining down to the minimum */
	b->probe_rtt_done_at = tcp_jiffies32 +
			       msecs_to_jiffies(BBR1_PROBE_RTT_MS);
	b->probe_rtt_round_done = 0;
	b->next_round_delivered = tp->delivered;	/* the round starts now */
}

/* RTprop filter: a strictly lower sample replaces it at once; after 10 s
 * without one, any sample not inflated by a delayed ACK does.  The expiry
 * also starts ProbeRTT (not right after an idle restart).
 */
static void bbr1_update_rtprop(struct sock *sk, const struct rate_sample *rs)
{
	struct bbr1 *b = bbr1_ca(sk);
	bool expired = after(tcp_jiffies32, b->rtprop_stamp +
			     BBR1_RTPROP_WINDOW_S * HZ);
	bool hooks = bbr1_hooks_on(sk);
	u32 sample;

	if (rs->rtt_us < 0)
		goto probe;
	sample = rs->rtt_us;
	if (sample < b->min_rtt_us) {
		if (bbr1_variant.min_rtt_lowered && hooks)
			bbr1_variant.min_rtt_lowered(sk, bbr1_ext(sk));
	} else if (expired && !rs->is_ack_delayed) {
		if (sample > b->min_rtt_us && bbr1_variant.min_rtt_expired &&
		    hooks)
			sample = bbr1_variant.min_rtt_expired(sk, bbr1_ext(sk),
							      b->min_rtt_us,
							      sample);
	} else {
		goto probe;
	}
	b->min_rtt_us = sample;
	b->rtprop_stamp = tcp_jiffies32;
probe:
	if (expired && !b->idle_restart && b->mode != BBR1_PROBE_RTT)
		bbr1_enter_probe_rtt(sk);
}

static void bbr1_check_probe_rtt(struct sock *sk, const struct rate_sample *rs)
{
	struct bbr1 *b = bbr1_ca(sk);

	if (b->mode == BBR1_PROBE_RTT)
		bbr1_handle_probe_rtt(sk);
	/* The idle restart is over with the first ACK of new data. */
	if (rs->delivered > 0)
		b->idle_restart = 0;
}

/* ---- the policer detector ------------------------------------------------ */

static void bbr1_policer_open_interval(struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct bbr1 *b = bbr1_ca(sk);

	b->policer_delivered0 = tp->delivered;
	b->policer_lost0 = tp->lost;
	b->policer_ms0 = div_u64(tp->delivered_mstamp, USEC_PER_MSEC);
	b->policer_rounds = 0;
}

/* Forget everything: not sampling, not policed, no previous rate. */
static void bbr1_policer_forget(struct sock *sk)
{
	struct bbr1 *b = bbr1_ca(sk);

	b->policer_sampling = 0;
	b->policed = 0;
	b->policed_bw = 0;
	bbr1_policer_open_interval(sk);
}

/* A lossy interval measured `rate`.  If the previous one measured about
 * the same, a token bucket is the bottleneck: pace at their mean.
 */
static void bbr1_policer_interval_end(struct sock *sk, u32 rate)
{
	struct bbr1 *b = bbr1_ca(sk);
	u32 prev = b->policed_bw;
	u32 gap = rate > prev ? rate - prev : prev - rate;
	bool close = (u64)gap * BBR_UNIT <= (u64)BBR1_POLICER_RATIO_X * prev ||
		     bbr1_bytes_per_sec(sk, gap, BBR_UNIT) <=
		     BBR1_POLICER_DIFF_BYTES_PER_S;

	if (prev && close) {
		b->policed_bw = (prev + rate) / 2;
		b->policed = 1;
		b->policer_rounds = 0;		/* now counts policed rounds */
		b->pacing_gain = BBR_UNIT;	/* no probing above the policer */
		return;
	}
	b->policed_bw = rate;
	bbr1_policer_open_interval(sk);
}

/* One step of the detector per ACK (valid rate samples only).  An interval
 * opens at a loss and closes at a loss after 4..16 rounds, if at least
 * ~20 % of what it delivered was lost; app-limited data spoils it.
 */
static void bbr1_policer_sample(struct sock *sk, const struct rate_sample *rs)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct bbr1 *b = bbr1_ca(sk);
	u32 delivered, lost, ms;

	if (b->policed) {
		/* Policed for 48 ProbeBW rounds: then probe again. */
		if (b->mode != BBR1_PROBE_BW || !b->round_start)
			return;
		if (++b->policer_rounds < BBR1_POLICED_ROUNDS)
			return;
		bbr1_policer_forget(sk);
		bbr1_enter_probe_bw(sk);
		return;
	}
	if (!b->policer_sampling) {
		if (rs->losses == 0)
			return;
		bbr1_policer_open_interval(sk);
		b->policer_sampling = 1;
	}
	if (rs->is_app_limited) {
		bbr1_policer_forget(sk);
		return;
	}
	b->policer_rounds += b->round_start;
	if (b->policer_rounds < BBR1_POLICER_MIN_ROUNDS)
		return;
	if (b->policer_rounds > BBR1_POLICER_MAX_ROUNDS) {
		bbr1_policer_forget(sk);
		return;
	}
	if (rs->losses == 0)
		return;

	delivered = tp->delivered - b->policer_delivered0;
	lost = tp->lost - b->policer_lost0;
	if (delivered == 0 ||
	    (u64)lost * BBR_UNIT < (u64)BBR1_POLICER_LOSS_X * delivered)
		return;
	ms = (u32)div_u64(tp->delivered_mstamp, USEC_PER_MSEC) -
	     b->policer_ms0;
	if ((s32)ms <= 0)
		return;		/* under a millisecond: wait for more */
	if (ms >= U32_MAX / USEC_PER_MSEC) {
		bbr1_policer_forget(sk);
		return;
	}
	bbr1_policer_interval_end(sk, div_u64((u64)delivered << BW_SCALE,
					      ms * USEC_PER_MSEC));
}

/* ---- the model (draft: BBRUpdateRound, BBRUpdateBtlBw) ------------------- */

/* Did this ACK come with a delivery-rate sample (possibly of 0)? */
static inline bool bbr1_has_rate_sample(const struct rate_sample *rs)
{
	return rs->delivered >= 0 && rs->interval_us > 0;
}

/* A round ends when a packet sent after it began is ACKed; rounds are
 * only counted on ACKs with a rate sample.
 */
static void bbr1_update_round(struct sock *sk, const struct rate_sample *rs)
{
	struct bbr1 *b = bbr1_ca(sk);

	b->round_start = bbr1_has_rate_sample(rs) &&
			 !before(rs->prior_delivered, b->next_round_delivered);
	if (!b->round_start)
		return;
	b->next_round_delivered = tcp_sk(sk)->delivered;
	b->rtt_cnt++;
	b->packet_conservation = 0;	/* conservation lasts one round */
}

/* Rounds, the policer detector, then the BtlBw max filter.  An app-limited
 * sample only counts when it does not lower the estimate.
 */
static void bbr1_update_btlbw(struct sock *sk, const struct rate_sample *rs)
{
	struct bbr1 *b = bbr1_ca(sk);
	u32 rate;

	bbr1_update_round(sk, rs);
	if (!bbr1_has_rate_sample(rs))
		return;
	bbr1_policer_sample(sk, rs);
	rate = bbr1_rs_bw(rs);
	if (rs->is_app_limited && rate < bbr1_btlbw(sk))
		return;
	minmax_running_max(&b->btlbw_filter, BBR1_BTLBW_ROUNDS, b->rtt_cnt,
			   rate);
}

/* ACK aggregation: within an epoch, count what was ACKed beyond what
 * BtlBw explains for the time since the epoch began.  The epoch restarts
 * whenever the ACKs fall back to the model's rate.
 */
static void bbr1_measure_ack_aggregation(struct sock *sk,
					 const struct rate_sample *rs)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct bbr1 *b = bbr1_ca(sk);
	u32 expected, excess;

	if (rs->acked_sacked <= 0 || !bbr1_has_rate_sample(rs))
		return;

	if (b->round_start) {
		/* Two windows of 5 rounds: the older one is replaced. */
		if (b->agg_window_rounds < 31)
			b->agg_window_rounds++;
		if (b->agg_window_rounds >= BBR1_AGG_WINDOW_ROUNDS) {
			b->agg_window_rounds = 0;
			b->agg_window = !b->agg_window;
			b->agg_excess[b->agg_window] = 0;
		}
	}

	expected = div_u64((u64)bbr1_model_bw(sk) *
			   bbr1_us_since(tp, b->agg_epoch_start), BW_UNIT);
	if (b->agg_epoch_acked <= expected ||
	    b->agg_epoch_acked + rs->acked_sacked >= BBR1_AGG_EPOCH_MAX_ACKED) {
		b->agg_epoch_start = (u32)tp->delivered_mstamp;
		b->agg_epoch_acked = 0;
		expected = 0;
	}
	b->agg_epoch_acked = min_t(u32, b->agg_epoch_acked + rs->acked_sacked,
				   BBR1_AGG_EPOCH_MAX_ACKED - 1);
	excess = min(b->agg_epoch_acked - expected, bbr1_cwnd(tp));
	b->agg_excess[b->agg_window] = max_t(u32, b->agg_excess[b->agg_window],
					     excess);
}

/* The mode's gains; the variant may change the cwnd gain. */
static void bbr1_set_gains(struct sock *sk)
{
	struct bbr1 *b = bbr1_ca(sk);
	u32 pacing = BBR_UNIT, cwnd = BBR_UNIT;

	if (b->mode == BBR1_STARTUP) {
		pacing = BBR1_STARTUP_GAIN;
		cwnd = BBR1_STARTUP_GAIN;
	} else if (b->mode == BBR1_DRAIN) {
		pacing = BBR1_DRAIN_GAIN;
		cwnd = BBR1_STARTUP_GAIN;
	} else if (b->mode == BBR1_PROBE_BW) {
		if (!b->policed)
			pacing = bbr1_gain_cycle[b->cycle_index];
		cwnd = bbr1_x1000_to_unit(READ_ONCE(cwnd_gain_x1000));
	}
	b->pacing_gain = pacing;
	if (bbr1_variant.cwnd_gain && bbr1_hooks_on(sk))
		cwnd = bbr1_variant.cwnd_gain(sk, bbr1_ext(sk), cwnd);
	b->cwnd_gain = clamp_t(u32, cwnd, 1, 2047);
}

static void bbr1_update_model_and_state(struct sock *sk,
					const struct rate_sample *rs)
{
	bbr1_update_btlbw(sk, rs);
	bbr1_measure_ack_aggregation(sk, rs);
	bbr1_check_cycle_phase(sk, rs);
	bbr1_check_full_pipe(sk, rs);
	bbr1_check_drain(sk);
	bbr1_update_rtprop(sk, rs);
	bbr1_check_probe_rtt(sk, rs);
	bbr1_set_gains(sk);
}

/* ---- cwnd (draft: BBRModulateCwndForRecovery, BBRSetCwnd) -------------- */

/* The loss response.  Lost packets leave the window; the first round of
 * fast recovery sends one packet per packet delivered (packet
 * conservation); leaving recovery restores the cwnd saved on entry.
 * Returns true while conserving (the target step is skipped).
 */
static bool bbr1_modulate_cwnd_for_recovery(struct sock *sk,
					    const struct rate_sample *rs,
					    u32 acked, u32 *cwnd)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct bbr1 *b = bbr1_ca(sk);
	u8 was = b->prev_ca_state, now = inet_csk(sk)->icsk_ca_state;
	u32 floor = tcp_packets_in_flight(tp) + acked;

	if (rs->losses > 0)
		*cwnd = *cwnd > rs->losses ? *cwnd - rs->losses : 1;
	if (now == TCP_CA_Recovery && was != TCP_CA_Recovery) {
		b->packet_conservation = 1;
		b->next_round_delivered = tp->delivered;  /* a round from now */
		*cwnd = floor;
	} else if (now < TCP_CA_Recovery && was >= TCP_CA_Recovery) {
		b->packet_conservation = 0;
		*cwnd = max(*cwnd, b->prior_cwnd);
	}
	b->prev_ca_state = now;
	if (b->packet_conservation)
		*cwnd = max(*cwnd, floor);
	return b->packet_conservation;
}

static u32 bbr1_modulate_cwnd_for_probe_rtt(const struct sock *sk, u32 cwnd)
{
	if (bbr1_ca(sk)->mode == BBR1_PROBE_RTT)
		return min(cwnd, bbr1_cwnd_min_target);
	return cwnd;
}

/* Move cwnd toward the target: before the pipe is full it only grows (by
 * what was ACKed), afterwards it grows to the target and no further.
 */
static void bbr1_set_cwnd(struct sock *sk, const struct rate_sample *rs,
			  u32 bw, u32 gain)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbr1 *b = bbr1_ca(sk);
	u32 acked = rs->acked_sacked;
	u32 cwnd = bbr1_cwnd(tp), target = 0;
	bool hooks = bbr1_hooks_on(sk);
	bool conserving;

	if (acked) {
		if (bbr1_variant.recovery && hooks) {
			conserving = bbr1_variant.recovery(sk, rs, bbr1_ext(sk),
							   acked, &cwnd);
			b->prev_ca_state = inet_csk(sk)->icsk_ca_state;
		} else {
			conserving = bbr1_modulate_cwnd_for_recovery(sk, rs,
								     acked,
								     &cwnd);
		}
		if (!conserving) {
			target = bbr1_update_target_cwnd(sk, bw, gain);
			if (b->filled_pipe)
				cwnd = min(cwnd + acked, target);
			else if (cwnd < target ||
				 tp->delivered < TCP_INIT_CWND)
				cwnd += acked;
			cwnd = max(cwnd, bbr1_cwnd_min_target);
		}
	}
	if (bbr1_variant.cwnd_cap && hooks)
		cwnd = bbr1_variant.cwnd_cap(sk, bbr1_ext(sk), cwnd, target,
					     acked);
	cwnd = bbr1_modulate_cwnd_for_probe_rtt(sk,
						min(cwnd, tp->snd_cwnd_clamp));
	bbr1_put_cwnd(tp, max(cwnd, 1U));
}

/* ---- reporting ----------------------------------------------------------- */

static u32 bbr1_report_cwnd_gain_ext(const struct sock *sk, void *ext)
{
	u32 gain = bbr1_ca(sk)->cwnd_gain;

	if (bbr1_variant.report_cwnd_gain && bbr1_hooks_on_ext(ext))
		gain = bbr1_variant.report_cwnd_gain(sk, ext, gain);
	return gain;
}

/* One event per packet-timed round, plus on every mode change and when a
 * hook asked for one.
 */
static void bbr1_maybe_trace(struct sock *sk)
{
	struct bbr1 *b = bbr1_ca(sk);
	void *ext = bbr1_ext(sk);
	struct bbr1_tv tv;

	if (!b->round_start && !b->trace_req && b->trace_mode == b->mode)
		return;
	b->trace_mode = b->mode;
	b->trace_req = 0;
	if (!bbr1_variant.trace)
		return;
	tv.mode = b->mode;
	tv.bw_bps = bbr1_bw_to_bps(sk, bbr1_model_bw(sk));
	tv.min_rtt_us = b->min_rtt_us;
	tv.pacing_gain_x1000 = bbr1_unit_to_x1000(bbr1_eff_pacing_gain(sk));
	tv.cwnd_gain_x1000 = bbr1_unit_to_x1000(bbr1_report_cwnd_gain_ext(sk,
									ext));
	tv.cwnd = bbr1_cwnd(tcp_sk(sk));
	bbr1_variant.trace(sk, &tv, bbr1_hooks_on_ext(ext) ? ext : NULL);
}

/* ---- tcp_congestion_ops -------------------------------------------------- */

/* Draft: BBRUpdateControlParameters (the send quantum is computed where
 * the cwnd budget needs it).
 */
static void bbr1_update_control_parameters(struct sock *sk,
					   const struct rate_sample *rs)
{
	u32 bw = bbr1_model_bw(sk);

	bbr1_set_pacing_rate_with_gain(sk, bw, bbr1_eff_pacing_gain(sk));
	bbr1_set_cwnd(sk, rs, bw, bbr1_ca(sk)->cwnd_gain);
}

/* Draft: BBRUpdateOnACK. */
static void bbr1_update_on_ack(BBR1_CONG_CONTROL_ARGS)
{
	bool hooks;

	bbr1_update_model_and_state(sk, rs);
	hooks = bbr1_hooks_on(sk);
	if (bbr1_variant.on_model && hooks)
		bbr1_variant.on_model(sk, rs, bbr1_ext(sk));
	bbr1_update_control_parameters(sk, rs);
	if (bbr1_variant.after_cwnd && hooks)
		bbr1_variant.after_cwnd(sk, rs, bbr1_ext(sk));
	bbr1_maybe_trace(sk);
}

static void bbr1_init(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbr1 *b = bbr1_ca(sk);
	struct bbr1_ext_box *box = NULL;
	void *ext = NULL;

	/* All zero: Startup, TCP_CA_Open, no ext until published below. */
	memset(b, 0, sizeof(*b));
	if (bbr1_variant.ext_size) {
		box = kzalloc(sizeof(*box) + bbr1_variant.ext_size,
			      GFP_NOWAIT | __GFP_NOWARN);
		if (box)
			ext = box->data;
	}

	/* BBR does not use ssthresh; "infinite" keeps TCP out of slow start
	 * logic and shows the pipe is not known yet.
	 */
	tp->snd_ssthresh = TCP_INFINITE_SSTHRESH;
	b->next_round_delivered = tp->delivered;
	b->min_rtt_us = tcp_min_rtt(tp);
	b->rtprop_stamp = tcp_jiffies32;
	minmax_reset(&b->btlbw_filter, 0, 0);
	bbr1_init_pacing_rate(sk);
	bbr1_policer_forget(sk);
	b->agg_epoch_start = (u32)tp->tcp_mstamp;
	b->trace_mode = BBR1_STARTUP;
	b->trace_req = 1;	/* first event at the first ACK */
	b->pacing_gain = BBR1_STARTUP_GAIN;
	b->cwnd_gain = BBR1_STARTUP_GAIN;

	if (bbr1_variant.init && bbr1_hooks_on_ext(ext))
		bbr1_variant.init(sk, ext);
	smp_store_release(&b->ext, ext);	/* get_info may read it now */

	cmpxchg(&sk->sk_pacing_status, SK_PACING_NONE, SK_PACING_NEEDED);
}

static void bbr1_release(struct sock *sk)
{
	struct bbr1 *b = bbr1_ca(sk);
	void *ext = b->ext;

	if (!ext)
		return;
	WRITE_ONCE(b->ext, NULL);
	/* A get_info under RCU may still read it: free after a grace period. */
	kfree_rcu(container_of(ext, struct bbr1_ext_box, data[0]), rcu);
}

/* Draft: BBRHandleRestartFromIdle.  Sending resumes after the application
 * paused: no need to pace above BtlBw, and ProbeRTT may be over already.
 */
static void bbr1_on_cwnd_event(struct sock *sk, enum tcp_ca_event event)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct bbr1 *b = bbr1_ca(sk);

	if (event != CA_EVENT_TX_START || !tp->app_limited)
		return;
	b->idle_restart = 1;
	b->agg_epoch_start = (u32)tp->tcp_mstamp;
	b->agg_epoch_acked = 0;
	if (b->mode == BBR1_PROBE_BW)
		bbr1_set_pacing_rate_with_gain(sk, bbr1_model_bw(sk), BBR_UNIT);
	else if (b->mode == BBR1_PROBE_RTT)
		bbr1_maybe_exit_probe_rtt(sk);
}
CCTEST_TX_START_HOOK_DEFINE(bbr1_on_cwnd_event)

/* Send buffer for 3 cwnds: BBR may grow fast while recovering. */
static u32 bbr1_sndbuf_cwnds(struct sock *sk)
{
	return 3;
}

/* A loss turned out spurious: Startup's plateau count and the policer
 * detector start over; cwnd stays as it is.
 */
static u32 bbr1_on_spurious_loss(struct sock *sk)
{
	struct bbr1 *b = bbr1_ca(sk);

	b->full_bw = 0;
	b->full_bw_count = 0;
	bbr1_policer_forget(sk);
	return bbr1_cwnd(tcp_sk(sk));
}

/* Called when a loss episode begins: save the cwnd to restore; BBR keeps
 * ssthresh as it is.
 */
static u32 bbr1_on_loss_episode(struct sock *sk)
{
	bbr1_save_cwnd(sk);
	return tcp_sk(sk)->snd_ssthresh;
}

/* An RTO: count it as the end of a round and a lossy sample for the
 * policer detector; Startup's plateau test starts over.
 */
static void bbr1_on_ca_state(struct sock *sk, u8 new_state)
{
	struct bbr1 *b = bbr1_ca(sk);
	struct rate_sample rto = { .losses = 1 };

	if (new_state != TCP_CA_Loss)
		return;
	b->prev_ca_state = TCP_CA_Loss;
	b->full_bw = 0;
	b->round_start = 1;
	bbr1_policer_sample(sk, &rto);
}

static size_t bbr1_diag_info(struct sock *sk, u32 ext, int *attr,
			    union tcp_cc_info *info)
{
	const u32 wanted = (1 << (INET_DIAG_BBRINFO - 1)) |
			   (1 << (INET_DIAG_VEGASINFO - 1));
	const struct bbr1 *b = bbr1_ca(sk);
	u64 bytes_per_sec;
	void *state;

	if (!(ext & wanted))
		return 0;
	bytes_per_sec = bbr1_bw_to_bytes(sk, bbr1_model_bw(sk));
	/* inet_diag calls us without the socket lock: the variant state is
	 * read once, inside an RCU read section, so release cannot free it
	 * underneath (it frees with kfree_rcu).
	 */
	rcu_read_lock();
	state = smp_load_acquire(&b->ext);
	info->bbr = (struct tcp_bbr_info) {
		.bbr_bw_lo = lower_32_bits(bytes_per_sec),
		.bbr_bw_hi = upper_32_bits(bytes_per_sec),
		.bbr_min_rtt = b->min_rtt_us,
		.bbr_pacing_gain = bbr1_eff_pacing_gain_ext(sk, state),
		.bbr_cwnd_gain = bbr1_report_cwnd_gain_ext(sk, state),
	};
	rcu_read_unlock();
	*attr = INET_DIAG_BBRINFO;
	return sizeof(info->bbr);
}

static struct tcp_congestion_ops bbr1_ops __read_mostly = {
	.flags		= TCP_CONG_NON_RESTRICTED,
	.name		= BBR1_CC_NAME,
	.owner		= THIS_MODULE,
	.init		= bbr1_init,
	.release	= bbr1_release,
	.cong_control	= bbr1_update_on_ack,
	.sndbuf_expand	= bbr1_sndbuf_cwnds,
	.undo_cwnd	= bbr1_on_spurious_loss,
	.cwnd_event	= bbr1_on_cwnd_event,
	CCTEST_TX_START_HOOK(bbr1_on_cwnd_event)
	.ssthresh	= bbr1_on_loss_episode,
	.min_tso_segs	= bbr1_min_burst_segs,
	.get_info	= bbr1_diag_info,
	.set_state	= bbr1_on_ca_state,
};

static int __init bbr1_module_init(void)
{
	BUILD_BUG_ON(sizeof(struct bbr1) > ICSK_CA_PRIV_SIZE);
	BUILD_BUG_ON(sizeof(BBR1_CC_NAME) > TCP_CA_NAME_MAX);
	return tcp_register_congestion_control(&bbr1_ops);
}

static void __exit bbr1_module_exit(void)
{
	tcp_unregister_congestion_control(&bbr1_ops);
}

module_init(bbr1_module_init);
module_exit(bbr1_module_exit);

MODULE_LICENSE("GPL");
MODULE_AUTHOR("cctest");
/* the authors of net/ipv4/tcp_bbr.c, which this core follows (header) */
MODULE_AUTHOR("Neal Cardwell <ncardwell@google.com>");
MODULE_AUTHOR("Yuchung Cheng <ycheng@google.com>");
MODULE_AUTHOR("Van Jacobson <vanj@google.com>");
MODULE_AUTHOR("Soheil Hassas Yeganeh <soheil@google.com>");
