// SPDX-License-Identifier: MIT
/*
 * The event log's spool (src/evlog/evspool.c): the descriptors the shim
 * owns, the spool file in /dev/shm and its rings (reserved before they
 * are mapped, never a SIGBUS), what is said when there is no room, a
 * fork child's copy, and the spools of dead processes handed to recovery
 * (through the event log: abort, _exit, a fatal signal, SIGKILL and exec
 * keep the records).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "capture.h"
#include "evlog_util.h"

/*
 * /dev/shm of this case's own: a fresh tmpfs (of size, NULL: the
 * default) in a mount namespace of its own, so that no other process
 * claims this case's dead spools nor this case theirs.  Root only:
 * 0 where it cannot be done (then the machine's /dev/shm is used).
 */
static int private_shm(const char *size)
{
	char opt[32];

	snprintf(opt, sizeof(opt), "size=%s", size ? size : "50%");
	return geteuid() == 0 && !unshare(CLONE_NEWNS) &&
	       !mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) &&
	       !mount("tmpfs", "/dev/shm", "tmpfs", 0, opt);
}

/* ---------------------------------------------------------------- */
/* through the event log                                             */

/* A number from /proc/self/status ("FDSize:"), -1 if absent. */
static long status_field(const char *key)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, strlen(key)))
			v = strtol(line + strlen(key), NULL, 10);
	fclose(f);
	return v;
}

static int open_fds(void)
{
	return th_dir_entries("/proc/self/fd");
}

/*
 * Configuring the log grows the descriptor table to where the log's own
 * descriptors go, so that the first logged call does not (in a process
 * with threads the kernel waits for an RCU grace period there: 15-34 ms
 * on an H200 host when 16 threads logged first at once), and leaves no
 * descriptor of its own open.
 */
TEST(configure_grows_the_fd_table_leaves_no_fd)
{
	struct rlimit rl;
	long lim = 1024, want;
	int before;

	if (status_field("FDSize:") < 0)
		SKIP("no FDSize in /proc/self/status");
	if (!getrlimit(RLIMIT_NOFILE, &rl))
		lim = rl.rlim_cur > 4096 ? 4096 : (long)rl.rlim_cur;
	want = lim - lim / 8 + 1;
	mk_tdir();
	before = open_fds();
	CHECK(status_field("FDSize:") < want);
	CHECK_EQ(gh_evlog_configure(tpath("log"), 0), 0);
	CHECK(status_field("FDSize:") >= want);
	CHECK_EQ(open_fds(), before);
	gh_evlog_shutdown(0, 0);
	rm_tdir();
}

/*
 * A thread that makes its own ring reserves only its first
 * GH_RING_FIRST_RECS records there (the rest is the writer's to reserve:
 * 12 MiB take 6 ms in /dev/shm, and threads starting at once queued on
 * the spool file for 50 ms).  With the writer held off, the thread
 * reserves more itself as it gets there, doubling, and loses nothing.
 */
TEST(own_ring_reserved_in_steps_nothing_lost)
{
	enum { RECS = 32768, N = 10000 };
	struct gh_ring *mine;

	mk_tdir();
	CHECK_EQ(gh_evlog_configure(tpath("log"),
				    (uint64_t)RECS * GH_EVLOG_REC_BYTES), 0);
	gh_evlog_atfork_prepare();	/* the writer waits on the lock */
	put(GH_EV_FREE, 0);
	mine = ring_in(GH_RING_OWNED);
	if (!mine || !mine->in_spool) {
		gh_evlog_atfork_parent();
		SKIP("no room in /dev/shm for the spool");
	}
	CHECK_EQ(__atomic_load_n(&mine->limit, __ATOMIC_ACQUIRE),
		 GH_RING_FIRST_RECS);
	for (int i = 1; i < N; i++)
		put(GH_EV_FREE, (uint64_t)i);
	/* doubled by the thread itself, each time it got there */
	{
		uint64_t want = GH_RING_FIRST_RECS;

		while (want < N)
			want *= 2;
		CHECK_EQ(__atomic_load_n(&mine->limit, __ATOMIC_ACQUIRE),
			 want);
	}
	CHECK_EQ(gh_evlog_dropped(), 0);
	gh_evlog_atfork_parent();
	/* then the writer reserves the rest */
	for (int i = 0; i < 1000 && __atomic_load_n(&mine->limit,
						    __ATOMIC_ACQUIRE) !=
				    UINT64_MAX; i++)
		usleep(10 * 1000);
	CHECK_EQ(__atomic_load_n(&mine->limit, __ATOMIC_ACQUIRE), UINT64_MAX);
	gh_evlog_flush();
	CHECK_EQ(gh_evlog_written(), N);
	CHECK_EQ(gh_evlog_dropped(), 0);
	gh_evlog_shutdown(0, 0);
	rm_tdir();
}

