/* SPDX-License-Identifier: MIT */
/*
 * The event log's spool (src/evlog/evspool.c): the rings of
 * src/evlog/evlog_ring.c live in a file-backed shared mapping (a file in
 * /dev/shm named after the uid and pid) that the page cache keeps when
 * the process dies by abort(), _exit(), a fatal signal or exec.  A clean
 * exit removes it; the next process that configures a log finds spools
 * of dead processes and hands each to recovery (evlog_recover.c).
 */
#ifndef GH_EVSPOOL_H
#define GH_EVSPOOL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "evrec.h"

enum gh_ring_state { GH_RING_FREE, GH_RING_OWNED, GH_RING_ORPHANED };

/* One thread's ring of records; its layout is also the spool's. */
struct gh_ring {
	struct gh_ring *next;		/* global list, immutable once pushed */
	uint32_t state;			/* enum gh_ring_state, atomic */
	uint32_t mask;			/* capacity - 1 */
	uint32_t wake_at;		/* fill level that wakes the writer */
	uint32_t in_spool;		/* 1: part of the spool file */
	uint32_t populated;		/* its pages faulted in (writer) */
	size_t map_len;
	/* records reserved in the spool: head stays below (atomic; all
	 * reserved: UINT64_MAX), and where the ring is in the spool file */
	uint64_t limit;
	uint64_t spool_off;
	uint64_t head __attribute__((aligned(64)));	/* producer */
	uint64_t tail __attribute__((aligned(64)));	/* consumer */
	struct gh_evrec rec[] __attribute__((aligned(64)));
};

/*
 * A descriptor the shim owns, known by its file (st_dev, st_ino) and never
 * by its number alone: the program may close it (close_range) and open
 * its own file on that number, or dup2() over it.  gh_fd_own() moves a
 * fresh fd above the numbers programs use and remembers its file;
 * gh_fd_ours() says whether the number still names that file (checked
 * before every write, mmap and close); gh_fd_close() closes only then.
 */
struct gh_ownfd {
	int fd;				/* -1: none */
	dev_t dev;
	ino_t ino;
};

int gh_fd_own(int fd, struct gh_ownfd *o);	/* 0 or -errno (fd closed) */
/*
 * At init: grow the descriptor table up to where gh_fd_own() moves fds.
 * The first move up there grows it, and in a process with threads the
 * kernel then waits for an RCU grace period (12 ms on the CPU VM): that
 * was inside the first logged call, with every other thread that logged
 * waiting on it.  Opens and closes its own descriptor only.
 */
void gh_fd_prime(void);
int gh_fd_ours(const struct gh_ownfd *o);
void gh_fd_close(struct gh_ownfd *o);

/* Bytes a ring of recs records maps (whole pages). */
size_t gh_ring_bytes(uint32_t recs);

/* The ring's capacity - 1, read beside its producer (which may shrink it,
 * gh_ring_grow). */
static inline uint32_t gh_ring_mask(const struct gh_ring *g)
{
	return __atomic_load_n(&g->mask, __ATOMIC_RELAXED);
}

/*
 * Create and map this process's spool (first event): log is the expanded
 * log path the records belong to; start_t/start_wall are its "start"
 * record's.  Without a spool (no /dev/shm, ...) rings are anonymous.
 * Preserves errno.
 */
void gh_spool_open(const char *log, uint32_t ring_recs, uint64_t start_t,
		   uint64_t start_wall);

/* The path of pid's spool (this uid's), NUL-terminated, into dst. */
void gh_spool_name(char *dst, size_t cap, pid_t pid);

/* True while this process has a spool (the start record's crash_safe). */
int gh_spool_active(void);

/*
 * The next ring of the spool, mapped shared, len bytes, its first reserve
 * bytes reserved first (a full /dev/shm must never raise SIGBUS on a
 * hook's store: nothing past what is reserved is written); *off_p: where
 * it is in the spool file.  MAP_FAILED when there is no spool, it is full
 * or there is no room (*err_p: the reservation's errno, for
 * gh_spool_note() when the caller then uses anonymous memory).  Any
 * thread, lock-free, no message.
 * populate: fault every page in now (MAP_POPULATE), so that the stores
 * of the thread that takes the ring later do not fault once per page.
 */
struct gh_ring *gh_spool_map_ring(size_t len, size_t reserve, int populate,
				  uint64_t *off_p, int *err_p);
/* Why a ring is in private memory, not the spool: said once by
 * gh_spool_report(). */
void gh_spool_note(int err);

/* Reserve len more bytes of the spool file at off: 0 or an errno. */
int gh_spool_reserve(uint64_t off, uint64_t len);
/* Tests: non-zero makes gh_spool_reserve fail with ENOSPC (a full
 * /dev/shm, which a test cannot make). */
extern int gh_spool_reserve_fails;
/* A ring stays smaller than asked, for want of room (err): said once by
 * gh_spool_report(). */
void gh_spool_note_smaller(int err);

/* Count n events dropped in the spool's header, for a recoverer. */
void gh_spool_count_drop(uint64_t n);

/* Say once, off the hook path, that rings are not crash-safe and why. */
void gh_spool_report(void);

/* Remove the spool (clean exit: everything in it was written). */
void gh_spool_remove(void);

/* fork child: the parent's spool is not ours; forget it (no unlink). */
void gh_spool_atfork_child(void);

/* A dead process's spool, as recovery sees it. */
struct gh_spool_dead {
	pid_t pid;
	uint64_t start_t;
	uint64_t start_wall;
	const char *log;		/* the log its records belong to */
	const char *spool;		/* its file (claimed: renamed) */
	uint32_t nrings;
	uint64_t dropped;		/* events it counted as dropped */
	/* private */
	int fd_;
	uint32_t ring_recs_;
	uint64_t stride_;
	uint64_t data_off_;
	uint64_t size_;
	const uint8_t *sound_;
};

/*
 * Ring i of a dead spool, mapped privately (tail updates stay ours), or
 * NULL when it is past the file or holds nothing sound.  Unmap it with
 * gh_spool_unmap_ring().
 */
struct gh_ring *gh_spool_dead_ring(const struct gh_spool_dead *d,
				   uint32_t i);
void gh_spool_unmap_ring(const struct gh_spool_dead *d, struct gh_ring *g);

/*
 * Spools of our uid whose process is gone (our own pid: a former image,
 * before exec): claim each by renaming it (two recoverers never write
 * the same records), call recover(arg, d), remove it.  The caller holds
 * the log's lock.  Not for a hook path.  Preserves errno.
 */
void gh_spool_recover_all(void (*recover)(void *arg,
					  const struct gh_spool_dead *d),
			  void *arg);

#endif
