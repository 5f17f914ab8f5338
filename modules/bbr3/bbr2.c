// SPDX-License-Identifier: GPL-2.0
/*
 * bbr2 -- an APPROXIMATION of BBRv2 on the bbr3 code, for paper 003's
 * Table 1 (BBRv1, v2, v3, v3+ against CUBIC). It is not Google's BBRv2.
 *
 * Source of every difference: Google's BBRv2 alpha, net/ipv4/tcp_bbr2.c on
 * branch v2alpha of github.com/google/bbr (read at commit 0487ade5, "v2alpha"),
 * the code the IETF 104-110 ICCRG BBRv2 talks presented; where it agrees with
 * the draft bbr3.c follows (the v2 model already had bw_lo/inflight_lo,
 * inflight_hi with a 2 % loss threshold, beta 0.7, headroom 0.15, the
 * DOWN/CRUISE/REFILL/UP cycle, 2-3 s / 63-round probe timing, ProbeRTT every
 * 5 s at 0.5 BDP for 200 ms, a 3-round 1.25x full-bw test on max_bw).
 *
 * Differences from the draft, each set below or selected by BBR3_V2:
 *  constants (module parameters; bbr3's defaults in parentheses)
 *   startup_pacing_gain_x1000 2885  bbr_high_gain = 2/ln 2 (2.77)
 *   startup_cwnd_gain_x1000   2885  bbr_startup_cwnd_gain, Startup and
 *                                   Drain (DefaultCwndGain 2)
 *   drain_pacing_gain_x1000    347  bbr_drain_gain = 1/2.885 (0.5)
 *   probe_down_pacing_gain_x1000 750  bbr_pacing_gain[DOWN] = 3/4 (0.9)
 *   probe_up_cwnd_gain_x1000  2000  UP keeps bbr_cwnd_gain = 2 (2.25)
 *   up_exit_pif_gain_x1000    1250  bbr_bw_probe_pif_gain (0: the draft's
 *                                   bw-plateau exit, below)
 *   startup_full_loss_cnt        8  bbr_full_loss_cnt (6)
 *   drain_max_rounds             0  bbr_check_drain has no round limit (3)
 *  behaviour (BBR3_V2)
 *   - ProbeBW_UP ends, absent loss, once UP has lasted a min_rtt and
 *     inflight reaches 1.25 x BDP ("is_queuing" in bbr2_update_cycle_phase);
 *     the draft stays in UP until max_bw stops growing (IsTimeToGoDown),
 *     one of the changes Google made for v3.
 *   - No packet conservation in fast recovery (bbr_set_cwnd in tcp_bbr2.c
 *     has none): the loss response is bw_lo/inflight_lo per lossy round and
 *     inflight_hi; cwnd cut by an RTO is restored as the Loss state ends.
 *   - Startup's loss exit sets inflight_hi = Inflight(max_bw, 1)
 *     (bbr2_handle_queue_too_high_in_startup), not max(BDP, inflight_latest).
 *   - Undo of a spurious loss recovery restores the bounds and the saved
 *     cwnd (bbr2_undo_cwnd) and does not resume Startup or a probe.
 *   - An RTO zeroes full_bw and, outside a probe, starts inflight_lo at the
 *     cwnd before it (bbr2_set_state).
 *   - Entering CRUISE caps inflight_lo at inflight_hi
 *     (bbr2_start_bw_probe_cruise); UP drops inflight_hi growth credit
 *     while not cwnd-limited (bbr2_probe_inflight_hi_upward).
 *  not reproduced
 *   - ECN: v2alpha's response is off by default (bbr_ecn_enable = false)
 *     and needs DCTCP-style marks; as in bbr3 marks are ignored.
 *   - Per-packet loss (the skb_marked_lost hook, tx.in_flight/tx.lost in
 *     the skb) needs Google's kernel patches: the stock-kernel
 *     approximations of bbr3.c's header apply unchanged.
 *   - Pacing/EDT refinements (bbr_packets_in_net_at_edt), the TSO sizing,
 *     the fast path, extra_acked's 5-10 round window and 100 ms cap: bbr3's
 *     versions (C.inflight, the kernel's autosizing, a 10-round window).
 *   - loss_thresh is 5/256 = 1.95 % in tcp_bbr2.c, 2 % here (an integer
 *     percent); paper 003 says "3% packet loss tolerance", which the code
 *     does not have.
 *
 * This file only names the module and sets these; the algorithm is bbr3.c,
 * compiled into this module's single object.
 */
#define BBR3_NAME bbr2
#define BBR3_V2 1
#define BBR3_DEFAULT_STARTUP_ALPHA_X1000 4000	/* unused: the gain is set */
#define BBR3_DEFAULT_STARTUP_PACING_GAIN_X1000 2885
#define BBR3_DEFAULT_STARTUP_CWND_GAIN_X1000 2885
#define BBR3_DEFAULT_DRAIN_PACING_GAIN_X1000 347
#define BBR3_DEFAULT_PROBE_DOWN_PACING_GAIN_X1000 750
#define BBR3_DEFAULT_PROBE_UP_CWND_GAIN_X1000 2000
#define BBR3_DEFAULT_UP_EXIT_PIF_GAIN_X1000 1250
#define BBR3_DEFAULT_STARTUP_FULL_LOSS_CNT 8
#define BBR3_DEFAULT_DRAIN_MAX_ROUNDS 0
#define BBR3_DESCRIPTION "BBRv2 approximation: bbr3 (IETF draft) code with the constants and differing rules of Google's BBRv2 alpha tcp_bbr2.c (stock kernel: no per-packet loss, no ECN), not Google's BBRv2"

#include "bbr3.c"
