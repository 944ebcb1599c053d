// SPDX-License-Identifier: MIT
/*
 * Event log throughput: how many events per second the writer sustains
 * (GDRHOOK_TRACE_MODE=block, so nothing is lost and the writer is the
 * limit), and what GDRHOOK_TRACE_MODE=drop loses with the default ring when
 * producers outrun it.  Anchor, measured in the same run: write(2) of
 * the same number of bytes of preformatted lines to the same target, the
 * most any writer could do there.
 *
 *   bench_evlog [events] [dir]     (defaults: 2000000, $TMPDIR or /tmp)
 */
#include <fcntl.h>
#include <time.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gdrhook.h"
#include "evlog/evlog.h"

static uint64_t n_events;

static void rec(struct gh_evrec *r, uint64_t i)
{
	gh_evrec_start(r, i & 1 ? GH_EV_FREE : GH_EV_ALLOC, 0);
	gh_evrec_str(r->u.mem.api, i & 1 ? "cuMemFree_v2" : "cuMemAlloc_v2");
	r->u.mem.ptr = 0x7f0000000000ull + ((i >> 1) << 20);
	r->u.mem.size = 1 << 20;
	r->u.mem.gen = i >> 1;
	r->u.mem.kind = GDRHOOK_KIND_DEVICE;
	r->u.mem.ctx = 0x5555;
	r->dur_ns = 1234;
}

static void *producer(void *arg)
{
	uint64_t n = (uint64_t)(uintptr_t)arg;
	struct gh_evrec r;

	for (uint64_t i = 0; i < n; i++) {
		rec(&r, i);
		gh_evlog_put(&r);
	}
	return NULL;
}

/* Run n events from nthreads producers; returns seconds to the last write. */
static double run(const char *path, int block, int nthreads, uint64_t n,
		  uint64_t *dropped_p, uint64_t *bytes_p)
{
	pthread_t th[16];
	uint64_t t0, t1;
	struct stat st;

	unlink(path);
	if (gh_evlog_configure(path, 0)) {
		fprintf(stderr, "cannot configure %s\n", path);
		exit(1);
	}
	gh_evlog_set_block(block);
	t0 = gh_now_ns();
	for (int i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, producer,
			       (void *)(uintptr_t)(n / nthreads));
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	gh_evlog_shutdown(0, 0);
	t1 = gh_now_ns();
	*dropped_p = gh_evlog_dropped();
	*bytes_p = stat(path, &st) ? 0 : (uint64_t)st.st_size;
	return (double)(t1 - t0) / 1e9;
}

/* The anchor: write(2) the same bytes, 256 KiB at a time. */
static double anchor(const char *path, uint64_t bytes)
{
	static char buf[256 << 10];
	uint64_t t0, done = 0;
	int fd;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = i % 200 == 199 ? '\n' : 'x';
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
	if (fd < 0)
		return 0;
	t0 = gh_now_ns();
	while (done < bytes) {
		size_t n = bytes - done < sizeof(buf) ? bytes - done :
			   sizeof(buf);
		ssize_t w = write(fd, buf, n);

		if (w <= 0)
			break;
		done += (uint64_t)w;
	}
	close(fd);
	return (double)(gh_now_ns() - t0) / 1e9;
}

static uint64_t cpu_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * The writer's ceiling on a machine of its own: formatting alone, in CPU
 * time of this thread (a loaded machine stretches wall time, not this).
 */
static double format_rate(uint64_t n)
{
	static char mem[1 << 20];
	struct gh_evrec r;
	struct gh_buf b;
	uint64_t t0, sink = 0;

	gh_buf_init(&b, mem, sizeof(mem));
	t0 = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
	for (uint64_t i = 0; i < n; i++) {
		if (gh_buf_room(&b) < 4096) {
			sink += b.len;
			gh_buf_reset(&b);
		}
		rec(&r, i);
		gh_ev_format_record(&b, &r, 4242);
	}
	sink += b.len;
	return n / ((double)(cpu_ns(CLOCK_THREAD_CPUTIME_ID) - t0) / 1e9) +
	       (double)(sink & 0);
}

int main(int argc, char **argv)
{
	const char *dir = argc > 2 ? argv[2] :
			  getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char path[4096], apath[4096];
	uint64_t dropped, bytes;
	double s, a;

	n_events = argc > 1 ? strtoull(argv[1], NULL, 0) : 2000000;
	snprintf(path, sizeof(path), "%s/bench_evlog.%d.jsonl", dir, getpid());
	snprintf(apath, sizeof(apath), "%s/bench_evlog.%d.anchor", dir,
		 getpid());

	printf("event log: %llu events, %d-byte records, default ring %u events per thread\n",
	       (unsigned long long)n_events, GH_EVLOG_REC_BYTES,
	       (unsigned)((12u << 20) / GH_EVLOG_REC_BYTES));
	for (int nt = 1; nt <= 4; nt *= 4) {
		s = run(path, 1, nt, n_events, &dropped, &bytes);
		a = anchor(apath, bytes);
		printf("  block, %d producer%s: writer sustains %.2f M events/s (%.0f MB/s); "
		       "dropped %llu; anchor write(2) of the same %.0f MB: %.0f MB/s\n",
		       nt, nt > 1 ? "s" : " ", n_events / s / 1e6,
		       bytes / s / 1e6, (unsigned long long)dropped,
		       bytes / 1e6, a > 0 ? bytes / a / 1e6 : 0.0);
		s = run(path, 0, nt, n_events, &dropped, &bytes);
		printf("  drop,  %d producer%s: %.2f M events/s offered, dropped %llu (%.1f%%)\n",
		       nt, nt > 1 ? "s" : " ", n_events / s / 1e6,
		       (unsigned long long)dropped,
		       100.0 * (double)dropped / (double)n_events);
	}
	{
		uint64_t c0 = cpu_ns(CLOCK_PROCESS_CPUTIME_ID), c1;

		s = run("/dev/null", 1, 1, n_events, &dropped, &bytes);
		c1 = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
		printf("  block, 1 producer, /dev/null: %.2f M events/s wall, %.0f ns of CPU per event (producer + writer)\n",
		       n_events / s / 1e6, (double)(c1 - c0) / n_events);
	}
	printf("  formatting alone: %.2f M events per CPU-second (the writer's ceiling)\n",
	       format_rate(n_events) / 1e6);
	unlink(path);
	unlink(apath);
	return 0;
}
