// SPDX-License-Identifier: MIT
/*
 * Event log (src/evlog): JSON Lines output, per-thread rings, writer
 * thread, drops, flush, shutdown, fork.  The spool (evspool.c) has its own
 * test, test_evspool.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
/* The fork test starts the child's writer thread after fork. */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
	return "die_after_fork=0";
}
#else
#define UNDER_TSAN 0
#endif
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#else
#define UNDER_ASAN 0
#endif

#include "evlog_util.h"

/* ---------------------------------------------------------------- */
/* helpers                                                           */

static int nthreads_now(void)
{
	return th_dir_entries("/proc/self/task");
}

/*
 * Threads once the count is @want, or after 20 s: a joined thread leaves
 * /proc/self/task a moment after pthread_join returns (the kernel wakes
 * the joiner before it releases the task), longer on a busy machine.
 */
static int nthreads_settled(int want)
{
	int n = nthreads_now();

	for (int i = 0; n != want && i < 20000; i++) {
		usleep(1000);
		n = nthreads_now();
	}
	return n;
}

/* ---------------------------------------------------------------- */
/* names and configuration                                           */

TEST(ev_names)
{
	static const char *const want[] = {
		NULL, "alloc", "free", "restore", "ctx_destroy", "ctx_reset",
		"ctx_release", "pool_trim", "pool_destroy", "untrusted",
		"audit", "pin", "unpin", "reg", "dereg", "revoke", "hit",
		"miss",
	};

	CHECK_EQ(sizeof(want) / sizeof(want[0]), GH_EV_COUNT_);
	CHECK(gh_ev_name(0) == NULL);
	for (unsigned int i = 1; i < GH_EV_COUNT_; i++)
		CHECK_STR(gh_ev_name(i), want[i]);
	CHECK(gh_ev_name(GH_EV_COUNT_) == NULL);
	CHECK(gh_ev_name(100000) == NULL);
}

TEST(configure_rejects_bad_paths)
{
	char longp[5000];

	CHECK(!gh_evlog_enabled());
	CHECK_EQ(gh_evlog_configure(NULL, 0), -EINVAL);
	CHECK_EQ(gh_evlog_configure("", 0), -EINVAL);
	CHECK_EQ(gh_evlog_configure("/x/log.%d", 0), -EINVAL);
	CHECK_EQ(gh_evlog_configure("/x/log.%", 0), -EINVAL);
	memset(longp, 'a', sizeof(longp) - 1);
	longp[sizeof(longp) - 1] = '\0';
	CHECK_EQ(gh_evlog_configure(longp, 0), -ENAMETOOLONG);
	CHECK(!gh_evlog_enabled());
	/* put before configure: ignored, no crash */
	put(GH_EV_ALLOC, 1);
	CHECK_EQ(gh_evlog_written() + gh_evlog_dropped(), 0);
	gh_evlog_flush();
	gh_evlog_shutdown(0, 0);
}

TEST(lazy_open_and_no_trace_without_events)
{
	struct stat st;
	int nt;

	mk_tdir();
	CHECK_EQ(gh_evlog_configure(tpath("log"), 0), 0);
	CHECK(gh_evlog_enabled());
	nt = nthreads_now();
	CHECK(stat(tpath("log"), &st) < 0 && errno == ENOENT);
	gh_evlog_flush();
	CHECK(stat(tpath("log"), &st) < 0 && errno == ENOENT);
	CHECK_EQ(nthreads_now(), nt);		/* no writer yet */
	gh_evlog_shutdown(0, 0);
	CHECK(stat(tpath("log"), &st) < 0 && errno == ENOENT);
	CHECK(!gh_evlog_enabled());

	/* the same process, configured again: first event opens */
	CHECK_EQ(gh_evlog_configure(tpath("log2"), 0), 0);
	put(GH_EV_ALLOC, 0x1000);
	nt = nthreads_now();
	gh_evlog_flush();
	CHECK(stat(tpath("log2"), &st) == 0);
	gh_evlog_shutdown(0, 0);
	CHECK_EQ(nthreads_settled(nt - 1), nt - 1);	/* writer joined */
	rm_tdir();
}

/* ---------------------------------------------------------------- */
/* record formats                                                    */

static const char *const k_start[] = { "ev", "v", "t", "pid", "tid", "exe",
				       "wall_ns", "crash_safe", "mode", NULL };
static const char *const k_alloc[] = { "t", "pid", "tid", "ev", "api", "ptr",
				       "size", "dev", "gen", "kind", "ctx",
				       "rc", "dur_ns", NULL };
static const char *const k_free_x[] = { "t", "pid", "tid", "ev", "api",
					"ptr", "size", "dev", "gen", "kind",
					"ctx", "rc", "dur_ns", "tracked",
					"implicit", NULL };
static const char *const k_ctx[] = { "t", "pid", "tid", "ev", "api", "ctx",
				     "dev", "rc", "dur_ns", "dropped",
				     "dropped_bytes", NULL };
static const char *const k_pool[] = { "t", "pid", "tid", "ev", "api", "pool",
				      "rc", "dur_ns", NULL };
static const char *const k_untr[] = { "t", "pid", "tid", "ev", "api", "why",
				      NULL };
static const char *const k_audit[] = { "t", "pid", "tid", "ev", "api", "ptr",
				       "size", "gen", "what", NULL };
static const char *const k_pin[] = { "t", "pid", "tid", "ev", "ptr", "size",
				     "gen", "dev", "backend", "rc", "dur_ns",
				     NULL };
static const char *const k_reg[] = { "t", "pid", "tid", "ev", "ptr", "size",
				     "gen", "mr", "pd", "access", "rc",
				     "dur_ns", NULL };
static const char *const k_lookup[] = { "t", "pid", "tid", "ev", "api",
					"ptr", "size", "gen", "dev", "mr",
					"pd", "access", "dur_ns", NULL };
