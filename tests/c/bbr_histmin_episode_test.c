/* Drives modules/bbr1/bbr_histmin_episode.h outside the kernel (tests/c/test_bbr_histmin_episode.py),
 * with the calls bbr_histmin.c's hooks make. Reads lines
 *   x <sample_us>    the RTprop filter expired on a fresh, undelayed sample above RTprop
 *   b                ProbeRTT begins
 *   s <rtt_us>       an ACK in ProbeRTT (rtt_us <= 0: no RTT sample)
 *   l <rtt_us>       a sample outside the episode rule: if below RTprop, RTprop takes it
 *   e                ProbeRTT ends
 * and prints "<rtprop_us> <streak> <raised> <episode_min_us>" after each (the minimum as the
 * tracepoint reports it: 0 while no episode is open or it has no sample).
 * argv: RTprop at start, K, tolerance_pct, drastic_x1000 (defaults 10000 3 10 10000). */
#include <stdio.h>
#include <stdlib.h>
#include "kshim.h"
#include "bbr_histmin_episode.h"

static u32 arg(int argc, char **argv, int i, u32 dflt)
{
	return argc > i ? (u32)strtoul(argv[i], NULL, 10) : dflt;
}

/* the core's RTprop filter: a lower sample replaces RTprop at once */
static u32 lower(struct histmin *h, u32 rtprop, long rtt)
{
	if (rtt <= 0 || rtt >= rtprop)
		return rtprop;
	histmin_lowered(h);
	return rtt;
}

int main(int argc, char **argv)
{
	struct histmin h = {0};
	u32 rtprop = arg(argc, argv, 1, 10000);
	const struct histmin_rule rule = { arg(argc, argv, 2, 3), arg(argc, argv, 3, 10),
					   arg(argc, argv, 4, 10000) };
	long rtt;
	char op;

	while (scanf(" %c", &op) == 1) {
		if (op == 'x' && scanf("%ld", &rtt) == 1)
			rtprop = histmin_expired(&h, rtprop, rtt);
		else if (op == 'b')
			histmin_open(&h);
		else if (op == 's' && scanf("%ld", &rtt) == 1)
			histmin_sample(&h, rtt);
		else if (op == 'l' && scanf("%ld", &rtt) == 1)
			rtprop = lower(&h, rtprop, rtt);
		else if (op == 'e')
			histmin_close(&h, &rtprop, &rule);
		else
			return 2;
		printf("%u %u %u %u\n", rtprop, h.streak, h.raised,
		       h.probe_min_us == HISTMIN_NO_SAMPLE ? 0 : h.probe_min_us);
	}
	return 0;
}
