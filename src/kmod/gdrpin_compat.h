/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kernel API differences, decided by the compile-time probes in compat/
 * (their results are in the generated gdrpin_config.h), never by version
 * numbers. Where a newer kernel renamed or narrowed a call, gdrpin uses
 * the newer form and this file supplies it for older kernels.
 */
#ifndef GDRPIN_COMPAT_H
#define GDRPIN_COMPAT_H

#include <linux/eventfd.h>
#include <linux/mm.h>

#include "gdrpin_config.h"

#ifndef GDRPIN_HAVE_VM_FLAGS_SET
/* Before 6.3 vm_flags is a plain field, written under mmap_lock. */
static inline void vm_flags_set(struct vm_area_struct *vma, vm_flags_t flags)
{
	vma->vm_flags |= flags;
}

static inline void vm_flags_clear(struct vm_area_struct *vma, vm_flags_t flags)
{
	vma->vm_flags &= ~flags;
}
#endif

/* Add 1 to an eventfd's counter (the only count gdrpin ever signals). */
static inline void gdrpin_eventfd_signal(struct eventfd_ctx *ctx)
{
#ifdef GDRPIN_HAVE_EVENTFD_SIGNAL_NOCOUNT
	eventfd_signal(ctx);
#else
	eventfd_signal(ctx, 1);
#endif
}

/* The importer callback a moving exporter calls (compat/dmabuf_*.c). */
#ifdef GDRPIN_HAVE_DMABUF_INVALIDATE_MAPPINGS
#define GDRPIN_DMABUF_NOTIFY	invalidate_mappings
#else
#define GDRPIN_DMABUF_NOTIFY	move_notify
#endif

#endif /* GDRPIN_COMPAT_H */
