// SPDX-License-Identifier: MIT
/*
 * src/platform/vreal.c: the real libibverbs entry points.  Without
 * libibverbs in the process every call fails with ENOSYS and nothing is
 * loaded; with the double loaded RTLD_LOCAL (as NCCL does) the calls
 * reach it, at the versions the hook list names, and the table of the
 * other entry points comes from that same library.
 */
#include <errno.h>
#include <stdlib.h>
#include <infiniband/verbs.h>

#include "harness.h"
#include "doubles.h"

#include "platform/platform.h"

#undef ibv_reg_mr

static void *fv;	/* the double's handle */

static unsigned long calls(const char *name)
{
	return ((unsigned long (*)(const char *))double_sym(fv,
		"fakeverbs_calls"))(name);
}

static int live_mrs(void)
{
	return ((int (*)(void))double_sym(fv, "fakeverbs_live_mrs"))();
}

static struct ibv_pd *fv_pd(struct ibv_context **ctx_p)
{
	struct ibv_context *ctx =
		((struct ibv_context *(*)(void))double_sym(fv,
			"fakeverbs_open"))();
	struct ibv_pd *pd;

	CHECK(ctx != NULL);
	pd = ((struct ibv_pd *(*)(struct ibv_context *))double_sym(fv,
		"ibv_alloc_pd"))(ctx);
	CHECK(pd != NULL);
	*ctx_p = ctx;
	return pd;
}

static int libibverbs_in_process(void)
{
	void *h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);

	if (h)
		dlclose(h);
	return h != NULL;
}

/* No libibverbs: ENOSYS everywhere, as a NIC call that cannot be made. */
TEST(without_libibverbs_every_call_fails_with_enosys)
{
	struct ibv_mr bogus = { 0 };
	char buf[64];

	if (libibverbs_in_process())
		SKIP("libibverbs is in the process already");
	errno = 0;
	CHECK(gh_vreal_reg_mr(NULL, buf, sizeof(buf), 0) == NULL);
	CHECK_EQ(errno, ENOSYS);
	errno = 0;
	CHECK(gh_vreal_reg_mr_iova(NULL, buf, sizeof(buf), 4096, 0) == NULL);
	CHECK_EQ(errno, ENOSYS);
	/* iova2 missing: ibv_reg_mr when the iova is the address */
	errno = 0;
	CHECK(gh_vreal_reg_mr_iova2(NULL, buf, sizeof(buf),
				    (uintptr_t)buf, 0) == NULL);
	CHECK_EQ(errno, ENOSYS);
	errno = 0;
	CHECK(gh_vreal_reg_mr_iova2(NULL, buf, sizeof(buf), 4096, 0) == NULL);
	CHECK_EQ(errno, ENOSYS);
	errno = 0;
	CHECK(gh_vreal_reg_dmabuf_mr(NULL, 0, 4096, 0, 3, 0) == NULL);
	CHECK_EQ(errno, ENOSYS);
	CHECK_EQ(gh_vreal_dereg_mr(&bogus), -ENOSYS);
	CHECK_EQ(gh_vreal_dereg_mr_raw(&bogus), ENOSYS);
	errno = 0;
	CHECK_EQ(gh_vreal_rereg_mr(&bogus, 0, NULL, NULL, 0, 0),
		 IBV_REREG_MR_ERR_INPUT);
	CHECK_EQ(errno, ENOSYS);
	CHECK_EQ(gh_vreal_dealloc_pd(NULL), ENOSYS);
	CHECK_EQ(gh_vreal_close_device(NULL), -1);
	CHECK_EQ(gh_vreal_have("ibv_reg_mr"), 0);
	CHECK(gh_vreal_verbs() == NULL);
	/* none of it loaded libibverbs */
	CHECK(!libibverbs_in_process());
}

/*
 * The double loaded RTLD_LOCAL: a registration goes to its IBVERBS_1.1
 * ibv_reg_mr (not the 1.0 compat one), a deregistration's errno comes
 * back negative (raw: as libibverbs returned it).
 */
