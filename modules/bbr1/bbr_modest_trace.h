/* SPDX-License-Identifier: GPL-2.0 */
/* tracepoint:bbr_modest:state - common BBRv1 fields (bbr1_trace_common.h), then
 * the variant's own.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM bbr_modest

#if !defined(_BBR_MODEST_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _BBR_MODEST_TRACE_H

#include <linux/tracepoint.h>
#include "bbr1_trace_common.h"

TRACE_EVENT(state,
	TP_PROTO(const struct sock *sk, const struct bbr1_tv *tv,
		 u32 phase, u32 min_win, u32 max_win, u32 proportion_x1000),
	TP_ARGS(sk, tv, phase, min_win, max_win, proportion_x1000),
	TP_STRUCT__entry(
		BBR1_TP_FIELDS
		__field(u32, phase)
		__field(u32, min_win)
		__field(u32, max_win)
		__field(u32, proportion_x1000)
	),
	TP_fast_assign(
		BBR1_TP_ASSIGN
		__entry->phase = phase;
		__entry->min_win = min_win;
		__entry->max_win = max_win;
		__entry->proportion_x1000 = proportion_x1000;
	),
	TP_printk(BBR1_TP_FMT " phase=%u min_win=%u max_win=%u proportion_x1000=%u",
		  BBR1_TP_ARGS, __entry->phase, __entry->min_win, __entry->max_win, __entry->proportion_x1000)
);

#endif /* _BBR_MODEST_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE bbr_modest_trace
#include <trace/define_trace.h>
