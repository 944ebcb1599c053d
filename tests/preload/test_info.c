// SPDX-License-Identifier: MIT
/*
 * gdrhook_info() and the banner (src/face/info*.c) as a preloaded
 * program reaches them.  tests/info/run checks the gdrhook-info command
 * (its views, its screen, no driver at all); here the facts are this
 * process's own: the version the library says, the double's driver and
 * GPUs, every route to a driver entry point reaching gdrhook's wrappers,
 * the configuration this process was started with and where each value
 * came from, whether this process's registry is trusted; the text's
 * first line is the JSON's verdict; unknown flags and a descriptor that
 * cannot be written are refused; and the one-line banner at the first
 * CUDA call names the version and the event log.
 */
#include <cuda.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>

/* Not every helper of the shared header is used here. */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "preload_util.h"

static void tmp_path(char *buf, size_t cap, const char *tag)
{
	snprintf(buf, cap, "%s/gdrhook-test-%d-info-%s",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid(),
		 tag);
	unlink(buf);
}

/* gdrhook_info(flags) into the file path; returns its result. */
static int info_to(const char *path, unsigned int flags)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	int rc;

	CHECK(fd >= 0);
	rc = gdrhook_info(fd, flags);
	close(fd);
	return rc;
}

/* Run python3 code on the JSON in path with argv[2..] = args; 0: its
 * assertions held. */
static int json_check(const char *path, const char *code, const char *a1,
		      const char *a2)
{
	char cmd[4096];

	snprintf(cmd, sizeof(cmd),
		 "python3 -c 'import json,sys\n"
		 "j=json.load(open(sys.argv[1]))\n"
		 "%s' '%s' '%s' '%s'", code, path, a1 ? a1 : "", a2 ? a2 : "");
	return system(cmd);
}

/* The file at path, NUL-terminated, in buf (at most cap - 1 bytes). */
static void slurp(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY);
	size_t n = 0;
	ssize_t r;

	CHECK(fd >= 0);
	while (n < cap - 1 && (r = read(fd, buf + n, cap - 1 - n)) > 0)
		n += (size_t)r;
	buf[n] = 0;
	close(fd);
}

/* How often what occurs in s. */
static int occurs(const char *s, const char *what)
{
	int n = 0;

	for (const char *p = strstr(s, what); p; p = strstr(p + 1, what))
		n++;
	return n;
}

static long file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) ? -1 : (long)st.st_size;
}

TEST(json_reports_this_process)
{
	char path[256], name[128];
	CUdevice dev;

	CU_OK(cuInit(0));
	CU_OK(cuDeviceGet(&dev, 0));
	CU_OK(cuDeviceGetName(name, sizeof(name), dev));
	tmp_path(path, sizeof(path), "json");
	CHECK_EQ(info_to(path, GDRHOOK_INFO_JSON), 0);
	CHECK_EQ(json_check(path,
		"v=j[\"version\"]\n"
		"assert v[\"library\"]==sys.argv[2], v\n"
		"assert v[\"api\"]==1, v\n"
		"assert j[\"cuda\"][\"error\"] is None, j[\"cuda\"]\n"
		"assert j[\"cuda\"][\"driver_version\"]==13000, j[\"cuda\"]\n"
		"assert j[\"cuda\"][\"gpus\"][0][\"name\"]==sys.argv[3]\n"
		"i=j[\"interception\"]\n"
		"assert i[\"complete\"] and not i[\"untrusted\"], i\n"
		"assert len(i[\"routes\"])>=4, i\n"
		"assert all(r[\"ours\"] is True for r in i[\"routes\"]), i\n"
		"assert j[\"verdict\"], j\n",
		gdrhook_version(), name), 0);
	unlink(path);
}

/* The untrusted registry of this process shows (a memory entry point
 * with no wrapper handed out by the resolver: see test_substitute). */
TEST(json_says_this_process_is_untrusted)
{
	CUdriverProcAddressQueryResult st;
	static char buf[1 << 16];
	char path[256];
	void *p = NULL;

	CU_OK(cuInit(0));
	CU_OK(cuGetProcAddress_v2("cuMemHostGetDevicePointer", &p, 3000,
				  CU_GET_PROC_ADDRESS_DEFAULT, &st));
	CHECK_EQ(gdrhook_trusted(), 0);
	tmp_path(path, sizeof(path), "untrusted");
	CHECK_EQ(info_to(path, GDRHOOK_INFO_JSON), 0);
	slurp(path, buf, sizeof(buf));
	CHECK(strstr(buf, "\"interception\":{\"complete\":false,") != NULL);
	CHECK_EQ(occurs(buf, "\"untrusted\":true"), 1);
	unlink(path);
}

