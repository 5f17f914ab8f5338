/* Drives modules/bbr3/bbr3_send_history.h outside the kernel (tests/c/test_bbr3_send_history.py).
 * Reads lines
 *   r <delivered> <lost>                              reset the ring
 *   a <prior_in_flight> <delivered> <lost> <step>     one ACK (after the stack's update)
 *   l <prior_delivered>                               look a packet up
 * and prints "<lost> <tx_in_flight> <found>" after each lookup. */
#include <stdio.h>
#include "kshim.h"
#include "bbr3_send_history.h"

int main(void)
{
	static struct bbr3_hist h;
	unsigned int a, b, c, d;
	u32 lost, tx;
	char op;

	bbr3_hist_reset(&h, 0, 0);
	while (scanf(" %c", &op) == 1) {
		if (op == 'r' && scanf("%u %u", &a, &b) == 2) {
			bbr3_hist_reset(&h, a, b);
		} else if (op == 'a' && scanf("%u %u %u %u", &a, &b, &c, &d) == 4) {
			bbr3_hist_on_ack(&h, a, b, c, d);
		} else if (op == 'l' && scanf("%u", &a) == 1) {
			int found = bbr3_hist_lookup(&h, a, &lost, &tx);

			printf("%u %u %d\n", lost, tx, found);
		} else {
			return 2;
		}
	}
	return 0;
}
