// SPDX-License-Identifier: GPL-2.0
/*
 * Lab self-test module (tests/lab/selftest): shows that an out-of-tree module
 * built against the lab kernel's headers loads in the guest, and, with
 * warn=1, that a kernel warning makes tests/lab/lab fail the run.
 */
#include <linux/bug.h>
#include <linux/module.h>
#include <linux/printk.h>

static bool warn;
module_param(warn, bool, 0444);
MODULE_PARM_DESC(warn, "emit a kernel warning on load");

static int __init labhello_init(void)
{
	pr_info("labhello: loaded\n");
	WARN(warn, "labhello: warning requested with warn=1\n");
	return 0;
}

static void __exit labhello_exit(void)
{
	pr_info("labhello: unloaded\n");
}

module_init(labhello_init);
module_exit(labhello_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("gdrhook lab self-test module");
