/* SPDX-License-Identifier: MIT */
/*
 * The allocation path: the shim's own work, measured against the bare
 * pass-through (LD_PRELOAD=libgdrhook.so GDRHOOK_ENABLE=0), which pays the
 * preload's interposition and nothing else.  Prints figures, asserts no
 * target; exits non-zero when a child or any CUDA call fails, or when a
 * configuration is not what it claims (the shim absent, disabled or
 * enabled where it should not be).
 *
 *   bench_alloc_path [run [MODE...]]   the rounds (default: every mode)
 *   bench_alloc_path MODE              one measurement in this process
 *                                      (what the rounds' children run)
 *
 * Modes (4 KiB unless said; "pair" = one allocation and one free):
 *   cu4k     one thread, cuMemAlloc + cuMemFree pairs; ns per pair
 *   rt4k     one thread, cudaMalloc + cudaFree pairs; ns per pair
 *   async1   one thread, cudaMallocAsync + cudaFreeAsync on its own
 *            non-blocking stream (PyTorch's backend:cudaMallocAsync and
 *            RMM's async resource: one call per tensor); ns per pair
 *   cu4k16   T threads, each keeping up to 8 live allocations (the
 *            oldest is freed before the next one is made), cuMemAlloc;
 *            pairs/s of all threads over the wall time
 *   rt4k16   the same through cudaMalloc + cudaFree
 *   async16  T threads, each pairs of cudaMallocAsync + cudaFreeAsync on
 *            its own non-blocking stream; pairs/s
 *   logu16   T threads, sizes log-uniform in 1 B .. 8 MiB, each
 *            allocation through cuMemAlloc or cudaMalloc by a coin, freed
 *            through the matching call, up to 8 live per thread (a random
 *            slot is freed and refilled); pairs/s
 * ns per pair: the median over the timed pairs, each timed alone, after
 * an untimed warm-up, less the median cost of two clock reads.  pairs/s:
 * T threads with the primary context current wait on a barrier after
 * their warm-up; the figure is the pairs of all threads over the time
 * from the first start to the last end.  Streams are made before
 * timing; the async modes synchronize only at the end (a timed part of
 * the multi-thread figure).
 *
 * The rounds: for R rounds, for each mode, five child processes of this
 * program in an order that rotates with the round: native (no preload),
 * pass-through (GDRHOOK_ENABLE=0), library (log off), library with
 * GDRHOOK_TRACE (a file under $TMPDIR, removed after the child), and
 * native + work: no preload, the program itself spinning
 * GH_BENCH_WORK_NS after each allocation and each free, on its own
 * thread's clock and touching nothing shared.  That last one is the
 * anchor for what the shim may cost here: it prices time alone spent
 * between two driver calls, whoever spends it (at 16 threads the driver
 * turns a few hundred ns of it into a large loss of pairs/s).  Children
 * get the caller's environment less LD_PRELOAD and every GDRHOOK_*, plus
 * what their configuration sets.  They are pinned: the one-thread modes to
 * the last CPU of the allowed set, the multi-thread modes to its first
 * min(T, CPUs) CPUs with thread t on the t-th of them (wrapping).  Per
 * round the ratios library / pass-through, log / pass-through,
 * pass-through / native and native + work / native (pairs/s inverted:
 * above 1 is slower); per mode their median and p10..p90 over the
 * rounds, beside the targets of the allocation-path issue.  Medians over
 * rounds, not means: the 4 KiB pair is bimodal from process to process
 * on the H100, natively as well.
 *
 * Environment (GH_BENCH_*, not GDRHOOK_*: the shim warns about names it
 * does not know):
 *   GH_BENCH_ROUNDS=9       rounds
 *   GH_BENCH_N=20000        timed pairs in the one-thread modes
 *   GH_BENCH_MT_N=4000      timed pairs per thread in cu4k16, rt4k16 and
 *                           async16
 *   GH_BENCH_LOGU_N=1000    timed pairs per thread in logu16
 *   GH_BENCH_WARMUP         untimed pairs per thread first (default N/10)
 *   GH_BENCH_THREADS=16     T (the last number of a list such as 1,2,16)
 *   GH_BENCH_CPUS           a CPU list (0-15,32) used in place of the
 *                           allowed set
 *   GH_BENCH_LIB            libgdrhook.so (default ../../libgdrhook.so
 *                           from this program)
 *   GH_BENCH_CHILD_SECS=300 a child still running after this is killed
 *   GH_BENCH_WORK_NS=100    the native + work configuration's ns after
 *                           each call (0: that configuration is not run)
 *
 * Every figure is one line "R <key> <value>" on stdout; other lines
 * start with '#' or are the report's table.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "gdrhook_preload.h"
#include "bench_cuda.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define SMALL (4 * KiB)
#define LIVE 8
#define MAX_THREADS 256
#define MAX_ROUNDS 1000

extern char **environ;

enum api { A_CU, A_RT, A_ASYNC, A_MIX };

struct mode {
	const char *name;
	enum api api;
	int multi;		/* T threads and pairs/s; else one, ns/pair */
	int live;		/* allocations kept per thread (0: pairs) */
	int logu;		/* sizes log-uniform 1 B .. 8 MiB */
	const char *nvar;	/* its knob for n */
	long n;			/* default timed pairs per thread */
	double lib_target, log_target;
	const char *what;
};

