// SPDX-License-Identifier: MIT
/*
 * Bad GDRHOOK_* values under LD_PRELOAD: each is said once on stderr, with
 * what would have been accepted, and the default is used.
 *  - GDRHOOK_LIBCUDA naming a library that is not there, or one that is
 *    not a CUDA driver: one warning saying what was asked, why it was
 *    refused and that libcuda.so.1 is used; hooked calls then work.
 *  - booleans, sizes, levels and words: the warning lists the accepted
 *    values or forms, and echoes the value as written.
 *  - old names (GDRHOOK_LOG, _LOG_BUFFER, _LOG_MODE): read as the new
 *    ones with one deprecation line; the new name wins when both are set;
 *    gdrhook-info -c names the old name a value came from.
 *  - an unknown name near a known one: "did you mean".
 *  - a bad escape in a file name template is named, with the escapes.
 *  - the diagnostics: GDRHOOK_LOG_FILE with %h and %p, the prefix
 *    gdrhook[host:pid:tid], and debug lines for each decision.
 */
#include <cuda.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/utsname.h>

/* Not every helper of the shared header is used here. */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "preload_util.h"
#include "verbs_load.h"

/* Lines of path containing every fragment (stderr here, not a log). */
#define ERR_COUNT(path, ...) LOG_COUNT(path, __VA_ARGS__)

static char *err_path(char *buf, size_t n, const char *tag)
{
	snprintf(buf, n, "%s/gdrhook-test-%d-%s.err",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid(),
		 tag);
	return buf;
}

/* Hooked calls work and are tracked. */
static int scenario_alloc(void)
{
	CUdeviceptr p;

	primary_ctx(0);
	CU_OK(cuMemAlloc_v2(&p, 1 << 20));
	CHECK_EQ(tracked(p, NULL), 0);
	CU_OK(cuMemFree_v2(p));
	CHECK_EQ(tracked(p, NULL), -ENOENT);
	CHECK_EQ(gdrhook_trusted(), 1);
	return 0;
}

/* The configuration as gdrhook-info -c prints it, on stderr. */
static int scenario_info_config(void)
{
	CHECK_EQ(scenario_alloc(), 0);
	CHECK_EQ(gdrhook_info(2, GDRHOOK_INFO_CONFIG), 0);
	return 0;
}

/* Registrations of each kind: a miss, a hit, host memory. */
static int scenario_regs(void)
{
	struct ibv_context *ctx;
	struct ibv_mr *a, *b, *h;
	struct ibv_pd *pd;
	static char host[4096];
	CUdeviceptr d;

	primary_ctx(0);
	verbs_load();
	ctx = v.open();
	pd = v.alloc_pd(ctx);
	d = dev_alloc(4 * MiB);
	a = v.reg(pd, (void *)d, MiB, LW);
	b = v.reg(pd, (void *)(d + MiB), MiB, LW);
	h = v.reg(pd, host, sizeof(host), LW);
	CHECK(a && b && h);
	CHECK_EQ(v.dereg(a), 0);
	CHECK_EQ(v.dereg(b), 0);
	CHECK_EQ(v.dereg(h), 0);
	CU_OK(cuMemFree_v2(d));
	return 0;
}

static const struct scenario scenarios[] = {
	{ "alloc", scenario_alloc },
	{ "info_config", scenario_info_config },
	{ "regs", scenario_regs },
};

/* A fresh directory for a case's files; removed with rm_tree. */
static char *tmp_dir(char *buf, size_t n)
{
	snprintf(buf, n, "%s/gdrhook-cfg.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	CHECK(mkdtemp(buf));
	return buf;
}

static void rm_tree(const char *dir)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK_EQ(system(cmd), 0);
}

static int file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) ? -1 : (int)st.st_size;
}

TEST(libcuda_missing_warns_and_uses_default)
{
	static const char *const env[] = {
		"GDRHOOK_LIBCUDA=/nonexistent/libcuda.so.1", NULL
	};
	char err[256];

	err_path(err, sizeof(err), "missing");
	CHECK_EQ(run_scenario_err("alloc", env, err), 0);
	CHECK_EQ(ERR_COUNT(err, "GDRHOOK_LIBCUDA=/nonexistent/libcuda.so.1",
			   "refused", "using the default libcuda.so.1"), 1);
	CHECK_EQ(ERR_COUNT(err, "libcuda"), 1);
	unlink(err);
}

