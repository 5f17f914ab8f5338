/* Drives modules/bbr3/bbr3_pacing.h outside the kernel (tests/c/test_bbr3_pacing.py). Reads lines
 *   g <bw> <rate> <in_force> <full_bw_reached>    SetPacingRateWithGain on an ACK
 *   i <bw> <rate> <in_force> <full_bw_reached>    the restart from idle in ProbeBW
 * (rate: what bw x gain gives, in_force: the socket's rate) and prints the rate set after each. */
#include <stdio.h>
#include "kshim.h"
#include "bbr3_pacing.h"

int main(void)
{
	unsigned int bw, full;
	unsigned long rate, in_force;
	struct bbr3_pacing p;
	char op;

	while (scanf(" %c %u %lu %lu %u", &op, &bw, &rate, &in_force, &full) == 5) {
		p = (struct bbr3_pacing){ bw, rate, in_force, full };
		if (op == 'g')
			printf("%lu\n", bbr3_pacing_rate_choice(&p));
		else if (op == 'i')
			printf("%lu\n", bbr3_idle_restart_rate(&p));
		else
			return 2;
	}
	return feof(stdin) ? 0 : 2;
}
