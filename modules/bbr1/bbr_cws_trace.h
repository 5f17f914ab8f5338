/* SPDX-License-Identifier: GPL-2.0 */
/* tracepoint:bbr_cws:state - common BBRv1 fields (bbr1_trace_common.h), then
 * the variant's own.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM bbr_cws

#if !defined(_BBR_CWS_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _BBR_CWS_TRACE_H

#include <linux/tracepoint.h>
#include "bbr1_trace_common.h"

TRACE_EVENT(state,
	TP_PROTO(const struct sock *sk, const struct bbr1_tv *tv,
		 u32 usf_x1000, u32 upper_cwnd, u32 in_conservation,
		 u32 rto_losses),
	TP_ARGS(sk, tv, usf_x1000, upper_cwnd, in_conservation, rto_losses),
	TP_STRUCT__entry(
		BBR1_TP_FIELDS
		__field(u32, usf_x1000)
		__field(u32, upper_cwnd)
		__field(u32, in_conservation)
		__field(u32, rto_losses)
	),
	TP_fast_assign(
		BBR1_TP_ASSIGN
		__entry->usf_x1000 = usf_x1000;
		__entry->upper_cwnd = upper_cwnd;
		__entry->in_conservation = in_conservation;
		__entry->rto_losses = rto_losses;
	),
	TP_printk(BBR1_TP_FMT " usf_x1000=%u upper_cwnd=%u in_conservation=%u rto_losses=%u",
		  BBR1_TP_ARGS, __entry->usf_x1000, __entry->upper_cwnd, __entry->in_conservation,
		  __entry->rto_losses)
);

#endif /* _BBR_CWS_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE bbr_cws_trace
#include <trace/define_trace.h>
