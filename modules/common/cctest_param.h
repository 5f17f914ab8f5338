/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Range-checked module parameters, shared by every cctest module tree
 * (each Kbuild adds -I$(src)/../common).
 *
 * A parameter is a plain int or unsigned int that the congestion control
 * reads on its ACK path. Its kernel_param_ops check every value when it is
 * set (insmod or a write to /sys/module/<name>/parameters/<param>): a value
 * that does not parse, or lies outside the parameter's range, is refused
 * with the parser's error or -EINVAL and the old value stays, so no ACK
 * ever sees it. The range is written once, in the macro call, and ends the
 * parameter's description as "[range LO..HI]", or "[range 0 or LO..HI]"
 * where 0 means "unset"; cctest reads it there (modinfo, or the sources)
 * to refuse a scenario's value before anything runs.
 *
 *   CCTEST_PARAM_INT(name, default, lo, hi, "description")
 *   CCTEST_PARAM_INT_OR_0(name, default, lo, hi, "description")
 *   CCTEST_PARAM_UINT(name, default, lo, hi, "description")
 *   CCTEST_PARAM_UINT_OR_0(name, default, lo, hi, "description")
 *
 * each define `static int name` (or `static unsigned int name`) = default,
 * mode 0644. lo and hi must be integer literals, not macros: they are
 * stringified as written into the description.
 */
#ifndef CCTEST_PARAM_H
#define CCTEST_PARAM_H

#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

struct cctest_param_int {
	int *value;
	int lo, hi;
	bool zero_ok;		/* 0 is accepted as "unset" besides lo..hi */
};

struct cctest_param_uint {
	unsigned int *value;
	unsigned int lo, hi;
	bool zero_ok;		/* 0 is accepted as "unset" besides lo..hi */
};

static int cctest_param_int_set(const char *val, const struct kernel_param *kp)
{
	const struct cctest_param_int *p = kp->arg;
	int v;
	int err = kstrtoint(val, 0, &v);

	if (err)
		return err;
	if ((v < p->lo || v > p->hi) && !(p->zero_ok && v == 0))
		return -EINVAL;
	WRITE_ONCE(*p->value, v);
	return 0;
}

static int cctest_param_int_get(char *buf, const struct kernel_param *kp)
{
	const struct cctest_param_int *p = kp->arg;

	return scnprintf(buf, PAGE_SIZE, "%d\n", READ_ONCE(*p->value));
}

static int cctest_param_uint_set(const char *val, const struct kernel_param *kp)
{
	const struct cctest_param_uint *p = kp->arg;
	unsigned int v;
	int err = kstrtouint(val, 0, &v);

	if (err)
		return err;
	if ((v < p->lo || v > p->hi) && !(p->zero_ok && v == 0))
		return -EINVAL;
	WRITE_ONCE(*p->value, v);
	return 0;
}

static int cctest_param_uint_get(char *buf, const struct kernel_param *kp)
{
	const struct cctest_param_uint *p = kp->arg;

	return scnprintf(buf, PAGE_SIZE, "%u\n", READ_ONCE(*p->value));
}

/* A module may use only one of the two kinds: the other's ops stay unused. */
static const struct kernel_param_ops cctest_param_int_ops __maybe_unused = {
	.set = cctest_param_int_set,
	.get = cctest_param_int_get,
};

static const struct kernel_param_ops cctest_param_uint_ops __maybe_unused = {
	.set = cctest_param_uint_set,
	.get = cctest_param_uint_get,
};

/* kind: int or uint; range: the description's "[range ...]" text */
#define CCTEST_PARAM_DEFINE(type, kind, name, def, lo, hi, zero, range, desc) \
	static type name = def;						\
	static struct cctest_param_##kind cctest_param_##name = {	\
		&name, lo, hi, zero };					\
	module_param_cb(name, &cctest_param_##kind##_ops,		\
			&cctest_param_##name, 0644);			\
	MODULE_PARM_DESC(name, desc " [range " range "]")

#define CCTEST_PARAM_INT(name, def, lo, hi, desc)			\
	CCTEST_PARAM_DEFINE(int, int, name, def, lo, hi, false,	\
			    #lo ".." #hi, desc)
#define CCTEST_PARAM_INT_OR_0(name, def, lo, hi, desc)			\
	CCTEST_PARAM_DEFINE(int, int, name, def, lo, hi, true,		\
			    "0 or " #lo ".." #hi, desc)
#define CCTEST_PARAM_UINT(name, def, lo, hi, desc)			\
	CCTEST_PARAM_DEFINE(unsigned int, uint, name, def, lo, hi, false, \
			    #lo ".." #hi, desc)
#define CCTEST_PARAM_UINT_OR_0(name, def, lo, hi, desc)		\
	CCTEST_PARAM_DEFINE(unsigned int, uint, name, def, lo, hi, true, \
			    "0 or " #lo ".." #hi, desc)

#endif /* CCTEST_PARAM_H */
