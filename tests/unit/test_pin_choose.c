// SPDX-License-Identifier: MIT
/*
 * The choice of the pin backend (src/pin/pin_choose.c) against the CUDA
 * driver double and the fake NIC: the verdicts of gh_pin_explain in
 * auto's order and for a backend asked by name, the decision made once,
 * the per-NIC DMA-BUF import probe of gh_pin_for_nic (a NIC that
 * imports, one that does not, two NICs that differ), exact exposure's
 * preference for window-capable peermem, and the record of what the
 * cache runs.  /dev/gdrpin is pointed at a path that does not exist.
 */
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"
#include "capture.h"
#include "doubles_linked.h"
#include "pin/pin.h"

#define MiB	(1ULL << 20)

/* nvidia-peermem on this machine: auto's fallback takes it. */
static int peermem_here(void)
{
	return !access("/sys/module/nvidia_peermem", F_OK) ||
	       !access("/sys/module/nv_peer_mem", F_OK);
}

/* A tracked allocation to register, on device 0. */
static struct gh_range gpu_range(CUcontext ctx)
{
	struct gh_range g = { .size = 4 * MiB, .gen = 1, .dev = 0,
			      .kind = GDRHOOK_KIND_DEVICE };

	g.base = cu_alloc(g.size);
	g.ctx = (uint64_t)(uintptr_t)ctx;
	return g;
}

static void setup(int backend)
{
	gh_gdrpin_dev = "/nonexistent/gdrpin";
	gh_pin_cfg.backend = backend;
	gh_log_level = GH_LOG_NONE;
}

/* -------------------------------------- moved from test_pin_gdrpin */

TEST(choose_gdrpin_without_device_is_none)
{
	gh_gdrpin_dev = "/nonexistent/gdrpin";
	gh_pin_cfg.backend = GH_CFG_BACKEND_GDRPIN;
	CHECK(gh_pin_choose(0) == &gh_pin_none);
}

TEST(choose_auto_without_anything_is_none)
{
	gh_gdrpin_dev = "/nonexistent/gdrpin";
	gh_pin_cfg.backend = GH_CFG_BACKEND_AUTO;
	CHECK(gh_pin_choose(0) != &gh_pin_gdrpin);
	/* the driver is loaded but not initialized: no dmabuf either */
	CHECK(gh_pin_decided() == (peermem_here() ? &gh_pin_peermem :
				   &gh_pin_none));
}

/* ------------------------------------------------------- verdicts */

TEST(explain_auto_takes_dmabuf_first)
{
	struct gh_pin_explanation x;

	setup(GH_CFG_BACKEND_AUTO);
	cu_primary(0);
	gh_pin_explain(0, 0, &x);
	CHECK_STR(x.requested, "auto");
	CHECK_EQ(x.chosen, GH_PIN_DMABUF);
	CHECK_EQ(x.probed[GH_PIN_DMABUF], 1);
	CHECK_EQ(x.usable[GH_PIN_DMABUF], 1);
	CHECK_STR(x.why[GH_PIN_DMABUF],
		  "device 0 exports DMA-BUF and libibverbs has ibv_reg_dmabuf_mr");
	/* the rest are not probed (no gdrpin context taken) */
	CHECK_EQ(x.probed[GH_PIN_PEERMEM] + x.probed[GH_PIN_GDRPIN] +
		 x.probed[GH_PIN_NONE], 0);
	CHECK_STR(x.why[GH_PIN_GDRPIN], "not probed: dmabuf comes first");
	CHECK_STR(x.reason, "auto: device 0 exports DMA-BUF and libibverbs "
		  "has ibv_reg_dmabuf_mr");
}

TEST(explain_all_probes_every_backend)
{
	struct gh_pin_explanation x;

	setup(GH_CFG_BACKEND_AUTO);
	cu_primary(0);
	gh_pin_explain(0, 1, &x);
	for (int b = 0; b < GH_PIN_NBACKENDS; b++)
		CHECK_EQ(x.probed[b], 1);
	CHECK_EQ(x.chosen, GH_PIN_DMABUF);
	CHECK_EQ(x.usable[GH_PIN_PEERMEM], peermem_here());
	CHECK_EQ(x.usable[GH_PIN_GDRPIN], 0);
	CHECK(strstr(x.why[GH_PIN_GDRPIN], "/nonexistent/gdrpin"));
	CHECK_EQ(x.usable[GH_PIN_NONE], 1);
	CHECK_STR(x.why[GH_PIN_NONE], "registrations pass through uncached");
}

