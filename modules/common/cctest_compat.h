/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Where the kernels cctest's modules build against differ in the
 * congestion-control API, in one place (each Kbuild adds
 * -I$(src)/../common and asks the kernel's headers what they have).
 *
 * Restart from idle.  CA_EVENT_TX_START (the first transmission while
 * nothing is in flight) reaches tcp_congestion_ops.cwnd_event in 6.1 and
 * 6.12; Linux 7.2's tcp_ca_event() hands it to a hook of its own,
 * cwnd_event_tx_start(sk), and no longer to cwnd_event.  A module that
 * handles it in its cwnd_event function `fn` says
 *
 *   CCTEST_TX_START_HOOK_DEFINE(fn)   after fn, at file scope
 *   CCTEST_TX_START_HOOK(fn)          among its ops' initialisers
 *
 * With the hook, these define fn_tx_start(sk), which calls fn(sk,
 * CA_EVENT_TX_START), and fill .cwnd_event_tx_start with it; without it
 * both are empty and fn keeps receiving the event through cwnd_event.
 * Whether the kernel has the hook is read from its include/net/tcp.h by
 * the Kbuild (CCTEST_HAVE_CWND_EVENT_TX_START), not guessed from its
 * version number.
 *
 * cong_control gained (ack, flag) in 6.10; each module picks its
 * signature by LINUX_VERSION_CODE where it defines the function.
 */
#ifndef CCTEST_COMPAT_H
#define CCTEST_COMPAT_H

#include <net/tcp.h>

#ifdef CCTEST_HAVE_CWND_EVENT_TX_START
#define CCTEST_TX_START_HOOK_DEFINE(fn)					\
	static void fn##_tx_start(struct sock *sk)			\
	{								\
		fn(sk, CA_EVENT_TX_START);				\
	}
#define CCTEST_TX_START_HOOK(fn)	.cwnd_event_tx_start = fn##_tx_start,
#else
#define CCTEST_TX_START_HOOK_DEFINE(fn)
#define CCTEST_TX_START_HOOK(fn)
#endif

#endif /* CCTEST_COMPAT_H */
