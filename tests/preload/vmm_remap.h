/* SPDX-License-Identifier: MIT */
/*
 * Two VMM chunks of one reservation, the second unmapped and mapped
 * again with new memory by a thread, again and again (PyTorch's
 * expandable segments, freed and grown): test_races and test_inflight
 * register across the two while it runs.
 */
#ifndef GH_VMM_REMAP_H
#define GH_VMM_REMAP_H

#include <cuda.h>
#include <errno.h>
#include <time.h>

#include "preload_util.h"

struct remap {
	CUcontext ctx;
	CUdeviceptr va;
	size_t gran;
	CUmemAllocationProp prop;
	unsigned long cycles;	/* atomic: whole unmap + map cycles done */
	int stop;		/* atomic */
	int bad;
};

/* Device 0 may read and write [va, va + n) (the double maps VMM memory
 * PROT_NONE until then, as the device does). */
static inline CUresult set_rw(CUdeviceptr va, size_t n)
{
	CUmemAccessDesc d = { 0 };

	d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	d.location.id = 0;
	d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	return cuMemSetAccess(va, n, &d, 1);
}

static inline void *remap_thread(void *arg)
{
	struct remap *m = arg;
	struct timespec nap = { 0, 200 * 1000 };

	CU_OK(cuCtxSetCurrent(m->ctx));
	while (!__atomic_load_n(&m->stop, __ATOMIC_ACQUIRE)) {
		CUmemGenericAllocationHandle h;

		if (cuMemUnmap(m->va + m->gran, m->gran) ||
		    cuMemCreate(&h, m->gran, &m->prop, 0) ||
		    cuMemMap(m->va + m->gran, m->gran, 0, h, 0) ||
		    set_rw(m->va + m->gran, m->gran) ||
		    cuMemRelease(h)) {
			m->bad = 1;
			break;
		}
		__atomic_add_fetch(&m->cycles, 1, __ATOMIC_RELEASE);
		/* mapped and writable a while: a registration can be made
		 * across both chunks (over an unmapped or PROT_NONE page the
		 * NIC refuses it), however slow the build (TSan) */
		while (nanosleep(&nap, &nap) && errno == EINTR)
			;
	}
	return NULL;
}

#endif