/* The summary's first line is the verdict the JSON gives. */
TEST(text_first_line_is_the_json_verdict)
{
	static char buf[1 << 16];
	char text[256], json[256], line[1024];
	const char *v;
	FILE *f;

	tmp_path(text, sizeof(text), "text");
	tmp_path(json, sizeof(json), "verdict");
	CHECK_EQ(info_to(text, 0), 0);
	CHECK_EQ(info_to(json, GDRHOOK_INFO_JSON), 0);
	f = fopen(text, "r");
	CHECK(f != NULL);
	CHECK(fgets(line, sizeof(line), f) != NULL);
	fclose(f);
	line[strcspn(line, "\n")] = 0;
	CHECK(line[0] != 0);
	slurp(json, buf, sizeof(buf));
	v = strstr(buf, "{\"verdict\":\"");
	CHECK(v == buf);
	v += strlen("{\"verdict\":\"");
	/* (a wrapped verdict continues on the next lines: compare its start) */
	if (strncmp(v, line, strlen(line)))
		TH_FAIL("text begins \"%s\", JSON verdict \"%.200s\"", line, v);
	unlink(text);
	unlink(json);
}

TEST(bad_flags_and_unwritable_descriptors_are_refused)
{
	char path[256];
	int pfd[2];

	tmp_path(path, sizeof(path), "flags");
	CHECK_EQ(info_to(path, 0x100), -EINVAL);
	CHECK_EQ(info_to(path, GDRHOOK_INFO_JSON | 0x80000000u), -EINVAL);
	CHECK_EQ(file_size(path), 0);		/* nothing written */
	CHECK_EQ(gdrhook_info(-1, 0), -EBADF);
	CHECK(signal(SIGPIPE, SIG_IGN) != SIG_ERR);
	CHECK(pipe(pfd) == 0);
	close(pfd[0]);
	CHECK_EQ(gdrhook_info(pfd[1], GDRHOOK_INFO_ALL), -EPIPE);
	close(pfd[1]);
	unlink(path);
}

/* ---- scenarios run in a fresh process with their own GDRHOOK_* ---- */

/* The configuration view and JSON name what this process was given. */
static int scenario_config(void)
{
	static char buf[1 << 16];
	char path[256];

	tmp_path(path, sizeof(path), "config");
	if (info_to(path, GDRHOOK_INFO_JSON))
		return 2;
	slurp(path, buf, sizeof(buf));
	if (!strstr(buf, "{\"name\":\"GDRHOOK_BACKEND\",\"value\":\"none\","
			 "\"source\":\"environment\","))
		return 3;
	if (!strstr(buf, "{\"name\":\"GDRHOOK_VALIDATE\",\"value\":\"0\","
			 "\"source\":\"default\","))
		return 4;
	if (!strstr(buf, "\"backend\":{\"requested\":\"none\","))
		return 5;
	if (info_to(path, GDRHOOK_INFO_CONFIG))
		return 6;
	slurp(path, buf, sizeof(buf));
	unlink(path);
	return occurs(buf, "GDRHOOK_BACKEND") >= 1 ? 0 : 7;
}

/* One CUDA call: the banner is printed then. */
static int scenario_banner(void)
{
	CUdeviceptr p;

	primary_ctx(0);
	if (cuMemAlloc_v2(&p, 4096))
		return 2;
	return cuMemFree_v2(p) ? 3 : 0;
}

static const struct scenario scenarios[] = {
	{ "config", scenario_config },
	{ "banner", scenario_banner },
};

TEST(config_names_the_environment_it_was_given)
{
	const char *env[] = { "GDRHOOK_BACKEND=none", NULL };

	CHECK_EQ(run_scenario("config", env), 0);
}

TEST(banner_names_the_version_and_the_event_log)
{
	char err[256], trace[256], var[300], want[128];
	const char *off[] = { "GDRHOOK_LOG_LEVEL=info", NULL };
	const char *on[] = { "GDRHOOK_LOG_LEVEL=info", var, NULL };

	tmp_path(err, sizeof(err), "banner");
	snprintf(want, sizeof(want), "info: gdrhook %s: pin backend ",
		 gdrhook_version());
	CHECK_EQ(run_scenario_err("banner", off, err), 0);
	CHECK_EQ(count_in_file(err, want), 1);
	CHECK_EQ(count_in_file(err, "event log off (GDRHOOK_TRACE unset)"), 1);
	log_path(trace, sizeof(trace), "banner");
	snprintf(var, sizeof(var), "GDRHOOK_TRACE=%s", trace);
	CHECK_EQ(run_scenario_err("banner", on, err), 0);
	CHECK_EQ(count_in_file(err, want), 1);
	CHECK_EQ(count_in_file(err, trace), 1);
	CHECK_EQ(count_in_file(err, "event log off"), 0);
	unlink(err);
	unlink(trace);
}

SCENARIO_MAIN(scenarios)
