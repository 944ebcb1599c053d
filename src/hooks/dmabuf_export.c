// SPDX-License-Identifier: MIT
/*
 * The program's dma-buf exports, so that its own ibv_reg_dmabuf_mr is
 * tied to the memory the dma-buf reaches (an iova is a name the program
 * chooses, often 0).  A record is keyed by the file's (st_dev, st_ino),
 * read with fstat on the fd the driver returned; a later export that gets
 * the same identity (the old file closed, its inode reused) replaces it.
 * The generations recorded are what the export reached: if one of them
 * is freed, a registration of the dma-buf can only be refused.
 *
 * A fixed table (no malloc on the hook path) under a lock only this file
 * takes; when it is full the oldest record goes (its registrations then
 * pass through as a dma-buf of unknown memory, and say so once).
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <cuda.h>

#include "registry/registry.h"
#include "dmabuf_export.h"
#include "hookrt.h"

#define EX_CAP	1024

struct ex_rec {
	uint64_t dev, ino, seq;		/* seq 0: free */
	struct gh_export x;
};

static struct {
	pthread_mutex_t lock;
	uint64_t seq;
	struct ex_rec rec[EX_CAP];
} ex = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int ex_collect(const struct gh_range *g, void *arg)
{
	struct gh_export *x = arg;

	if (x->n == GH_EXPORT_RANGES)
		return 1;
	x->r[x->n++] = *g;
	return 0;
}

void gh_dmabuf_export_post(struct gh_call *c, void *handle, CUdeviceptr dptr,
			   size_t size, CUmemRangeHandleType type,
			   unsigned long long flags)
{
	struct ex_rec *slot = NULL;
	struct gh_export x;
	struct stat st;
	int fd;

	if (c->rc || !handle || type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD)
		return;
	fd = *(int *)handle;
	if (fd < 0 || fstat(fd, &st))
		return;
	memset(&x, 0, sizeof(x));
	x.base = dptr;
	x.size = size;
	gh_registry_overlaps(dptr, size ? size : 1, ex_collect, &x);
	pthread_mutex_lock(&ex.lock);
	for (int i = 0; i < EX_CAP; i++) {
		struct ex_rec *r = &ex.rec[i];

		if (r->seq && r->dev == (uint64_t)st.st_dev &&
		    r->ino == (uint64_t)st.st_ino) {
			slot = r;	/* the identity came back: newest wins */
			break;
		}
		if (!slot || (slot->seq && (!r->seq || r->seq < slot->seq)))
			slot = r;
	}
	slot->dev = (uint64_t)st.st_dev;
	slot->ino = (uint64_t)st.st_ino;
	slot->seq = ++ex.seq;
	slot->x = x;
	pthread_mutex_unlock(&ex.lock);
	(void)flags;
}

int gh_dmabuf_export_find(int fd, struct gh_export *x_p)
{
	struct stat st;
	int err = -ENOENT;

	if (fd < 0 || fstat(fd, &st))
		return -EBADF;
	pthread_mutex_lock(&ex.lock);
	for (int i = 0; i < EX_CAP; i++) {
		struct ex_rec *r = &ex.rec[i];

		if (r->seq && r->dev == (uint64_t)st.st_dev &&
		    r->ino == (uint64_t)st.st_ino) {
			*x_p = r->x;
			err = 0;
			break;
		}
	}
	pthread_mutex_unlock(&ex.lock);
	return err;
}
