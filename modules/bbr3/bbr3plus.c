// SPDX-License-Identifier: GPL-2.0
/*
 * bbr3plus -- BBRv3+ (Chu and Chiang, "Improved BBRv3", Engineering
 * Proceedings 2025, Algorithm 1; seed paper 003, docs/papers.md).
 *
 * BBRv3 unchanged except the Startup pacing gain: alpha * (ln beta)^gamma
 * with alpha = 3, beta = 2, gamma = 1, i.e. 3 ln 2 = 2.08 instead of the
 * draft's 4 ln 2 = 2.77, for fairer sharing with CUBIC after Startup. The
 * paper's Algorithm 1 is a search over alpha, beta and gamma; the module
 * parameters startup_alpha_x1000, startup_beta_x1000, startup_gamma (and
 * startup_pacing_gain_x1000, which overrides them) let a sweep do that.
 *
 * This file only names the module and sets the default; the algorithm is
 * bbr3.c, compiled into this module's single object.
 */
#define BBR3_NAME bbr3plus
/* 3.000: alpha of 3 * (ln 2)^1 = 2.08, paper 003 Algorithm 1 (BBRv3+) */
#define BBR3_DEFAULT_STARTUP_ALPHA_X1000 3000
#define BBR3_DESCRIPTION "BBRv3+ (paper 003: Startup pacing gain 3 ln 2) on bbr3, i.e. the IETF draft's constants, not the Google BBRv3 the paper built on"

#include "bbr3.c"