/* The descriptor this process holds on its spool, or -1. */
static int spool_fd_number(void)
{
	char path[64], target[256];
	int found = -1;

	for (int fd = 0; fd < 4096 && found < 0; fd++) {
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		n = readlink(path, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		if (strstr(target, "/dev/shm/gdrhook-spool."))
			found = fd;
	}
	return found;
}

/*
 * The program puts its own file on the number of the spool's descriptor
 * (dup2) before a thread's ring grows: the growth reserves in the spool
 * (opened again by its path), never in the program's file, and nothing
 * is lost.
 */
TEST(own_ring_grows_after_the_program_took_the_spool_fd_number)
{
	enum { N = 3000 };
	struct gh_ring *mine;
	struct stat st;
	int sfd, pfd;

	mk_tdir();
	CHECK_EQ(gh_evlog_configure(tpath("log"), 0), 0);
	gh_evlog_atfork_prepare();	/* the writer reserves nothing */
	put(GH_EV_FREE, 0);
	mine = ring_in(GH_RING_OWNED);
	sfd = spool_fd_number();
	if (!mine || sfd < 0) {
		gh_evlog_atfork_parent();
		SKIP("no room in /dev/shm for the spool");
	}
	pfd = open(tpath("mine"), O_RDWR | O_CREAT, 0600);
	CHECK(pfd >= 0);
	CHECK_EQ(dup2(pfd, sfd), sfd);
	for (int i = 1; i < N; i++)
		put(GH_EV_FREE, (uint64_t)i);
	CHECK(__atomic_load_n(&mine->limit, __ATOMIC_ACQUIRE) >= N);
	CHECK_EQ(fstat(sfd, &st), 0);
	CHECK_EQ(st.st_size, 0);	/* the program's file, untouched */
	CHECK_EQ(st.st_blocks, 0);
	gh_evlog_atfork_parent();
	gh_evlog_flush();
	CHECK_EQ(gh_evlog_written(), N);
	CHECK_EQ(gh_evlog_dropped(), 0);
	gh_evlog_shutdown(0, 0);
	close(sfd);
	close(pfd);
	rm_tdir();
}

/*
 * No room left in the spool when the thread needs more than its first
 * records: its ring goes on as a ring of those (no SIGBUS, no write past
 * what is reserved), what does not fit is counted as dropped, and the
 * records after the writer drained it are written, in order.
 */
TEST(own_ring_without_room_goes_on_smaller)
{
	enum { RECS = 32768, N = 10000, MORE = 100 };
	struct gh_ring *mine;
	struct lines l;
	int n = 0;
	long long prev = -1;

	mk_tdir();
	CHECK_EQ(gh_evlog_configure(tpath("log"),
				    (uint64_t)RECS * GH_EVLOG_REC_BYTES), 0);
	gh_evlog_atfork_prepare();
	__atomic_store_n(&gh_spool_reserve_fails, 1, __ATOMIC_RELAXED);
	put(GH_EV_FREE, 0);
	mine = ring_in(GH_RING_OWNED);
	if (!mine || !mine->in_spool) {
		gh_evlog_atfork_parent();
		SKIP("no room in /dev/shm for the spool");
	}
	for (int i = 1; i < N; i++)
		put(GH_EV_FREE, (uint64_t)i);
	CHECK_EQ(gh_ring_mask(mine), GH_RING_FIRST_RECS - 1);
	CHECK_EQ(gh_evlog_dropped(), N - GH_RING_FIRST_RECS);
	gh_evlog_atfork_parent();
	gh_evlog_flush();
	for (int i = 0; i < MORE; i++)
		put(GH_EV_FREE, (uint64_t)(N + i));
	gh_evlog_shutdown(0, 0);
	l = read_lines(tpath("log"));
	for (int i = 0; i < l.n; i++) {
		struct obj *o = parse_line(l.v[i]);
		const char *ev = get(o, "ev");
		long long p;

		if (!ev || (strcmp(ev, "\"free\"") && strcmp(ev, "free")))
			continue;
		p = geti(o, "ptr");
		/* the first records, then the later ones, in order */
		CHECK(p > prev);
		CHECK(p < GH_RING_FIRST_RECS || p >= N);
		prev = p;
		n++;
	}
	CHECK_EQ(n, GH_RING_FIRST_RECS + MORE);
	rm_tdir();
}

/*
 * A real /dev/shm with no room for a whole ring (700 KiB of tmpfs in a
 * mount namespace of this case's own; root only): the header and the
 * first events fit, the writer's reservation of the rest fails, and so
 * does the thread's own when it gets there.  No SIGBUS: every event,
 * written in block mode, is in the log and nothing is dropped.
 */
TEST(tiny_dev_shm_loses_nothing_in_block_mode)
{
	enum { N = 20000 };
	struct gh_ring *mine;

	if (geteuid() != 0 || unshare(CLONE_NEWNS) ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=700k"))
		SKIP("cannot mount a small tmpfs on /dev/shm here (not root)");
	mk_tdir();
	CHECK_EQ(gh_evlog_configure(tpath("log"), 0), 0);
	gh_evlog_set_block(1);
	for (int i = 0; i < N; i++)
		put(GH_EV_FREE, (uint64_t)i);
	mine = ring_in(GH_RING_OWNED);
	CHECK(mine != NULL);		/* in the spool, smaller */
	CHECK(gh_ring_mask(mine) + 1 < GH_EV_DEFAULT_RING / GH_EVLOG_REC_BYTES);
	gh_evlog_flush();
	CHECK_EQ(gh_evlog_written(), N);
	CHECK_EQ(gh_evlog_dropped(), 0);
	gh_evlog_shutdown(0, 0);
	rm_tdir();
}

/* ---------------------------------------------------------------- */
/* a crash keeps the record (seen 9, and exec: seen 3)               */

enum death { D_ABORT, D_EXIT, D_SEGV, D_KILL, D_EXEC };

static void die_after_events(const char *path, enum death how, int n)
{
	pid_t pid = fork();
	int st;

	CHECK(pid >= 0);
	if (pid == 0) {
		if (gh_evlog_configure(path, 0))
			_exit(99);
		for (int i = 0; i < n; i++)
			put(i % 2 ? GH_EV_FREE : GH_EV_ALLOC, (uint64_t)i);
		switch (how) {
		case D_ABORT:
			signal(SIGABRT, SIG_DFL);
			abort();
		case D_EXIT:
			_exit(3);
		case D_SEGV:
			signal(SIGSEGV, SIG_DFL);
			raise(SIGSEGV);
			break;
		case D_KILL:
			raise(SIGKILL);
			break;
		case D_EXEC:
			execl("/bin/true", "true", (char *)NULL);
			break;
		}
		_exit(98);
	}
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	if (how == D_EXIT || how == D_EXEC)
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == (how == D_EXIT ? 3 : 0));
	else
		CHECK(WIFSIGNALED(st));
}

static void check_recovered(enum death how)
{
	struct lines l;
	int n = 0, rec = 0;

	private_shm(NULL);
	mk_tdir();
	die_after_events(tpath("dead.log"), how, 5);
	/* the next process that configures a log recovers the dead one's */
	CHECK_EQ(gh_evlog_configure(tpath("next.log"), 0), 0);
	gh_evlog_shutdown(0, 0);
	l = read_lines(tpath("dead.log"));
	check_json(tpath("dead.log"));
	for (int i = 0; i < l.n; i++) {
		struct obj *o = parse_line(l.v[i]);
		const char *e = get(o, "ev");

		/*
		 * In order, none lost.  A batch the writer had written but
		 * not yet released from its ring when the process died is
		 * recovered again (README, "Known limits"): a repeat of
		 * records already seen, never a new one out of order.
		 */
		if (!strcmp(e, "alloc") || !strcmp(e, "free")) {
			CHECK(geti(o, "ptr") <= n);
			if (geti(o, "ptr") == n)
				n++;
		}
		/* the writer may have written some before the death */
		if (!strcmp(e, "recovered")) {
			CHECK(geti(o, "events") <= 5);
			rec++;
		}
	}
	CHECK_EQ(n, 5);
	CHECK_EQ(rec, 1);
	/* nothing left to recover twice */
	CHECK_EQ(gh_evlog_configure(tpath("next.log"), 0), 0);
	gh_evlog_shutdown(0, 0);
	CHECK_EQ(read_lines(tpath("dead.log")).n, l.n);
	rm_tdir();
}

/*
 * A log on stderr has a spool (the next image after exec writes it), but
 * a dead process's stderr is not another process's to write into: the
 * next process removes its spool and writes none of it.
 */
TEST(dead_stderr_spool_is_not_written_elsewhere)
{
	char spool[128];
	struct lines l;
	pid_t pid;
	int st;

	private_shm(NULL);
	mk_tdir();
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int fd = open(tpath("stderr"), O_WRONLY | O_CREAT | O_TRUNC,
			      0600);

		if (fd < 0 || dup2(fd, 2) < 0 ||
		    gh_evlog_configure("stderr", 0))
			_exit(99);
		for (int i = 0; i < 5; i++)
			put(GH_EV_ALLOC, (uint64_t)i);
		signal(SIGABRT, SIG_DFL);
		abort();
	}
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFSIGNALED(st));
	gh_spool_name(spool, sizeof(spool), pid);
	CHECK_EQ(access(spool, F_OK), 0);
	CHECK_EQ(gh_evlog_configure(tpath("next.log"), 0), 0);
	gh_evlog_shutdown(0, 0);
	CHECK(access(spool, F_OK) != 0);
	l = read_lines(tpath("next.log"));
	for (int i = 0; i < l.n; i++)
		CHECK(!strstr(l.v[i], "\"recovered\""));
	rm_tdir();
}