static const struct mode modes[] = {
	{ "cu4k", A_CU, 0, 0, 0, "GH_BENCH_N", 20000, 1.05, 1.12,
	  "4 KiB cuMemAlloc+cuMemFree" },
	{ "rt4k", A_RT, 0, 0, 0, "GH_BENCH_N", 20000, 1.05, 1.12,
	  "4 KiB cudaMalloc+cudaFree" },
	{ "cu4k16", A_CU, 1, LIVE, 0, "GH_BENCH_MT_N", 4000, 1.08, 1.15,
	  "4 KiB cuMemAlloc+cuMemFree, 8 live a thread" },
	{ "rt4k16", A_RT, 1, LIVE, 0, "GH_BENCH_MT_N", 4000, 1.08, 1.15,
	  "4 KiB cudaMalloc+cudaFree, 8 live a thread" },
	{ "async1", A_ASYNC, 0, 0, 0, "GH_BENCH_N", 20000, 1.10, 1.25,
	  "4 KiB cudaMallocAsync+cudaFreeAsync" },
	{ "async16", A_ASYNC, 1, 0, 0, "GH_BENCH_MT_N", 4000, 1.10, 1.25,
	  "4 KiB cudaMallocAsync+cudaFreeAsync" },
	{ "logu16", A_MIX, 1, LIVE, 1, "GH_BENCH_LOGU_N", 1000, 1.08, 1.15,
	  "1 B..8 MiB log-uniform, both APIs, 8 live" },
};
#define NMODES (sizeof(modes) / sizeof(modes[0]))

enum cfg { C_NATIVE, C_PT, C_LIB, C_LOG, C_WORK, NCFG };
static const char *const cfg_name[NCFG] = {
	"native", "pt", "lib", "log", "work"
};

static CUcontext ctx;
/* The program's own work after each call (the "work" configuration). */
static long work_ns;

/*
 * ns of the thread's own work, touching nothing shared: what a program
 * (or a shim) does between two driver calls, at no cost but its time.
 */
static void own_work(long ns)
{
	uint64_t t0 = now_ns();

	while (now_ns() - t0 < (uint64_t)ns)
		;
}

