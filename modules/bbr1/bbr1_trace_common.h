/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Fields shared by every v1 module's `state` tracepoint.
 *
 * Observability contract (read generically by cctest's bpftrace sampler):
 * each module defines one event, tracepoint:<cc name>:state, whose first
 * two fields are sport and dport (host byte order), followed by
 *   mode (0 STARTUP, 1 DRAIN, 2 PROBE_BW, 3 PROBE_RTT), bw_bps (BtlBw in
 *   bit/s), min_rtt_us, pacing_gain_x1000, cwnd_gain_x1000 (effective),
 *   cwnd (packets)
 * and then the variant's own integer fields.  Fixed point is value*1000.
 * Emitted once per packet-timed round per socket, on every mode change,
 * and when a variant reports a phase change.
 *
 * These are plain macros: they expand inside TRACE_EVENT() on each pass of
 * <trace/define_trace.h>, picking up that pass's __field/__entry meaning.
 */
#ifndef _BBR1_TRACE_COMMON_H
#define _BBR1_TRACE_COMMON_H

#include <net/inet_sock.h>

#define BBR1_TP_FIELDS				\
	__field(u16, sport)			\
	__field(u16, dport)			\
	__field(u32, mode)			\
	__field(u64, bw_bps)			\
	__field(u32, min_rtt_us)		\
	__field(u32, pacing_gain_x1000)		\
	__field(u32, cwnd_gain_x1000)		\
	__field(u32, cwnd)

#define BBR1_TP_ASSIGN						\
	__entry->sport = ntohs(inet_sk(sk)->inet_sport);	\
	__entry->dport = ntohs(inet_sk(sk)->inet_dport);	\
	__entry->mode = tv->mode;				\
	__entry->bw_bps = tv->bw_bps;				\
	__entry->min_rtt_us = tv->min_rtt_us;			\
	__entry->pacing_gain_x1000 = tv->pacing_gain_x1000;	\
	__entry->cwnd_gain_x1000 = tv->cwnd_gain_x1000;		\
	__entry->cwnd = tv->cwnd;

#define BBR1_TP_FMT							\
	"sport=%u dport=%u mode=%u bw_bps=%llu min_rtt_us=%u "		\
	"pacing_gain_x1000=%u cwnd_gain_x1000=%u cwnd=%u"

#define BBR1_TP_ARGS							\
	__entry->sport, __entry->dport, __entry->mode,			\
	(unsigned long long)__entry->bw_bps, __entry->min_rtt_us,	\
	__entry->pacing_gain_x1000, __entry->cwnd_gain_x1000, __entry->cwnd

#endif /* _BBR1_TRACE_COMMON_H */