TEST(calls_reach_the_loaded_library_at_the_listed_versions)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr, bogus = { 0 };
	char *buf = aligned_alloc(4096, 3 * 4096);

	CHECK(buf != NULL);
	fv = double_open("fakeverbs/libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
	pd = fv_pd(&ctx);
	mr = gh_vreal_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr != NULL);
	CHECK(mr->addr == buf);
	CHECK_EQ(mr->length, 4096);
	CHECK(mr->pd == pd);
	CHECK_EQ(calls("ibv_reg_mr"), 1);
	CHECK_EQ(calls("ibv_reg_mr@IBVERBS_1.0"), 0);
	CHECK_EQ(live_mrs(), 1);
	CHECK_EQ(gh_vreal_dereg_mr(mr), 0);
	CHECK_EQ(calls("ibv_dereg_mr"), 1);
	CHECK_EQ(calls("ibv_dereg_mr@IBVERBS_1.0"), 0);
	CHECK_EQ(live_mrs(), 0);
	/* an MR the library does not know: EINVAL, negated or raw */
	CHECK_EQ(gh_vreal_dereg_mr(&bogus), -EINVAL);
	CHECK_EQ(gh_vreal_dereg_mr_raw(&bogus), EINVAL);
	/* iova2: a peer reaches the memory at the iova the caller gave */
	mr = gh_vreal_reg_mr_iova2(pd, buf + 4096, 4096, 0x10000,
				   IBV_ACCESS_LOCAL_WRITE |
				   IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr != NULL);
	CHECK(mr->addr == buf + 4096);
	CHECK_EQ(((int (*)(struct ibv_pd *, uint32_t, uint64_t, const void *,
			   size_t))double_sym(fv, "fakeverbs_write"))(
			 pd, mr->rkey, 0x10000 + 8, "iova", 5), 0);
	CHECK_STR(buf + 4096 + 8, "iova");
	CHECK_EQ(gh_vreal_dereg_mr_raw(mr), 0);
	mr = gh_vreal_reg_mr_iova(pd, buf, 8192, 0x20000,
				  IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr != NULL);
	CHECK_EQ(calls("ibv_reg_mr_iova"), 1);
	CHECK_EQ(gh_vreal_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL,
				   0, IBV_ACCESS_LOCAL_WRITE |
				   IBV_ACCESS_REMOTE_WRITE), 0);
	CHECK_EQ(calls("ibv_rereg_mr"), 1);
	CHECK_EQ(gh_vreal_dereg_mr(mr), 0);
	CHECK_EQ(live_mrs(), 0);
	CHECK_EQ(gh_vreal_dealloc_pd(pd), 0);
	CHECK_EQ(gh_vreal_close_device(ctx), 0);
	free(buf);
}

/* gh_vreal_have: a verbs row the library provides, nothing else. */
TEST(have_names_only_verbs_rows_the_library_has)
{
	fv = double_open("fakeverbs/libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
	CHECK_EQ(gh_vreal_have("ibv_reg_mr"), 1);
	CHECK_EQ(gh_vreal_have("ibv_reg_dmabuf_mr"), 1);
	CHECK_EQ(gh_vreal_have("cuMemAlloc_v2"), 0);	/* a driver row */
	CHECK_EQ(gh_vreal_have("ibv_no_such_call"), 0);
}

/* The table: the unhooked rows from the same library, at IBVERBS_1.1
 * where the windows asked for it; the hooked rows the calls' own. */
TEST(table_from_the_library_of_the_hooked_calls)
{
	const struct gh_verbs *t;
	int loaded = -1;

	fv = double_open("fakeverbs/libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
	t = gh_vreal_verbs();
	CHECK(t != NULL);
	CHECK(gh_vreal_verbs() == t);	/* filled once */
	CHECK((void *)t->get_device_list == dlsym(fv, "ibv_get_device_list"));
	CHECK((void *)t->alloc_pd == dlsym(fv, "ibv_alloc_pd"));
	CHECK((void *)t->query_device ==
	      dlvsym(fv, "ibv_query_device", "IBVERBS_1.1"));
	CHECK((void *)t->create_qp ==
	      dlvsym(fv, "ibv_create_qp", "IBVERBS_1.1"));
	CHECK((void *)t->dereg_mr ==
	      dlvsym(fv, "ibv_dereg_mr", "IBVERBS_1.1"));
	CHECK((void *)t->dereg_mr == gh_real_get(GH_SYM_ibv_dereg_mr));
	CHECK((void *)t->close_device ==
	      dlvsym(fv, "ibv_close_device", "IBVERBS_1.1"));
	CHECK((void *)t->reg_dmabuf_mr ==
	      dlvsym(fv, "ibv_reg_dmabuf_mr", "IBVERBS_1.12"));
	/* present already: gh_vreal_load loads nothing more */
	CHECK(gh_vreal_load(&loaded) == t);
	CHECK_EQ(loaded, 1);
}

/*
 * gh_vreal_load with no libibverbs in the process loads libibverbs.so.1
 * from the loader's path (this machine's, if any) and keeps it: the table
 * then comes from it; without one, NULL and *loaded_p 0.
 */
TEST(load_loads_and_keeps_the_default_library)
{
	const struct gh_verbs *t;
	int loaded = -1;
	void *h;

	if (libibverbs_in_process())
		SKIP("libibverbs is in the process already");
	t = gh_vreal_load(&loaded);
	h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
	CHECK_EQ(loaded, h != NULL);
	if (!h) {
		CHECK(t == NULL);
		return;
	}
	CHECK(t != NULL);
	CHECK((void *)t->get_device_list == dlsym(h, "ibv_get_device_list"));
	dlclose(h);
	/* kept: still there when the caller has closed its handle */
	CHECK(libibverbs_in_process());
}

TEST_MAIN()
