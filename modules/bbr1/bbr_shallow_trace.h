/* SPDX-License-Identifier: GPL-2.0 */
/* tracepoint:bbr_shallow:state - the common BBRv1 fields only (bbr1_trace_common.h). */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM bbr_shallow

#if !defined(_BBR_SHALLOW_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _BBR_SHALLOW_TRACE_H

#include <linux/tracepoint.h>
#include "bbr1_trace_common.h"

TRACE_EVENT(state,
	TP_PROTO(const struct sock *sk, const struct bbr1_tv *tv),
	TP_ARGS(sk, tv),
	TP_STRUCT__entry(BBR1_TP_FIELDS),
	TP_fast_assign(BBR1_TP_ASSIGN),
	TP_printk(BBR1_TP_FMT, BBR1_TP_ARGS)
);

#endif /* _BBR_SHALLOW_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE bbr_shallow_trace
#include <trace/define_trace.h>
