/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * gdrpin: user/kernel ABI of /dev/gdrpin.
 *
 * Rules every struct follows:
 *  - fixed-width fields only, pointers travel as __u64;
 *  - the struct is padded explicitly to a multiple of 8 bytes;
 *  - the first two fields are "__u32 size" (must equal sizeof the struct this
 *    header declares) and "__u32 flags" (unknown bits are rejected);
 *  - pad and reserved fields must be zero on input (-EINVAL otherwise) and are
 *    zero on output;
 *  - ioctl numbers encode the struct type, never a pointer type.
 *
 * Errors: unknown command -ENOTTY; malformed argument -EINVAL; no such pin
 * -ENOENT; caller is not the process that opened the fd (fork, SCM_RIGHTS)
 * -EACCES; quota (max_pinned_bytes, or max_user_pinned_bytes of the
 * opener's uid) exceeded -ENOSPC; the fd has no free status slot -ENOBUFS;
 * no nv-p2p provider loaded -ENODEV; the memory was freed while it was
 * being pinned -ESTALE. open() fails with -EMFILE when the caller's uid
 * already holds max_user_contexts open fds.
 *
 * Handles: a handle is (generation << GDRPIN_HANDLE_SLOT_BITS) | slot. The
 * generation is a per-fd sequence number that never repeats, so a handle
 * value is never reused within one fd. The slot indexes the status page.
 *
 * Status page: mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0) maps a read-only
 * area that starts with struct gdrpin_status_header followed by nslots
 * struct gdrpin_status_slot. A pin is valid while
 *   slot[GDRPIN_HANDLE_SLOT(h)].gen == GDRPIN_HANDLE_GEN(h) and
 *   slot[...].state == GDRPIN_SLOT_ACTIVE.
 * The kernel marks a slot GDRPIN_SLOT_REVOKED before it increments
 * revoke_count (with a write barrier in between), so a reader that loads
 * revoke_count with acquire semantics and sees the value it cached knows no
 * pin of this fd was revoked since then: the data path needs one load.
 */
#ifndef GDRPIN_IOCTL_H
#define GDRPIN_IOCTL_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define GDRPIN_DEVICE_NAME	"gdrpin"
#define GDRPIN_IOCTL_TYPE	0xDB

#define GDRPIN_ABI_MAJOR	1
#define GDRPIN_ABI_MINOR	1	/* 1: PIN_DMABUF */
#define GDRPIN_ABI_VERSION	((GDRPIN_ABI_MAJOR << 16) | GDRPIN_ABI_MINOR)

/* Pins are rounded out to this alignment (GPU BAR page size). */
#define GDRPIN_PIN_ALIGN	0x10000ULL

#define GDRPIN_HANDLE_SLOT_BITS	16
#define GDRPIN_HANDLE_SLOT(h)	((__u32)((h) & ((1ULL << GDRPIN_HANDLE_SLOT_BITS) - 1)))
#define GDRPIN_HANDLE_GEN(h)	((__u64)(h) >> GDRPIN_HANDLE_SLOT_BITS)

/* Capabilities reported by GET_VERSION. */
#define GDRPIN_CAP_PERSISTENT	(1ULL << 0)	/* provider has get_pages_persistent */
#define GDRPIN_CAP_LEGACY	(1ULL << 1)	/* provider has get_pages + callback */
#define GDRPIN_CAP_POLL		(1ULL << 2)
#define GDRPIN_CAP_EVENTFD	(1ULL << 3)
#define GDRPIN_CAP_STATUS_PAGE	(1ULL << 4)
#define GDRPIN_CAP_PROVIDER	(1ULL << 5)	/* an nv-p2p provider is loaded */
#define GDRPIN_CAP_FORCE_BAR1	(1ULL << 6)
#define GDRPIN_CAP_DMABUF	(1ULL << 7)	/* PIN_DMABUF: pins a dma-buf fd */
/* A dynamic exporter's dma-buf is followed (move_notify revokes), not pinned. */
#define GDRPIN_CAP_DMABUF_MOVE	(1ULL << 8)

