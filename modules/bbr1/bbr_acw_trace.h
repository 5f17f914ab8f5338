/* SPDX-License-Identifier: GPL-2.0 */
/* tracepoint:bbr_acw:state - common BBRv1 fields (bbr1_trace_common.h), then
 * the variant's own.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM bbr_acw

#if !defined(_BBR_ACW_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _BBR_ACW_TRACE_H

#include <linux/tracepoint.h>
#include "bbr1_trace_common.h"

TRACE_EVENT(state,
	TP_PROTO(const struct sock *sk, const struct bbr1_tv *tv,
		 u32 alpha_x1000, u32 beta_x1000, u32 regime, u32 gain_changes),
	TP_ARGS(sk, tv, alpha_x1000, beta_x1000, regime, gain_changes),
	TP_STRUCT__entry(
		BBR1_TP_FIELDS
		__field(u32, alpha_x1000)
		__field(u32, beta_x1000)
		__field(u32, regime)
		__field(u32, gain_changes)
	),
	TP_fast_assign(
		BBR1_TP_ASSIGN
		__entry->alpha_x1000 = alpha_x1000;
		__entry->beta_x1000 = beta_x1000;
		__entry->regime = regime;
		__entry->gain_changes = gain_changes;
	),
	TP_printk(BBR1_TP_FMT " alpha_x1000=%u beta_x1000=%u regime=%u gain_changes=%u",
		  BBR1_TP_ARGS, __entry->alpha_x1000, __entry->beta_x1000,
		  __entry->regime, __entry->gain_changes)
);

#endif /* _BBR_ACW_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE bbr_acw_trace
#include <trace/define_trace.h>
