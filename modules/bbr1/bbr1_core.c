// SPDX-License-Identifier: GPL-2.0
/*
 * bbr1_core.c - cctest's BBRv1 core, shared by bbr1 and the v1 variants.
 *
 * NOT a standalone object.  Every module (bbr1.c, bbr_cws.c, bbr_acw.c,
 * bbr_modest.c, bbr_shallow.c, bbr_histmin.c) #includes this file once, so the core is
 * compiled privately into each .ko and Kbuild never links one object into
 * several modules.  Before the #include a module defines:
 *
 *   BBR1_CC_NAME                   congestion control name ("bbr_cws")
 *   BBR1_DEFAULT_CWND_GAIN_X1000   default ProbeBW cwnd gain (2000 = BBR)
 *
 * and after it, the hook table `bbr1_variant` (struct bbr1_hooks) plus the
 * module's tracepoint (see bbr1_trace_common.h).
 *
 * The model (Cardwell et al., "BBR: Congestion-Based Congestion Control",
 * ACM Queue 14(5), 2016; behaviour of Linux net/ipv4/tcp_bbr.c):
 *
 *   BtlBw  = max(delivery rate samples) over the last 10 packet-timed rounds
 *   RTprop = min(RTT samples) over the last 10 seconds
 *   pacing_rate = pacing_gain * BtlBw       (1% below, to drain queues)
 *   cwnd        = cwnd_gain * BtlBw * RTprop (+ ACK-aggregation allowance,
 *                 + room for 3 TSO bursts, rounded up to an even number)
 *
 * The state machine:
 *
 *   STARTUP   pacing and cwnd gain 2/ln2 = 2.885, the smallest gain that
 *             doubles the delivery rate each round.  Left when BtlBw grew
 *             by less than 25 % for 3 rounds ("the pipe is full").
 *   DRAIN     pacing gain 1/2.885 until the estimated inflight is down to
 *             one BDP, i.e. the Startup queue is gone.
 *   PROBE_BW  cwnd gain 2 (a module parameter here), pacing gain cycling
 *             through 8 phases of one RTprop each: 1.25 (probe for more
 *             bandwidth), 0.75 (drain what the probe queued), six at 1.0.
 *             The starting phase is random so flows do not synchronise.
 *   PROBE_RTT entered when RTprop has not been refreshed for 10 s: cwnd is
 *             held at 4 packets for max(200 ms, one round) so the queue
 *             drains and the true propagation delay can be measured.
 *
 * Losses do not drive the model.  On the first round of fast recovery BBR
 * uses packet conservation (send one packet per packet delivered); after
 * recovery it restores the cwnd it had before.  A long-term ("LT") sampler
 * detects token-bucket policers (two lossy intervals with the same rate)
 * and then paces at the policed rate for 48 rounds.
 *
 * Hooks (struct bbr1_hooks): a variant gets a small, private, kzalloc'ed
 * state block (ext) and may adjust the cwnd gain, the pacing gain, replace
 * the loss-recovery step, cap the final cwnd, overrule a rise of RTprop
 * when its filter expires, and run per-ACK logic.  If the
 * allocation fails (or a variant has no hooks) the core is plain BBR.
 *
 * Stock-kernel storage: the 104 bytes of icsk_ca_priv must hold the whole
 * core plus the ext pointer, so the two microsecond timestamps the kernel
 * keeps as u64 (gain-cycle phase start, ACK-aggregation epoch start) are
 * kept as their low 32 bits; deltas are taken modulo 2^32 (71 minutes),
 * which is exact for every gap shorter than that.
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

#ifndef BBR1_CC_NAME
#error "define BBR1_CC_NAME before including bbr1_core.c"
#endif
#ifndef BBR1_DEFAULT_CWND_GAIN_X1000
#define BBR1_DEFAULT_CWND_GAIN_X1000 2000
#endif

#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 10, 0)
#define BBR1_CONG_CONTROL_ARGS \
	struct sock *sk, u32 ack, int flag, const struct rate_sample *rs
#else
#define BBR1_CONG_CONTROL_ARGS struct sock *sk, const struct rate_sample *rs
#endif

/* Bandwidth is kept in packets per microsecond, scaled by 2^24 (unit about
 * 715 bit/s at 1500-byte packets), so any realistic rate fits in a u32.
 */
#define BW_SCALE 24
#define BW_UNIT (1 << BW_SCALE)

/* Gains are fixed point with 8 fractional bits (256 = 1.0). */
#define BBR_SCALE 8
#define BBR_UNIT (1 << BBR_SCALE)

enum bbr1_mode {
	BBR1_STARTUP = 0,	/* ramp up: double the delivery rate each round */
	BBR1_DRAIN = 1,		/* remove the queue Startup built */
	BBR1_PROBE_BW = 2,	/* steady state: gain cycling around BtlBw */
	BBR1_PROBE_RTT = 3,	/* hold 4 packets to re-measure RTprop */
};

