// SPDX-License-Identifier: MIT
/*
 * The event log's spool: see evspool.h.
 *
 * Layout of /dev/shm/gdrhook-spool.<uid>.<pid>: a header (struct
 * gh_spool_hdr, whole pages), then GH_SPOOL_MAX_RINGS slots of
 * gh_ring_bytes(ring_recs) bytes, handed out in order to the threads
 * that record (nrings counts them).  The file is sized once (sparse), so
 * a thread maps its ring without a lock and without growing the file.
 *
 * A page of a tmpfs file is allocated when it is first stored into; on a
 * full tmpfs that store takes SIGBUS, in the program's thread.  So the
 * header and each ring are reserved (posix_fallocate) before they are
 * mapped; a ring that finds no room is anonymous memory instead (not
 * crash-safe, said once), and the header marks which slots are sound so
 * that a recoverer never touches a hole either.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "evspool.h"

#define GH_SPOOL_DIR		"/dev/shm"
#define GH_SPOOL_PREFIX		"gdrhook-spool."
#define GH_SPOOL_MAGIC		0x324c4f4f50534847ull	/* "GHSPOOL2" */
#define GH_SPOOL_MAX_RINGS	1024u

/* The spool's first page(s): what a recoverer needs to know. */
struct gh_spool_hdr {
	uint64_t magic;
	uint32_t version;		/* GH_EV_FORMAT_VERSION */
	uint32_t slot_size;
	uint32_t ring_recs;
	uint32_t nrings;		/* atomic: rings handed out */
	uint64_t ring_stride;		/* bytes per ring in the file */
	uint64_t data_off;		/* offset of ring 0 */
	int32_t pid;
	int32_t pad_;
	uint64_t start_t;		/* the dead process's "start" t */
	uint64_t start_wall;
	uint64_t dropped;		/* atomic: events dropped, all rings */
	char log[PATH_MAX];		/* expanded log path */
	uint8_t sound[GH_SPOOL_MAX_RINGS];	/* slot reserved and mapped */
};

static struct {
	/* fd.fd atomic; dev/ino fixed while hdr is set (-1: no spool) */
	struct gh_ownfd fd;
	struct gh_spool_hdr *hdr;	/* atomic: rings map while it is set */
	int err;			/* atomic: why a ring is anonymous */
	int said;			/* gh_spool_report() said it */
	int small_err;			/* atomic: why a ring is smaller */
	int said_small;
	char path[64];
} gh_sp = {
	.fd = { .fd = -1 },
};

/* ---------------------------------------------------------------- */
/* owned descriptors (the primitives, gh_fd_floor and gh_fd_is: base) */

void gh_fd_prime(void)
{
	int saved = errno, fd = open("/", O_PATH | O_CLOEXEC), hi;

	if (fd >= 0) {
		hi = fcntl(fd, F_DUPFD_CLOEXEC, gh_fd_floor());
		if (hi >= 0)
			close(hi);
		close(fd);
	}
	errno = saved;
}

int gh_fd_own(int fd, struct gh_ownfd *o)
{
	struct stat st;
	int hi, err;

	o->fd = -1;
	if (fstat(fd, &st)) {
		err = -errno;
		close(fd);
		return err;
	}
	/* no room up there (a low limit): the number is checked anyway */
	hi = fcntl(fd, F_DUPFD_CLOEXEC, gh_fd_floor());
	if (hi >= 0) {
		close(fd);
		fd = hi;
	}
	o->dev = st.st_dev;
	o->ino = st.st_ino;
	o->fd = fd;
	return 0;
}

int gh_fd_ours(const struct gh_ownfd *o)
{
	return gh_fd_is(o->fd, o->dev, o->ino);
}

void gh_fd_close(struct gh_ownfd *o)
{
	int saved = errno;

	if (gh_fd_ours(o))
		close(o->fd);
	o->fd = -1;
	errno = saved;
}

/*
 * posix_fallocate, retried when a signal cut it short; 0 or errno.  In
 * pieces of 1 MiB: each call holds the spool file's lock while it clears
 * its pages (6 ms for 12 MiB in /dev/shm), and a thread reserving the
 * first part of its ring meanwhile waits only for the piece under way.
 */
static int gh_reserve(int fd, off_t off, off_t len)
{
	const off_t piece = 1 << 20;
	int err = 0;

	while (len > 0 && !err) {
		off_t n = len < piece ? len : piece;

		do {
			err = posix_fallocate(fd, off, n);
		} while (err == EINTR);
		off += n;
		len -= n;
	}
	return err;
}

/* Keep the first error in *where (0: none yet). */
static void gh_spool_first_err(int *where, int err)
{
	int none = 0;

	__atomic_compare_exchange_n(where, &none, err, 0, __ATOMIC_RELAXED,
				    __ATOMIC_RELAXED);
}