/* Pin modes. */
#define GDRPIN_MODE_PERSISTENT	1	/* nvidia_p2p_get_pages_persistent */
#define GDRPIN_MODE_LEGACY	2	/* nvidia_p2p_get_pages + free callback */
#define GDRPIN_MODE_DMABUF	3	/* a dma-buf attachment (PIN_DMABUF) */

/* Slot and pin states. */
#define GDRPIN_SLOT_FREE	0
#define GDRPIN_SLOT_ACTIVE	1
#define GDRPIN_SLOT_REVOKED	2	/* the driver freed the memory */

struct gdrpin_version_args {
	__u32 size;
	__u32 flags;			/* in: 0 */
	__u32 abi_major;		/* out */
	__u32 abi_minor;		/* out */
	__u64 caps;			/* out: GDRPIN_CAP_* */
	__u32 status_header_size;	/* out */
	__u32 status_slot_size;		/* out */
	__u32 status_nslots;		/* out: slots of this fd */
	__u32 status_map_size;		/* out: bytes to mmap */
	__u64 pin_align;		/* out: GDRPIN_PIN_ALIGN */
	__u64 reserved[2];		/* in: 0 */
};

/* PIN flags */
#define GDRPIN_PIN_LEGACY	(1U << 0)	/* use get_pages + callback */
#define GDRPIN_PIN_FORCE_BAR1	(1U << 1)	/* persistent only */
#define GDRPIN_PIN_FLAGS_ALL	(GDRPIN_PIN_LEGACY | GDRPIN_PIN_FORCE_BAR1)

struct gdrpin_pin_args {
	__u32 size;
	__u32 flags;			/* in: GDRPIN_PIN_* */
	__u64 va;			/* in: GPU virtual address */
	__u64 len;			/* in: bytes, > 0 */
	__u64 handle;			/* out */
	__u64 pinned_va;		/* out: va rounded down to 64 KiB */
	__u64 pinned_len;		/* out: length rounded out to 64 KiB */
	__u32 slot;			/* out: status page slot */
	__u32 mode;			/* out: GDRPIN_MODE_* */
	__u32 page_size;		/* out: bytes per page table entry */
	__u32 entries;			/* out: page table entries */
	__u8 gpu_uuid[16];		/* out */
	__u64 reserved[2];		/* in: 0 */
};

struct gdrpin_unpin_args {
	__u32 size;
	__u32 flags;			/* in: 0 */
	__u64 handle;			/* in */
	__u32 state;			/* out: GDRPIN_SLOT_* before the unpin */
	__u32 pad;			/* in: 0 */
};

struct gdrpin_query_args {
	__u32 size;
	__u32 flags;			/* in: 0 */
	__u64 handle;			/* in */
	__u64 pinned_va;		/* out */
	__u64 pinned_len;		/* out */
	__u32 state;			/* out: GDRPIN_SLOT_ACTIVE or _REVOKED */
	__u32 mode;			/* out */
	__u32 page_size;		/* out */
	__u32 entries;			/* out */
	__u64 pin_ns;			/* out: time spent in the pin call */
	__u64 reserved[2];		/* in: 0 */
};

/*
 * GET_REVOKED: copies up to max_handles handles of revoked pins to the
 * __u64 array at handles_ptr and releases them (their slots become free and
 * the handles then fail with -ENOENT). pending is what is left afterwards.
 * max_handles == 0 only reports pending. Nothing is released unless both
 * the handles and this struct were copied out: on -EFAULT every revoked
 * handle stays pending.
 */
struct gdrpin_get_revoked_args {
	__u32 size;
	__u32 flags;			/* in: 0 */
	__u64 handles_ptr;		/* in: user pointer to __u64[max_handles] */
	__u32 max_handles;		/* in */
	__u32 count;			/* out */
	__u64 pending;			/* out */
};

/* SET_EVENTFD: signal this eventfd on every revocation; fd -1 clears it. */
struct gdrpin_set_eventfd_args {
	__u32 size;
	__u32 flags;			/* in: 0 */
	__s32 fd;			/* in */
	__u32 pad;			/* in: 0 */
};

