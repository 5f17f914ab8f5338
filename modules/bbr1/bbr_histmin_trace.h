/* SPDX-License-Identifier: GPL-2.0 */
/* tracepoint:bbr_histmin:state - common BBRv1 fields (bbr1_trace_common.h), then
 * the variant's own.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM bbr_histmin

#if !defined(_BBR_HISTMIN_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _BBR_HISTMIN_TRACE_H

#include <linux/tracepoint.h>
#include "bbr1_trace_common.h"

TRACE_EVENT(state,
	TP_PROTO(const struct sock *sk, const struct bbr1_tv *tv,
		 u32 probe_min_us, u32 streak, u32 raised),
	TP_ARGS(sk, tv, probe_min_us, streak, raised),
	TP_STRUCT__entry(
		BBR1_TP_FIELDS
		__field(u32, probe_min_us)
		__field(u32, streak)
		__field(u32, raised)
	),
	TP_fast_assign(
		BBR1_TP_ASSIGN
		__entry->probe_min_us = probe_min_us;
		__entry->streak = streak;
		__entry->raised = raised;
	),
	TP_printk(BBR1_TP_FMT " probe_min_us=%u streak=%u raised=%u",
		  BBR1_TP_ARGS, __entry->probe_min_us, __entry->streak, __entry->raised)
);

#endif /* _BBR_HISTMIN_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE bbr_histmin_trace
#include <trace/define_trace.h>
