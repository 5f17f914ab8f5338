/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The draft's BBR.max_bw filter (UpdateMaxBw / AdvanceMaxBwFilter): the
 * maximum delivery rate over a window of two ProbeBW cycles, kept as one
 * slot per cycle. Plain C on u32 so that tests/c/ can compile it on its own.
 *
 * An empty slot (a cycle in which no rate sample was accepted, e.g. one
 * spent in ProbeRTT, or one whose only round-start ACK carried no rate
 * sample) does not advance the window: advancing would move the empty slot
 * into the window and drop the last real estimate, and a max_bw of 0 stops
 * pacing and pins cwnd at its floor. The window then waits for a cycle
 * that measured something.
 */
#ifndef _BBR3_BW_FILTER_H
#define _BBR3_BW_FILTER_H

struct bbr3_bw_filter {
	u32 prev;	/* max rate sample of the previous cycle */
	u32 cur;	/* max rate sample of the current cycle, 0 = none yet */
};

static inline u32 bbr3_bw_filter_max(const struct bbr3_bw_filter *f)
{
	return f->prev > f->cur ? f->prev : f->cur;
}

/* draft UpdateMaxBw(): one accepted rate sample of the current cycle */
static inline void bbr3_bw_filter_update(struct bbr3_bw_filter *f, u32 bw)
{
	if (bw > f->cur)
		f->cur = bw;
}

/* draft AdvanceMaxBwFilter(): a new cycle starts, unless this one was empty */
static inline void bbr3_bw_filter_advance(struct bbr3_bw_filter *f)
{
	if (!f->cur)
		return;
	f->prev = f->cur;
	f->cur = 0;
}

#endif /* _BBR3_BW_FILTER_H */
