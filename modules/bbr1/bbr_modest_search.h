/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Modest BBR's window search (002 Alg. 1 with bbr_modest.c's readings) and
 * which losses judge it.  Plain C on u32 so that tests/c/ can compile it on
 * its own; bbr_modest.c feeds it the socket's counters on every ACK in
 * ProbeBW.
 *
 * A loss counts only if the lost packet was sent since the last mark (a new
 * cap, or the start of ProbeBW).  That holds for a search step and for the
 * entry into a search alike, so each loss is judged once: the losses of
 * packets sent under the last step's cap, reported after that step was
 * taken, were that step's to judge and must not start a new search.
 */
#ifndef _BBR_MODEST_SEARCH_H
#define _BBR_MODEST_SEARCH_H

enum modest_phase {		/* tracepoint field "phase" */
	MODEST_NONE = 0,	/* BBR as is */
	MODEST_SEARCH = 1,	/* bin_p = 1 */
	MODEST_LINEAR = 2,	/* add_p = 1 */
};

struct modest {
	u32 phase;		/* enum modest_phase */
	u32 last_cwnd;		/* cwnd when the search began (line 3) */
	u32 min_win;		/* packets (lines 4, 12) */
	u32 max_win;		/* packets (lines 5, 9) */
	u32 cap;		/* the algorithm's cwnd, packets */
	u32 target;		/* BBR's last cwnd target, packets */
	u32 cap_delivered;	/* C.delivered at the mark */
	u32 cap_seq;		/* snd_nxt at the mark */
	u32 cap_rounds;		/* round starts since the mark */
	u8 cap_lossy;		/* a packet sent since the mark was lost */
	u8 marked;		/* cap_delivered/cap_seq are set */
};

/* One ACK in ProbeBW: the socket's counters after it. */
struct modest_ack {
	s32 losses;		/* packets this ACK marked lost */
	u32 prior_delivered;	/* C.delivered when the ACKed packet was sent */
	bool prior_valid;	/* the ACK carries a rate sample */
	bool round_start;	/* the ACK starts a packet-timed round */
	u32 delivered;		/* C.delivered */
	u32 snd_una;
	u32 snd_nxt;
	u32 bbr_cwnd;		/* BBR's window before the loss */
};

/* Wmin x pkts, packets. */
static inline u32 modest_wmin_of(u32 pkts, u32 wmin_x1000)
{
	return div_u64((u64)pkts * wmin_x1000, 1000);
}

/* From now on only losses of packets sent from now count (the window in
 * force changed: a new cap, or ProbeBW began).
 */
static inline void modest_mark(struct modest *m, u32 delivered, u32 snd_nxt)
{
	m->cap_delivered = delivered;
	m->cap_seq = snd_nxt;
	m->cap_rounds = 0;
	m->cap_lossy = 0;
	m->marked = 1;
}

/* A new search cap: its judgement starts with the packets sent from now. */
static inline void modest_set_cap(struct modest *m, u32 cap,
				  const struct modest_ack *a)
{
	m->cap = cap;
	modest_mark(m, a->delivered, a->snd_nxt);
}

/* Per ACK: was a packet sent since the last mark lost? */
static inline void modest_note_loss(struct modest *m,
				    const struct modest_ack *a)
{
	if (a->losses <= 0 || !a->prior_valid)
		return;
	if (m->marked && before(a->prior_delivered, m->cap_delivered))
		return;		/* ACK of a packet sent before the mark */
	if (m->marked && before(a->snd_una, m->cap_seq))
		return;		/* a pre-mark hole: the loss may be one of those */
	m->cap_lossy = 1;
}

/* Lines 1-6: a search anchored on BBR's own, uncapped target (before BBR
 * computed one: its window before the loss).
 */
static inline void modest_enter_search(struct modest *m,
				       const struct modest_ack *a,
				       u32 wmin_x1000)
{
	u32 anchor = m->target ? m->target : a->bbr_cwnd;

	m->last_cwnd = anchor;
	m->min_win = modest_wmin_of(anchor, wmin_x1000);
	m->max_win = (anchor + m->min_win) / 2;
	modest_set_cap(m, m->max_win, a);
	m->phase = MODEST_SEARCH;
}

/* Lines 7-19, once the round of packets sent under the cap is ACKed. */
static inline void modest_search_step(struct modest *m,
				      const struct modest_ack *a, u32 smin)
{
	u32 mid = (m->max_win + m->min_win) / 2;

	if (m->cap_lossy) {
		m->max_win = mid;
		modest_set_cap(m, m->max_win, a);
	} else {
		m->min_win = mid;
		modest_set_cap(m, m->min_win, a);
	}
	if (m->max_win <= m->min_win + smin)
		m->phase = MODEST_LINEAR;
}

/* Lines 20-24, per ACK: back to last_cwnd, then the cap is released.  The
 * cap grows without a new mark: a loss of a packet sent under the linear
 * phase restarts the search.
 */
static inline void modest_linear_step(struct modest *m, u32 smin)
{
	m->cap = min(m->cap + smin, m->last_cwnd);
	if (m->cap >= m->last_cwnd)
		m->phase = MODEST_NONE;	/* done */
}

/* Algorithm 1 on one ACK in ProbeBW, its feedback judged once per round.
 * Returns whether the search moved (a step, or a new phase).
 */
static inline bool modest_on_ack(struct modest *m, const struct modest_ack *a,
				 u32 wmin_x1000, u32 smin)
{
	u32 phase = m->phase;
	bool step = false;

	modest_note_loss(m, a);
	if (a->round_start && m->phase != MODEST_SEARCH && m->cap_lossy) {
		modest_enter_search(m, a, wmin_x1000);
	} else if (a->round_start && m->phase == MODEST_SEARCH &&
		   ++m->cap_rounds >= 2) {
		modest_search_step(m, a, smin);
		step = true;
	}
	if (m->phase == MODEST_LINEAR)
		modest_linear_step(m, smin);
	return step || m->phase != phase;
}

#endif /* _BBR_MODEST_SEARCH_H */
