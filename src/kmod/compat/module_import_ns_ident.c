// SPDX-License-Identifier: GPL-2.0
/* MODULE_IMPORT_NS() took an identifier until 6.13, a string literal since. */
#include <linux/module.h>

MODULE_IMPORT_NS(DMA_BUF);
