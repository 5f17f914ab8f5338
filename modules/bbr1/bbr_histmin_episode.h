/* SPDX-License-Identifier: GPL-2.0 */
/*
 * bbr_histmin's ProbeRTT episodes and the rule that lets RTprop rise (the
 * decisions: bbr_histmin.c's header).  Plain C on u32 so that tests/c/ can
 * compile it on its own; bbr_histmin.c calls it from its hooks.
 *
 * An episode opens when ProbeRTT begins, and its minimum is over every RTT
 * sample of it, whether or not the ACK on which the RTprop filter expired
 * carried one (a delayed ACK, no sample, or one equal to RTprop does not
 * reach the expiry hook).  An episode without a sample is not judged: it
 * neither counts nor ends a streak.  An expiry without a ProbeRTT (in an
 * idle restart) opens nothing, so no stale minimum waits for the next one.
 */
#ifndef _BBR_HISTMIN_EPISODE_H
#define _BBR_HISTMIN_EPISODE_H

/* probe_min_us while an episode is open and has no sample yet */
#define HISTMIN_NO_SAMPLE U32_MAX

struct histmin {
	u32 probe_min_us;	/* lowest sample of this ProbeRTT (0 = none open) */
	u32 streak_min_us;	/* lowest episode minimum of the streak */
	u32 streak;		/* consecutive episodes above RTprop */
	u32 raised;		/* times RTprop was allowed to rise */
};

/* When an episode's minimum raises RTprop. */
struct histmin_rule {
	u32 agree;		/* K consecutive higher minima raise RTprop */
	u32 tolerance_pct;	/* minima up to this % above RTprop agree */
	u32 drastic_x1000;	/* one minimum this x RTprop raises it; <= 1000: off */
};

/* The RTprop filter expired on a fresh sample above RTprop: RTprop stays.
 * The episode opens when ProbeRTT begins (histmin_open), not here.
 */
static inline u32 histmin_expired(struct histmin *h, u32 rtprop_us,
				  u32 sample_us)
{
	return rtprop_us;
}

/* ProbeRTT begins: a new episode, no sample yet. */
static inline void histmin_open(struct histmin *h)
{
	h->probe_min_us = HISTMIN_NO_SAMPLE;
}

/* An ACK in ProbeRTT, rtt_us <= 0 if it carried no RTT sample. */
static inline void histmin_sample(struct histmin *h, long rtt_us)
{
	if (h->probe_min_us && rtt_us > 0)
		h->probe_min_us = min_t(u32, h->probe_min_us, rtt_us);
}

/* A sample below RTprop (which took it): the history holds. */
static inline void histmin_lowered(struct histmin *h)
{
	h->probe_min_us = 0;	/* this episode agrees with the history */
	h->streak = 0;
}

/* The episode's minimum m against RTprop: a route change, a higher value
 * K episodes agree on, or agreement with the history.
 */
static inline void histmin_judge(struct histmin *h, u32 *rtprop_us, u32 m,
				 const struct histmin_rule *r)
{
	u64 band = (u64)*rtprop_us * (100 + r->tolerance_pct);

	if (r->drastic_x1000 > 1000 &&
	    (u64)m * 1000 >= (u64)*rtprop_us * r->drastic_x1000) {
		*rtprop_us = m;		/* a route change */
		h->streak = 0;
		h->raised++;
	} else if ((u64)m * 100 > band) {
		h->streak_min_us = h->streak ? min(h->streak_min_us, m) : m;
		if (++h->streak >= r->agree) {
			*rtprop_us = h->streak_min_us;
			h->streak = 0;
			h->raised++;
		}
	} else {
		h->streak = 0;
	}
}

/* ProbeRTT ends: judge the episode, if one is open and it had a sample.
 * Returns whether it was judged.
 */
static inline bool histmin_close(struct histmin *h, u32 *rtprop_us,
				 const struct histmin_rule *r)
{
	u32 m = h->probe_min_us;

	h->probe_min_us = 0;
	if (!m || m == HISTMIN_NO_SAMPLE)
		return false;
	histmin_judge(h, rtprop_us, m, r);
	return true;
}

#endif /* _BBR_HISTMIN_EPISODE_H */
