/* Drives modules/bbr1/bbr_modest_search.h outside the kernel (tests/c/test_bbr_modest_search.py).
 * Reads lines
 *   p <delivered> <snd_nxt>        ProbeBW begins
 *   t <target>                     BBR computed a cwnd target
 *   a <round_start> <losses> <prior_valid> <prior_delivered> <delivered> <snd_una> <snd_nxt> <bbr_cwnd>
 *                                  one ACK in ProbeBW
 * and prints "<phase> <cap> <min_win> <max_win> <last_cwnd>" after each.
 * Wmin and Smin: argv[1], argv[2] (default 750 and 1, the module's defaults). */
#include <stdio.h>
#include <stdlib.h>
#include "kshim.h"
#include "bbr_modest_search.h"

static int read_ack(struct modest_ack *a)
{
	unsigned int r, v, pd, d, una, nxt, w;
	int losses;

	if (scanf("%u %d %u %u %u %u %u %u", &r, &losses, &v, &pd, &d, &una, &nxt, &w) != 8)
		return 0;
	*a = (struct modest_ack){ .losses = losses, .prior_delivered = pd, .prior_valid = v,
				  .round_start = r, .delivered = d, .snd_una = una,
				  .snd_nxt = nxt, .bbr_cwnd = w };
	return 1;
}

int main(int argc, char **argv)
{
	struct modest m = {0};
	struct modest_ack a;
	u32 wmin = argc > 1 ? atoi(argv[1]) : 750, smin = argc > 2 ? atoi(argv[2]) : 1;
	unsigned int x, y;
	char op;

	while (scanf(" %c", &op) == 1) {
		if (op == 'p' && scanf("%u %u", &x, &y) == 2)
			modest_mark(&m, x, y);
		else if (op == 't' && scanf("%u", &x) == 1)
			m.target = x;
		else if (op == 'a' && read_ack(&a))
			modest_on_ack(&m, &a, wmin, smin);
		else
			return 2;
		printf("%u %u %u %u %u\n", m.phase, m.cap, m.min_win, m.max_win, m.last_cwnd);
		fflush(stdout);	/* the test answers each line: the cap sets its window */
	}
	return 0;
}
