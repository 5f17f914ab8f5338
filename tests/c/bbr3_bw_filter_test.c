/* Drives modules/bbr3/bbr3_bw_filter.h outside the kernel (tests/c/test_bbr3_bw_filter.py).
 * Reads lines "u <bw>" (a rate sample), "a" (advance the window) and prints max_bw after each. */
#include <stdio.h>
#include "kshim.h"
#include "bbr3_bw_filter.h"

int main(void)
{
	struct bbr3_bw_filter f = {0, 0};
	char op;
	unsigned int bw;

	while (scanf(" %c", &op) == 1) {
		if (op == 'u' && scanf("%u", &bw) == 1)
			bbr3_bw_filter_update(&f, bw);
		else if (op == 'a')
			bbr3_bw_filter_advance(&f);
		else
			return 2;
		printf("%u\n", bbr3_bw_filter_max(&f));
	}
	return 0;
}
