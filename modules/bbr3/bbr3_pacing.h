/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Which pacing rate bbr3 sets: the draft's SetPacingRateWithGain() rule, on
 * every ACK and on the restart from idle.  Plain C so that tests/c/ can
 * compile it on its own; bbr3.c computes the rates it chooses between.
 *
 * Without a bandwidth estimate (bw = 0: before the first sample, or a bw_lo
 * cut to 0 by lossy rounds without samples) the rate in force stays: the
 * rate bw = 0 gives is 0, and a pacing rate of 0 would stall the flow.
 */
#ifndef _BBR3_PACING_H
#define _BBR3_PACING_H

struct bbr3_pacing {
	u32 bw;			/* the model's bw, 0 = no estimate */
	unsigned long rate;	/* bytes/s that bw x gain gives */
	unsigned long in_force;	/* the socket's pacing rate, bytes/s */
	bool full_bw_reached;	/* Startup found the pipe full */
};

/* draft SetPacingRateWithGain(): until the pipe is full the rate only rises. */
static inline unsigned long bbr3_pacing_rate_choice(const struct bbr3_pacing *p)
{
	if (!p->bw)
		return p->in_force;
	if (p->full_bw_reached || p->rate > p->in_force)
		return p->rate;
	return p->in_force;
}

/* draft HandleRestartFromIdle() in ProbeBW: pace at the estimated bw (gain
 * 1, in p->rate) by the same rule, so no estimate keeps the rate in force.
 */
static inline unsigned long bbr3_idle_restart_rate(const struct bbr3_pacing *p)
{
	return bbr3_pacing_rate_choice(p);
}

#endif /* _BBR3_PACING_H */
