// SPDX-License-Identifier: MIT
// A subscriber callback that throws a C++ exception out of a hooked
// cuMemFree, caught by the program (tests/preload/test_inflight.c): the
// hook it left must not stay open.  Exit 0: the thread's next
// allocation is tracked (its guard is down), a second thread's
// registration-free allocation is too, and gdrhook_unsubscribe returns.
#include <cuda.h>
#include <thread>

#include "gdrhook.h"

static void throw_cb(const struct gdrhook_event *ev, void *)
{
	if (ev->type == GDRHOOK_EVENT_FREE)
		throw 42;
}

static int tracked(CUdeviceptr p)
{
	struct gdrhook_range r;

	return !gdrhook_lookup(reinterpret_cast<void *>(p), 1, &r);
}

int main()
{
	CUcontext ctx;
	CUdeviceptr d, e;
	int caught = 0, h, other = 0;

	if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) ||
	    cuCtxSetCurrent(ctx) || cuMemAlloc(&d, 1 << 20))
		return 2;
	h = gdrhook_subscribe(GDRHOOK_EVENT_FREE, throw_cb, nullptr);
	if (h < 0)
		return 3;
	try {
		cuMemFree(d);
	} catch (int) {
		caught = 1;
	}
	if (!caught)
		return 4;
	if (cuMemAlloc(&e, 4096) || !tracked(e))
		return 5;
	std::thread t([&] {
		CUdeviceptr f;

		other = !cuCtxSetCurrent(ctx) && !cuMemAlloc(&f, 4096) &&
			tracked(f);
	});
	t.join();
	if (!other)
		return 6;
	if (gdrhook_unsubscribe(h))
		return 7;
	return cuMemFree(e) ? 8 : 0;
}
