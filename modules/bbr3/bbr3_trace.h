/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The one tracepoint of the bbr3 / bbr3plus modules: <cc name>:state.
 *
 * TRACE_SYSTEM is the module's congestion-control name (BBR3_NAME, set by
 * bbr3.c or bbr3plus.c before including this header), so the event is
 * tracepoint:bbr3:state in bbr3.ko and tracepoint:bbr3plus:state in
 * bbr3plus.ko. Field order and names are a contract with the engine's
 * bpftrace sampler: sport and dport first (host byte order), then integers;
 * fixed-point values carry the suffix _x1000.
 *
 * Unset ("infinite") bounds are reported as 0: bw_lo_bps, inflight_hi and
 * inflight_lo are 0 when the draft's value is Infinity.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM BBR3_NAME

#if !defined(_BBR3_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _BBR3_TRACE_H

#include <linux/tracepoint.h>
#include <net/sock.h>
#include <net/inet_sock.h>

TRACE_EVENT(state,
	TP_PROTO(const struct sock *sk, u32 mode, u32 phase, u64 max_bw_bps,
		 u64 bw_lo_bps, u32 min_rtt_us, u32 inflight_hi,
		 u32 inflight_lo, u32 pacing_gain_x1000, u32 cwnd_gain_x1000,
		 u32 cwnd),

	TP_ARGS(sk, mode, phase, max_bw_bps, bw_lo_bps, min_rtt_us,
		inflight_hi, inflight_lo, pacing_gain_x1000, cwnd_gain_x1000,
		cwnd),

	TP_STRUCT__entry(
		__field(u16, sport)
		__field(u16, dport)
		__field(u32, mode)
		__field(u32, phase)
		__field(u64, max_bw_bps)
		__field(u64, bw_lo_bps)
		__field(u32, min_rtt_us)
		__field(u32, inflight_hi)
		__field(u32, inflight_lo)
		__field(u32, pacing_gain_x1000)
		__field(u32, cwnd_gain_x1000)
		__field(u32, cwnd)
	),

	TP_fast_assign(
		const struct inet_sock *inet = inet_sk(sk);

		__entry->sport = ntohs(inet->inet_sport);
		__entry->dport = ntohs(inet->inet_dport);
		__entry->mode = mode;
		__entry->phase = phase;
		__entry->max_bw_bps = max_bw_bps;
		__entry->bw_lo_bps = bw_lo_bps;
		__entry->min_rtt_us = min_rtt_us;
		__entry->inflight_hi = inflight_hi;
		__entry->inflight_lo = inflight_lo;
		__entry->pacing_gain_x1000 = pacing_gain_x1000;
		__entry->cwnd_gain_x1000 = cwnd_gain_x1000;
		__entry->cwnd = cwnd;
	),

	TP_printk("sport=%u dport=%u mode=%u phase=%u max_bw_bps=%llu bw_lo_bps=%llu min_rtt_us=%u inflight_hi=%u inflight_lo=%u pacing_gain_x1000=%u cwnd_gain_x1000=%u cwnd=%u",
		  __entry->sport, __entry->dport, __entry->mode,
		  __entry->phase, __entry->max_bw_bps, __entry->bw_lo_bps,
		  __entry->min_rtt_us, __entry->inflight_hi,
		  __entry->inflight_lo, __entry->pacing_gain_x1000,
		  __entry->cwnd_gain_x1000, __entry->cwnd)
);

#endif /* _BBR3_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE bbr3_trace
#include <trace/define_trace.h>