static const char *const k_revoke[] = { "t", "pid", "tid", "ev", "ptr",
					"size", "gen", "dev", NULL };
static const char *const k_exit[] = { "ev", "t", "pid", "tid", "events",
				      "dropped", "live", "live_bytes", NULL };

#define HI "say \"hi\"\n"

static struct gh_evrec full_rec(unsigned int ev)
{
	struct gh_evrec r;

	memset(&r, 0, sizeof(r));
	r.t_ns = 1000 + ev;
	r.dur_ns = 77;
	r.tid = 4242;
	r.ev = (uint16_t)ev;
	switch (ev) {
	case GH_EV_ALLOC:
	case GH_EV_FREE:
	case GH_EV_RESTORE:
		gh_evrec_str(r.u.mem.api, "cuFoo_v2");
		r.u.mem.ptr = 0x7f0000001000ull;
		r.u.mem.size = 123456789012ull;
		r.u.mem.dev = 1;
		r.u.mem.gen = 42;
		r.u.mem.kind = GDRHOOK_KIND_HOST_REGISTERED;
		r.u.mem.ctx = 0xabcdef;
		r.u.mem.rc = -3;
		break;
	case GH_EV_CTX_DESTROY:
	case GH_EV_CTX_RESET:
	case GH_EV_CTX_RELEASE:
		gh_evrec_str(r.u.ctx.api, "cuFoo_v2");
		r.u.ctx.ctx = 0xabcdef;
		r.u.ctx.dev = 1;
		r.u.ctx.rc = -3;
		r.u.ctx.dropped = 0x6666;
		r.u.ctx.dropped_bytes = 0x5555;
		break;
	case GH_EV_POOL_TRIM:
	case GH_EV_POOL_DESTROY:
		gh_evrec_str(r.u.pool.api, "cuFoo_v2");
		r.u.pool.pool = 0xabcdef;
		r.u.pool.rc = -3;
		break;
	case GH_EV_UNTRUSTED:
		gh_evrec_str(r.u.untrusted.api, "cuFoo_v2");
		gh_evrec_str(r.u.untrusted.why, HI);
		break;
	case GH_EV_AUDIT:
		gh_evrec_str(r.u.audit.api, "cuFoo_v2");
		r.u.audit.ptr = 0x7f0000001000ull;
		r.u.audit.gen = 42;
		gh_evrec_str(r.u.audit.what, HI);
		break;
	case GH_EV_PIN:
	case GH_EV_UNPIN:
		r.u.pin.ptr = 0x7f0000001000ull;
		r.u.pin.gen = 42;
		r.u.pin.dev = 1;
		gh_evrec_str(r.u.pin.backend, HI);
		r.u.pin.rc = -3;
		break;
	case GH_EV_REG:
	case GH_EV_DEREG:
		r.u.reg.ptr = 0x7f0000001000ull;
		r.u.reg.gen = 42;
		r.u.reg.mr = 0x5555;
		r.u.reg.pd = 0x6666;
		r.u.reg.access = 7;
		r.u.reg.rc = -3;
		break;
	case GH_EV_HIT:
	case GH_EV_MISS:
		gh_evrec_str(r.u.lookup.api, "ibv_reg_mr");
		r.u.lookup.ptr = 0x7f0000001000ull;
		r.u.lookup.gen = 42;
		r.u.lookup.dev = 1;
		r.u.lookup.mr = 0x5555;
		r.u.lookup.pd = 0x6666;
		r.u.lookup.access = 7;
		break;
	case GH_EV_REVOKE:
		r.u.revoke.ptr = 0x7f0000001000ull;
		r.u.revoke.gen = 42;
		r.u.revoke.dev = 1;
		break;
	}
	return r;
}