/* T: the last number of GH_BENCH_THREADS (bench-gpu's list), default 16. */
static long env_threads(void)
{
	const char *s = getenv("GH_BENCH_THREADS"), *c;
	long t;

	if (!s || !*s)
		return 16;
	c = strrchr(s, ',');
	t = strtol(c ? c + 1 : s, NULL, 0);
	return t < 1 ? 1 : t > MAX_THREADS ? MAX_THREADS : t;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* 1 B .. 8 MiB: a uniform octave 2^0 .. 2^22, then uniform inside it. */
static size_t logu_size(uint64_t *s)
{
	uint64_t r = xs(s);
	unsigned int e = (unsigned int)(r % 23);

	return ((size_t)1 << e) + (size_t)((r >> 8) % (1ull << e));
}

/* ---- one measurement (a child) ---- */

/* Median of back-to-back clock reads: what each timed pair also holds. */
static double timer_cost(void)
{
	enum { NS = 20000 };
	static double v[NS];

	for (int i = 0; i < NS; i++) {
		uint64_t a = now_ns();

		v[i] = (double)(now_ns() - a);
	}
	return median(v, NS);
}

struct slot {
	void *p;
	int rt;			/* made by the runtime (cudaMalloc) */
};

struct worker {
	const struct mode *m;
	long n, warm;
	int t, cpu;
	pthread_barrier_t *bar;	/* NULL: one thread, each pair timed */
	double *tp;		/* one thread: ns of each timed pair */
	uint64_t t_start, t_end;
};

static void slot_free(struct slot *s, CUstream st)
{
	if (!s->p)
		return;
	if (st)
		CKRT(cudaFreeAsync(s->p, (cudaStream_t)st));
	else if (s->rt)
		CKRT(cudaFree(s->p));
	else
		CK(cuMemFree((CUdeviceptr)(uintptr_t)s->p));
	s->p = NULL;
}

static void slot_alloc(struct slot *s, enum api api, size_t size,
		       uint64_t *rng, CUstream st)
{
	int rt = api == A_RT || (api == A_MIX && (xs(rng) >> 63));

	if (st) {
		CKRT(cudaMallocAsync(&s->p, size, (cudaStream_t)st));
	} else if (rt) {
		CKRT(cudaMalloc(&s->p, size));
	} else {
		CUdeviceptr d;

		CK(cuMemAlloc(&d, size));
		s->p = (void *)(uintptr_t)d;
	}
	s->rt = rt;
}

static void pin_self(int cpu)
{
	if (cpu >= 0 && pin_cpu(cpu)) {
		fprintf(stderr, "bench_alloc_path: cannot pin to CPU %d\n", cpu);
		exit(2);
	}
}

static void *worker_run(void *arg)
{
	struct worker *w = arg;
	const struct mode *m = w->m;
	struct slot s[LIVE] = { { 0 } };
	uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(w->t + 1);
	CUstream st = NULL;

	pin_self(w->cpu);
	CK(cuCtxSetCurrent(ctx));
	CKRT(cudaSetDevice(0));
	if (m->api == A_ASYNC)
		/* The driver's call: the runtime double has no
		 * cudaStreamCreateWithFlags; the two stream types are one. */
		CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
	for (long i = -w->warm; i < w->n; i++) {
		size_t size = m->logu ? logu_size(&rng) : SMALL;
		struct slot *x = &s[0];
		uint64_t t0;

		if (i == 0) {
			if (w->bar)
				pthread_barrier_wait(w->bar);
			w->t_start = now_ns();
		}
		t0 = now_ns();
		if (m->live) {
			/* The oldest, or a random one of the live set. */
			x = &s[m->logu ? xs(&rng) % LIVE :
			       (uint64_t)(i + w->warm) % LIVE];
			slot_free(x, st);
			if (work_ns)
				own_work(work_ns);
		}
		slot_alloc(x, m->api, size, &rng, st);
		if (work_ns)
			own_work(work_ns);
		if (!m->live) {
			slot_free(x, st);
			if (work_ns)
				own_work(work_ns);
		}
		if (i >= 0 && w->tp)
			w->tp[i] = (double)(now_ns() - t0);
	}
	if (st)
		CK(cuStreamSynchronize(st));
	w->t_end = now_ns();
	for (int k = 0; k < LIVE; k++)
		slot_free(&s[k], st);
	if (st) {
		CK(cuStreamSynchronize(st));
		CK(cuStreamDestroy(st));
	}
	return NULL;
}

static void report_gh(void)
{
	struct gdrhook_preload gh;
	struct gdrhook_stats st;

	if (gdrhook_preload_open(&gh)) {
		printf("R gdrhook 0\n");
		return;
	}
	printf("R gdrhook 1\n");
	gh.flush_log();		/* so that log_events counts every record */
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	if (gh.get_stats(&st))
		return;
	printf("R gh.allocs %llu\nR gh.frees %llu\nR gh.live %llu\n"
	       "R gh.failed_calls %llu\nR gh.log_events %llu\n"
	       "R gh.log_dropped %llu\n",
	       (unsigned long long)st.allocs, (unsigned long long)st.frees,
	       (unsigned long long)st.live,
	       (unsigned long long)st.failed_calls,
	       (unsigned long long)st.log_events,
	       (unsigned long long)st.log_dropped);
}

static int measure(const struct mode *m)
{
	long threads = m->multi ? env_threads() : 1;
	long n = env_long(m->nvar, m->n);
	long warm = env_long("GH_BENCH_WARMUP", n / 10);
	static struct worker w[MAX_THREADS];
	pthread_t th[MAX_THREADS];
	pthread_barrier_t bar;
	int cpus[MAX_THREADS], ncpu = allowed_cpus(cpus, MAX_THREADS);
	uint64_t t0 = 0, t1 = 0;
	double *tp = NULL, tc;

	if (n < 1)
		n = 1;
	if (warm < 1)
		warm = 1;
	work_ns = env_long("GH_BENCH_OWN_WORK_NS", 0);
	/* The primary context, through the runtime so both APIs share it. */
	CKRT(cudaSetDevice(0));
	CKRT(cudaFree(NULL));
	CK(cuCtxGetCurrent(&ctx));
	if (!ctx) {
		fprintf(stderr, "bench_alloc_path: no current context\n");
		return 2;
	}
	print_versions(0);
	printf("R mode %s\nR threads %ld\nR n %ld\nR warmup %ld\n", m->name,
	       threads, n, warm);
	if (!m->multi) {
		tp = calloc((size_t)n, sizeof(*tp));
		if (!tp)
			return 2;
		w[0] = (struct worker){ .m = m, .n = n, .warm = warm,
			.cpu = -1, .tp = tp };
		worker_run(&w[0]);
		/* Less the clock's own cost, which would dilute the ratios. */
		tc = timer_cost();
		printf("R timer_ns %.1f\nR fig %.1f\nR unit ns_per_pair\n", tc,
		       median(tp, (int)n) - tc);
		printf("R pair.p10_ns %.1f\nR pair.p90_ns %.1f\n",
		       rank(tp, (int)n, 0.1), rank(tp, (int)n, 0.9));
		free(tp);
		report_gh();
		return 0;
	}
	if (pthread_barrier_init(&bar, NULL, (unsigned int)threads))
		return 2;
	for (long t = 0; t < threads; t++) {
		w[t] = (struct worker){ .m = m, .n = n, .warm = warm,
			.t = (int)t, .bar = &bar,
			.cpu = ncpu ? cpus[t % ncpu] : -1 };
		if (pthread_create(&th[t], NULL, worker_run, &w[t])) {
			fprintf(stderr, "bench_alloc_path: pthread_create\n");
			return 2;
		}
	}
	for (long t = 0; t < threads; t++) {
		pthread_join(th[t], NULL);
		if (!t || w[t].t_start < t0)
			t0 = w[t].t_start;
		if (w[t].t_end > t1)
			t1 = w[t].t_end;
	}
	pthread_barrier_destroy(&bar);
	printf("R fig %.0f\nR unit pairs_per_s\nR wall_s %.4f\n",
	       (double)(threads * n) / ((double)(t1 - t0) / 1e9),
	       (double)(t1 - t0) / 1e9);
	report_gh();
	return 0;
}

/* ---- the rounds (the parent) ---- */

struct child_out {
	double fig;
	int have_fig, gdrhook;
	double allocs, failed, log_events, log_dropped;
	long threads, n, warm;
	char device[128], drv[128], rt[128];
};

/* "0-3,8" -> cpus; returns the count (0 on a malformed list). */
static int parse_cpus(const char *s, int *cpus, int max)
{
	int n = 0;

	while (*s) {
		char *e;
		long a = strtol(s, &e, 10), b = a;

		if (e == s || a < 0 || a >= CPU_SETSIZE)
			return 0;
		if (*e == '-') {
			s = e + 1;
			b = strtol(s, &e, 10);
			if (e == s || b < a || b >= CPU_SETSIZE)
				return 0;
		}
		for (long c = a; c <= b && n < max; c++)
			cpus[n++] = (int)c;
		if (*e == ',')
			e++;
		else if (*e)
			return 0;
		s = e;
	}
	return n;
}

/* "0-3,8" for n CPUs. */
static void cpus_str(const int *c, int n, char *b, size_t len)
{
	size_t o = 0;

	b[0] = 0;
	for (int i = 0; i < n && o < len; i++) {
		int j = i;

		while (j + 1 < n && c[j + 1] == c[j] + 1)
			j++;
		o += (size_t)snprintf(b + o, len - o, j > i ? "%s%d-%d" : "%s%d",
				      i ? "," : "", c[i], c[j]);
		i = j;
	}
}

/* The caller's environment less LD_PRELOAD and GDRHOOK_*, then extra. */
static char **child_env(char *const extra[])
{
	size_t n = 0, k = 0;
	char **e;

	while (environ[n])
		n++;
	e = calloc(n + 4, sizeof(*e));
	if (!e)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "LD_PRELOAD=", 11) &&
		    strncmp(environ[i], "GDRHOOK_", 8) &&
		    strncmp(environ[i], "GH_BENCH_OWN_WORK_NS=", 21))
			e[k++] = environ[i];
	for (size_t i = 0; extra[i]; i++)
		e[k++] = extra[i];
	return e;
}