TEST(explain_auto_before_cuinit)
{
	struct gh_pin_explanation x;

	setup(GH_CFG_BACKEND_AUTO);
	gh_pin_explain(-1, 0, &x);
	CHECK_EQ(x.usable[GH_PIN_DMABUF], 0);
	CHECK_STR(x.why[GH_PIN_DMABUF],
		  "the driver is not initialized yet (cuInit)");
	CHECK(x.chosen != GH_PIN_DMABUF && x.chosen != GH_PIN_GDRPIN);
	CHECK(strstr(x.reason, "auto: the driver is not initialized yet"));
}

TEST(explain_a_backend_asked_by_name)
{
	static const struct {
		int cfg;
		unsigned int b;
		const char *reason;
	} asked[] = {
		{ GH_CFG_BACKEND_DMABUF, GH_PIN_DMABUF, "GDRHOOK_BACKEND=dmabuf" },
		{ GH_CFG_BACKEND_PEERMEM, GH_PIN_PEERMEM, "GDRHOOK_BACKEND=peermem" },
		{ GH_CFG_BACKEND_NONE, GH_PIN_NONE, "GDRHOOK_BACKEND=none" },
	};
	struct gh_pin_explanation x;

	for (size_t i = 0; i < sizeof(asked) / sizeof(asked[0]); i++) {
		setup(asked[i].cfg);
		gh_pin_explain(0, 0, &x);
		/* taken as asked, nothing probed (no driver initialized) */
		CHECK_EQ(x.chosen, asked[i].b);
		CHECK_STR(x.reason, asked[i].reason);
		for (int b = 0; b < GH_PIN_NBACKENDS; b++)
			CHECK_EQ(x.probed[b], 0);
	}
	/* gdrpin is probed, alone, and refused with the reason */
	setup(GH_CFG_BACKEND_GDRPIN);
	gh_pin_explain(0, 0, &x);
	CHECK_EQ(x.chosen, GH_PIN_NONE);
	CHECK_EQ(x.probed[GH_PIN_GDRPIN], 1);
	CHECK_EQ(x.probed[GH_PIN_DMABUF] + x.probed[GH_PIN_PEERMEM], 0);
	CHECK(strstr(x.reason, "GDRHOOK_BACKEND=gdrpin, but gdrpin is "
		     "unavailable: "));
	CHECK(strstr(x.reason, "/nonexistent/gdrpin"));
}

TEST(backend_ops_by_number)
{
	CHECK(gh_pin_backend_ops(GH_PIN_DMABUF) == &gh_pin_dmabuf);
	CHECK(gh_pin_backend_ops(GH_PIN_PEERMEM) == &gh_pin_peermem);
	CHECK(gh_pin_backend_ops(GH_PIN_GDRPIN) == &gh_pin_gdrpin);
	CHECK(gh_pin_backend_ops(GH_PIN_NONE) == &gh_pin_none);
	CHECK(gh_pin_backend_ops(GH_PIN_NBACKENDS) == &gh_pin_none);
	CHECK_EQ(gh_pin_auto_fallback(),
		 peermem_here() ? GH_PIN_PEERMEM : GH_PIN_NONE);
}

TEST(choice_made_once_and_said)
{
	const char *out;

	setup(GH_CFG_BACKEND_AUTO);
	cu_primary(0);
	CHECK(gh_pin_decided() == NULL);
	gh_log_level = GH_LOG_INFO;
	capture_begin();
	CHECK(gh_pin_choose(0) == &gh_pin_dmabuf);
	/* asked again, with another setting: the same, not said again */
	gh_pin_cfg.backend = GH_CFG_BACKEND_NONE;
	CHECK(gh_pin_choose(0) == &gh_pin_dmabuf);
	out = capture_end();
	CHECK(gh_pin_decided() == &gh_pin_dmabuf);
	CHECK_EQ(capture_count(out, "pin backend: dmabuf (auto: device 0 "
			       "exports DMA-BUF"), 1);
	CHECK_EQ(capture_count(out, "pin backend"), 1);
}