TEST(abort_keeps_the_record) { check_recovered(D_ABORT); }
TEST(underscore_exit_keeps_the_record) { check_recovered(D_EXIT); }
TEST(fatal_signal_keeps_the_record) { check_recovered(D_SEGV); }
TEST(sigkill_keeps_the_record) { check_recovered(D_KILL); }
TEST(exec_keeps_the_record) { check_recovered(D_EXEC); }


/* ---------------------------------------------------------------- */
/* the spool's own calls                                             */

static int count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* The spool of pid: this uid's, by pid; cut, still terminated. */
TEST(spool_name_is_uid_and_pid)
{
	char name[64], want[64];

	gh_spool_name(name, sizeof(name), 4321);
	snprintf(want, sizeof(want), "/dev/shm/gdrhook-spool.%u.4321",
		 (unsigned int)getuid());
	CHECK_STR(name, want);
	gh_spool_name(name, 8, 4321);
	CHECK_STR(name, "/dev/sh");
}

/*
 * gh_fd_own moves a descriptor up to gh_fd_floor, close-on-exec, and
 * knows its file: once the program puts its own file on the number, the
 * number is not ours and gh_fd_close leaves it open.
 */
TEST(owned_fd_moves_up_and_knows_its_file)
{
	char a[] = "/tmp/gh_evspool.XXXXXX", b[] = "/tmp/gh_evspool.XXXXXX";
	struct gh_ownfd o;
	int fa = mkstemp(a), fb = mkstemp(b), num;

	CHECK(fa >= 0 && fb >= 0);
	CHECK_EQ(gh_fd_own(fa, &o), 0);
	CHECK(o.fd >= gh_fd_floor());
	CHECK(fcntl(fa, F_GETFD) < 0 && errno == EBADF);	/* moved */
	CHECK(fcntl(o.fd, F_GETFD) & FD_CLOEXEC);
	CHECK_EQ(gh_fd_ours(&o), 1);
	num = o.fd;
	CHECK_EQ(dup2(fb, num), num);
	CHECK_EQ(gh_fd_ours(&o), 0);
	errno = 55;
	gh_fd_close(&o);
	CHECK_EQ(errno, 55);
	CHECK_EQ(o.fd, -1);
	CHECK(fcntl(num, F_GETFD) >= 0);	/* the program's, still open */
	/* a number with nothing open on it: -EBADF, nothing owned */
	CHECK_EQ(close(num), 0);
	CHECK_EQ(gh_fd_own(num, &o), -EBADF);
	CHECK_EQ(o.fd, -1);
	close(fb);
	unlink(a);
	unlink(b);
}