static void parse_line(struct child_out *o, const char *l)
{
	char key[64], val[128];

	if (sscanf(l, "R %63s %127[^\n]", key, val) != 2)
		return;
	if (!strcmp(key, "fig")) {
		o->fig = strtod(val, NULL);
		o->have_fig = 1;
	} else if (!strcmp(key, "gdrhook")) {
		o->gdrhook = atoi(val);
	} else if (!strcmp(key, "gh.allocs")) {
		o->allocs = strtod(val, NULL);
	} else if (!strcmp(key, "gh.failed_calls")) {
		o->failed = strtod(val, NULL);
	} else if (!strcmp(key, "gh.log_events")) {
		o->log_events = strtod(val, NULL);
	} else if (!strcmp(key, "gh.log_dropped")) {
		o->log_dropped = strtod(val, NULL);
	} else if (!strcmp(key, "threads")) {
		o->threads = atol(val);
	} else if (!strcmp(key, "n")) {
		o->n = atol(val);
	} else if (!strcmp(key, "warmup")) {
		o->warm = atol(val);
	} else if (!strcmp(key, "device")) {
		snprintf(o->device, sizeof(o->device), "%s", val);
	} else if (!strcmp(key, "cuda_driver_api")) {
		snprintf(o->drv, sizeof(o->drv), "%s", val);
	} else if (!strcmp(key, "cuda_runtime")) {
		snprintf(o->rt, sizeof(o->rt), "%s", val);
	}
}