/* Per-socket core state; must fit in icsk_ca_priv (104 bytes on 6.1). */
struct bbr1 {
	u32 min_rtt_us;			/* RTprop estimate */
	u32 min_rtt_stamp;		/* jiffies when RTprop was last taken */
	u32 probe_rtt_done_stamp;	/* jiffies when PROBE_RTT may end */
	struct minmax bw;		/* BtlBw max filter (BW_UNIT scale) */
	u32 rtt_cnt;			/* packet-timed rounds so far */
	u32 next_rtt_delivered;		/* tp->delivered that ends the round */
	u32 cycle_stamp;		/* low 32 bits of us stamp: phase start */
	u32 mode:2,			/* enum bbr1_mode */
	    prev_ca_state:3,		/* icsk_ca_state seen on previous ACK */
	    packet_conservation:1,	/* first round of recovery */
	    round_start:1,		/* this ACK began a new round */
	    idle_restart:1,		/* sending resumed after idle */
	    probe_rtt_round_done:1,	/* a full round spent at 4 packets */
	    lt_is_sampling:1,		/* long-term (policer) sampling on */
	    lt_rtt_cnt:7,		/* rounds in the LT interval */
	    lt_use_bw:1,		/* pace at lt_bw (policer found) */
	    has_seen_rtt:1,		/* pacing rate set from a real RTT */
	    full_bw_reached:1,		/* Startup found the pipe full */
	    full_bw_cnt:2,		/* rounds without 25 % bw growth */
	    cycle_idx:3,		/* index in the ProbeBW gain cycle */
	    trace_mode:2,		/* mode at the last trace event */
	    trace_req:1,		/* a hook asked for a trace event */
	    unused_a:4;
	u32 pacing_gain:11,		/* state machine's pacing gain */
	    cwnd_gain:11,		/* effective cwnd gain (after hooks) */
	    unused_b:10;
	u32 lt_bw;			/* long-term (policed) rate */
	u32 lt_last_delivered;		/* LT interval start: tp->delivered */
	u32 lt_last_stamp;		/* LT interval start: delivered ms */
	u32 lt_last_lost;		/* LT interval start: tp->lost */
	u32 prior_cwnd;			/* cwnd to restore after loss/ProbeRTT */
	u32 full_bw;			/* bw at the last 25 % growth */
	u32 ack_epoch_stamp;		/* low 32 bits of us stamp: epoch */
	u16 extra_acked[2];		/* max excess ACKed, two windows */
	u32 ack_epoch_acked:20,		/* packets ACKed in this epoch */
	    extra_acked_win_rtts:5,	/* age of the extra_acked window */
	    extra_acked_win_idx:1,	/* which extra_acked[] is current */
	    unused_c:6;
	void *ext;			/* variant state, NULL = plain BBR */
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

/* Every parameter of the v1 family is an int checked against its range
 * when it is set (insmod or sysfs): a value outside it is refused with
 * -EINVAL and the old one stays, so an ACK never sees it.  The range is
 * written once, in BBR1_PARAM, and ends the parameter's description as
 * "[range LO..HI]", which cctest reads with modinfo to refuse a scenario's
 * value before anything runs (the same convention as bbr3).
 */
struct bbr1_param {
	int *value;
	int lo, hi;
};

static int bbr1_param_set(const char *val, const struct kernel_param *kp)
{
	const struct bbr1_param *p = kp->arg;
	int v;
	int err = kstrtoint(val, 0, &v);

	if (err)
		return err;
	if (v < p->lo || v > p->hi)
		return -EINVAL;
	WRITE_ONCE(*p->value, v);
	return 0;
}

static int bbr1_param_get(char *buf, const struct kernel_param *kp)
{
	const struct bbr1_param *p = kp->arg;

	return scnprintf(buf, PAGE_SIZE, "%d\n", READ_ONCE(*p->value));
}

static const struct kernel_param_ops bbr1_param_ops = {
	.set = bbr1_param_set,
	.get = bbr1_param_get,
};

/* int parameter `name`, default def, allowed lo..hi (literals >= 0). */
#define BBR1_PARAM(name, def, lo, hi, desc)				\
	static int name = def;						\
	static struct bbr1_param bbr1_param_##name = { &name, lo, hi };	\
	module_param_cb(name, &bbr1_param_ops, &bbr1_param_##name, 0644); \
	MODULE_PARM_DESC(name, desc " [range " #lo ".." #hi "]")

/* ProbeBW cwnd gain x1000: BBRv1 2000; bbr_shallow 1500 (004 section
 * IV-E.1).  At most what the 11-bit gain field holds (7996 -> 2047/256).
 */
BBR1_PARAM(cwnd_gain_x1000, BBR1_DEFAULT_CWND_GAIN_X1000, 1, 7996,
	   "ProbeBW cwnd gain x1000 (BBRv1: 2000)");

/* BBR's own constants (ACM Queue 2016 / tcp_bbr.c), not parameters. */
#define BBR1_CYCLE_LEN 8		/* phases in the ProbeBW gain cycle */
static const u32 bbr1_bw_rtts = BBR1_CYCLE_LEN + 2;	/* BtlBw window, rounds */
static const u32 bbr1_min_rtt_win_sec = 10;	/* RTprop window, s */
static const u32 bbr1_probe_rtt_mode_ms = 200;	/* min time at 4 pkts */
static const int bbr1_min_tso_rate = 1200000;	/* bit/s: below, 1 seg TSO */
static const int bbr1_pacing_margin_percent = 1; /* pace 1% under BtlBw */
static const int bbr1_high_gain = BBR_UNIT * 2885 / 1000 + 1; /* 2/ln2 */
static const int bbr1_drain_gain = BBR_UNIT * 1000 / 2885;   /* ln2/2 */
static const int bbr1_cycle_gain[BBR1_CYCLE_LEN] = {
	BBR_UNIT * 5 / 4,		/* probe for more bandwidth */
	BBR_UNIT * 3 / 4,		/* drain the probe's queue */
	BBR_UNIT, BBR_UNIT, BBR_UNIT,	/* cruise at BtlBw */
	BBR_UNIT, BBR_UNIT, BBR_UNIT,
};
static const u32 bbr1_cycle_rand = 7;	/* random start among 7 phases */
static const u32 bbr1_cwnd_min_target = 4;	/* packets: 2 delayed-ACK pairs */
static const u32 bbr1_full_bw_thresh = BBR_UNIT * 5 / 4; /* 25 % growth */
static const u32 bbr1_full_bw_cnt = 3;	/* rounds without growth = full */
static const u32 bbr1_lt_intvl_min_rtts = 4;	/* LT interval, rounds */
static const u32 bbr1_lt_loss_thresh = 50;	/* 50/256 ~ 20 % loss */
static const u32 bbr1_lt_bw_ratio = BBR_UNIT / 8; /* rates within 1/8 */
static const u32 bbr1_lt_bw_diff = 4000 / 8;	/* or within 4 kbit/s */
static const u32 bbr1_lt_bw_max_rtts = 48;	/* rounds to pace at lt_bw */
static const int bbr1_extra_acked_gain = BBR_UNIT;	/* aggregation gain */
static const u32 bbr1_extra_acked_win_rtts = 5;	/* aggregation window */
static const u32 bbr1_ack_epoch_acked_reset_thresh = 1U << 20;
static const u32 bbr1_extra_acked_max_us = 100 * 1000; /* cap: 100 ms */

/* ---- small accessors -------------------------------------------------- */

static inline struct bbr1 *bbr1_ca(const struct sock *sk)
{
	return (struct bbr1 *)inet_csk_ca(sk);
}

/* The variant's state block is read by get_info (inet_diag) under RCU only,
 * without the socket lock, so release must not free it while a reader may
 * hold it: the block carries an rcu_head and is freed with kfree_rcu, and
 * the pointer is published only once the block is initialised.
 */
struct bbr1_ext_box {
	struct rcu_head rcu;
	u64 data[] __aligned(sizeof(u64));	/* the variant's ext_size bytes */
};

/* The variant's state, or NULL when hooks must not run (socket lock held,
 * or an RCU read section, as in get_info).
 */
static inline void *bbr1_ext(const struct sock *sk)
{
	return READ_ONCE(bbr1_ca(sk)->ext);
}

/* Do hooks run for this ext pointer?  Without state only if none is needed. */
static inline bool bbr1_hooks_on_ext(const void *ext)
{
	return bbr1_variant.ext_size == 0 || ext;
}

static inline bool bbr1_hooks_on(const struct sock *sk)
{
	return bbr1_hooks_on_ext(bbr1_ext(sk));
}

static inline u32 bbr1_cwnd(const struct tcp_sock *tp)
{
	return tp->snd_cwnd;
}

static inline void bbr1_set_cwnd_raw(struct tcp_sock *tp, u32 cwnd)
{
	tp->snd_cwnd = cwnd;
}

/* Low 32 bits of the time of the latest delivery, in us. */
static inline u32 bbr1_now_us32(const struct tcp_sock *tp)
{
	return (u32)tp->delivered_mstamp;
}

/* Low 32 bits of the socket's us clock (tp->tcp_mstamp). */
static inline u32 bbr1_clock_us32(const struct tcp_sock *tp)
{
	return (u32)tp->tcp_mstamp;
}

/* Uniform integer in [0, n). */
static inline u32 bbr1_rand_below(u32 n)
{
	return (u32)(((u64)get_random_u32() * n) >> 32);
}

/* x1000 fixed point <-> BBR_UNIT fixed point. */
static inline u32 bbr1_x1000_to_unit(int x1000)
{
	if (x1000 < 0)
		x1000 = 0;
	return DIV_ROUND_CLOSEST((u32)x1000 * BBR_UNIT, 1000);
}

static inline u32 bbr1_unit_to_x1000(u32 g)
{
	return DIV_ROUND_CLOSEST(g * 1000, BBR_UNIT);
}

static inline bool bbr1_full_bw_reached(const struct sock *sk)
{
	return bbr1_ca(sk)->full_bw_reached;
}

/* BtlBw from the max filter. */
static inline u32 bbr1_max_bw(const struct sock *sk)
{
	return minmax_get(&bbr1_ca(sk)->bw);
}

/* The bandwidth BBR acts on: the policed rate if one was found. */
static inline u32 bbr1_bw(const struct sock *sk)
{
	const struct bbr1 *b = bbr1_ca(sk);

	return b->lt_use_bw ? b->lt_bw : bbr1_max_bw(sk);
}

/* bw (BW_UNIT scale) to bits per second, for reports. */
static inline u64 bbr1_bw_to_bps(const struct sock *sk, u32 bw)
{
	return ((u64)bw * tcp_sk(sk)->mss_cache * USEC_PER_SEC * 8) >> BW_SCALE;
}

static void bbr1_notify_mode(struct sock *sk, u32 from, u32 to)
{
	if (from != to && bbr1_variant.mode_change && bbr1_hooks_on(sk))
		bbr1_variant.mode_change(sk, bbr1_ext(sk), from, to);
}

static void bbr1_set_mode(struct sock *sk, u32 mode)
{
	struct bbr1 *b = bbr1_ca(sk);
	u32 old = b->mode;

	b->mode = mode;
	bbr1_notify_mode(sk, old, mode);
}

/* A hook asks for a trace event on this ACK (e.g. a phase change). */
static inline void bbr1_trace_request(struct sock *sk)
{
	bbr1_ca(sk)->trace_req = 1;
}

/* ---- pacing ----------------------------------------------------------- */

/* rate (BW_UNIT) * gain (BBR_UNIT) -> bytes/s, 1% under; ordered so the
 * u64 does not overflow below ~2.9 Tbit/s at gain 2.89.
 */
static u64 bbr1_rate_bytes_per_sec(struct sock *sk, u64 rate, int gain)
{
	rate *= tcp_sk(sk)->mss_cache;
	rate *= gain;
	rate >>= BBR_SCALE;
	rate *= USEC_PER_SEC / 100 * (100 - bbr1_pacing_margin_percent);
	return rate >> BW_SCALE;
}

static unsigned long bbr1_pacing_rate_for(struct sock *sk, u32 bw, int gain)
{
	u64 rate = bbr1_rate_bytes_per_sec(sk, bw, gain);

	return min_t(u64, rate, READ_ONCE(sk->sk_max_pacing_rate));
}

/* Before any bandwidth sample: high_gain * initial cwnd / RTT (1 ms if
 * no RTT is known yet).
 */
static void bbr1_init_pacing_rate(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbr1 *b = bbr1_ca(sk);
	u32 rtt_us = USEC_PER_MSEC;
	u64 bw;

	if (tp->srtt_us) {
		rtt_us = max(tp->srtt_us >> 3, 1U);
		b->has_seen_rtt = 1;
	}
	bw = (u64)bbr1_cwnd(tp) * BW_UNIT;
	do_div(bw, rtt_us);
	WRITE_ONCE(sk->sk_pacing_rate,
		   bbr1_pacing_rate_for(sk, bw, bbr1_high_gain));
}

/* Until the pipe is known to be full the pacing rate only goes up. */
static void bbr1_set_pacing_rate(struct sock *sk, u32 bw, int gain)
{
	struct bbr1 *b = bbr1_ca(sk);
	unsigned long rate = bbr1_pacing_rate_for(sk, bw, gain);

	if (unlikely(!b->has_seen_rtt && tcp_sk(sk)->srtt_us))
		bbr1_init_pacing_rate(sk);
	if (bbr1_full_bw_reached(sk) || rate > READ_ONCE(sk->sk_pacing_rate))
		WRITE_ONCE(sk->sk_pacing_rate, rate);
}

/* Pacing gain actually used: the state machine's, adjusted by the hook
 * (ext: the variant state the caller read once, see bbr1_ext).
 */
static u32 bbr1_eff_pacing_gain_ext(const struct sock *sk, void *ext)
{
	u32 g = bbr1_ca(sk)->pacing_gain;

	if (bbr1_variant.pacing_gain && bbr1_hooks_on_ext(ext))
		g = bbr1_variant.pacing_gain(sk, ext, g);
	return g;
}

static u32 bbr1_eff_pacing_gain(const struct sock *sk)
{
	return bbr1_eff_pacing_gain_ext(sk, bbr1_ext(sk));
}

static u32 bbr1_min_tso_segs(struct sock *sk)
{
	return READ_ONCE(sk->sk_pacing_rate) < (bbr1_min_tso_rate >> 3) ? 1 : 2;
}

/* The largest burst the cwnd budget plans for: the classic 64 KB GSO
 * limit.  Since 5.19 GSO_MAX_SIZE allows BIG TCP (512 KB) and kernel bbr
 * budgets with GSO_LEGACY_MAX_SIZE; older headers have only GSO_MAX_SIZE,
 * which is 64 KB there.  With 512 KB the goal would be 127 segments instead
 * of 45 above ~0.5 Gbit/s of pacing, and bbr1 would keep more in flight.
 */
#ifdef GSO_LEGACY_MAX_SIZE
#define BBR1_TSO_BUDGET_BYTES GSO_LEGACY_MAX_SIZE
#else
#define BBR1_TSO_BUDGET_BYTES GSO_MAX_SIZE
#endif
static_assert(BBR1_TSO_BUDGET_BYTES == 65536, "TSO budget must be 64 KB");

/* Segments per TSO burst at the current pacing rate (~1 ms of data). */
static u32 bbr1_tso_segs_goal(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u32 bytes, segs;

	bytes = min_t(unsigned long,
		      READ_ONCE(sk->sk_pacing_rate) >> READ_ONCE(sk->sk_pacing_shift),
		      BBR1_TSO_BUDGET_BYTES - 1 - MAX_TCP_HEADER);
	segs = max_t(u32, bytes / tp->mss_cache, bbr1_min_tso_segs(sk));
	return min(segs, 0x7FU);
}

/* ---- cwnd targets ----------------------------------------------------- */

/* Remember a cwnd worth returning to after recovery or ProbeRTT. */
static void bbr1_save_cwnd(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbr1 *b = bbr1_ca(sk);

	if (b->prev_ca_state < TCP_CA_Recovery && b->mode != BBR1_PROBE_RTT)
		b->prior_cwnd = bbr1_cwnd(tp);
	else	/* cwnd is temporarily cut: keep the larger one */
		b->prior_cwnd = max(b->prior_cwnd, bbr1_cwnd(tp));
}

/* ceil(gain * bw * RTprop) in packets; the initial window if no RTT. */
static u32 bbr1_bdp(struct sock *sk, u32 bw, int gain)
{
	const struct bbr1 *b = bbr1_ca(sk);
	u64 w;

	if (unlikely(b->min_rtt_us == ~0U))
		return TCP_INIT_CWND;
	w = (u64)bw * b->min_rtt_us;
	return (((w * gain) >> BBR_SCALE) + BW_UNIT - 1) / BW_UNIT;
}

/* Room for TSO bursts in the sender qdisc, the NIC and the receiver's
 * GRO/delayed ACK; an even count; and in the 1.25 probe phase two more
 * packets so that small BDPs still probe above one BDP.
 */
static u32 bbr1_quantization_budget(struct sock *sk, u32 cwnd)
{
	const struct bbr1 *b = bbr1_ca(sk);

	cwnd += 3 * bbr1_tso_segs_goal(sk);
	cwnd = (cwnd + 1) & ~1U;
	if (b->mode == BBR1_PROBE_BW && b->cycle_idx == 0)
		cwnd += 2;
	return cwnd;
}

static u32 bbr1_inflight(struct sock *sk, u32 bw, int gain)
{
	return bbr1_quantization_budget(sk, bbr1_bdp(sk, bw, gain));
}

/* Packets of ours still in the network when the next skb leaves
 * (earliest departure time): inflight now minus what bw drains meanwhile,
 * plus that skb when we are increasing inflight.
 */
static u32 bbr1_packets_in_net_at_edt(struct sock *sk, u32 inflight_now)
{
	struct tcp_sock *tp = tcp_sk(sk);
	const struct bbr1 *b = bbr1_ca(sk);
	u64 now_ns = tp->tcp_clock_cache;
	u64 edt_ns = max(tp->tcp_wstamp_ns, now_ns);
	u64 gap_us = div_u64(edt_ns - now_ns, NSEC_PER_USEC);
	u32 drained = ((u64)bbr1_bw(sk) * gap_us) >> BW_SCALE;
	u32 at_edt = inflight_now;

	if (b->pacing_gain > BBR_UNIT)
		at_edt += bbr1_tso_segs_goal(sk);
	return drained >= at_edt ? 0 : at_edt - drained;
}

/* Extra cwnd for ACK aggregation: recent max excess-ACKed, capped by
 * 100 ms worth of bw; only once Startup is over.
 */
static u32 bbr1_ack_aggregation_cwnd(struct sock *sk)
{
	const struct bbr1 *b = bbr1_ca(sk);
	u32 cap, extra;

	if (!bbr1_extra_acked_gain || !bbr1_full_bw_reached(sk))
		return 0;
	cap = ((u64)bbr1_bw(sk) * bbr1_extra_acked_max_us) / BW_UNIT;
	extra = (bbr1_extra_acked_gain *
		 max(b->extra_acked[0], b->extra_acked[1])) >> BBR_SCALE;
	return min(extra, cap);
}

/* BBR's cwnd target for a given bw and gain (used by hooks too). */
static u32 bbr1_target_cwnd(struct sock *sk, u32 bw, int gain)
{
	u32 t = bbr1_bdp(sk, bw, gain) + bbr1_ack_aggregation_cwnd(sk);

	return bbr1_quantization_budget(sk, t);
}

/* BBR's loss response.  Losses are subtracted; the first round of fast
 * recovery conserves packets (cwnd = inflight + acked); leaving recovery
 * restores the cwnd saved at its start.  True while conserving.
 */
static bool bbr1_recover_or_restore(struct sock *sk,
				    const struct rate_sample *rs,
				    u32 acked, u32 *new_cwnd)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbr1 *b = bbr1_ca(sk);
	u8 prev = b->prev_ca_state, now = inet_csk(sk)->icsk_ca_state;
	u32 cwnd = bbr1_cwnd(tp);

	if (rs->losses > 0)
		cwnd = max_t(s32, cwnd - rs->losses, 1);

	if (now == TCP_CA_Recovery && prev != TCP_CA_Recovery) {
		b->packet_conservation = 1;
		b->next_rtt_delivered = tp->delivered;	/* round starts now */
		cwnd = tcp_packets_in_flight(tp) + acked;
	} else if (prev >= TCP_CA_Recovery && now < TCP_CA_Recovery) {
		cwnd = max(cwnd, b->prior_cwnd);
		b->packet_conservation = 0;
	}
	b->prev_ca_state = now;

	if (b->packet_conservation) {
		*new_cwnd = max(cwnd, tcp_packets_in_flight(tp) + acked);
		return true;
	}
	*new_cwnd = cwnd;
	return false;
}

/* Grow toward the target by `acked` (slow-start like), or snap down to it
 * once Startup is over.  Then hooks, the global clamp and ProbeRTT's cap.
 */
static void bbr1_set_cwnd(struct sock *sk, const struct rate_sample *rs,
			  u32 acked, u32 bw, int gain)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbr1 *b = bbr1_ca(sk);
	bool hooks = bbr1_hooks_on(sk);
	u32 cwnd = bbr1_cwnd(tp), target = 0;
	bool skip;

	if (!acked)
		goto done;

	if (bbr1_variant.recovery && hooks) {
		skip = bbr1_variant.recovery(sk, rs, b->ext, acked, &cwnd);
		b->prev_ca_state = inet_csk(sk)->icsk_ca_state;
	} else {
		skip = bbr1_recover_or_restore(sk, rs, acked, &cwnd);
	}
	if (skip)
		goto done;

	target = bbr1_target_cwnd(sk, bw, gain);
	if (bbr1_full_bw_reached(sk))
		cwnd = min(cwnd + acked, target);
	else if (cwnd < target || tp->delivered < TCP_INIT_CWND)
		cwnd += acked;
	cwnd = max(cwnd, bbr1_cwnd_min_target);

done:
	if (bbr1_variant.cwnd_cap && hooks)
		cwnd = bbr1_variant.cwnd_cap(sk, b->ext, cwnd, target, acked);
	cwnd = min(cwnd, tp->snd_cwnd_clamp);
	if (b->mode == BBR1_PROBE_RTT)
		cwnd = min(cwnd, bbr1_cwnd_min_target);
	bbr1_set_cwnd_raw(tp, max(cwnd, 1U));
}

/* ---- ProbeBW gain cycling ----------------------------------------------- */

/* Phase over?  Gain 1.0: after one RTprop.  Gain > 1: after one RTprop and
 * once inflight reached gain*BDP (or a loss says it will not fit).
 * Gain < 1: after one RTprop or as soon as inflight is down to one BDP.
 */
static bool bbr1_is_next_cycle_phase(struct sock *sk,
				     const struct rate_sample *rs)
{
	const struct bbr1 *b = bbr1_ca(sk);
	u32 elapsed = bbr1_now_us32(tcp_sk(sk)) - b->cycle_stamp;
	bool full_length = elapsed > b->min_rtt_us;
	u32 inflight, bw;

	if (b->pacing_gain == BBR_UNIT)
		return full_length;

	inflight = bbr1_packets_in_net_at_edt(sk, rs->prior_in_flight);
	bw = bbr1_max_bw(sk);

	if (b->pacing_gain > BBR_UNIT)
		return full_length &&
		       (rs->losses ||
			inflight >= bbr1_inflight(sk, bw, b->pacing_gain));

	return full_length || inflight <= bbr1_inflight(sk, bw, BBR_UNIT);
}

static void bbr1_advance_cycle_phase(struct sock *sk)
{
	struct bbr1 *b = bbr1_ca(sk);

	b->cycle_idx = (b->cycle_idx + 1) & (BBR1_CYCLE_LEN - 1);
	b->cycle_stamp = bbr1_now_us32(tcp_sk(sk));
}

static void bbr1_update_cycle_phase(struct sock *sk,
				    const struct rate_sample *rs)
{
	if (bbr1_ca(sk)->mode == BBR1_PROBE_BW &&
	    bbr1_is_next_cycle_phase(sk, rs))
		bbr1_advance_cycle_phase(sk);
}

/* Enter ProbeBW at a random phase other than the 0.75 drain phase. */
static void bbr1_enter_probe_bw(struct sock *sk)
{
	struct bbr1 *b = bbr1_ca(sk);

	bbr1_set_mode(sk, BBR1_PROBE_BW);
	b->cycle_idx = BBR1_CYCLE_LEN - 1 - bbr1_rand_below(bbr1_cycle_rand);
	bbr1_advance_cycle_phase(sk);
}

/* After ProbeRTT: back to ProbeBW if the pipe was filled, else Startup. */
static void bbr1_reset_mode(struct sock *sk)
{
	if (!bbr1_full_bw_reached(sk))
		bbr1_set_mode(sk, BBR1_STARTUP);
	else
		bbr1_enter_probe_bw(sk);
}

/* ---- long-term (policer) bandwidth ------------------------------------- */

static void bbr1_lt_new_interval(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbr1 *b = bbr1_ca(sk);

	b->lt_last_stamp = div_u64(tp->delivered_mstamp, USEC_PER_MSEC);
	b->lt_last_delivered = tp->delivered;
	b->lt_last_lost = tp->lost;
	b->lt_rtt_cnt = 0;
}

static void bbr1_lt_reset(struct sock *sk)
{
	struct bbr1 *b = bbr1_ca(sk);

	b->lt_bw = 0;
	b->lt_use_bw = 0;
	b->lt_is_sampling = 0;
	bbr1_lt_new_interval(sk);
}

/* An interval ended with bw: two consistent intervals mean a policer. */
static void bbr1_lt_interval_done(struct sock *sk, u32 bw)
{
	struct bbr1 *b = bbr1_ca(sk);
	u32 diff;

	if (b->lt_bw) {
		diff = abs((int)bw - (int)b->lt_bw);
		if (diff * BBR_UNIT <= bbr1_lt_bw_ratio * b->lt_bw ||
		    bbr1_rate_bytes_per_sec(sk, diff, BBR_UNIT) <=
		    bbr1_lt_bw_diff) {
			b->lt_bw = (bw + b->lt_bw) >> 1;
			b->lt_use_bw = 1;
			b->pacing_gain = BBR_UNIT;
			b->lt_rtt_cnt = 0;
			return;
		}
	}
	b->lt_bw = bw;
	bbr1_lt_new_interval(sk);
}

/* Sample the delivery rate over lossy intervals of 4..16 rounds that begin
 * and end with a loss; if two such intervals agree, pace at their average.
 */
static void bbr1_lt_sampling(struct sock *sk, const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbr1 *b = bbr1_ca(sk);
	u32 lost, delivered, t;
	u64 bw;

	if (b->lt_use_bw) {
		if (b->mode == BBR1_PROBE_BW && b->round_start &&
		    ++b->lt_rtt_cnt >= bbr1_lt_bw_max_rtts) {
			bbr1_lt_reset(sk);
			bbr1_enter_probe_bw(sk);
		}
		return;
	}

	if (!b->lt_is_sampling) {
		if (!rs->losses)
			return;		/* wait for the policer to bite */
		bbr1_lt_new_interval(sk);
		b->lt_is_sampling = 1;
	}

	if (rs->is_app_limited) {
		bbr1_lt_reset(sk);
		return;
	}

	if (b->round_start)
		b->lt_rtt_cnt++;
	if (b->lt_rtt_cnt < bbr1_lt_intvl_min_rtts)
		return;
	if (b->lt_rtt_cnt > 4 * bbr1_lt_intvl_min_rtts) {
		bbr1_lt_reset(sk);
		return;
	}
	if (!rs->losses)
		return;		/* end intervals on a loss */

	lost = tp->lost - b->lt_last_lost;
	delivered = tp->delivered - b->lt_last_delivered;
	if (!delivered || (lost << BBR_SCALE) < bbr1_lt_loss_thresh * delivered)
		return;

	t = div_u64(tp->delivered_mstamp, USEC_PER_MSEC) - b->lt_last_stamp;
	if ((s32)t < 1)
		return;
	if (t >= ~0U / USEC_PER_MSEC) {
		bbr1_lt_reset(sk);
		return;
	}
	t *= USEC_PER_MSEC;
	bw = (u64)delivered * BW_UNIT;
	do_div(bw, t);
	bbr1_lt_interval_done(sk, bw);
}

/* ---- the model ---------------------------------------------------------- */

/* Delivery-rate sample of this ACK (BW_UNIT), or 0 if not valid. */
static inline u32 bbr1_rs_bw(const struct rate_sample *rs)
{
	u64 bw;

	if (rs->delivered <= 0 || rs->interval_us <= 0)
		return 0;
	bw = (u64)rs->delivered * BW_UNIT;
	do_div(bw, rs->interval_us);
	return (u32)min_t(u64, bw, U32_MAX);
}

/* Round accounting and the BtlBw max filter. */
static void bbr1_update_bw(struct sock *sk, const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbr1 *b = bbr1_ca(sk);
	u64 bw;

	b->round_start = 0;
	if (rs->delivered < 0 || rs->interval_us <= 0)
		return;

	/* A round ends when a packet sent after the round began is ACKed. */
	if (!before(rs->prior_delivered, b->next_rtt_delivered)) {
		b->next_rtt_delivered = tp->delivered;
		b->rtt_cnt++;
		b->round_start = 1;
		b->packet_conservation = 0;
	}

	bbr1_lt_sampling(sk, rs);

	bw = (u64)rs->delivered * BW_UNIT;
	do_div(bw, rs->interval_us);

	/* App-limited samples only count if they raise the estimate. */
	if (!rs->is_app_limited || bw >= bbr1_max_bw(sk))
		minmax_running_max(&b->bw, bbr1_bw_rtts, b->rtt_cnt, bw);
}

/* Track data ACKed beyond what BtlBw explains over an epoch (ACK
 * aggregation); keep the max over two 5-round windows.
 */
static void bbr1_update_ack_aggregation(struct sock *sk,
					const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbr1 *b = bbr1_ca(sk);
	u32 epoch_us, expected, extra;

	if (!bbr1_extra_acked_gain || !rs->acked_sacked ||
	    rs->delivered < 0 || rs->interval_us <= 0)
		return;

	if (b->round_start) {
		b->extra_acked_win_rtts = min(0x1FU,
					      b->extra_acked_win_rtts + 1U);
		if (b->extra_acked_win_rtts >= bbr1_extra_acked_win_rtts) {
			b->extra_acked_win_rtts = 0;
			b->extra_acked_win_idx ^= 1;
			b->extra_acked[b->extra_acked_win_idx] = 0;
		}
	}

	epoch_us = bbr1_now_us32(tp) - b->ack_epoch_stamp;
	expected = ((u64)bbr1_bw(sk) * epoch_us) / BW_UNIT;

	if (b->ack_epoch_acked <= expected ||
	    b->ack_epoch_acked + rs->acked_sacked >=
	    bbr1_ack_epoch_acked_reset_thresh) {
		b->ack_epoch_acked = 0;
		b->ack_epoch_stamp = bbr1_now_us32(tp);
		expected = 0;
	}

	b->ack_epoch_acked = min_t(u32, 0xFFFFF,
				   b->ack_epoch_acked + rs->acked_sacked);
	extra = b->ack_epoch_acked - expected;
	extra = min(extra, bbr1_cwnd(tp));
	if (extra > b->extra_acked[b->extra_acked_win_idx])
		b->extra_acked[b->extra_acked_win_idx] = extra;
}

/* Startup is over when 3 non-app-limited rounds in a row failed to raise
 * BtlBw by 25 %.
 */
static void bbr1_check_full_bw_reached(struct sock *sk,
				       const struct rate_sample *rs)
{
	struct bbr1 *b = bbr1_ca(sk);
	u32 thresh;

	if (bbr1_full_bw_reached(sk) || !b->round_start || rs->is_app_limited)
		return;

	thresh = ((u64)b->full_bw * bbr1_full_bw_thresh) >> BBR_SCALE;
	if (bbr1_max_bw(sk) >= thresh) {
		b->full_bw = bbr1_max_bw(sk);
		b->full_bw_cnt = 0;
		return;
	}
	++b->full_bw_cnt;
	b->full_bw_reached = b->full_bw_cnt >= bbr1_full_bw_cnt;
}

/* Startup -> Drain once full; Drain -> ProbeBW once inflight <= BDP. */
static void bbr1_check_drain(struct sock *sk, const struct rate_sample *rs)
{
	struct bbr1 *b = bbr1_ca(sk);

	if (b->mode == BBR1_STARTUP && bbr1_full_bw_reached(sk)) {
		bbr1_set_mode(sk, BBR1_DRAIN);
		tcp_sk(sk)->snd_ssthresh =
			bbr1_inflight(sk, bbr1_max_bw(sk), BBR_UNIT);
	}
	if (b->mode == BBR1_DRAIN &&
	    bbr1_packets_in_net_at_edt(sk, tcp_packets_in_flight(tcp_sk(sk))) <=
	    bbr1_inflight(sk, bbr1_max_bw(sk), BBR_UNIT))
		bbr1_enter_probe_bw(sk);
}

static void bbr1_check_probe_rtt_done(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbr1 *b = bbr1_ca(sk);

	if (!(b->probe_rtt_done_stamp &&
	      after(tcp_jiffies32, b->probe_rtt_done_stamp)))
		return;

	b->min_rtt_stamp = tcp_jiffies32;	/* next ProbeRTT in 10 s */
	bbr1_set_cwnd_raw(tp, max(bbr1_cwnd(tp), b->prior_cwnd));
	bbr1_reset_mode(sk);
}

/* RTprop min filter (10 s) and the ProbeRTT mode it triggers on expiry. */
static void bbr1_update_min_rtt(struct sock *sk, const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbr1 *b = bbr1_ca(sk);
	bool expired;

	expired = after(tcp_jiffies32,
			b->min_rtt_stamp + bbr1_min_rtt_win_sec * HZ);
	if (rs->rtt_us >= 0 &&
	    (rs->rtt_us <= b->min_rtt_us ||
	     (expired && !rs->is_ack_delayed))) {
		u32 rtt_us = rs->rtt_us;

		if (rtt_us < b->min_rtt_us && bbr1_variant.min_rtt_lowered &&
		    bbr1_hooks_on(sk))
			bbr1_variant.min_rtt_lowered(sk, b->ext);
		else if (rtt_us > b->min_rtt_us && bbr1_variant.min_rtt_expired &&
			 bbr1_hooks_on(sk))
			rtt_us = bbr1_variant.min_rtt_expired(sk, b->ext,
							      b->min_rtt_us,
							      rtt_us);
		b->min_rtt_us = rtt_us;
		b->min_rtt_stamp = tcp_jiffies32;
	}

	if (bbr1_probe_rtt_mode_ms > 0 && expired && !b->idle_restart &&
	    b->mode != BBR1_PROBE_RTT) {
		u32 old = b->mode;

		b->mode = BBR1_PROBE_RTT;	/* dip: drain the queue */
		bbr1_save_cwnd(sk);		/* to restore on exit */
		b->probe_rtt_done_stamp = 0;
		bbr1_notify_mode(sk, old, BBR1_PROBE_RTT);
	}

	if (b->mode == BBR1_PROBE_RTT) {
		/* Samples taken at 4 packets are app-limited by design. */
		tp->app_limited = (tp->delivered + tcp_packets_in_flight(tp)) ? : 1;
		if (!b->probe_rtt_done_stamp &&
		    tcp_packets_in_flight(tp) <= bbr1_cwnd_min_target) {
			b->probe_rtt_done_stamp = tcp_jiffies32 +
				msecs_to_jiffies(bbr1_probe_rtt_mode_ms);
			b->probe_rtt_round_done = 0;
			b->next_rtt_delivered = tp->delivered;
		} else if (b->probe_rtt_done_stamp) {
			if (b->round_start)
				b->probe_rtt_round_done = 1;
			if (b->probe_rtt_round_done)
				bbr1_check_probe_rtt_done(sk);
		}
	}
	if (rs->delivered > 0)
		b->idle_restart = 0;
}

/* Gains for the current mode; the variant may change the cwnd gain. */
static void bbr1_update_gains(struct sock *sk)
{
	struct bbr1 *b = bbr1_ca(sk);
	u32 cwnd_gain;

	switch (b->mode) {
	case BBR1_STARTUP:
		b->pacing_gain = bbr1_high_gain;
		cwnd_gain = bbr1_high_gain;
		break;
	case BBR1_DRAIN:
		b->pacing_gain = bbr1_drain_gain;
		cwnd_gain = bbr1_high_gain;
		break;
	case BBR1_PROBE_BW:
		b->pacing_gain = b->lt_use_bw ? BBR_UNIT :
				 bbr1_cycle_gain[b->cycle_idx];
		cwnd_gain = bbr1_x1000_to_unit(cwnd_gain_x1000);
		break;
	default:	/* BBR1_PROBE_RTT */
		b->pacing_gain = BBR_UNIT;
		cwnd_gain = BBR_UNIT;
		break;
	}
	if (bbr1_variant.cwnd_gain && bbr1_hooks_on(sk))
		cwnd_gain = bbr1_variant.cwnd_gain(sk, b->ext, cwnd_gain);
	b->cwnd_gain = clamp_t(u32, cwnd_gain, 1, 2047);
}

static void bbr1_update_model(struct sock *sk, const struct rate_sample *rs)
{
	bbr1_update_bw(sk, rs);
	bbr1_update_ack_aggregation(sk, rs);
	bbr1_update_cycle_phase(sk, rs);
	bbr1_check_full_bw_reached(sk, rs);
	bbr1_check_drain(sk, rs);
	bbr1_update_min_rtt(sk, rs);
	bbr1_update_gains(sk);
}

/* ---- reporting ------------------------------------------------------- */

static u32 bbr1_report_cwnd_gain_ext(const struct sock *sk, void *ext)
{
	u32 g = bbr1_ca(sk)->cwnd_gain;

	if (bbr1_variant.report_cwnd_gain && bbr1_hooks_on_ext(ext))
		g = bbr1_variant.report_cwnd_gain(sk, ext, g);
	return g;
}

static u32 bbr1_report_cwnd_gain(const struct sock *sk)
{
	return bbr1_report_cwnd_gain_ext(sk, bbr1_ext(sk));
}

/* One event per packet-timed round, plus on every mode change and when a
 * hook asked for one.
 */
static void bbr1_maybe_trace(struct sock *sk)
{
	struct bbr1 *b = bbr1_ca(sk);
	struct bbr1_tv tv;

	if (!b->round_start && b->trace_mode == b->mode && !b->trace_req)
		return;
	b->trace_mode = b->mode;
	b->trace_req = 0;
	if (!bbr1_variant.trace)
		return;

	tv.mode = b->mode;
	tv.bw_bps = bbr1_bw_to_bps(sk, bbr1_bw(sk));
	tv.min_rtt_us = b->min_rtt_us;
	tv.pacing_gain_x1000 = bbr1_unit_to_x1000(bbr1_eff_pacing_gain(sk));
	tv.cwnd_gain_x1000 = bbr1_unit_to_x1000(bbr1_report_cwnd_gain(sk));
	tv.cwnd = bbr1_cwnd(tcp_sk(sk));
	bbr1_variant.trace(sk, &tv, bbr1_hooks_on(sk) ? b->ext : NULL);
}

/* ---- tcp_congestion_ops ------------------------------------------------ */

static void bbr1_main(BBR1_CONG_CONTROL_ARGS)
{
	struct bbr1 *b = bbr1_ca(sk);
	bool hooks = bbr1_hooks_on(sk);
	u32 bw;

	bbr1_update_model(sk, rs);
	if (bbr1_variant.on_model && hooks)
		bbr1_variant.on_model(sk, rs, b->ext);

	bw = bbr1_bw(sk);
	bbr1_set_pacing_rate(sk, bw, bbr1_eff_pacing_gain(sk));
	bbr1_set_cwnd(sk, rs, rs->acked_sacked, bw, b->cwnd_gain);

	if (bbr1_variant.after_cwnd && hooks)
		bbr1_variant.after_cwnd(sk, rs, b->ext);
	bbr1_maybe_trace(sk);
}

static void bbr1_init(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbr1 *b = bbr1_ca(sk);
	struct bbr1_ext_box *box = NULL;
	void *ext = NULL;

	WRITE_ONCE(b->ext, NULL);
	if (bbr1_variant.ext_size) {
		box = kzalloc(sizeof(*box) + bbr1_variant.ext_size,
			      GFP_NOWAIT | __GFP_NOWARN);
		if (box)
			ext = box->data;
	}

	b->prior_cwnd = 0;
	tp->snd_ssthresh = TCP_INFINITE_SSTHRESH;
	b->rtt_cnt = 0;
	b->next_rtt_delivered = 0;
	b->prev_ca_state = TCP_CA_Open;
	b->packet_conservation = 0;

	b->probe_rtt_done_stamp = 0;
	b->probe_rtt_round_done = 0;
	b->min_rtt_us = tcp_min_rtt(tp);
	b->min_rtt_stamp = tcp_jiffies32;

	minmax_reset(&b->bw, b->rtt_cnt, 0);

	b->has_seen_rtt = 0;
	bbr1_init_pacing_rate(sk);

	b->round_start = 0;
	b->idle_restart = 0;
	b->full_bw_reached = 0;
	b->full_bw = 0;
	b->full_bw_cnt = 0;
	b->cycle_stamp = 0;
	b->cycle_idx = 0;
	bbr1_lt_reset(sk);
	b->mode = BBR1_STARTUP;
	b->trace_mode = BBR1_STARTUP;
	b->trace_req = 1;	/* first event at the first ACK */
	b->pacing_gain = bbr1_high_gain;
	b->cwnd_gain = bbr1_high_gain;

	b->ack_epoch_stamp = bbr1_clock_us32(tp);
	b->ack_epoch_acked = 0;
	b->extra_acked_win_rtts = 0;
	b->extra_acked_win_idx = 0;
	b->extra_acked[0] = 0;
	b->extra_acked[1] = 0;

	if (bbr1_variant.init && bbr1_hooks_on_ext(ext))
		bbr1_variant.init(sk, ext);
	/* Published initialised: get_info may read it from now on. */
	smp_store_release(&b->ext, ext);

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

static void bbr1_cwnd_event(struct sock *sk, enum tcp_ca_event event)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbr1 *b = bbr1_ca(sk);

	if (event == CA_EVENT_TX_START && tp->app_limited) {
		b->idle_restart = 1;
		b->ack_epoch_stamp = bbr1_clock_us32(tp);
		b->ack_epoch_acked = 0;
		/* Restarting from idle: no need to pace faster than BtlBw. */
		if (b->mode == BBR1_PROBE_BW)
			bbr1_set_pacing_rate(sk, bbr1_bw(sk), BBR_UNIT);
		else if (b->mode == BBR1_PROBE_RTT)
			bbr1_check_probe_rtt_done(sk);
	}
}

/* Provision 3 * cwnd of send buffer: BBR may slow-start in recovery. */
static u32 bbr1_sndbuf_expand(struct sock *sk)
{
	return 3;
}

/* Spurious loss: restart full-pipe detection and policer sampling. */
static u32 bbr1_undo_cwnd(struct sock *sk)
{
	struct bbr1 *b = bbr1_ca(sk);

	b->full_bw = 0;
	b->full_bw_cnt = 0;
	bbr1_lt_reset(sk);
	return bbr1_cwnd(tcp_sk(sk));
}

/* Entering recovery: remember cwnd; ssthresh is not used by BBR. */
static u32 bbr1_ssthresh(struct sock *sk)
{
	bbr1_save_cwnd(sk);
	return tcp_sk(sk)->snd_ssthresh;
}

static size_t bbr1_get_info(struct sock *sk, u32 ext, int *attr,
			    union tcp_cc_info *info)
{
	const struct bbr1 *b = bbr1_ca(sk);
	void *state;
	u64 bw;