TEST(libcuda_not_a_driver_warns_and_uses_default)
{
	static const char *const env[] = { "GDRHOOK_LIBCUDA=libm.so.6", NULL };
	char err[256];

	err_path(err, sizeof(err), "notdrv");
	CHECK_EQ(run_scenario_err("alloc", env, err), 0);
	CHECK_EQ(ERR_COUNT(err, "GDRHOOK_LIBCUDA=libm.so.6", "refused",
			   "not a CUDA driver", "using the default libcuda.so.1"),
		 1);
	CHECK_EQ(ERR_COUNT(err, "libcuda"), 1);
	unlink(err);
}

/* Every kind of value: the warning says what would have been taken. */
TEST(bad_values_list_what_is_accepted)
{
	static const char *const env[] = {
		"GDRHOOK_STATS=maybe",
		"GDRHOOK_TRACE_BUFFER=12q",
		"GDRHOOK_CACHE_MAX_SIZE=lots",
		"GDRHOOK_PIN_WHOLE_MAX=99999999999999999999",
		"GDRHOOK_LOG_LEVEL=loud",
		"GDRHOOK_TRACE_MODE=sometimes",
		NULL
	};
	char err[256];

	err_path(err, sizeof(err), "values");
	CHECK_EQ(run_scenario_err("alloc", env, err), 0);
	CHECK_EQ(ERR_COUNT(err, "bad value \"maybe\" for GDRHOOK_STATS",
			   "1, y, yes, on, true, 0, n, no, off, false",
			   "using \"0\""), 1);
	CHECK_EQ(ERR_COUNT(err, "bad value \"12q\" for GDRHOOK_TRACE_BUFFER",
			   "whole number", "k, m or g", "using \"12m\""), 1);
	CHECK_EQ(ERR_COUNT(err, "bad value \"lots\" for GDRHOOK_CACHE_MAX_SIZE",
			   "k, m or g", "inf"), 1);
	CHECK_EQ(ERR_COUNT(err, "GDRHOOK_PIN_WHOLE_MAX", "too large",
			   "k, m or g"), 1);
	CHECK_EQ(ERR_COUNT(err, "bad value \"loud\" for GDRHOOK_LOG_LEVEL",
			   "none, error, warn", "debug", "0, 1, 2, 3, 4"), 1);
	CHECK_EQ(ERR_COUNT(err, "bad value \"sometimes\" for GDRHOOK_TRACE_MODE",
			   "one of: drop, block"), 1);
	CHECK_EQ(ERR_COUNT(err, "not understood"), 0);
	unlink(err);
}

/* The old names still work, each with one line saying so. */
TEST(old_names_read_with_one_deprecation_line)
{
	char dir[256], trace[320], e1[400], err[320];

	tmp_dir(dir, sizeof(dir));
	snprintf(trace, sizeof(trace), "%s/old.jsonl", dir);
	snprintf(e1, sizeof(e1), "GDRHOOK_LOG=%s", trace);
	snprintf(err, sizeof(err), "%s/err", dir);
	{
		const char *const env[] = { e1, "GDRHOOK_LOG_BUFFER=48k",
					    "GDRHOOK_LOG_MODE=block", NULL };

		CHECK_EQ(run_scenario_err("alloc", env, err), 0);
	}
	CHECK(file_size(trace) > 0);	/* the trace was written */
	CHECK_EQ(ERR_COUNT(err, "warning: deprecated variable", e1,
			   "read as GDRHOOK_TRACE, its new name"), 1);
	CHECK_EQ(ERR_COUNT(err, "deprecated variable GDRHOOK_LOG_BUFFER=48k",
			   "read as GDRHOOK_TRACE_BUFFER"), 1);
	CHECK_EQ(ERR_COUNT(err, "deprecated variable GDRHOOK_LOG_MODE=block",
			   "read as GDRHOOK_TRACE_MODE"), 1);
	CHECK_EQ(ERR_COUNT(err, "gdrhook["), 3);	/* nothing else */
	CHECK_EQ(LOG_COUNT(trace, "\"mode\":\"block\""), 1);
	rm_tree(dir);
}

