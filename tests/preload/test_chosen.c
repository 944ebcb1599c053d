// SPDX-License-Identifier: MIT
/*
 * "Chosen" is what the registration cache runs.  GDRHOOK_BACKEND=auto on
 * the fake NIC that refuses DMA-BUF imports (FAKEVERBS_NO_DMABUF): auto
 * chooses dmabuf, the NIC-import probe at the first registration refuses
 * it and the registrations pass through (no nvidia-peermem here to fall
 * back on).  The info banner (GDRHOOK_LOG_LEVEL=info), gdrhook_info()'s
 * text and its JSON (backend.chosen_in_process) must then all name the
 * backend the cache runs, not auto's first choice; and when a second NIC
 * imports later, the backend the cache starts on then.
 */
#include <cuda.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "preload_util.h"
#include "verbs_load.h"

static char *tmp_path(char *buf, size_t n, const char *tag)
{
	snprintf(buf, n, "%s/gdrhook-test-%d-%s",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid(),
		 tag);
	unlink(buf);
	return buf;
}

/* gdrhook_info()'s report (flags) into buf, NUL-terminated. */
static int info_report(unsigned int flags, char *buf, size_t cap)
{
	char path[512];
	ssize_t n;
	int fd;

	tmp_path(path, sizeof(path), "chosen-info");
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	unlink(path);
	CHECK_EQ(gdrhook_info(fd, flags), 0);
	CHECK(lseek(fd, 0, SEEK_SET) == 0);
	n = read(fd, buf, cap - 1);
	close(fd);
	CHECK(n > 0);
	buf[n] = '\0';
	return 0;
}

/* The report's text and JSON both name backend as the one chosen here. */
static int info_names(const char *backend)
{
	static char buf[1 << 16];
	char want[128];

	CHECK_EQ(info_report(GDRHOOK_INFO_JSON, buf, sizeof(buf)), 0);
	snprintf(want, sizeof(want), "\"chosen_in_process\":\"%s\"", backend);
	if (!strstr(buf, want))
		TH_FAIL("JSON lacks %s: %.600s", want,
			strstr(buf, "\"backend\"") ? strstr(buf, "\"backend\"") : buf);
	CHECK_EQ(info_report(0, buf, sizeof(buf)), 0);
	snprintf(want, sizeof(want), "chosen in this process: %s (", backend);
	if (!strstr(buf, want))
		TH_FAIL("text lacks \"%s\": %.800s", want,
			strstr(buf, "pin backend:") ? strstr(buf, "pin backend:") : buf);
	return 0;
}

/* One registration of d in pd; 1: it passed through (libibverbs' own MR),
 * 0: the cache served it. */
static int reg_passed(struct ibv_pd *pd, CUdeviceptr d)
{
	struct ibv_mr *m = v.reg(pd, (void *)d, 4096, LW | RW);
	int own;

	CHECK(m != NULL);
	own = v.is_mr(m);
	CHECK_EQ(v.dereg(m), 0);
	return own;
}

/* Every NIC refuses DMA-BUF: the cache runs nothing, "none" is chosen. */
static int scenario_refused(void)
{
	struct ibv_pd *pd;
	CUdeviceptr d;

	verbs_load();	/* before the first CUDA call: a verbs program's banner */
	primary_ctx(0);
	pd = v.alloc_pd(v.open());
	d = dev_alloc(MiB);
	CHECK_EQ(reg_passed(pd, d), 1);
	CHECK_EQ(reg_passed(pd, d), 1);
	CHECK_EQ(v.calls("ibv_reg_dmabuf_mr"), 1);	/* the probe */
	CHECK_EQ(info_names("none"), 0);
	CU_OK(cuMemFree(d));
	return 0;
}

/* fakenic1 refuses, fakenic0 imports: none after fakenic1's first
 * registration, dmabuf once fakenic0's started the cache. */
static int scenario_second_nic(void)
{
	struct ibv_pd *pd1, *pd0;
	CUdeviceptr d;

	verbs_load();	/* before the first CUDA call: a verbs program's banner */
	primary_ctx(0);
	pd1 = v.alloc_pd(v.open_nic(1));
	pd0 = v.alloc_pd(v.open_nic(0));
	d = dev_alloc(MiB);
	CHECK_EQ(reg_passed(pd1, d), 1);
	CHECK_EQ(info_names("none"), 0);
	CHECK_EQ(reg_passed(pd0, d), 0);
	CHECK_EQ(info_names("dmabuf"), 0);
	CHECK_EQ(reg_passed(pd1, d), 1);	/* still passes through */
	CHECK_EQ(info_names("dmabuf"), 0);
	CU_OK(cuMemFree(d));
	return 0;
}

static const struct scenario scenarios[] = {
	{ "refused", scenario_refused },
	{ "second_nic", scenario_second_nic },
};

/* The banner's lines, in order; the last one's backend into last. */
static int banners(const char *path, char *last, size_t cap, int *n_p)
{
	char line[2048];
	FILE *f = fopen(path, "r");
	int n = 0;

	CHECK(f != NULL);
	last[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, ": pin backend ");

		if (!strstr(line, ": info: gdrhook ") || !p)
			continue;
		p += strlen(": pin backend ");
		snprintf(last, cap, "%.*s", (int)strcspn(p, " "), p);
		n++;
	}
	fclose(f);
	*n_p = n;
	return 0;
}

TEST(auto_fallback_banner_info_and_json_name_what_the_cache_runs)
{
	/* a NIC without windows: auto has no window-capable parent to
	 * prefer (test_windows) */
	const char *env[] = { "GDRHOOK_BACKEND=auto", "FAKEVERBS_NO_DMABUF=1",
			      "FAKEVERBS_PROVIDER=nomw", "GDRHOOK_LOG_LEVEL=info",
			      NULL };
	char err[512], last[64];
	int n;

	tmp_path(err, sizeof(err), "chosen-refused.err");
	CHECK_EQ(run_scenario_err("refused", env, err), 0);
	CHECK_EQ(banners(err, last, sizeof(last), &n), 0);
	if (strcmp(last, "none"))
		TH_FAIL("the last banner names \"%s\", the cache runs none (%d banner lines)",
			last, n);
	CHECK_EQ(count_in_file(err, "pin backend none (chosen; auto chose dmabuf, but ibv_reg_dmabuf_mr failed on the probe of NIC fakenic0"),
		 1);
	unlink(err);
}

TEST(auto_second_nic_imports_banner_follows_the_cache)
{
	const char *env[] = { "GDRHOOK_BACKEND=auto",
			      "FAKEVERBS_NO_DMABUF=fakenic1",
			      "FAKEVERBS_PROVIDER=nomw",
			      "GDRHOOK_LOG_LEVEL=info", NULL };
	char err[512], last[64];
	int n;

	tmp_path(err, sizeof(err), "chosen-second.err");
	CHECK_EQ(run_scenario_err("second_nic", env, err), 0);
	CHECK_EQ(banners(err, last, sizeof(last), &n), 0);
	if (strcmp(last, "dmabuf"))
		TH_FAIL("the last banner names \"%s\", the cache runs dmabuf (%d banner lines)",
			last, n);
	/* auto's dmabuf, then none after fakenic1, then dmabuf again */
	CHECK_EQ(n, 3);
	CHECK_EQ(count_in_file(err, "pin backend none (chosen; "), 1);
	CHECK_EQ(count_in_file(err, "pin backend dmabuf (chosen; "), 1);
	unlink(err);
}

SCENARIO_MAIN(scenarios)