TEST(record_fields_exact)
{
	struct lines l;
	struct obj *o;
	struct gh_evrec r;
	char pid[32];
	int i = 0;

	mk_tdir();
	snprintf(pid, sizeof(pid), "%d", getpid());
	CHECK_EQ(gh_evlog_configure(tpath("log"), 0), 0);
	for (unsigned int ev = 1; ev < GH_EV_COUNT_; ev++) {
		r = full_rec(ev);
		gh_evlog_put(&r);
	}
	/* flag variants */
	r = full_rec(GH_EV_FREE);
	r.flags = GH_EVF_NOT_TRACKED | GH_EVF_IMPLICIT;
	r.u.mem.kind = 0;
	gh_evlog_put(&r);
	r = full_rec(GH_EV_REG);
	r.flags = GH_EVF_IMPLICIT;	/* not a reg flag: no key */
	gh_evlog_put(&r);
	r = full_rec(GH_EV_UNTRUSTED);
	gh_evrec_str(r.u.untrusted.why, NULL);
	gh_evlog_put(&r);
	r = full_rec(GH_EV_ALLOC);
	r.u.mem.kind = 200;	/* out of range: written as a number */
	r.tid = 0;		/* filled in by put */
	gh_evlog_put(&r);
	gh_evlog_shutdown(3, 4096);

	check_json(tpath("log"));
	l = read_lines(tpath("log"));
	CHECK_EQ(l.n, 1 + (GH_EV_COUNT_ - 1) + 4 + 1);

	o = parse_line(l.v[i++]);
	check_keys(o, k_start);
	CHECK_STR(get(o, "ev"), "start");
	CHECK_EQ(geti(o, "v"), 2);
	CHECK_STR(get(o, "pid"), pid);
	{
		char exe[4096];
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

		CHECK(n > 0);
		exe[n] = '\0';
		CHECK(is_str(o, "exe"));
		CHECK_STR(get(o, "exe"), exe);
		CHECK_EQ(geti(o, "tid"), gh_gettid());
	}
	CHECK(geti(o, "wall_ns") > 1600000000ll * 1000000000ll);

	for (unsigned int ev = 1; ev < GH_EV_COUNT_; ev++) {
		o = parse_line(l.v[i++]);
		CHECK_EQ(geti(o, "t"), 1000 + ev);
		CHECK_STR(get(o, "pid"), pid);
		CHECK_EQ(geti(o, "tid"), 4242);
		CHECK_STR(get(o, "ev"), gh_ev_name(ev));
		switch (ev) {
		case GH_EV_ALLOC:
		case GH_EV_FREE:
		case GH_EV_RESTORE:
			check_keys(o, k_alloc);
			CHECK_STR(get(o, "api"), "cuFoo_v2");
			CHECK_STR(get(o, "ptr"), "0x7f0000001000");
			CHECK(is_str(o, "ptr"));
			CHECK_STR(get(o, "size"), "123456789012");
			CHECK_EQ(geti(o, "dev"), 1);
			CHECK_EQ(geti(o, "gen"), 42);
			CHECK_STR(get(o, "kind"), "host_registered");
			CHECK_STR(get(o, "ctx"), "0xabcdef");
			CHECK_EQ(geti(o, "rc"), -3);
			CHECK_EQ(geti(o, "dur_ns"), 77);
			break;
		case GH_EV_CTX_DESTROY:
		case GH_EV_CTX_RESET:
		case GH_EV_CTX_RELEASE:
			check_keys(o, k_ctx);
			CHECK_STR(get(o, "ctx"), "0xabcdef");
			CHECK_EQ(geti(o, "dropped"), 0x6666);
			CHECK_EQ(geti(o, "dropped_bytes"), 0x5555);
			CHECK_EQ(geti(o, "rc"), -3);
			break;
		case GH_EV_POOL_TRIM:
		case GH_EV_POOL_DESTROY:
			check_keys(o, k_pool);
			CHECK_STR(get(o, "pool"), "0xabcdef");
			break;
		case GH_EV_UNTRUSTED:
			check_keys(o, k_untr);
			CHECK_STR(get(o, "why"), HI);
			break;
		case GH_EV_AUDIT:
			check_keys(o, k_audit);
			CHECK_STR(get(o, "what"), "say \"hi\"\n");
			break;
		case GH_EV_PIN:
		case GH_EV_UNPIN:
			check_keys(o, k_pin);
			CHECK_STR(get(o, "backend"), "say \"hi\"\n");
			CHECK_EQ(geti(o, "dur_ns"), 77);
			break;
		case GH_EV_REG:
		case GH_EV_DEREG:
			check_keys(o, k_reg);
			CHECK_STR(get(o, "mr"), "0x5555");
			CHECK_STR(get(o, "pd"), "0x6666");
			CHECK_EQ(geti(o, "access"), 7);
			CHECK_EQ(geti(o, "rc"), -3);
			break;
		case GH_EV_HIT:
		case GH_EV_MISS:
			check_keys(o, k_lookup);
			CHECK_STR(get(o, "api"), "ibv_reg_mr");
			CHECK_STR(get(o, "mr"), "0x5555");
			CHECK_STR(get(o, "pd"), "0x6666");
			CHECK_EQ(geti(o, "dev"), 1);
			CHECK_EQ(geti(o, "access"), 7);
			CHECK_EQ(geti(o, "dur_ns"), 77);
			break;
		case GH_EV_REVOKE:
			check_keys(o, k_revoke);
			CHECK_STR(get(o, "ptr"), "0x7f0000001000");
			CHECK_EQ(geti(o, "gen"), 42);
			CHECK_EQ(geti(o, "dev"), 1);
			break;
		default:
			TH_FAIL("event %u has no expectation", ev);
		}
	}
	o = parse_line(l.v[i++]);
	check_keys(o, k_free_x);
	CHECK_STR(get(o, "tracked"), "false");
	CHECK_STR(get(o, "implicit"), "true");
	CHECK_STR(get(o, "kind"), "none");
	o = parse_line(l.v[i++]);
	check_keys(o, k_reg);
	o = parse_line(l.v[i++]);
	check_keys(o, k_untr);
	CHECK_STR(get(o, "why"), "");
	CHECK(is_str(o, "why"));
	o = parse_line(l.v[i++]);
	CHECK_EQ(geti(o, "kind"), 200);
	CHECK_EQ(geti(o, "tid"), gh_gettid());

	o = parse_line(l.v[i++]);
	check_keys(o, k_exit);
	CHECK_EQ(geti(o, "events"), GH_EV_COUNT_ - 1 + 4);
	CHECK_EQ(geti(o, "dropped"), 0);
	CHECK_EQ(geti(o, "live"), 3);
	CHECK_EQ(geti(o, "live_bytes"), 4096);
	CHECK_EQ(gh_evlog_written(), GH_EV_COUNT_ - 1 + 4);
	rm_tdir();
}

TEST(put_preserves_errno)
{
	mk_tdir();
	CHECK_EQ(gh_evlog_configure(tpath("log"), 0), 0);
	errno = 1234;
	put(GH_EV_ALLOC, 1);		/* first: maps a ring, starts writer */
	CHECK_EQ(errno, 1234);
	put(GH_EV_FREE, 1);
	CHECK_EQ(errno, 1234);
	gh_evlog_flush();
	CHECK_EQ(errno, 1234);
	gh_evlog_shutdown(0, 0);
	CHECK_EQ(errno, 1234);
	rm_tdir();
}

TEST(pid_substitution)
{
	char name[64];
	struct lines l;

	mk_tdir();
	CHECK_EQ(gh_evlog_configure(tpath("log.%p.%%.json"), 0), 0);
	put(GH_EV_ALLOC, 1);
	gh_evlog_shutdown(0, 0);
	snprintf(name, sizeof(name), "log.%d.%%.json", getpid());
	l = read_lines(tpath(name));
	CHECK_EQ(l.n, 3);
	rm_tdir();
}