/* Both names set: the new one is used, and the old one said ignored. */
TEST(new_name_wins_and_that_is_said)
{
	char dir[256], a[320], b[320], ea[400], eb[400], err[320];

	tmp_dir(dir, sizeof(dir));
	snprintf(a, sizeof(a), "%s/old.jsonl", dir);
	snprintf(b, sizeof(b), "%s/new.jsonl", dir);
	snprintf(ea, sizeof(ea), "GDRHOOK_LOG=%s", a);
	snprintf(eb, sizeof(eb), "GDRHOOK_TRACE=%s", b);
	snprintf(err, sizeof(err), "%s/err", dir);
	{
		const char *const env[] = { ea, eb, "GDRHOOK_LOG_MODE=bogus",
					    "GDRHOOK_TRACE_MODE=drop", NULL };

		CHECK_EQ(run_scenario_err("alloc", env, err), 0);
	}
	CHECK_EQ(file_size(a), -1);
	CHECK(file_size(b) > 0);
	CHECK_EQ(ERR_COUNT(err, "deprecated variable", ea, "ignored", eb,
			   "is set too and wins"), 1);
	/* the shadowed old value is not even parsed */
	CHECK_EQ(ERR_COUNT(err, "deprecated variable GDRHOOK_LOG_MODE=bogus ignored",
			   "GDRHOOK_TRACE_MODE=drop is set too and wins"), 1);
	CHECK_EQ(ERR_COUNT(err, "bad value"), 0);
	rm_tree(dir);
}

/* A bad value under an old name is reported under that name. */
TEST(bad_value_under_an_old_name_names_it)
{
	static const char *const env[] = { "GDRHOOK_LOG_BUFFER=lots", NULL };
	char err[256];

	err_path(err, sizeof(err), "oldbad");
	CHECK_EQ(run_scenario_err("alloc", env, err), 0);
	CHECK_EQ(ERR_COUNT(err, "bad value \"lots\" for GDRHOOK_LOG_BUFFER",
			   "using \"12m\""), 1);
	CHECK_EQ(ERR_COUNT(err, "deprecated variable GDRHOOK_LOG_BUFFER=lots"), 1);
	unlink(err);
}

/* A near miss gets the name it probably meant; a far one none. */
TEST(unknown_names_get_did_you_mean)
{
	static const char *const env[] = {
		"GDRHOOK_LOG_LEVL=info",	/* one letter off */
		"GDRHOOK_BAKCEND=dmabuf",	/* two swapped */
		"GDRHOOK_log_file=x",		/* case */
		"GDRHOOK_MAX_SIZE=1g",		/* the last words */
		"GDRHOOK_LOG_BUFER=1m",		/* an old name, misspelt */
		"GDRHOOK_ZZZZZZ=1",		/* nothing like it */
		NULL
	};
	char err[256];

	err_path(err, sizeof(err), "dym");
	CHECK_EQ(run_scenario_err("alloc", env, err), 0);
	CHECK_EQ(ERR_COUNT(err, "unknown variable ignored: GDRHOOK_LOG_LEVL=info (did you mean GDRHOOK_LOG_LEVEL?)"), 1);
	CHECK_EQ(ERR_COUNT(err, "unknown variable ignored: GDRHOOK_BAKCEND=dmabuf (did you mean GDRHOOK_BACKEND?)"), 1);
	CHECK_EQ(ERR_COUNT(err, "unknown variable ignored: GDRHOOK_log_file=x (did you mean GDRHOOK_LOG_FILE?)"), 1);
	CHECK_EQ(ERR_COUNT(err, "unknown variable ignored: GDRHOOK_MAX_SIZE=1g (did you mean GDRHOOK_CACHE_MAX_SIZE?)"), 1);
	CHECK_EQ(ERR_COUNT(err, "unknown variable ignored: GDRHOOK_LOG_BUFER=1m (did you mean GDRHOOK_TRACE_BUFFER?)"), 1);
	CHECK_EQ(ERR_COUNT(err, "unknown variable ignored: GDRHOOK_ZZZZZZ=1"), 1);
	CHECK_EQ(ERR_COUNT(err, "GDRHOOK_ZZZZZZ=1 (did you mean"), 0);
	unlink(err);
}

/* A bad escape in either template is named, with the escapes. */
TEST(bad_escape_is_named_with_the_escapes)
{
	static const char *const env[] = {
		"GDRHOOK_TRACE=/tmp/t.%q.jsonl", "GDRHOOK_LOG_FILE=d.%h.%", NULL
	};
	char err[256];

	err_path(err, sizeof(err), "esc");
	CHECK_EQ(run_scenario_err("alloc", env, err), 0);
	CHECK_EQ(ERR_COUNT(err, "bad value \"/tmp/t.%q.jsonl\" for GDRHOOK_TRACE: unknown escape \"%q\"",
			   "(the escapes: %p the pid, %h the host name, %% a percent sign)",
			   "left unset"), 1);
	CHECK_EQ(ERR_COUNT(err, "bad value \"d.%h.%\" for GDRHOOK_LOG_FILE: unknown escape \"%\"",
			   "%p the pid"), 1);
	CHECK_EQ(access("/tmp/t.%q.jsonl", F_OK), -1);
	unlink(err);
}