/* gh_fd_prime grows the table to the floor, leaves no fd, keeps errno. */
TEST(fd_prime_grows_the_table_leaves_no_fd)
{
	int before;

	if (status_field("FDSize:") < 0)
		SKIP("no FDSize in /proc/self/status");
	before = open_fds();
	CHECK(status_field("FDSize:") <= gh_fd_floor());
	errno = 66;
	gh_fd_prime();
	CHECK_EQ(errno, 66);
	CHECK(status_field("FDSize:") > gh_fd_floor());
	CHECK_EQ(open_fds(), before);
}

/*
 * The spool file, 0600, sized once; rings handed out in order, one
 * stride apart, each reserved (its blocks allocated) and mapped shared
 * (a store lands in the file); removed: gone, and no more rings.
 */
TEST(spool_rings_reserved_mapped_and_removed)
{
	size_t len = gh_ring_bytes(64);
	uint64_t off1 = 0, off2 = 0, head = 0;
	struct gh_ring *g1, *g2;
	char name[64];
	struct stat st;
	int err = 0, fd;

	private_shm(NULL);
	CHECK_EQ(len % (size_t)sysconf(_SC_PAGESIZE), 0);
	CHECK(len >= sizeof(struct gh_ring) + 64 * sizeof(struct gh_evrec));
	CHECK_EQ(gh_spool_active(), 0);
	errno = 99;
	gh_spool_open("/some/dir/log.jsonl", 64, 11, 22);
	CHECK_EQ(errno, 99);
	if (!gh_spool_active())
		SKIP("no spool in /dev/shm here");
	gh_spool_name(name, sizeof(name), getpid());
	CHECK_EQ(stat(name, &st), 0);
	CHECK(S_ISREG(st.st_mode));
	CHECK_EQ(st.st_mode & 0777, 0600);
	CHECK((uint64_t)st.st_size > 1024 * (uint64_t)len);
	g1 = gh_spool_map_ring(len, len, 0, &off1, &err);
	g2 = gh_spool_map_ring(len, len, 1, &off2, &err);
	CHECK(g1 != MAP_FAILED && g2 != MAP_FAILED);
	CHECK_EQ(err, 0);
	CHECK(off1 > 0);
	CHECK_EQ(off1 % (uint64_t)sysconf(_SC_PAGESIZE), 0);
	CHECK_EQ(off2, off1 + len);
	g1->head = 42;
	fd = open(name, O_RDONLY);
	CHECK(fd >= 0);
	CHECK_EQ(pread(fd, &head, sizeof(head),
		       (off_t)(off1 + offsetof(struct gh_ring, head))),
		 sizeof(head));
	CHECK_EQ(head, 42);
	CHECK_EQ(fstat(fd, &st), 0);
	CHECK((uint64_t)st.st_blocks * 512 >= 2 * len);	/* reserved */
	close(fd);
	CHECK_EQ(gh_spool_reserve(off2 + len, len), 0);
	gh_spool_remove();
	CHECK_EQ(gh_spool_active(), 0);
	CHECK(access(name, F_OK) < 0 && errno == ENOENT);
	err = 0;
	CHECK(gh_spool_map_ring(len, len, 0, &off1, &err) == MAP_FAILED);
	munmap(g1, len);
	munmap(g2, len);
}

