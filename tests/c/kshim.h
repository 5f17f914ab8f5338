/* The kernel types and helpers the modules' pure headers use, so that they compile in userspace
 * (the tests/c/<name>_test.c harnesses, built by build_c_harness in tests/c/build.py). Include
 * it before the header under test. Plain C: min() does not type-check its arguments as the
 * kernel's does. */
#ifndef KSHIM_H
#define KSHIM_H

#include <stdbool.h>
#include <stdint.h>

typedef uint8_t u8;
typedef int32_t s32;
typedef uint32_t u32;
typedef uint64_t u64;

#define U32_MAX UINT32_MAX

#define min(a, b) ((a) < (b) ? (a) : (b))
#define min_t(type, a, b) min((type)(a), (type)(b))
#define div_u64(n, d) ((n) / (d))
/* TCP sequence order (net/tcp.h): a comes before b, modulo 2^32 */
#define before(a, b) ((s32)((a) - (b)) < 0)

#endif /* KSHIM_H */