/* Values are echoed as written: "100g", not its bytes. */
TEST(values_echoed_as_written)
{
	char dir[256], trace[320], e1[400], err[320];

	tmp_dir(dir, sizeof(dir));
	snprintf(trace, sizeof(trace), "%s/t.jsonl", dir);
	snprintf(e1, sizeof(e1), "GDRHOOK_TRACE=%s", trace);
	snprintf(err, sizeof(err), "%s/err", dir);
	{
		const char *const env[] = { e1, "GDRHOOK_TRACE_BUFFER=100g",
					    "GDRHOOK_CACHE_MAX_SIZE=1G", NULL };

		CHECK_EQ(run_scenario_err("info_config", env, err), 0);
	}
	/* the ring warning, and gdrhook-info -c */
	CHECK_EQ(ERR_COUNT(err, "warning: GDRHOOK_TRACE_BUFFER=100g: each thread's ring holds"), 1);
	CHECK_EQ(ERR_COUNT(err, "GDRHOOK_TRACE_BUFFER=100g (environment)"), 1);
	CHECK_EQ(ERR_COUNT(err, "GDRHOOK_CACHE_MAX_SIZE=1G (environment)"), 1);
	CHECK_EQ(ERR_COUNT(err, "107374182400"), 0);
	CHECK_EQ(ERR_COUNT(err, "1073741824"), 0);
	rm_tree(dir);
}

/* gdrhook-info -c shows a variable set under its old name, as written,
 * and that old name as its source. */
TEST(info_shows_old_name_value)
{
	static const char *const env[] = { "GDRHOOK_LOG_BUFFER=100g", NULL };
	char err[256];

	err_path(err, sizeof(err), "infoold");
	CHECK_EQ(run_scenario_err("info_config", env, err), 0);
	CHECK_EQ(ERR_COUNT(err, "GDRHOOK_TRACE_BUFFER=100g (from GDRHOOK_LOG_BUFFER, deprecated)"), 1);
	CHECK_EQ(ERR_COUNT(err, "GDRHOOK_TRACE_BUFFER=100g (environment)"), 0);
	/* the load's own line, once */
	CHECK_EQ(ERR_COUNT(err, "deprecated variable GDRHOOK_LOG_BUFFER=100g"), 1);
	unlink(err);
}

/* The source of each value in gdrhook-info -c: an old name, a bad value
 * under one, and the new name where both are set. */
TEST(info_names_a_deprecated_source)
{
	char dir[256], trace[320], e1[400], err[320];

	tmp_dir(dir, sizeof(dir));
	snprintf(trace, sizeof(trace), "%s/t.jsonl", dir);
	snprintf(e1, sizeof(e1), "GDRHOOK_LOG=%s", trace);
	snprintf(err, sizeof(err), "%s/err", dir);
	{
		const char *const env[] = { e1, "GDRHOOK_LOG_BUFFER=lots",
					    "GDRHOOK_LOG_MODE=block",
					    "GDRHOOK_TRACE_MODE=drop", NULL };

		CHECK_EQ(run_scenario_err("info_config", env, err), 0);
	}
	CHECK(file_size(trace) > 0);	/* GDRHOOK_LOG read as GDRHOOK_TRACE */
	CHECK_EQ(ERR_COUNT(err, "  GDRHOOK_TRACE=", trace,
			   " (from GDRHOOK_LOG, deprecated)"), 1);
	CHECK_EQ(ERR_COUNT(err, "  GDRHOOK_TRACE_BUFFER=12m (default (the value of GDRHOOK_LOG_BUFFER, deprecated, is not valid))"), 1);
	CHECK_EQ(ERR_COUNT(err, "  GDRHOOK_TRACE_MODE=drop (environment)"), 1);
	CHECK_EQ(ERR_COUNT(err, "deprecated variable", e1,
			   "read as GDRHOOK_TRACE, its new name"), 1);
	CHECK_EQ(ERR_COUNT(err, "GDRHOOK_LOG_MODE=block ignored"), 1);
	rm_tree(dir);
}

/* The host name as the prefix and %h give it. */
static void names(char *full, size_t nf, char *shrt, size_t ns)
{
	struct utsname u;

	CHECK_EQ(uname(&u), 0);
	snprintf(full, nf, "%s", u.nodename);
	snprintf(shrt, ns, "%s", u.nodename);
	shrt[strcspn(shrt, ".")] = '\0';
}

/*
 * GDRHOOK_LOG_FILE: %h and %p expand, the lines go there with the
 * host:pid:tid prefix, and stderr stays empty.
 */