void gh_spool_note(int err)
{
	gh_spool_first_err(&gh_sp.err, err);
}

static size_t gh_pagesize(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

static size_t gh_spool_hdr_len(void)
{
	size_t pg = gh_pagesize();

	return (sizeof(struct gh_spool_hdr) + pg - 1) & ~(pg - 1);
}

size_t gh_ring_bytes(uint32_t recs)
{
	size_t pg = gh_pagesize();
	size_t len = sizeof(struct gh_ring) +
		     (size_t)recs * sizeof(struct gh_evrec);

	return (len + pg - 1) & ~(pg - 1);
}

void gh_spool_name(char *dst, size_t cap, pid_t pid)
{
	struct gh_buf b;

	gh_buf_init(&b, dst, cap);
	gh_buf_lit(&b, GH_SPOOL_DIR "/" GH_SPOOL_PREFIX);
	gh_buf_u64(&b, (uint64_t)getuid());
	gh_buf_putc(&b, '.');
	gh_buf_i64(&b, pid);
	gh_buf_cstr(&b);
}

void gh_spool_open(const char *log, uint32_t ring_recs, uint64_t start_t,
		   uint64_t start_wall)
{
	size_t hdr_len = gh_spool_hdr_len(), stride, n;
	struct gh_spool_hdr *h;
	int fd, err, saved = errno;

	if (gh_sp.hdr)
		return;
	n = strlen(log);
	if (n >= sizeof(h->log))
		goto out;
	gh_spool_name(gh_sp.path, sizeof(gh_sp.path), getpid());
	/* a spool of our pid is a former image's: recovered at configure */
	fd = open(gh_sp.path,
		  O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		gh_spool_note(errno);
		goto out;
	}
	if (gh_fd_own(fd, &gh_sp.fd)) {
		unlink(gh_sp.path);
		goto out;
	}
	fd = gh_sp.fd.fd;
	stride = gh_ring_bytes(ring_recs);
	if (ftruncate(fd, (off_t)(hdr_len + stride * GH_SPOOL_MAX_RINGS))) {
		gh_spool_note(errno);
		goto out_unlink;
	}
	err = gh_reserve(fd, 0, (off_t)hdr_len);
	if (err) {
		gh_spool_note(err);
		goto out_unlink;
	}
	h = mmap(NULL, hdr_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED)
		goto out_unlink;
	h->version = GH_EV_FORMAT_VERSION;
	h->slot_size = sizeof(struct gh_evrec);
	h->ring_recs = ring_recs;
	h->ring_stride = stride;
	h->data_off = hdr_len;
	h->pid = getpid();
	h->start_t = start_t;
	h->start_wall = start_wall;
	memcpy(h->log, log, n + 1);
	__atomic_store_n(&h->magic, GH_SPOOL_MAGIC, __ATOMIC_RELEASE);
	/* rings are taken (gh_spool_map_ring) by threads that may see it now */
	__atomic_store_n(&gh_sp.hdr, h, __ATOMIC_RELEASE);
	goto out;
out_unlink:
	gh_fd_close(&gh_sp.fd);
	unlink(gh_sp.path);
out:
	errno = saved;
}

int gh_spool_active(void)
{
	return __atomic_load_n(&gh_sp.hdr, __ATOMIC_ACQUIRE) != NULL;
}

/*
 * The spool's fd, checked: if the program closed or replaced its number,
 * the same file (same dev/ino) is opened again by its path.  *mine: the
 * caller closes the fd it got (another thread published its own first).
 */
static int gh_spool_fd(int *mine)
{
	int old = __atomic_load_n(&gh_sp.fd.fd, __ATOMIC_ACQUIRE);
	int fd, nfd;

	*mine = 0;
	if (gh_fd_is(old, gh_sp.fd.dev, gh_sp.fd.ino))
		return old;
	nfd = open(gh_sp.path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (nfd < 0)
		return -1;
	/* move it high as gh_fd_own() does, keeping the spool's identity */
	if (!gh_fd_is(nfd, gh_sp.fd.dev, gh_sp.fd.ino)) {
		close(nfd);
		return -1;
	}
	fd = fcntl(nfd, F_DUPFD_CLOEXEC, gh_fd_floor());
	if (fd >= 0) {
		close(nfd);
		nfd = fd;
	}
	/* the old number is not ours any more: never closed */
	if (!__atomic_compare_exchange_n(&gh_sp.fd.fd, &old, nfd, 0,
					 __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		*mine = 1;
	return nfd;
}

int gh_spool_reserve_fails;

int gh_spool_reserve(uint64_t off, uint64_t len)
{
	int fd, mine, err;

	if (__atomic_load_n(&gh_spool_reserve_fails, __ATOMIC_RELAXED))
		return ENOSPC;
	fd = gh_spool_fd(&mine);
	if (fd < 0)
		return EBADF;
	err = gh_reserve(fd, (off_t)off, (off_t)len);
	if (mine)
		close(fd);
	return err;
}

void gh_spool_note_smaller(int err)
{
	gh_spool_first_err(&gh_sp.small_err, err);
}

struct gh_ring *gh_spool_map_ring(size_t len, size_t reserve, int populate,
				  uint64_t *off_p, int *err_p)
{
	struct gh_spool_hdr *sp = __atomic_load_n(&gh_sp.hdr,
						  __ATOMIC_ACQUIRE);
	struct gh_ring *g = MAP_FAILED;
	int fd, mine, err;
	uint32_t i;
	off_t off;

	if (!sp)
		return MAP_FAILED;
	i = __atomic_fetch_add(&sp->nrings, 1, __ATOMIC_ACQ_REL);
	if (i >= GH_SPOOL_MAX_RINGS)
		return MAP_FAILED;
	fd = gh_spool_fd(&mine);
	if (fd < 0) {
		gh_spool_note(EBADF);
		return MAP_FAILED;
	}
	off = (off_t)(sp->data_off + (uint64_t)i * sp->ring_stride);
	*off_p = (uint64_t)off;
	err = gh_reserve(fd, off, (off_t)(reserve < len ? reserve : len));
	if (err)
		*err_p = err;
	else
		g = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, off);
	if (mine)
		close(fd);
	if (g != MAP_FAILED)
		__atomic_store_n(&sp->sound[i], 1, __ATOMIC_RELEASE);
	return g;
}

void gh_spool_count_drop(uint64_t n)
{
	struct gh_spool_hdr *sp = __atomic_load_n(&gh_sp.hdr,
						  __ATOMIC_ACQUIRE);

	if (sp)
		__atomic_add_fetch(&sp->dropped, n, __ATOMIC_RELAXED);
}

/* What a failure to reserve spool storage means, in words. */
static const char *gh_spool_why(int err)
{
	switch (err) {
	case ENOSPC:
		return GH_SPOOL_DIR " is full";
	case EBADF:
		return "the program closed the spool and it cannot be opened "
		       "again";
	default:
		return strerrordesc_np(err);
	}
}

void gh_spool_report(void)
{
	int err = __atomic_load_n(&gh_sp.err, __ATOMIC_RELAXED);
	int small = __atomic_load_n(&gh_sp.small_err, __ATOMIC_RELAXED);

	if (small && !gh_sp.said_small) {
		gh_sp.said_small = 1;
		gh_warn("event log: no room in %s (%s) for all of a thread's "
			"ring: it holds fewer events than GDRHOOK_TRACE_BUFFER "
			"asks, so more may be dropped", GH_SPOOL_DIR,
			gh_spool_why(small));
	}
	if (!err || gh_sp.said)
		return;
	gh_sp.said = 1;
	gh_warn("event log: no room for a ring in %s (%s): some events are "
		"kept in private memory, not crash-safe (lost if the process "
		"is killed)", GH_SPOOL_DIR, gh_spool_why(err));
}

void gh_spool_remove(void)
{
	if (!gh_sp.hdr)
		return;
	unlink(gh_sp.path);
	gh_fd_close(&gh_sp.fd);
	__atomic_store_n(&gh_sp.hdr, NULL, __ATOMIC_RELEASE);
}

void gh_spool_atfork_child(void)
{
	if (gh_sp.hdr) {
		munmap(gh_sp.hdr, (size_t)gh_sp.hdr->data_off);
		gh_sp.hdr = NULL;
	}
	/* ours (dev/ino) is the parent's spool: the child's copy goes */
	gh_fd_close(&gh_sp.fd);
	gh_sp.err = 0;
	gh_sp.said = 0;
	gh_sp.small_err = 0;
	gh_sp.said_small = 0;
}

/* ---------------------------------------------------------------- */
/* recovery of dead processes' spools                                */

/* Is pid gone (or a zombie)?  Our own pid: a former image (exec). */
static int gh_pid_dead(pid_t pid)
{
	char path[64], buf[256], *p;
	struct gh_buf b;

	if (pid == getpid())
		return 1;
	if (kill(pid, 0) == 0 || errno == EPERM) {
		gh_buf_init(&b, path, sizeof(path));
		gh_buf_lit(&b, "/proc/");
		gh_buf_i64(&b, pid);
		gh_buf_lit(&b, "/stat");
		gh_buf_cstr(&b);
		if (gh_read_text(path, buf, sizeof(buf)) < 0)
			return 0;
		p = strrchr(buf, ')');
		return p && p[1] == ' ' && p[2] == 'Z';
	}
	return errno == ESRCH;
}

struct gh_ring *gh_spool_dead_ring(const struct gh_spool_dead *d,
				   uint32_t i)
{
	uint64_t off = d->data_off_ + (uint64_t)i * d->stride_;
	struct gh_ring *g;

	/* a slot never reserved may be a hole: a fault on it can SIGBUS */
	if (i >= d->nrings || off + d->stride_ > d->size_ || !d->sound_[i])
		return NULL;
	/* private: our tail updates stay ours */
	g = mmap(NULL, d->stride_, PROT_READ | PROT_WRITE, MAP_PRIVATE,
		 d->fd_, (off_t)off);
	if (g == MAP_FAILED)
		return NULL;
	/* a ring whose spool had no room for all of it is smaller */
	if (g->state != GH_RING_FREE && g->mask <= d->ring_recs_ - 1 &&
	    !((g->mask + 1) & g->mask) &&
	    g->head >= g->tail && g->head - g->tail <= g->mask + 1)
		return g;
	munmap(g, d->stride_);
	return NULL;
}

void gh_spool_unmap_ring(const struct gh_spool_dead *d, struct gh_ring *g)
{
	munmap(g, d->stride_);
}

/* Check one claimed spool and hand it to recover(arg, ...). */
static void gh_spool_recover(const char *spool,
			     void (*recover)(void *arg,
					     const struct gh_spool_dead *d),
			     void *arg)
{
	size_t hdr_len = gh_spool_hdr_len();
	struct gh_spool_dead d;
	struct gh_spool_hdr *h;
	struct stat st;
	int sfd;

	sfd = open(spool, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (sfd < 0)
		return;
	if (fstat(sfd, &st) || st.st_uid != getuid() ||
	    (uint64_t)st.st_size < hdr_len)
		goto out_close;
	h = mmap(NULL, hdr_len, PROT_READ, MAP_SHARED, sfd, 0);
	if (h == MAP_FAILED)
		goto out_close;
	if (h->magic != GH_SPOOL_MAGIC || h->version != GH_EV_FORMAT_VERSION ||
	    h->slot_size != sizeof(struct gh_evrec) || !h->ring_recs ||
	    (h->ring_recs & (h->ring_recs - 1)) ||
	    h->ring_stride != gh_ring_bytes(h->ring_recs) ||
	    h->data_off != hdr_len || !memchr(h->log, 0, sizeof(h->log))) {
		gh_info("event log: %s is not a spool of this version: removed",
			spool);
		goto out_unmap;
	}
	d.pid = h->pid;
	d.start_t = h->start_t;
	d.start_wall = h->start_wall;
	d.log = h->log;
	d.spool = spool;
	d.nrings = h->nrings < GH_SPOOL_MAX_RINGS ? h->nrings :
						   GH_SPOOL_MAX_RINGS;
	d.dropped = h->dropped;
	d.sound_ = h->sound;
	d.fd_ = sfd;
	d.ring_recs_ = h->ring_recs;
	d.stride_ = h->ring_stride;
	d.data_off_ = h->data_off;
	d.size_ = (uint64_t)st.st_size;
	recover(arg, &d);
out_unmap:
	munmap(h, hdr_len);
out_close:
	close(sfd);
}

void gh_spool_recover_all(void (*recover)(void *arg,
					  const struct gh_spool_dead *d),
			  void *arg)
{
	char prefix[64], from[320], to[352];
	struct gh_buf b;
	struct dirent *d;
	size_t plen;
	DIR *dir;
	int saved = errno;

	gh_buf_init(&b, prefix, sizeof(prefix));
	gh_buf_lit(&b, GH_SPOOL_PREFIX);
	gh_buf_u64(&b, (uint64_t)getuid());
	gh_buf_putc(&b, '.');
	gh_buf_cstr(&b);
	plen = strlen(prefix);
	dir = opendir(GH_SPOOL_DIR);
	if (!dir)
		goto out;
	while ((d = readdir(dir))) {
		char *end;
		long pid;

		if (strncmp(d->d_name, prefix, plen))
			continue;
		pid = strtol(d->d_name + plen, &end, 10);
		if (*end || pid <= 0 || !gh_pid_dead((pid_t)pid))
			continue;
		gh_buf_init(&b, from, sizeof(from));
		gh_buf_lit(&b, GH_SPOOL_DIR "/");
		gh_buf_puts(&b, d->d_name);
		gh_buf_cstr(&b);
		gh_buf_init(&b, to, sizeof(to));
		gh_buf_puts(&b, from);
		gh_buf_lit(&b, ".claimed-by.");
		gh_buf_i64(&b, getpid());
		gh_buf_cstr(&b);
		if (rename(from, to))
			continue;	/* another recoverer was first */
		gh_spool_recover(to, recover, arg);
		unlink(to);
	}
	closedir(dir);
out:
	errno = saved;
}