struct parent {
	const char *self, *lib, *logpath;
	int cpu1;			/* the one-thread modes' CPU */
	int mcpus[MAX_THREADS], nm;	/* the multi-thread modes' CPUs */
	unsigned int secs;
	long work_ns;			/* the "work" configuration's */
	struct child_out first;		/* of the first child that ran */
	int have_first;
};

/* One child: mode m in configuration c; 0 when it ran as it should. */
static int run_child(struct parent *p, const struct mode *m, enum cfg c,
		     int round, struct child_out *o)
{
	char pre[PATH_MAX + 16], logv[PATH_MAX + 16], line[512], wv[64];
	char *extra[4] = { NULL }, **env;
	char *argv[] = { (char *)p->self, (char *)m->name, NULL };
	int fd[2], st, k = 0, bad = 0;
	long expect;
	struct stat sb;
	FILE *f;
	pid_t pid;

	memset(o, 0, sizeof(*o));
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", p->lib);
	snprintf(logv, sizeof(logv), "GDRHOOK_TRACE=%s", p->logpath);
	snprintf(wv, sizeof(wv), "GH_BENCH_OWN_WORK_NS=%ld", p->work_ns);
	if (c != C_NATIVE && c != C_WORK)
		extra[k++] = pre;
	if (c == C_WORK)
		extra[k++] = wv;
	if (c == C_PT)
		extra[k++] = "GDRHOOK_ENABLE=0";
	if (c == C_LOG)
		extra[k++] = logv;
	env = child_env(extra);
	unlink(p->logpath);
	if (!env || pipe(fd))
		return -1;
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -1;
	if (!pid) {
		cpu_set_t set;

		CPU_ZERO(&set);
		if (m->multi)
			for (int i = 0; i < p->nm; i++)
				CPU_SET(p->mcpus[i], &set);
		else
			CPU_SET(p->cpu1, &set);
		if (sched_setaffinity(0, sizeof(set), &set))
			_exit(126);
		dup2(fd[1], 1);
		close(fd[0]);
		close(fd[1]);
		alarm(p->secs);	/* kept across exec: a hung child ends */
		execve(p->self, argv, env);
		_exit(127);
	}
	free(env);
	close(fd[1]);
	f = fdopen(fd[0], "r");
	while (f && fgets(line, sizeof(line), f))
		parse_line(o, line);
	if (f)
		fclose(f);
	else
		close(fd[0]);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "bench_alloc_path: %s %s round %d: child %s %d\n",
			m->name, cfg_name[c], round + 1,
			WIFSIGNALED(st) ? "killed by signal" : "exited",
			WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
		return -1;
	}
	/* Each configuration must be what it claims: else its figure
	 * measures something else. */
	expect = o->threads * (o->n + o->warm);
	if (!o->have_fig) {
		fprintf(stderr, "bench_alloc_path: %s %s: no figure\n",
			m->name, cfg_name[c]);
		bad = 1;
	} else if ((c == C_NATIVE || c == C_WORK) && o->gdrhook) {
		fprintf(stderr, "bench_alloc_path: %s run has gdrhook loaded\n",
			cfg_name[c]);
		bad = 1;
	} else if (c != C_NATIVE && c != C_WORK && !o->gdrhook) {
		fprintf(stderr, "bench_alloc_path: %s: gdrhook not loaded (%s)\n",
			cfg_name[c], p->lib);
		bad = 1;
	} else if (c == C_PT && o->allocs != 0) {
		fprintf(stderr, "bench_alloc_path: pass-through tracked %.0f allocations\n",
			o->allocs);
		bad = 1;
	} else if ((c == C_LIB || c == C_LOG) && o->allocs < (double)expect) {
		fprintf(stderr, "bench_alloc_path: %s %s: gdrhook saw %.0f allocations of %ld\n",
			m->name, cfg_name[c], o->allocs, expect);
		bad = 1;
	} else if (o->failed) {
		fprintf(stderr, "bench_alloc_path: %s %s: %.0f failed calls\n",
			m->name, cfg_name[c], o->failed);
		bad = 1;
	} else if (c == C_LOG && (o->log_events <= 0 || stat(p->logpath, &sb))) {
		fprintf(stderr, "bench_alloc_path: %s log: no event log written\n",
			m->name);
		bad = 1;
	}
	if (c == C_LOG && !stat(p->logpath, &sb))
		printf("R alloc_path.%s.log.r%d.log_bytes %lld\n"
		       "R alloc_path.%s.log.r%d.log_dropped %.0f\n", m->name,
		       round, (long long)sb.st_size, m->name, round,
		       o->log_dropped);
	unlink(p->logpath);
	if (bad)
		return -1;
	printf("R alloc_path.%s.%s.r%d %.1f\n", m->name, cfg_name[c], round,
	       o->fig);
	fflush(stdout);
	if (!p->have_first) {
		p->first = *o;
		p->have_first = 1;
	}
	return 0;
}

