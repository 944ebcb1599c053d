// SPDX-License-Identifier: MIT
/*
 * Audit mode (src/registry/audit.c) against the CUDA driver double: a
 * recorded range the driver agrees with passes silently; a different
 * base, size or buffer ID, a range the driver does not know, a VMM range
 * with nothing mapped and a pointer only the driver knows are each one
 * disagreement, counted and said with the entry point; host memory the
 * driver cannot answer for is not held against the registry; the sweep
 * checks every live range.
 */
#include <errno.h>
#include <stdint.h>

#include "harness.h"
#include "capture.h"
#include "doubles_linked.h"
#include "registry/registry.h"

#define MiB	(1ULL << 20)

static struct gh_range range_of(CUdeviceptr d, uint64_t size,
				unsigned int kind)
{
	struct gh_range r = { .base = d, .size = size, .kind = kind,
			      .dev = 0, .gen = 7 };

	if (kind != GDRHOOK_KIND_VMM)
		r.buffer_id = cu_buffer_id(d);
	return r;
}

/* Audit r as an allocation: what was said, "" if nothing. */
static const char *audit(const struct gh_range *r, const char *api)
{
	gh_log_level = GH_LOG_WARN;
	capture_begin();
	gh_audit_alloc(r, api);
	return capture_end();
}

TEST(agreeing_ranges_pass_silently)
{
	CUdeviceptr d, m;
	struct gh_range r;

	cu_primary(0);
	d = cu_alloc(MiB);
	CU_OK(cuMemAllocManaged(&m, 2 * MiB, CU_MEM_ATTACH_GLOBAL));
	r = range_of(d, MiB, GDRHOOK_KIND_DEVICE);
	CHECK_STR(audit(&r, "cuMemAlloc_v2"), "");
	r = range_of(m, 2 * MiB, GDRHOOK_KIND_MANAGED);
	CHECK_STR(audit(&r, "cuMemAllocManaged"), "");
	gh_audit_free(&r, "cuMemFree_v2");
	CHECK_EQ(gh_ctr.audit_checks, 3);
	CHECK_EQ(gh_ctr.audit_disagreements, 0);
}

TEST(different_base_size_or_buffer_id)
{
	CUdeviceptr d, m;
	struct gh_range r;

	cu_primary(0);
	d = cu_alloc(4 * MiB);
	CU_OK(cuMemAllocManaged(&m, 2 * MiB, CU_MEM_ATTACH_GLOBAL));

	r = range_of(d, 4 * MiB, GDRHOOK_KIND_DEVICE);
	r.base += 64 << 10;
	r.size -= 64 << 10;
	CHECK_EQ(capture_count(audit(&r, "cuMemAlloc_v2"),
			       "audit: cuMemAlloc_v2 0x"), 1);
	CHECK(strstr(cap_text, "driver reports a different base"));

	r = range_of(d, 8 * MiB, GDRHOOK_KIND_DEVICE);
	CHECK(strstr(audit(&r, "cuMemAlloc_v2"),
		     "driver reports a different size"));
	/* device memory the driver rounded up is fine, managed is exact */
	r = range_of(d, 3 * MiB, GDRHOOK_KIND_DEVICE);
	CHECK_STR(audit(&r, "cuMemAlloc_v2"), "");
	r = range_of(m, MiB, GDRHOOK_KIND_MANAGED);
	CHECK(strstr(audit(&r, "cuMemAllocManaged"),
		     "driver reports a different size"));

	r = range_of(d, 4 * MiB, GDRHOOK_KIND_DEVICE);
	r.buffer_id++;
	CHECK(strstr(audit(&r, "cuMemAlloc_v2"),
		     "buffer ID changed while the allocation was live"));
	/* no buffer ID recorded: not compared */
	r.buffer_id = 0;
	CHECK_STR(audit(&r, "cuMemAlloc_v2"), "");
	CHECK_EQ(gh_ctr.audit_disagreements, 4);
}

TEST(unknown_to_the_driver)
{
	struct gh_range r, h;
	CUdeviceptr d;
	static char host[8192];
	const char *out;

	cu_primary(0);
	d = cu_alloc(MiB);
	r = range_of(d, MiB, GDRHOOK_KIND_DEVICE);
	CU_OK(cuMemFree(d));
	gh_log_level = GH_LOG_WARN;
	capture_begin();
	gh_audit_free(&r, "cuMemFree_v2");
	out = capture_end();
	CHECK_EQ(capture_count(out, "audit: cuMemFree_v2 0x"), 1);
	CHECK(strstr(out, "driver does not know a live allocation"));
	CHECK_EQ(gh_ctr.audit_disagreements, 1);

	/* host memory: not every host range is queryable */
	h = (struct gh_range){ .base = (uint64_t)(uintptr_t)host,
			       .size = sizeof(host),
			       .kind = GDRHOOK_KIND_HOST_REGISTERED };
	CHECK_STR(audit(&h, "cuMemHostRegister_v2"), "");
	h.kind = GDRHOOK_KIND_HOST;
	CHECK_STR(audit(&h, "cuMemHostAlloc"), "");
	CHECK_EQ(gh_ctr.audit_disagreements, 1);
	CHECK_EQ(gh_ctr.audit_checks, 3);
}