TEST(log_file_with_host_and_pid)
{
	char dir[256], tmpl[400], err[320], path[700], full[256], shrt[256];
	char want[600];
	struct dirent *de;
	int found = 0;
	DIR *d;

	tmp_dir(dir, sizeof(dir));
	names(full, sizeof(full), shrt, sizeof(shrt));
	snprintf(tmpl, sizeof(tmpl), "GDRHOOK_LOG_FILE=%s/diag.%%h.%%p.log",
		 dir);
	snprintf(err, sizeof(err), "%s/err", dir);
	{
		const char *const env[] = { tmpl, "GDRHOOK_STATS=maybe",
					    "GDRHOOK_LOG_LEVEL=info", NULL };

		CHECK_EQ(run_scenario_err("alloc", env, err), 0);
	}
	CHECK_EQ(file_size(err), 0);
	d = opendir(dir);
	CHECK(d);
	while ((de = readdir(d))) {
		int pid;
		char host[320], tail[16];

		if (strncmp(de->d_name, "diag.", 5))
			continue;
		found++;
		/* diag.<host>.<pid>.log, the host maybe with dots */
		CHECK(!strncmp(de->d_name + 5, full, strlen(full)));
		CHECK_EQ(sscanf(de->d_name + 5 + strlen(full), ".%d%15s", &pid,
				tail), 2);
		CHECK_STR(tail, ".log");
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		/* the child is single-threaded here: tid == pid */
		snprintf(want, sizeof(want), "gdrhook[%s:%d:%d]: warning: bad value \"maybe\" for GDRHOOK_STATS",
			 shrt, pid, pid);
		CHECK_EQ(count_in_file(path, want), 1);
		snprintf(host, sizeof(host), "gdrhook[%s:%d:", shrt, pid);
		CHECK_EQ(count_in_file(path, host), count_in_file(path, "gdrhook["));
		CHECK(count_in_file(path, "]: info: gdrhook ") >= 1);
	}
	closedir(d);
	CHECK_EQ(found, 1);
	rm_tree(dir);
}

/* A file that cannot be opened: one warning, and stderr. */
TEST(log_file_unopenable_goes_to_stderr)
{
	static const char *const env[] = {
		"GDRHOOK_LOG_FILE=/nonexistent-gdrhook/d.log",
		"GDRHOOK_STATS=maybe", NULL
	};
	char err[256];

	err_path(err, sizeof(err), "lfbad");
	CHECK_EQ(run_scenario_err("alloc", env, err), 0);
	CHECK_EQ(ERR_COUNT(err, "cannot write the diagnostics to GDRHOOK_LOG_FILE /nonexistent-gdrhook/d.log"), 1);
	CHECK_EQ(ERR_COUNT(err, "bad value \"maybe\" for GDRHOOK_STATS"), 1);
	unlink(err);
}

/* info says nothing at the default level; debug says each decision. */
TEST(debug_level_shows_each_decision)
{
	static const char *const dbg[] = { "GDRHOOK_LOG_LEVEL=debug", NULL };
	static const char *const info[] = { "GDRHOOK_LOG_LEVEL=info", NULL };
	char err[256];

	err_path(err, sizeof(err), "dbg");
	CHECK_EQ(run_scenario_err("regs", dbg, err), 0);
	CHECK_EQ(ERR_COUNT(err, "]: debug: ibv_reg_mr", "served by the cache (miss"), 1);
	CHECK_EQ(ERR_COUNT(err, "]: debug: ibv_reg_mr", "served by the cache (hit)"), 1);
	/* the route the miss took (a hit needs none) */
	CHECK_EQ(ERR_COUNT(err, "]: debug: cache: pd", "a shared registration of the allocation"), 1);
	/* how each entry point reached the wrapper */
	CHECK_EQ(ERR_COUNT(err, "]: debug: dlvsym: ibv_reg_mr -> wrapper"), 1);
	CHECK_EQ(ERR_COUNT(err, "]: debug: ibv_reg_mr", "wrapped: registered by libibverbs") +
		 ERR_COUNT(err, "]: debug: ibv_reg_mr", "passed through untouched"), 1);
	CHECK(ERR_COUNT(err, "]: debug: ") > ERR_COUNT(err, "]: info: "));
	CHECK_EQ(run_scenario_err("regs", info, err), 0);
	CHECK_EQ(ERR_COUNT(err, "]: debug: "), 0);
	CHECK(ERR_COUNT(err, "]: info: ") >= 1);
	unlink(err);
}

SCENARIO_MAIN(scenarios)