/*
 * No room for a ring (a 64 KiB tmpfs: the header fits, a 1 MiB ring
 * does not): MAP_FAILED and ENOSPC, never a mapping past what is
 * reserved; what the callers note is said once, in words.
 */
TEST(no_room_for_a_ring_said_once)
{
	size_t len = gh_ring_bytes(8192);
	uint64_t off = 0;
	const char *out;
	int err = 0;

	if (!private_shm("64k"))
		SKIP("cannot mount a small tmpfs on /dev/shm here (not root)");
	gh_spool_open("/some/log", 8192, 1, 2);
	CHECK_EQ(gh_spool_active(), 1);
	CHECK(gh_spool_map_ring(len, len, 0, &off, &err) == MAP_FAILED);
	CHECK_EQ(err, ENOSPC);
	/* a small first part fits */
	err = 0;
	CHECK(gh_spool_map_ring(len, 4096, 0, &off, &err) != MAP_FAILED);
	CHECK_EQ(err, 0);
	/* tests make a full /dev/shm at will */
	__atomic_store_n(&gh_spool_reserve_fails, 1, __ATOMIC_RELAXED);
	CHECK_EQ(gh_spool_reserve(off, 4096), ENOSPC);
	capture_begin();
	gh_spool_note(ENOSPC);
	gh_spool_note(EBADF);		/* the first one is said */
	gh_spool_note_smaller(EBADF);
	gh_spool_report();
	gh_spool_report();
	out = capture_end();
	CHECK(strstr(out, "warning: event log: no room for a ring in /dev/shm (/dev/shm is full): some events are kept in private memory, not crash-safe (lost if the process is killed)\n"));
	CHECK(strstr(out, "warning: event log: no room in /dev/shm (the program closed the spool and it cannot be opened again) for all of a thread's ring"));
	CHECK_EQ(count_lines(out), 2);
	gh_spool_remove();
}