TEST(stderr_target)
{
	struct lines l;
	int fd;

	mk_tdir();
	fflush(stderr);
	fd = open(tpath("err"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK(dup2(fd, 2) == 2);
	close(fd);
	CHECK_EQ(gh_evlog_configure("stderr", 0), 0);
	put(GH_EV_ALLOC, 1);
	put(GH_EV_FREE, 1);
	gh_evlog_shutdown(0, 0);
	/* fd 2 stays open after shutdown */
	CHECK(write(2, "", 0) == 0);
	l = read_lines(tpath("err"));
	CHECK_EQ(l.n, 4);
	CHECK_STR(get(parse_line(l.v[0]), "ev"), "start");
	CHECK_STR(get(parse_line(l.v[1]), "ev"), "alloc");
	CHECK_STR(get(parse_line(l.v[3]), "ev"), "exit");
	rm_tdir();
}

TEST(appends_not_truncates)
{
	struct lines l;
	int fd;

	mk_tdir();
	fd = open(tpath("log"), O_WRONLY | O_CREAT, 0644);
	CHECK(fd >= 0);
	CHECK(write(fd, "{\"old\":1}\n", 10) == 10);
	close(fd);
	CHECK_EQ(gh_evlog_configure(tpath("log"), 0), 0);
	put(GH_EV_ALLOC, 1);
	gh_evlog_shutdown(0, 0);
	l = read_lines(tpath("log"));
	CHECK_EQ(l.n, 4);
	CHECK_STR(l.v[0], "{\"old\":1}");
	rm_tdir();
}

/* ---------------------------------------------------------------- */
/* flush, drops                                                      */

TEST(flush_is_synchronous)
{
	struct lines l;

	mk_tdir();
	CHECK_EQ(gh_evlog_configure(tpath("log"), 0), 0);
	for (int i = 0; i < 10; i++)
		put(GH_EV_ALLOC, (uint64_t)i);
	gh_evlog_flush();
	l = read_lines(tpath("log"));
	CHECK_EQ(l.n, 11);
	CHECK_EQ(gh_evlog_written(), 10);
	for (int i = 0; i < 10; i++)
		put(GH_EV_FREE, (uint64_t)i);
	gh_evlog_flush();
	l = read_lines(tpath("log"));
	CHECK_EQ(l.n, 21);
	CHECK_EQ(count_ev(&l, "free"), 10);
	gh_evlog_shutdown(0, 0);
	rm_tdir();
}

TEST(full_ring_counts_drops_exactly)
{
	struct lines l;
	struct obj *o;

	mk_tdir();
	/* 16 records per ring */
	CHECK_EQ(gh_evlog_configure(tpath("log"),
				    16 * GH_EVLOG_REC_BYTES), 0);
	put(GH_EV_ALLOC, 0);
	gh_evlog_flush();
	CHECK_EQ(gh_evlog_written(), 1);
	/* holds the consumer lock (after draining): the writer is stuck */
	gh_evlog_atfork_prepare();
	for (int i = 1; i <= 100; i++)
		put(GH_EV_ALLOC, (uint64_t)i);
	CHECK_EQ(gh_evlog_dropped(), 84);
	gh_evlog_atfork_parent();
	gh_evlog_flush();
	CHECK_EQ(gh_evlog_written(), 17);
	gh_evlog_shutdown(0, 0);

	l = read_lines(tpath("log"));
	CHECK_EQ(l.n, 1 + 17 + 1);
	/* the first 16 of the burst survive, in order */
	for (int i = 0; i <= 16; i++)
		CHECK_EQ(geti(parse_line(l.v[1 + i]), "ptr"), i);
	o = parse_line(l.v[l.n - 1]);
	CHECK_EQ(geti(o, "events"), 17);
	CHECK_EQ(geti(o, "dropped"), 84);
	rm_tdir();
}

/* ---------------------------------------------------------------- */
/* threads                                                           */

#define MT_THREADS	4
#define MT_EVENTS	20000

static void *mt_body(void *arg)
{
	uintptr_t id = (uintptr_t)arg;

	for (uint64_t i = 0; i < MT_EVENTS; i++) {
		put(GH_EV_ALLOC, (id << 32) | i);
		if (!(i % 256))
			usleep(1000);	/* bursts of ~250 k events/s */
	}
	return NULL;
}

TEST(multithread_order_per_thread)
{
	pthread_t th[MT_THREADS];
	uint64_t next[MT_THREADS] = { 0 };
	int32_t tid_of[MT_THREADS] = { 0 };
	struct lines l;
	struct obj *o;
	uint64_t total = 0;

	mk_tdir();
	CHECK_EQ(gh_evlog_configure(tpath("log"), 0), 0);
	for (uintptr_t i = 0; i < MT_THREADS; i++)
		CHECK(!pthread_create(&th[i], NULL, mt_body, (void *)i));
	for (int i = 0; i < MT_THREADS; i++)
		pthread_join(th[i], NULL);
	gh_evlog_shutdown(0, 0);
	CHECK_EQ(gh_evlog_written() + gh_evlog_dropped(),
		 MT_THREADS * MT_EVENTS);

	l = read_lines(tpath("log"));
	for (int i = 1; i < l.n - 1; i++) {
		uint64_t v, id, seq;

		o = parse_line(l.v[i]);
		v = (uint64_t)strtoull(get(o, "ptr"), NULL, 16);
		id = v >> 32;
		seq = v & 0xffffffffu;
		CHECK(id < MT_THREADS);
		if (!tid_of[id])
			tid_of[id] = (int32_t)geti(o, "tid");
		CHECK_EQ(geti(o, "tid"), tid_of[id]);
		/* order per thread; gaps only where events were dropped */
		CHECK(seq >= next[id]);
		if (!gh_evlog_dropped())
			CHECK_EQ(seq, next[id]);
		next[id] = seq + 1;
		total++;
	}
	CHECK_EQ(total, gh_evlog_written());
	/* The default ring is enough at full speed; a sanitized writer is
	 * 3-5x slower, so there only order and accounting are checked. */
	if (!UNDER_TSAN && !UNDER_ASAN)
		CHECK_EQ(gh_evlog_dropped(), 0);
	rm_tdir();
}

static void *exit_body(void *arg)
{
	uintptr_t id = (uintptr_t)arg;

	for (uint64_t i = 0; i < 100; i++)
		put(GH_EV_FREE, (id << 32) | i);
	return NULL;
}

TEST(thread_exit_loses_nothing)
{
	struct lines l;
	pthread_t th;
	int n = 0;

	mk_tdir();
	CHECK_EQ(gh_evlog_configure(tpath("log"),
				    128 * GH_EVLOG_REC_BYTES), 0);
	for (uintptr_t i = 0; i < 200; i++) {
		/* exit without anyone flushing: the ring is orphaned */
		CHECK(!pthread_create(&th, NULL, exit_body, (void *)i));
		pthread_join(th, NULL);
		if (i % 50 == 0)
			usleep(60 * 1000);	/* let the writer recycle */
	}
	gh_evlog_flush();
	CHECK_EQ(gh_evlog_written(), 200 * 100);
	CHECK_EQ(gh_evlog_dropped(), 0);
	gh_evlog_shutdown(0, 0);
	l = read_lines(tpath("log"));
	n = count_ev(&l, "free");
	CHECK_EQ(n, 200 * 100);
	rm_tdir();
}

static volatile int sp_put, sp_go;

static void *spare_body(void *arg)
{
	put(GH_EV_FREE, 2);
	__atomic_store_n(&sp_put, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&sp_go, __ATOMIC_ACQUIRE))
		usleep(1000);
	return NULL;
}

/*
 * The writer keeps a spare ring reserved and mapped, so a new thread's
 * first event takes it instead of reserving 12 MiB inside the hook; and
 * it faults in the pages of a ring a thread had to make itself.
 */
TEST(new_thread_takes_the_writers_spare_ring)
{
	struct gh_ring *mine, *spare = NULL;
	pthread_t th;
	int i;

	mk_tdir();
	CHECK_EQ(gh_evlog_configure(tpath("log"), 0), 0);
	put(GH_EV_FREE, 1);	/* this thread's ring, made here */
	mine = ring_in(GH_RING_OWNED);
	if (!mine)
		SKIP("no room in /dev/shm for the spool");
	/* the writer's period is 50 ms: allow it 10 s on a loaded machine */
	for (i = 0; i < 1000 && !(spare = ring_in(GH_RING_FREE)); i++)
		usleep(10 * 1000);
	CHECK(spare != NULL);
	CHECK(spare != mine);
	CHECK_EQ(__atomic_load_n(&spare->populated, __ATOMIC_RELAXED), 1);
	for (i = 0; i < 1000 &&
	     !__atomic_load_n(&mine->populated, __ATOMIC_RELAXED); i++)
		usleep(10 * 1000);
	CHECK_EQ(__atomic_load_n(&mine->populated, __ATOMIC_RELAXED), 1);
	CHECK(!pthread_create(&th, NULL, spare_body, NULL));
	while (!__atomic_load_n(&sp_put, __ATOMIC_ACQUIRE))
		usleep(1000);
	/* the new thread's one event went into the spare */
	CHECK_EQ(__atomic_load_n(&spare->state, __ATOMIC_ACQUIRE),
		 GH_RING_OWNED);
	CHECK_EQ(__atomic_load_n(&spare->head, __ATOMIC_ACQUIRE), 1);
	__atomic_store_n(&sp_go, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	gh_evlog_flush();
	CHECK_EQ(gh_evlog_written(), 2);
	CHECK_EQ(gh_evlog_dropped(), 0);
	gh_evlog_shutdown(0, 0);
	rm_tdir();
}

/* ---------------------------------------------------------------- */
/* fork                                                              */

static volatile int fk_stop;

static void *fk_emitter(void *arg)
{
	uint64_t i = 0;

	(void)arg;
	/* bounded: a slow (sanitized, loaded) run must not grow the log */
	while (!__atomic_load_n(&fk_stop, __ATOMIC_RELAXED) && i < 20000) {
		put(GH_EV_HIT, i++);
		if (!(i % 16))
			usleep(200);	/* well below the writer's rate */
	}
	return NULL;
}

#define FK_CHILDREN	20

TEST_TIMEOUT(fork_child_own_records_no_deadlock, 120)
{
	pthread_t th[3];
	pid_t kids[FK_CHILDREN];
	struct lines l;
	int seen[FK_CHILDREN] = { 0 };

	/*
	 * The child starts its writer thread.  glibc makes that work after
	 * a threaded fork; the sanitizer runtimes do not (tsan: "dup thread
	 * with used id"; asan: its allocator lock, held by a parent thread
	 * at fork, stays locked in the child).
	 */
	if (UNDER_TSAN || UNDER_ASAN)
		SKIP("sanitizer runtimes cannot start a thread in the child "
		     "of a threaded fork");
	mk_tdir();
	CHECK(!pthread_atfork(gh_evlog_atfork_prepare, gh_evlog_atfork_parent,
			      gh_evlog_atfork_child));
	CHECK_EQ(gh_evlog_configure(tpath("log"), 0), 0);
	put(GH_EV_ALLOC, 1);
	for (int i = 0; i < 3; i++)
		CHECK(!pthread_create(&th[i], NULL, fk_emitter, NULL));
	for (int k = 0; k < FK_CHILDREN; k++) {
		kids[k] = fork();
		CHECK(kids[k] >= 0);
		if (kids[k] == 0) {
			alarm(20);
			/* the child's tid is its pid again */
			if (gh_gettid() != getpid())
				_exit(3);
			if (gh_evlog_written() || gh_evlog_dropped())
				_exit(4);
			for (int i = 0; i < 5; i++)
				put(GH_EV_MISS, 0x100 + (uint64_t)i);
			gh_evlog_shutdown(0, 0);
			_exit(0);
		}
		usleep(2000);
	}
	for (int k = 0; k < FK_CHILDREN; k++) {
		int st;

		CHECK(waitpid(kids[k], &st, 0) == kids[k]);
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			TH_FAIL("child %d: status 0x%x", kids[k], st);
	}
	__atomic_store_n(&fk_stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	gh_evlog_shutdown(0, 0);

	check_json(tpath("log"));
	l = read_lines(tpath("log"));
	for (int k = 0; k < FK_CHILDREN; k++) {
		/* child's lines: start, fork, 5 x miss, exit (in order) */
		int state = 0;

		for (int i = 0; i < l.n; i++) {
			struct obj *o = parse_line(l.v[i]);
			const char *ev = get(o, "ev");

			if (geti(o, "pid") != kids[k])
				continue;
			if (state == 0) {
				CHECK_STR(ev, "start");
			} else if (state == 1) {
				CHECK_STR(ev, "fork");
				CHECK_EQ(geti(o, "parent"), getpid());
				CHECK_EQ(geti(o, "tid"), kids[k]);
			} else if (state < 7) {
				CHECK_STR(ev, "miss");
				CHECK_EQ(geti(o, "ptr"), 0x100 + state - 2);
				CHECK_EQ(geti(o, "tid"), kids[k]);
			} else if (state == 7) {
				CHECK_STR(ev, "exit");
				CHECK_EQ(geti(o, "events"), 5);
				CHECK_EQ(geti(o, "dropped"), 0);
			} else {
				TH_FAIL("extra line for child %d: %s",
					kids[k], l.v[i]);
			}
			state++;
		}
		CHECK_EQ(state, 8);
		seen[k] = 1;
	}
	/* the parent: one start, no fork record, one exit at the end */
	{
		int starts = 0, forks = 0;
		struct obj *o;

		for (int i = 0; i < l.n; i++) {
			o = parse_line(l.v[i]);
			if (geti(o, "pid") != getpid())
				continue;
			if (!strcmp(get(o, "ev"), "start"))
				starts++;
			if (!strcmp(get(o, "ev"), "fork"))
				forks++;
		}
		CHECK_EQ(starts, 1);
		CHECK_EQ(forks, 0);
		o = parse_line(l.v[0]);
		CHECK_STR(get(o, "ev"), "start");
		CHECK_EQ(geti(o, "pid"), getpid());
	}
	(void)seen;
	rm_tdir();
}

/*
 * Children that record nothing leave nothing, never deadlock although
 * other threads emit (and the writer drains) while we fork, and start no
 * thread (so this case also runs under tsan).
 */
TEST_TIMEOUT(fork_while_emitting_silent_children, 120)
{
	pthread_t th[3];
	struct lines l;

	mk_tdir();
	CHECK(!pthread_atfork(gh_evlog_atfork_prepare, gh_evlog_atfork_parent,
			      gh_evlog_atfork_child));
	CHECK_EQ(gh_evlog_configure(tpath("log"), 0), 0);
	put(GH_EV_ALLOC, 1);
	__atomic_store_n(&fk_stop, 0, __ATOMIC_RELAXED);
	for (int i = 0; i < 3; i++)
		CHECK(!pthread_create(&th[i], NULL, fk_emitter, NULL));
	for (int k = 0; k < FK_CHILDREN; k++) {
		pid_t pid = fork();
		int st;

		CHECK(pid >= 0);
		if (pid == 0) {
			alarm(20);
			gh_evlog_flush();
			if (gh_evlog_written() || gh_evlog_dropped())
				_exit(4);
			gh_evlog_shutdown(0, 0);
			_exit(0);
		}
		CHECK(waitpid(pid, &st, 0) == pid);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		usleep(1000);
	}
	__atomic_store_n(&fk_stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	gh_evlog_shutdown(0, 0);
	l = read_lines(tpath("log"));
	for (int i = 0; i < l.n; i++)
		CHECK_EQ(geti(parse_line(l.v[i]), "pid"), getpid());
	CHECK_EQ(count_ev(&l, "start"), 1);
	CHECK_EQ(count_ev(&l, "exit"), 1);
	CHECK_EQ(count_ev(&l, "hit") + 1, gh_evlog_written());
	rm_tdir();
}

/* ---------------------------------------------------------------- */
/* cost (printed, not checked)                                       */

TEST(bench_put_and_writer)
{
	/* smaller under sanitizers: their copies cost 10x, not the point here */
	enum { N = UNDER_TSAN || UNDER_ASAN ? 1 << 16 : 1 << 19 };
	uint64_t t0, t1, t2;

	mk_tdir();
	CHECK_EQ(gh_evlog_configure(tpath("log"),
				    (uint64_t)N * GH_EVLOG_REC_BYTES), 0);
	put(GH_EV_ALLOC, 0);
	gh_evlog_flush();
	/* warm the ring's pages, then measure with the consumer held off */
	gh_evlog_atfork_prepare();
	for (int i = 0; i < N - 1; i++)
		put(GH_EV_ALLOC, (uint64_t)i);
	gh_evlog_atfork_parent();
	gh_evlog_flush();

	gh_evlog_atfork_prepare();
	{
		struct gh_evrec r = mkrec(GH_EV_ALLOC, 0);

		t0 = gh_now_ns();
		for (int i = 0; i < N; i++) {
			r.u.mem.ptr = (uint64_t)i << 12;
			gh_evlog_put(&r);
		}
		t1 = gh_now_ns();
	}
	gh_evlog_atfork_parent();
	gh_evlog_flush();
	t2 = gh_now_ns();
	CHECK_EQ(gh_evlog_dropped(), 0);
	printf("  gh_evlog_put: %.1f ns/event, consumer idle; "
	       "writer: %.2f M events/s to a file\n",
	       (double)(t1 - t0) / N, N / ((double)(t2 - t1) / 1e3));

	/* the same with the writer draining concurrently (woken at 1/4) */
	{
		struct gh_evrec r = mkrec(GH_EV_FREE, 0);

		t0 = gh_now_ns();
		for (int i = 0; i < N; i++) {
			r.u.mem.ptr = (uint64_t)i << 12;
			gh_evlog_put(&r);
		}
		t1 = gh_now_ns();
	}
	gh_evlog_flush();
	printf("  gh_evlog_put: %.1f ns/event, writer draining; dropped %llu\n",
	       (double)(t1 - t0) / N,
	       (unsigned long long)gh_evlog_dropped());
	gh_evlog_shutdown(0, 0);
	rm_tdir();
}

/* ---------------------------------------------------------------- */
/* the log never hurts the program (issue 11, seen 1, 2, 5, 7)      */

/* A FIFO nobody reads: opening does not block, the sink is abandoned. */
TEST_TIMEOUT(fifo_without_reader_never_hangs, 30)
{
	uint64_t t0;

	mk_tdir();
	CHECK_EQ(mkfifo(tpath("fifo"), 0600), 0);
	CHECK_EQ(gh_evlog_configure(tpath("fifo"), 0), 0);
	t0 = gh_now_ns();
	put(GH_EV_ALLOC, 1);
	put(GH_EV_FREE, 1);
	gh_evlog_flush();
	put(GH_EV_ALLOC, 2);		/* after abandonment: counted */
	gh_evlog_atfork_prepare();	/* fork would take the same path */
	gh_evlog_atfork_parent();
	gh_evlog_shutdown(0, 0);
	CHECK(gh_now_ns() - t0 < 5000000000ull);
	CHECK_EQ(gh_evlog_written(), 0);
	CHECK_EQ(gh_evlog_dropped(), 3);
	rm_tdir();
}

/* The reader goes away: no SIGPIPE, disposition untouched, loss counted. */
TEST(reader_gone_no_sigpipe)
{
	struct sigaction sa;
	sigset_t pend;
	int p[2];

	CHECK_EQ(pipe(p), 0);
	close(p[0]);
	CHECK(dup2(p[1], 2) == 2);	/* stderr: a pipe with no reader */
	close(p[1]);
	CHECK_EQ(gh_evlog_configure("stderr", 0), 0);
	for (int i = 0; i < 10; i++)
		put(GH_EV_ALLOC, (uint64_t)i);
	gh_evlog_flush();
	put(GH_EV_FREE, 1);
	gh_evlog_shutdown(0, 0);
	CHECK_EQ(gh_evlog_written(), 0);
	CHECK_EQ(gh_evlog_dropped(), 11);
	CHECK_EQ(sigaction(SIGPIPE, NULL, &sa), 0);
	CHECK(sa.sa_handler == SIG_DFL);
	CHECK_EQ(sigpending(&pend), 0);
	CHECK(!sigismember(&pend, SIGPIPE));
}

/* A FIFO whose reader takes 200 bytes and leaves. */
TEST_TIMEOUT(fifo_reader_leaves, 30)
{
	pid_t rd;
	int st;

	mk_tdir();
	CHECK_EQ(mkfifo(tpath("fifo"), 0600), 0);
	rd = fork();
	if (rd == 0) {
		char buf[200];
		int fd = open(tpath("fifo"), O_RDONLY);
		size_t got = 0;

		while (fd >= 0 && got < sizeof(buf)) {
			ssize_t n = read(fd, buf, sizeof(buf) - got);

			if (n <= 0)
				break;
			got += (size_t)n;
		}
		_exit(0);
	}
	/* wait for the reader to open its end */
	for (int i = 0; i < 500; i++) {
		int fd = open(tpath("fifo"), O_WRONLY | O_NONBLOCK);

		if (fd >= 0) {
			close(fd);
			break;
		}
		usleep(10000);
	}
	CHECK_EQ(gh_evlog_configure(tpath("fifo"), 0), 0);
	for (int i = 0; i < 20000; i++)
		put(GH_EV_ALLOC, (uint64_t)i);
	gh_evlog_flush();
	CHECK_EQ(waitpid(rd, &st, 0), rd);
	for (int i = 0; i < 100; i++)
		put(GH_EV_FREE, (uint64_t)i);
	gh_evlog_shutdown(0, 0);
	/* every event is either written or counted */
	CHECK_EQ(gh_evlog_written() + gh_evlog_dropped(), 20100);
	CHECK(gh_evlog_dropped() >= 100);
	rm_tdir();
}

TEST(created_0600_nofollow)
{
	struct stat st;

	mk_tdir();
	umask(0);
	CHECK_EQ(gh_evlog_configure(tpath("log"), 0), 0);
	put(GH_EV_ALLOC, 1);
	gh_evlog_shutdown(0, 0);
	CHECK_EQ(stat(tpath("log"), &st), 0);
	CHECK_EQ(st.st_mode & 0777, 0600);

	/* a symlink at the path is not followed: nothing is written */
	CHECK_EQ(close(open(tpath("target"), O_CREAT | O_WRONLY, 0600)), 0);
	CHECK_EQ(symlink(tpath("target"), tpath("link")), 0);
	CHECK_EQ(gh_evlog_configure(tpath("link"), 0), 0);
	put(GH_EV_ALLOC, 1);
	gh_evlog_shutdown(0, 0);
	CHECK_EQ(stat(tpath("target"), &st), 0);
	CHECK_EQ(st.st_size, 0);
	CHECK_EQ(gh_evlog_dropped(), 1);
	rm_tdir();
}

/* /dev/full: every write fails, every event is counted as dropped. */
TEST(dev_full_counted)
{
	CHECK_EQ(gh_evlog_configure("/dev/full", 0), 0);
	for (int i = 0; i < 5; i++)
		put(GH_EV_ALLOC, (uint64_t)i);
	gh_evlog_flush();
	gh_evlog_shutdown(0, 0);
	CHECK_EQ(gh_evlog_written(), 0);
	CHECK_EQ(gh_evlog_dropped(), 5);
}

/* seen 4: start is stamped at configure (init), before any event. */
TEST(start_stamped_at_init)
{
	uint64_t before, after, start_t;
	struct lines l;
	struct obj *o;

	mk_tdir();
	before = gh_now_ns();
	CHECK_EQ(gh_evlog_configure(tpath("log"), 0), 0);
	after = gh_now_ns();
	usleep(20000);
	put(GH_EV_ALLOC, 1);
	gh_evlog_shutdown(0, 0);
	l = read_lines(tpath("log"));
	CHECK_EQ(l.n, 3);
	o = parse_line(l.v[0]);
	CHECK_STR(get(o, "ev"), "start");
	start_t = (uint64_t)geti(o, "t");
	CHECK(start_t >= before && start_t <= after);
	o = parse_line(l.v[1]);
	CHECK((uint64_t)geti(o, "t") >= start_t + 20000000ull);
	rm_tdir();
}

/* seen 7: a relative path is resolved at configure, not at first event. */
TEST(relative_path_resolved_at_start)
{
	char cwd[512];
	struct stat st;

	mk_tdir();
	CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
	CHECK_EQ(chdir(tdir), 0);
	CHECK_EQ(gh_evlog_configure("rel.log", 0), 0);
	CHECK_EQ(chdir("/"), 0);
	put(GH_EV_ALLOC, 1);
	gh_evlog_shutdown(0, 0);
	CHECK_EQ(stat(tpath("rel.log"), &st), 0);
	CHECK_EQ(chdir(cwd), 0);
	rm_tdir();
}

/* %h is the host name, %p the pid, also at the end of a long name. */
TEST(host_and_pid_in_name)
{
	char host[64], want[1024], name[300];
	struct stat st;

	mk_tdir();
	CHECK_EQ(gethostname(host, sizeof(host)), 0);
	memset(name, 'x', 200);
	memcpy(name + 200, "-%h-%p", 7);
	snprintf(want, sizeof(want), "%s/%s", tdir, name);
	CHECK_EQ(gh_evlog_configure(want, 0), 0);
	put(GH_EV_ALLOC, 1);
	gh_evlog_shutdown(0, 0);
	memset(name, 'x', 200);
	snprintf(name + 200, sizeof(name) - 200, "-%.60s-%d", host, getpid());
	snprintf(want, sizeof(want), "%s/%s", tdir, name);
	CHECK_EQ(stat(want, &st), 0);
	rm_tdir();
}

/* A torn last line left by a process that died writing is ended before
 * anything is appended after it. */
TEST(torn_line_ended_after_a_death)
{
	struct lines l;
	pid_t pid;
	FILE *f;
	int st;

	mk_tdir();
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		if (gh_evlog_configure(tpath("log"), 0))
			_exit(99);
		gh_evlog_atfork_prepare();	/* the writer cannot drain */
		put(GH_EV_ALLOC, 1);
		f = fopen(tpath("log"), "w");
		fputs("{\"t\":1,\"ev\":\"alloc\",\"api\":\"cuMemAl", f);
		fclose(f);
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK_EQ(gh_evlog_configure(tpath("next"), 0), 0);
	gh_evlog_shutdown(0, 0);
	l = read_lines(tpath("log"));
	CHECK_EQ(l.n, 3);
	CHECK(!strncmp(l.v[1], "{\"ev\":\"recovered\"", 17));
	CHECK(!strncmp(l.v[2], "{\"t\":", 5));
	rm_tdir();
}

/* ---------------------------------------------------------------- */
/* GDRHOOK_TRACE_MODE=block (seen 8)                                   */

TEST_TIMEOUT(block_mode_loses_nothing, 120)
{
	struct lines l;

	mk_tdir();
	CHECK_EQ(gh_evlog_configure(tpath("log"), 16 * GH_EVLOG_REC_BYTES),
		 0);
	gh_evlog_set_block(1);
	for (int i = 0; i < 50000; i++)
		put(GH_EV_ALLOC, (uint64_t)i);
	gh_evlog_shutdown(0, 0);
	CHECK_EQ(gh_evlog_dropped(), 0);
	CHECK_EQ(gh_evlog_written(), 50000);
	l = read_lines(tpath("log"));
	CHECK_EQ(count_ev(&l, "alloc"), 50000);
	rm_tdir();
}

/* The default ring holds a burst of 200 k events with nobody draining. */
TEST(default_ring_holds_a_burst)
{
	mk_tdir();
	CHECK_EQ(gh_evlog_configure(tpath("log"), 0), 0);
	put(GH_EV_ALLOC, 0);
	gh_evlog_flush();
	gh_evlog_atfork_prepare();
	for (int i = 0; i < 40000; i++)
		put(GH_EV_ALLOC, (uint64_t)i);
	gh_evlog_atfork_parent();
	gh_evlog_shutdown(0, 0);
	CHECK_EQ(gh_evlog_dropped(), 0);
	rm_tdir();
}

TEST_MAIN()