struct gdrpin_stats_args {
	__u32 size;
	__u32 flags;			/* in: 0 */
	__u64 fd_pinned_bytes;		/* out: bytes pinned through this fd */
	__u64 fd_pins;			/* out: live pins of this fd (incl. revoked) */
	__u64 fd_revoked;		/* out: revoked, not yet released */
	__u64 fd_revocations;		/* out: revocations ever, this fd */
	__u64 global_pinned_bytes;	/* out */
	__u64 max_pinned_bytes;		/* out: quota, 0 = unlimited */
	__u64 reserved[2];		/* in: 0 */
};

/*
 * PIN_DMABUF: pin a whole dma-buf (from cuMemGetHandleForAddressRange, or
 * any exporter) instead of a virtual range; it needs no nv-p2p provider.
 * va is the address the buffer's first byte has in the caller's GPU
 * address space: page aligned, it places the pin for in-kernel lookups by
 * address and QUERY. The pin holds its own reference to the dma-buf, so
 * the caller may close fd afterwards. When the exporter moves or frees the
 * buffer (move_notify) the pin is revoked exactly like a freed nv-p2p
 * range: status page, poll, eventfd, GET_REVOKED. UNPIN, QUERY, the quota
 * and the statistics treat it like any other pin. Errors beyond the
 * common ones: fd is not a dma-buf -EBADF (not an fd) or -EINVAL; the
 * exporter refuses the attachment, pin or mapping: its error.
 */
struct gdrpin_pin_dmabuf_args {
	__u32 size;
	__u32 flags;			/* in: 0 */
	__s32 fd;			/* in: dma-buf fd */
	__u32 pad;			/* in: 0 */
	__u64 va;			/* in: GPU address of byte 0, page aligned */
	__u64 handle;			/* out */
	__u64 pinned_len;		/* out: the dma-buf's size */
	__u32 slot;			/* out: status page slot */
	__u32 mode;			/* out: GDRPIN_MODE_DMABUF */
	__u32 entries;			/* out: DMA segments of the mapping */
	__u32 pad2;			/* in: 0 */
	__u64 reserved[2];		/* in: 0 */
};

#define GDRPIN_IOC_GET_VERSION	_IOWR(GDRPIN_IOCTL_TYPE, 0x00, struct gdrpin_version_args)
#define GDRPIN_IOC_PIN		_IOWR(GDRPIN_IOCTL_TYPE, 0x01, struct gdrpin_pin_args)
#define GDRPIN_IOC_UNPIN	_IOWR(GDRPIN_IOCTL_TYPE, 0x02, struct gdrpin_unpin_args)
#define GDRPIN_IOC_QUERY	_IOWR(GDRPIN_IOCTL_TYPE, 0x03, struct gdrpin_query_args)
#define GDRPIN_IOC_GET_REVOKED	_IOWR(GDRPIN_IOCTL_TYPE, 0x04, struct gdrpin_get_revoked_args)
#define GDRPIN_IOC_SET_EVENTFD	_IOWR(GDRPIN_IOCTL_TYPE, 0x05, struct gdrpin_set_eventfd_args)
#define GDRPIN_IOC_GET_STATS	_IOWR(GDRPIN_IOCTL_TYPE, 0x06, struct gdrpin_stats_args)
#define GDRPIN_IOC_PIN_DMABUF	_IOWR(GDRPIN_IOCTL_TYPE, 0x07, struct gdrpin_pin_dmabuf_args)

/* Status page (read-only mapping at offset 0). */
#define GDRPIN_STATUS_MAGIC	0x67647270U	/* "gdrp" */

struct gdrpin_status_header {
	__u32 magic;			/* GDRPIN_STATUS_MAGIC */
	__u32 abi_version;		/* GDRPIN_ABI_VERSION */
	__u32 header_size;		/* offset of slot 0 */
	__u32 slot_size;		/* sizeof(struct gdrpin_status_slot) */
	__u32 nslots;
	__u32 pad;
	__u64 revoke_count;		/* revocations of this fd, monotonic */
	__u64 reserved[4];
};

struct gdrpin_status_slot {
	__u64 gen;			/* GDRPIN_HANDLE_GEN of the pin */
	__u32 state;			/* GDRPIN_SLOT_* */
	__u32 pad;
};

#endif /* GDRPIN_IOCTL_H */
