/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The draft's per-packet send-time state (P.lost, P.tx_in_flight) recovered
 * from ACKs, for a stock kernel that gives a module neither (approximations 1
 * and 2 in bbr3.c). Plain C on u32 so that tests/c/ can compile it on its own.
 *
 * Every packet carries P.delivered = C.delivered when it was sent, and the
 * kernel hands the newest ACKed packet's value to the module as
 * rs->prior_delivered. C.delivered only moves on ACKs, so a packet with
 * P.delivered = d was sent after the ACK that raised C.delivered to d and
 * before the next one. A ring of checkpoints, (C.delivered, C.lost) after an
 * ACK, taken about 8 times per flight (every cwnd / 8 packets delivered),
 * therefore brackets P.lost: the newest checkpoint at or below d was taken
 * before P was sent, the next one after. Within the bracket P.lost is
 * interpolated by delivered. RS.lost = C.lost - P.lost then counts the losses
 * of the interval since P was sent, as the draft's does, to within the losses
 * of one bracket (1/8 of a flight), not those of a whole round more.
 *
 * P.tx_in_flight (C.inflight just after P was sent) is the prior_in_flight
 * of the ACK that followed P's transmission; each checkpoint keeps the
 * largest prior_in_flight of the ACKs whose pre-ACK C.delivered fell in its
 * bracket, i.e. of the flights sent in that bracket.
 */
#ifndef _BBR3_SEND_HISTORY_H
#define _BBR3_SEND_HISTORY_H

#define BBR3_HIST_SLOTS		64	/* power of two; >= 4 flights at 8 each */
#define BBR3_HIST_PER_FLIGHT	8	/* checkpoints per cwnd of delivery */

struct bbr3_hist_slot {
	u32 delivered;	/* C.delivered after the ACK that opened the slot */
	u32 lost;	/* C.lost after that ACK */
	u32 inflight;	/* max prior_in_flight of ACKs of packets sent in it */
};

struct bbr3_hist {
	struct bbr3_hist_slot slot[BBR3_HIST_SLOTS];
	u32 newest;		/* index of the newest slot */
	u32 count;		/* slots in use, 1..BBR3_HIST_SLOTS */
	u32 last_delivered;	/* C.delivered after the previous ACK */
	u32 last_lost;		/* C.lost after the previous ACK */
};

static inline void bbr3_hist_reset(struct bbr3_hist *h, u32 delivered,
				   u32 lost)
{
	h->newest = 0;
	h->count = 1;
	h->slot[0].delivered = delivered;
	h->slot[0].lost = lost;
	h->slot[0].inflight = 0;
	h->last_delivered = delivered;
	h->last_lost = lost;
}

static inline struct bbr3_hist_slot *bbr3_hist_at(struct bbr3_hist *h,
						  u32 age)
{
	return &h->slot[(h->newest - age) & (BBR3_HIST_SLOTS - 1)];
}

/* age of the newest slot opened at or before delivered d; -1 if none is */
static inline int bbr3_hist_find(struct bbr3_hist *h, u32 d)
{
	u32 age;

	for (age = 0; age < h->count; age++)
		if ((s32)(d - bbr3_hist_at(h, age)->delivered) >= 0)
			return (int)age;
	return -1;
}

/*
 * One ACK, after the stack updated C.delivered and C.lost: credit its
 * prior_in_flight to the packets sent since the previous ACK, and open a
 * checkpoint once step packets were delivered since the last one.
 */
static inline void bbr3_hist_on_ack(struct bbr3_hist *h, u32 prior_in_flight,
				    u32 delivered, u32 lost, u32 step)
{
	int age = bbr3_hist_find(h, h->last_delivered);
	struct bbr3_hist_slot *s;

	if (age >= 0) {
		s = bbr3_hist_at(h, (u32)age);
		if (prior_in_flight > s->inflight)
			s->inflight = prior_in_flight;
	}
	if ((s32)(delivered - bbr3_hist_at(h, 0)->delivered) >= (s32)(step ? step : 1)) {
		h->newest = (h->newest + 1) & (BBR3_HIST_SLOTS - 1);
		if (h->count < BBR3_HIST_SLOTS)
			h->count++;
		s = bbr3_hist_at(h, 0);
		s->delivered = delivered;
		s->lost = lost;
		s->inflight = 0;
	}
	h->last_delivered = delivered;
	h->last_lost = lost;
}

/*
 * For a packet sent when C.delivered was d (rs->prior_delivered), after
 * bbr3_hist_on_ack() of the current ACK: *lost = C.lost - P.lost (RS.lost),
 * *tx_in_flight = P.tx_in_flight, 0 if no ACK followed its bracket yet.
 * Returns 0 if d is older than the ring: then *lost counts from the oldest
 * checkpoint (too high, never too low) and *tx_in_flight is 0.
 */
static inline int bbr3_hist_lookup(struct bbr3_hist *h, u32 d, u32 *lost,
				   u32 *tx_in_flight)
{
	int age = bbr3_hist_find(h, d);
	struct bbr3_hist_slot *c;
	u32 hi_delivered, hi_lost, span, p_lost;

	if (age < 0) {
		*lost = h->last_lost - bbr3_hist_at(h, h->count - 1)->lost;
		*tx_in_flight = 0;
		return 0;
	}
	c = bbr3_hist_at(h, (u32)age);
	if (age == 0) {		/* bracket still open: up to now */
		hi_delivered = h->last_delivered;
		hi_lost = h->last_lost;
	} else {
		hi_delivered = bbr3_hist_at(h, (u32)age - 1)->delivered;
		hi_lost = bbr3_hist_at(h, (u32)age - 1)->lost;
	}
	span = hi_delivered - c->delivered;
	p_lost = c->lost;
	if (span && (s32)(d - hi_delivered) < 0) {
		u64 part = (u64)(hi_lost - c->lost) * (d - c->delivered);

#ifdef __KERNEL__
		p_lost += (u32)div_u64(part, span);
#else
		p_lost += (u32)(part / span);
#endif
	} else if (span) {
		p_lost = hi_lost;
	}
	*lost = h->last_lost - p_lost;
	*tx_in_flight = c->inflight;
	return 1;
}

#endif /* _BBR3_SEND_HISTORY_H */
