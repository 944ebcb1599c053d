/* SPDX-License-Identifier: GPL-2.0 */
/*
 * fake_dmabuf: a test-only dma-buf exporter (/dev/gdrpin_fake_dmabuf).
 * CREATE exports a buffer of kernel pages, each 32-bit word i holding
 * seed + i, as a dma-buf fd; MOVE calls dma_buf_move_notify() on one, as
 * an exporter does when it moves or frees the memory behind importers.
 * Live objects are counted in /sys/module/fake_dmabuf/parameters/.
 */
#ifndef FAKE_DMABUF_H
#define FAKE_DMABUF_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define FAKE_DMABUF_DEV		"/dev/gdrpin_fake_dmabuf"
#define FAKE_DMABUF_DYNAMIC	(1U << 0)	/* has pin/unpin: may move */

struct fake_dmabuf_create {
	__u64 size;		/* in: bytes, a multiple of the page size */
	__u32 flags;		/* in: FAKE_DMABUF_* */
	__u32 seed;		/* in: word i of the buffer holds seed + i */
	__s32 fd;		/* out: the dma-buf */
	__u32 pad;
};

#define FAKE_DMABUF_CREATE	_IOWR('F', 1, struct fake_dmabuf_create)
#define FAKE_DMABUF_MOVE	_IOW('F', 2, __s32)

#endif /* FAKE_DMABUF_H */