/* A fork child: the parent's spool is not its own, nor removed by it. */
TEST(fork_child_forgets_the_parents_spool)
{
	size_t len = gh_ring_bytes(64);
	char name[64];
	uint64_t off;
	pid_t pid;
	int st, err;

	private_shm(NULL);
	gh_spool_open("/some/log", 64, 1, 2);
	if (!gh_spool_active())
		SKIP("no spool in /dev/shm here");
	gh_spool_name(name, sizeof(name), getpid());
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int ok;

		gh_spool_atfork_child();
		ok = !gh_spool_active() && access(name, F_OK) == 0 &&
		     gh_spool_map_ring(len, len, 0, &off, &err) == MAP_FAILED;
		gh_spool_remove();	/* nothing of the parent's */
		_exit(ok && access(name, F_OK) == 0 ? 0 : 1);
	}
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK_EQ(gh_spool_active(), 1);
	CHECK(gh_spool_map_ring(len, len, 0, &off, &err) != MAP_FAILED);
	gh_spool_remove();
}

struct seen {
	int n;
	pid_t pid[4];
	uint64_t start_t, start_wall, dropped, head, ptr2;
	uint32_t nrings;
	char log[64];
	int claimed, sound0, sound1, past;
};

static void on_dead(void *arg, const struct gh_spool_dead *d)
{
	struct seen *s = arg;
	char want[64];
	struct gh_ring *g;

	s->pid[s->n++] = d->pid;
	s->start_t = d->start_t;
	s->start_wall = d->start_wall;
	s->dropped = d->dropped;
	s->nrings = d->nrings;
	snprintf(s->log, sizeof(s->log), "%s", d->log);
	snprintf(want, sizeof(want), ".claimed-by.%d", getpid());
	s->claimed = strstr(d->spool, want) && !access(d->spool, F_OK);
	g = gh_spool_dead_ring(d, 0);
	s->sound0 = g != NULL;
	if (g) {
		s->head = g->head;
		s->ptr2 = g->rec[2].u.mem.ptr;
		gh_spool_unmap_ring(d, g);
	}
	g = gh_spool_dead_ring(d, 1);
	s->sound1 = g != NULL;
	if (g)
		gh_spool_unmap_ring(d, g);
	s->past = gh_spool_dead_ring(d, d->nrings) != NULL;
}