/* ---------------------------------------------- the NIC-import probe */

TEST(nic_that_imports_gets_dmabuf_probed_once)
{
	struct ibv_pd *pd;
	struct gh_range g;
	const char *why = NULL;
	size_t live;

	setup(GH_CFG_BACKEND_AUTO);
	g = gpu_range(cu_primary(0));
	pd = nic_pd();
	live = fakecuda_live_count();
	CHECK(gh_pin_for_nic(&g, pd, 0) == &gh_pin_dmabuf);
	/* one export, one registration of one page, all undone */
	CHECK_EQ(fakecuda_calls("cuMemGetHandleForAddressRange"), 1);
	CHECK_EQ(fakeverbs_calls("ibv_reg_dmabuf_mr"), 1);
	CHECK_EQ(fakeverbs_live_mrs(), 0);
	CHECK_EQ(fakecuda_live_count(), live);	/* its buffer freed */
	/* known now: no second probe */
	CHECK(gh_pin_for_nic(&g, pd, 0) == &gh_pin_dmabuf);
	CHECK(gh_pin_for_nic(&g, ibv_alloc_pd(pd->context), 0) ==
	      &gh_pin_dmabuf);
	CHECK_EQ(fakeverbs_calls("ibv_reg_dmabuf_mr"), 1);

	/* what the cache runs, once it says */
	CHECK(gh_pin_chosen(NULL) == NULL);
	gh_pin_record(&gh_pin_dmabuf, NULL);
	CHECK(gh_pin_chosen(&why) == &gh_pin_dmabuf);
	CHECK(strstr(why, "NIC fakenic0 imported a probe DMA-BUF"));
}

TEST(nic_that_cannot_import_passes_through)
{
	struct ibv_pd *pd;
	struct gh_range g;
	const char *out;

	if (peermem_here())
		SKIP("nvidia-peermem is loaded: auto falls back to it");
	setenv("FAKEVERBS_NO_DMABUF", "1", 1);
	setup(GH_CFG_BACKEND_AUTO);
	g = gpu_range(cu_primary(0));
	pd = nic_pd();
	gh_log_level = GH_LOG_WARN;
	capture_begin();
	CHECK(gh_pin_for_nic(&g, pd, 0) == NULL);
	CHECK(gh_pin_for_nic(&g, pd, 0) == NULL);
	out = capture_end();
	CHECK_EQ(fakeverbs_calls("ibv_reg_dmabuf_mr"), 1);
	CHECK_EQ(capture_count(out, "auto chose dmabuf, but ibv_reg_dmabuf_mr "
			       "failed on the probe of NIC fakenic0"), 1);
	CHECK(strstr(out, "its registrations pass through uncached"));
	CHECK_EQ(fakeverbs_live_mrs(), 0);
}

TEST(nics_that_differ_each_get_their_answer)
{
	struct ibv_pd *pd0, *pd1;
	struct gh_range g;

	setenv("FAKEVERBS_NO_DMABUF", "fakenic1", 1);
	setup(GH_CFG_BACKEND_AUTO);
	g = gpu_range(cu_primary(0));
	pd0 = nic_pd();
	pd1 = ibv_alloc_pd(fakeverbs_open_nic(1));
	CHECK(pd1 != NULL);
	CHECK(gh_pin_for_nic(&g, pd0, 0) == &gh_pin_dmabuf);
	/* the cache has one backend: the NIC that cannot passes through */
	CHECK(gh_pin_for_nic(&g, pd1, 0) == NULL);
	CHECK(gh_pin_for_nic(&g, pd0, 0) == &gh_pin_dmabuf);
	CHECK(gh_pin_for_nic(&g, pd1, 0) == NULL);
	CHECK_EQ(fakeverbs_calls("ibv_reg_dmabuf_mr"), 2);
}

TEST(first_nic_refuses_second_imports)
{
	struct ibv_pd *pd0, *pd1;
	struct gh_range g;

	if (peermem_here())
		SKIP("nvidia-peermem is loaded: auto falls back to it");
	setenv("FAKEVERBS_NO_DMABUF", "fakenic0", 1);
	setup(GH_CFG_BACKEND_AUTO);
	g = gpu_range(cu_primary(0));
	pd0 = nic_pd();
	pd1 = ibv_alloc_pd(fakeverbs_open_nic(1));
	CHECK(gh_pin_for_nic(&g, pd0, 0) == NULL);
	CHECK(gh_pin_for_nic(&g, pd1, 0) == &gh_pin_dmabuf);
	CHECK(gh_pin_for_nic(&g, pd0, 0) == NULL);
}