struct ratio {
	double med, p10, p90;
	int n;
};

/* Per round: num / den (or den / num for pairs/s, so that above 1 is
 * slower); median and p10..p90 over the rounds where both ran. */
static struct ratio ratios(const double *num, const double *den, int rounds,
			   int inverted)
{
	double v[MAX_ROUNDS];
	struct ratio r = { 0, 0, 0, 0 };

	for (int i = 0; i < rounds; i++)
		if (num[i] > 0 && den[i] > 0)
			v[r.n++] = inverted ? den[i] / num[i] : num[i] / den[i];
	if (!r.n)
		return r;
	r.med = median(v, r.n);
	r.p10 = rank(v, r.n, 0.1);
	r.p90 = rank(v, r.n, 0.9);
	return r;
}

static const char *verdict(const struct ratio *r, double target)
{
	return !r->n ? "-" : r->med <= target ? "ok" : "MISS";
}

/* The median and "p10..p90" of a ratio, or "n/a" where no round ran. */
static void rstr(const struct ratio *r, char *med, size_t ml, char *pp,
		 size_t pl)
{
	if (!r->n) {
		snprintf(med, ml, "n/a");
		if (pp)
			snprintf(pp, pl, "n/a");
		return;
	}
	snprintf(med, ml, "%.3f", r->med);
	if (pp)
		snprintf(pp, pl, "%.3f..%.3f", r->p10, r->p90);
}

struct summary {
	struct ratio rl, rg, rp;	/* lib/pt, log/pt, pt/native */
	struct ratio rw;		/* native + own work / native */
	double med[NCFG];		/* figures, pairs/s in thousands */
};

static struct summary summarize(double f[NCFG][MAX_ROUNDS], int rounds,
				int multi)
{
	struct summary x;

	x.rl = ratios(f[C_LIB], f[C_PT], rounds, multi);
	x.rg = ratios(f[C_LOG], f[C_PT], rounds, multi);
	x.rp = ratios(f[C_PT], f[C_NATIVE], rounds, multi);
	x.rw = ratios(f[C_WORK], f[C_NATIVE], rounds, multi);
	for (int c = 0; c < NCFG; c++) {
		double v[MAX_ROUNDS];
		int n = 0;

		for (int r = 0; r < rounds; r++)
			if (f[c][r] > 0)
				v[n++] = f[c][r];
		x.med[c] = n ? median(v, n) / (multi ? 1e3 : 1) : 0;
	}
	return x;
}

