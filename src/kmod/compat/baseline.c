// SPDX-License-Identifier: GPL-2.0
/*
 * Must always compile: if it does not, the toolchain or the kernel tree is
 * broken (wrong compiler, objtool without /proc, ...), and every other
 * probe's "no" would be a lie. gen-config.sh stops the build instead.
 */
#include <linux/module.h>

int gdrpin_probe(void);
int gdrpin_probe(void)
{
	return 0;
}