TEST(vmm_range_checked_by_its_mapping)
{
	CUmemAllocationProp prop = {
		.type = CU_MEM_ALLOCATION_TYPE_PINNED,
		.location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
	};
	CUmemGenericAllocationHandle h;
	struct gh_range r;
	size_t gran = 0;
	CUdeviceptr va;

	cu_primary(0);
	CU_OK(cuMemGetAllocationGranularity(&gran, &prop,
					    CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	CU_OK(cuMemAddressReserve(&va, 2 * gran, 0, 0, 0));
	CU_OK(cuMemCreate(&h, gran, &prop, 0));
	CU_OK(cuMemMap(va, gran, 0, h, 0));
	r = range_of(va, gran, GDRHOOK_KIND_VMM);
	CHECK_STR(audit(&r, "cuMemMap"), "");	/* no access set: still */
	r = range_of(va + gran, gran, GDRHOOK_KIND_VMM);
	CHECK(strstr(audit(&r, "cuMemMap"),
		     "driver has no allocation mapped at a live VMM range"));
	CU_OK(cuMemUnmap(va, gran));
	r = range_of(va, gran, GDRHOOK_KIND_VMM);
	CHECK(strstr(audit(&r, "cuMemUnmap"),
		     "driver has no allocation mapped at a live VMM range"));
	CU_OK(cuMemRelease(h));
	CHECK_EQ(gh_ctr.audit_disagreements, 2);
}

TEST(lookup_of_what_only_the_driver_knows)
{
	static char host[4096];
	struct gh_range r;
	CUdeviceptr d;
	const char *out;

	cu_primary(0);
	d = cu_alloc(MiB);
	gh_log_level = GH_LOG_WARN;
	capture_begin();
	/* the registry said -ENOENT: the driver knows it */
	gh_audit_lookup(d + 100, -ENOENT, NULL);
	/* neither knows it */
	gh_audit_lookup((uint64_t)(uintptr_t)host, -ENOENT, NULL);
	/* the registry found it: checked as a range */
	r = range_of(d, MiB, GDRHOOK_KIND_DEVICE);
	gh_audit_lookup(d + 100, 0, &r);
	r.size = 2 * MiB;
	gh_audit_lookup(d, -ERANGE, &r);
	out = capture_end();
	CHECK_EQ(capture_count(out, "audit: gdrhook_lookup 0x"), 2);
	CHECK_EQ(capture_count(out, "driver knows an allocation the "
			       "registry does not"), 1);
	CHECK_EQ(capture_count(out, "driver reports a different size"), 1);
	CHECK_EQ(gh_ctr.lookups, 4);
	CHECK_EQ(gh_ctr.audit_checks, 4);
	CHECK_EQ(gh_ctr.audit_disagreements, 2);
}

TEST(sweep_checks_every_live_range)
{
	CUdeviceptr a, b, c;
	struct gh_range r;
	const char *out;

	cu_primary(0);
	CHECK_EQ(gh_registry_init(), 0);
	a = cu_alloc(MiB);
	b = cu_alloc(MiB);
	c = cu_alloc(MiB);
	r = range_of(a, MiB, GDRHOOK_KIND_DEVICE);
	CHECK_EQ(gh_registry_insert(&r, NULL), 0);
	r = range_of(b, MiB, GDRHOOK_KIND_DEVICE);
	CHECK_EQ(gh_registry_insert(&r, NULL), 0);
	r = range_of(c, MiB, GDRHOOK_KIND_DEVICE);
	CHECK_EQ(gh_registry_insert(&r, NULL), 0);
	/* freed behind the registry's back */
	CU_OK(cuMemFree(b));

	gh_log_level = GH_LOG_WARN;
	capture_begin();
	gh_audit_sweep();
	out = capture_end();
	CHECK_EQ(gh_ctr.audit_checks, 3);
	CHECK_EQ(gh_ctr.audit_disagreements, 1);
	CHECK_EQ(capture_count(out, "audit: exit 0x"), 1);
	CHECK_EQ(capture_count(out, "driver does not know a live allocation"),
		 1);
	CHECK_EQ(gh_registry_count(), 3);	/* a sweep only looks */
}

/* A thread with no context current gets no range for any pointer: the
 * sweep of a program that unset its context holds nothing against it. */
TEST(sweep_without_a_context_blames_nothing)
{
	CUdeviceptr a;
	struct gh_range r;
	const char *out;

	cu_primary(0);
	CHECK_EQ(gh_registry_init(), 0);
	a = cu_alloc(MiB);
	r = range_of(a, MiB, GDRHOOK_KIND_DEVICE);
	CHECK_EQ(gh_registry_insert(&r, NULL), 0);
	CU_OK(cuCtxSetCurrent(NULL));
	gh_log_level = GH_LOG_WARN;
	capture_begin();
	gh_audit_sweep();
	out = capture_end();
	CHECK_EQ(gh_ctr.audit_disagreements, 0);
	CHECK_STR(out, "");
}

TEST(report_counts_and_names_the_entry_point)
{
	const char *out;

	gh_log_level = GH_LOG_WARN;
	capture_begin();
	gh_audit_report("cuMemFreeAsync", 0x7f0000001000ULL, 4096, 3,
			"a reason");
	gh_audit_report(NULL, 0x7f0000002000ULL, 4096, 4, "no entry point");
	out = capture_end();
	CHECK_EQ(gh_ctr.audit_disagreements, 2);
	CHECK_EQ(capture_count(out, "audit: cuMemFreeAsync 0x7f0000001000: "
			       "a reason"), 1);
	CHECK_EQ(capture_count(out, "audit: ? 0x7f0000002000: "
			       "no entry point"), 1);
}

TEST_MAIN()