static int rounds_main(int argc, char **argv, const char *self)
{
	static double fig[NMODES][NCFG][MAX_ROUNDS];
	const struct mode *sel[NMODES];
	int nsel = 0, rounds = (int)env_long("GH_BENCH_ROUNDS", 9);
	int cpus[CPU_SETSIZE], ncpu, failed = 0, t;
	const char *cl = getenv("GH_BENCH_CPUS"), *tmp = getenv("TMPDIR");
	char lib[PATH_MAX + 32], logpath[PATH_MAX], b[512];
	struct parent p = { 0 };

	for (int i = 0; i < argc; i++) {
		size_t k;

		for (k = 0; k < NMODES; k++)
			if (!strcmp(argv[i], modes[k].name))
				break;
		if (k == NMODES) {
			fprintf(stderr, "bench_alloc_path: unknown mode %s\n",
				argv[i]);
			return 2;
		}
		sel[nsel++] = &modes[k];
	}
	if (!nsel)
		for (size_t k = 0; k < NMODES; k++)
			sel[nsel++] = &modes[k];
	if (rounds < 1 || rounds > MAX_ROUNDS) {
		fprintf(stderr, "bench_alloc_path: GH_BENCH_ROUNDS 1..%d\n",
			MAX_ROUNDS);
		return 2;
	}
	p.self = self;
	p.lib = getenv("GH_BENCH_LIB");
	if (!p.lib || !*p.lib) {
		snprintf(lib, sizeof(lib), "%s", self);
		*strrchr(lib, '/') = 0;
		strcat(lib, "/../../libgdrhook.so");
		p.lib = lib;
	}
	if (access(p.lib, R_OK)) {
		fprintf(stderr, "bench_alloc_path: %s: not found (make lib; or GH_BENCH_LIB=)\n",
			p.lib);
		return 2;
	}
	snprintf(logpath, sizeof(logpath), "%s/gdrhook-alloc-path.%d.jsonl",
		 tmp && *tmp ? tmp : "/tmp", (int)getpid());
	p.logpath = logpath;
	p.secs = (unsigned int)env_long("GH_BENCH_CHILD_SECS", 300);
	p.work_ns = env_long("GH_BENCH_WORK_NS", 100);
	if (p.work_ns < 0 || p.work_ns > 1000000) {
		fprintf(stderr, "bench_alloc_path: GH_BENCH_WORK_NS 0..1000000\n");
		return 2;
	}
	if (cl && *cl) {
		ncpu = parse_cpus(cl, cpus, CPU_SETSIZE);
		if (!ncpu) {
			fprintf(stderr, "bench_alloc_path: GH_BENCH_CPUS=%s: not a CPU list\n",
				cl);
			return 2;
		}
	} else {
		ncpu = allowed_cpus(cpus, CPU_SETSIZE);
		if (!ncpu)
			return 2;
	}
	t = (int)env_threads();
	p.cpu1 = cpus[ncpu - 1];
	p.nm = t < ncpu ? t : ncpu;
	memcpy(p.mcpus, cpus, (size_t)p.nm * sizeof(int));
	cpus_str(p.mcpus, p.nm, b, sizeof(b));
	printf("# pinned: one-thread modes on CPU %d; %d-thread modes on CPUs %s,"
	       " thread t on the t-th%s\n", p.cpu1, t, b,
	       t > p.nm ? " (wrapping: fewer CPUs than threads)" : "");
	printf("# library %s; %d rounds; configurations in a rotating order\n",
	       p.lib, rounds);
	printf("R alloc_path.rounds %d\nR alloc_path.cpu1 %d\n"
	       "R alloc_path.threads %d\nR alloc_path.cpus %s\n",
	       rounds, p.cpu1, t, b);
	fflush(stdout);

	for (int r = 0; r < rounds; r++) {
		for (int k = 0; k < nsel; k++) {
			const struct mode *m = sel[k];
			int mi = (int)(m - modes);

			fprintf(stderr, "bench_alloc_path: round %d/%d: %s\n",
				r + 1, rounds, m->name);
			for (int i = 0; i < NCFG; i++) {
				enum cfg c = (enum cfg)((i + r) % NCFG);
				struct child_out o;

				if (c == C_WORK && !p.work_ns)
					continue;
				if (run_child(&p, m, c, r, &o))
					failed++;
				else
					fig[mi][c][r] = o.fig;
			}
		}
	}

	for (int k = 0; k < nsel; k++) {
		const struct mode *m = sel[k];
		struct summary x = summarize(fig[m - modes], rounds, m->multi);
		const struct ratio *rs[] = { &x.rl, &x.rg, &x.rp, &x.rw };
		const char *rn[] = { "lib", "log", "pt", "work" };

		printf("R alloc_path.%s.unit %s\n", m->name,
		       m->multi ? "kpairs_per_s" : "ns_per_pair");
		for (int c = 0; c < NCFG; c++)
			printf("R alloc_path.%s.%s.fig_med %.3f\n", m->name,
			       cfg_name[c], x.med[c]);
		for (int i = 0; i < 4; i++)
			printf("R alloc_path.%s.%s.ratio_med %.4f\n"
			       "R alloc_path.%s.%s.ratio_p10 %.4f\n"
			       "R alloc_path.%s.%s.ratio_p90 %.4f\n"
			       "R alloc_path.%s.%s.rounds %d\n",
			       m->name, rn[i], rs[i]->med, m->name, rn[i],
			       rs[i]->p10, m->name, rn[i], rs[i]->p90, m->name,
			       rn[i], rs[i]->n);
	}
	printf("\nThe allocation path against the pass-through: %s\n",
	       p.have_first ? p.first.device : "?");
	printf("CUDA driver API %s, runtime %s; %d rounds; per round one process"
	       " each of native, pass-through\n(LD_PRELOAD, GDRHOOK_ENABLE=0),"
	       " library (log off), library + GDRHOOK_TRACE and native + work, in rotating order.\n",
	       p.have_first ? p.first.drv : "?",
	       p.have_first ? p.first.rt : "?", rounds);
	printf("Pinned: one-thread modes on CPU %d, %d-thread modes on CPUs %s"
	       " (one thread a CPU).\n", p.cpu1, t, b);
	printf("Figures: medians over rounds, ns per pair (1 thread: median pair)"
	       " or k pairs/s (T threads,\nall together).  Ratios: median of the"
	       " per-round ratios to the same round's pass-through\n"
	       "(pairs/s inverted: above 1 is slower), p10..p90 over rounds;"
	       " pt/nat: pass-through over native;\nwork/nat: native doing %ld ns"
	       " of its own work (no shim, nothing shared) after each\n"
	       "allocation and each free, over native: what any such time"
	       " between driver calls costs here.\n\n", p.work_ns);
	printf("%-8s %-44s %3s %9s %9s %9s %9s | %6s %-13s %5s %4s | %6s %-13s %5s %4s | %6s | %8s %-13s\n",
	       "mode", "what", "T", "native", "pass-thr", "library", "lib+log",
	       "lib/pt", "p10..p90", "tgt", "", "log/pt", "p10..p90", "tgt",
	       "", "pt/nat", "work/nat", "p10..p90");
	for (int k = 0; k < nsel; k++) {
		const struct mode *m = sel[k];
		struct summary x = summarize(fig[m - modes], rounds, m->multi);
		char pl[32], pg[32];

		char ml[16], mg[16], mp[16], mw[16], pw[32];

		rstr(&x.rw, mw, sizeof(mw), pw, sizeof(pw));
		rstr(&x.rl, ml, sizeof(ml), pl, sizeof(pl));
		rstr(&x.rg, mg, sizeof(mg), pg, sizeof(pg));
		rstr(&x.rp, mp, sizeof(mp), NULL, 0);
		printf("%-8s %-44s %3d %9.1f %9.1f %9.1f %9.1f | %6s %-13s %5.2f %4s | %6s %-13s %5.2f %4s | %6s | %8s %-13s\n",
		       m->name, m->what, m->multi ? t : 1, x.med[C_NATIVE],
		       x.med[C_PT], x.med[C_LIB], x.med[C_LOG], ml, pl,
		       m->lib_target, verdict(&x.rl, m->lib_target), mg, pg,
		       m->log_target, verdict(&x.rg, m->log_target), mp, mw,
		       p.work_ns ? pw : "");
	}
	printf("(targets: the issue's log-off / log-on columns; ok/MISS is"
	       " informative, nothing is asserted)\n");
	if (failed)
		printf("FAILED: %d child runs (their rounds are left out)\n",
		       failed);
	unlink(logpath);
	return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	char self[PATH_MAX];
	ssize_t k;

	for (size_t i = 0; argc == 2 && i < NMODES; i++)
		if (!strcmp(argv[1], modes[i].name))
			return measure(&modes[i]);
	if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		printf("usage: %s [run [MODE...]] | MODE\nmodes:", argv[0]);
		for (size_t i = 0; i < NMODES; i++)
			printf(" %s", modes[i].name);
		printf("\n(see the top of tests/bench/bench_alloc_path.c)\n");
		return 0;
	}
	k = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (k <= 0) {
		perror("bench_alloc_path: readlink /proc/self/exe");
		return 2;
	}
	self[k] = 0;
	if (argc == 1)
		return rounds_main(0, NULL, self);
	if (!strcmp(argv[1], "run"))
		return rounds_main(argc - 2, argv + 2, self);
	fprintf(stderr, "bench_alloc_path: usage: bench_alloc_path [run [MODE...]] | MODE\n");
	return 2;
}