/* In a child: a spool with one ring of 3 records and one left free. */
static void spool_with_records(void)
{
	size_t len = gh_ring_bytes(64);
	struct gh_ring *g;
	uint64_t off;
	int err;

	gh_spool_open("/x/dead.log", 64, 111, 222);
	g = gh_spool_map_ring(len, len, 0, &off, &err);
	if (!gh_spool_active() || g == MAP_FAILED)
		_exit(90);
	for (int i = 0; i < 3; i++)
		g->rec[i] = mkrec(GH_EV_ALLOC, (uint64_t)i + 1);
	g->mask = 63;
	g->head = 3;
	g->state = GH_RING_OWNED;
	if (gh_spool_map_ring(len, len, 0, &off, &err) == MAP_FAILED)
		_exit(91);
	gh_spool_count_drop(5);
}

/*
 * Spools of dead processes are claimed (renamed), handed over with what
 * their header says and their sound rings only, then removed; a live
 * process's spool is left alone until it is dead; a file that is no
 * spool of this version is removed unread.
 */
TEST(dead_spools_handed_to_recovery_then_removed)
{
	struct seen s = { 0 };
	char dead[64], live[64], junk[64];
	pid_t d, l, j;
	int st, go[2];

	if (!private_shm(NULL))
		SKIP("no /dev/shm of this case's own here (not root)");
	d = fork();
	CHECK(d >= 0);
	if (d == 0) {
		spool_with_records();
		_exit(0);
	}
	CHECK_EQ(waitpid(d, &st, 0), d);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK_EQ(pipe(go), 0);
	l = fork();
	CHECK(l >= 0);
	if (l == 0) {
		char c;

		spool_with_records();
		close(go[1]);
		_exit(read(go[0], &c, 1) == 0 ? 0 : 1);
	}
	close(go[0]);
	j = fork();
	CHECK(j >= 0);
	if (j == 0)
		_exit(0);
	CHECK_EQ(waitpid(j, &st, 0), j);
	gh_spool_name(dead, sizeof(dead), d);
	gh_spool_name(live, sizeof(live), l);
	gh_spool_name(junk, sizeof(junk), j);
	{
		int fd = open(junk, O_WRONLY | O_CREAT, 0600);

		CHECK(fd >= 0);
		CHECK_EQ(ftruncate(fd, 1 << 20), 0);
		close(fd);
	}
	/* the live child's spool is there once it waits */
	for (int i = 0; i < 2000 && access(live, F_OK); i++)
		usleep(1000);
	CHECK_EQ(access(live, F_OK), 0);
	gh_spool_recover_all(on_dead, &s);
	CHECK_EQ(s.n, 1);
	CHECK_EQ(s.pid[0], d);
	CHECK_EQ(s.start_t, 111);
	CHECK_EQ(s.start_wall, 222);
	CHECK_STR(s.log, "/x/dead.log");
	CHECK_EQ(s.nrings, 2);
	CHECK_EQ(s.dropped, 5);
	CHECK(s.claimed);
	CHECK(s.sound0);
	CHECK_EQ(s.head, 3);
	CHECK_EQ(s.ptr2, 3);
	CHECK(!s.sound1);		/* mapped, never owned: nothing sound */
	CHECK(!s.past);
	CHECK(access(dead, F_OK) < 0);
	CHECK(access(junk, F_OK) < 0);
	CHECK_EQ(access(live, F_OK), 0);
	/* nothing twice */
	gh_spool_recover_all(on_dead, &s);
	CHECK_EQ(s.n, 1);
	/* the live one, once it is dead */
	close(go[1]);
	CHECK_EQ(waitpid(l, &st, 0), l);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	gh_spool_recover_all(on_dead, &s);
	CHECK_EQ(s.n, 2);
	CHECK_EQ(s.pid[1], l);
	CHECK(access(live, F_OK) < 0);
}

TEST_MAIN()