TEST(backend_by_name_needs_no_probe)
{
	struct gh_range g;

	setup(GH_CFG_BACKEND_PEERMEM);
	g = gpu_range(cu_primary(0));
	CHECK(gh_pin_for_nic(&g, nic_pd(), 0) == &gh_pin_peermem);
	setup(GH_CFG_BACKEND_NONE);
	CHECK(gh_pin_for_nic(&g, nic_pd(), 0) == &gh_pin_peermem); /* once */
	CHECK_EQ(fakeverbs_calls("ibv_reg_dmabuf_mr") +
		 fakeverbs_calls("ibv_reg_mr_iova2"), 0);
}

TEST(none_by_name_passes_through)
{
	struct gh_range g;

	setup(GH_CFG_BACKEND_NONE);
	g = gpu_range(cu_primary(0));
	CHECK(gh_pin_for_nic(&g, nic_pd(), 1) == NULL);
	gh_pin_record(NULL, NULL);
	CHECK(gh_pin_chosen(NULL) == &gh_pin_none);
}

/* ------------------------------------ exact exposure and windows */

TEST(exact_takes_peermem_where_windows_and_a_peer_client)
{
	struct gh_range g;
	const char *why = NULL;

	setup(GH_CFG_BACKEND_AUTO);
	gh_pin_cfg.windows = 1;
	g = gpu_range(cu_primary(0));
	CHECK(gh_pin_for_nic(&g, nic_pd(), 1) == &gh_pin_peermem);
	/* asked by a plain registration of one page, not by an export */
	CHECK_EQ(fakeverbs_calls("ibv_reg_mr_iova2"), 1);
	CHECK_EQ(fakeverbs_calls("ibv_reg_dmabuf_mr"), 0);
	CHECK_EQ(fakeverbs_live_mrs(), 0);
	gh_pin_record(&gh_pin_peermem, NULL);
	CHECK(gh_pin_chosen(&why) == &gh_pin_peermem);
	CHECK(strstr(why, "exact exposure: NIC fakenic0 binds type-1 windows"));
}

TEST(exact_without_a_peer_client_stays_dmabuf)
{
	struct gh_range g;

	setenv("FAKEVERBS_PEERMEM", "0", 1);
	setup(GH_CFG_BACKEND_AUTO);
	gh_pin_cfg.windows = 1;
	g = gpu_range(cu_primary(0));
	CHECK(gh_pin_for_nic(&g, nic_pd(), 1) == &gh_pin_dmabuf);
	CHECK_EQ(fakeverbs_calls("ibv_reg_dmabuf_mr"), 1);
}

TEST(exact_on_a_nic_without_windows_stays_dmabuf)
{
	struct gh_range g;

	setenv("FAKEVERBS_PROVIDER", "nomw", 1);
	setup(GH_CFG_BACKEND_AUTO);
	gh_pin_cfg.windows = 1;
	g = gpu_range(cu_primary(0));
	CHECK(gh_pin_for_nic(&g, nic_pd(), 1) == &gh_pin_dmabuf);
	CHECK_EQ(fakeverbs_calls("ibv_reg_mr_iova2"), 0);
}

TEST(record_of_a_cache_that_differs)
{
	struct gh_range g;
	const char *why = NULL;

	setup(GH_CFG_BACKEND_AUTO);
	g = gpu_range(cu_primary(0));
	CHECK(gh_pin_for_nic(&g, nic_pd(), 0) == &gh_pin_dmabuf);
	gh_pin_record(&gh_pin_none, "the cache could not start");
	CHECK(gh_pin_chosen(&why) == &gh_pin_none);
	CHECK_STR(why, "the cache could not start");
	/* the first such record stands */
	gh_pin_record(&gh_pin_peermem, "another reason");
	CHECK(gh_pin_chosen(&why) == &gh_pin_none);
	CHECK_STR(why, "the cache could not start");
}

TEST_MAIN()