	if (!(ext & (1 << (INET_DIAG_BBRINFO - 1))) &&
	    !(ext & (1 << (INET_DIAG_VEGASINFO - 1))))
		return 0;

	bw = ((u64)bbr1_bw(sk) * tcp_sk(sk)->mss_cache * USEC_PER_SEC) >>
	     BW_SCALE;	/* bytes per second */
	memset(&info->bbr, 0, sizeof(info->bbr));
	info->bbr.bbr_bw_lo = (u32)bw;
	info->bbr.bbr_bw_hi = (u32)(bw >> 32);
	info->bbr.bbr_min_rtt = b->min_rtt_us;
	/* inet_diag calls us without the socket lock: the variant state is
	 * read once, inside an RCU read section, so release cannot free it
	 * underneath (it frees with kfree_rcu).
	 */
	rcu_read_lock();
	state = smp_load_acquire(&b->ext);
	info->bbr.bbr_pacing_gain = bbr1_eff_pacing_gain_ext(sk, state);
	info->bbr.bbr_cwnd_gain = bbr1_report_cwnd_gain_ext(sk, state);
	rcu_read_unlock();
	*attr = INET_DIAG_BBRINFO;
	return sizeof(info->bbr);
}

/* An RTO: treat it as a round end and feed the policer sampler a loss. */
static void bbr1_set_state(struct sock *sk, u8 new_state)
{
	struct bbr1 *b = bbr1_ca(sk);

	if (new_state == TCP_CA_Loss) {
		struct rate_sample rs = { .losses = 1 };

		b->prev_ca_state = TCP_CA_Loss;
		b->full_bw = 0;
		b->round_start = 1;
		bbr1_lt_sampling(sk, &rs);
	}
}

static struct tcp_congestion_ops bbr1_ops __read_mostly = {
	.flags		= TCP_CONG_NON_RESTRICTED,
	.name		= BBR1_CC_NAME,
	.owner		= THIS_MODULE,
	.init		= bbr1_init,
	.release	= bbr1_release,
	.cong_control	= bbr1_main,
	.sndbuf_expand	= bbr1_sndbuf_expand,
	.undo_cwnd	= bbr1_undo_cwnd,
	.cwnd_event	= bbr1_cwnd_event,
	.ssthresh	= bbr1_ssthresh,
	.min_tso_segs	= bbr1_min_tso_segs,
	.get_info	= bbr1_get_info,
	.set_state	= bbr1_set_state,
};

static int __init bbr1_register(void)
{
	BUILD_BUG_ON(sizeof(struct bbr1) > ICSK_CA_PRIV_SIZE);
	BUILD_BUG_ON(sizeof(BBR1_CC_NAME) > TCP_CA_NAME_MAX);
	return tcp_register_congestion_control(&bbr1_ops);
}

static void __exit bbr1_unregister(void)
{
	tcp_unregister_congestion_control(&bbr1_ops);
}

module_init(bbr1_register);
module_exit(bbr1_unregister);

MODULE_LICENSE("GPL");
MODULE_AUTHOR("cctest");
