/* SPDX-License-Identifier: GPL-2.0 */
/*
 * gdrpin internal declarations.
 *
 * Objects
 *   struct gdrpin_ctx   one per open file; kref'd (the file and every pin
 *                       hold a reference; the last put calls ctx->release),
 *                       bound to the opener's tgid + mm.
 *                       Its pins are released when the opener's mm goes
 *                       (mmu_notifier release) or the file is released,
 *                       whichever comes first: a forked child holding the
 *                       fd does not keep the parent's pins alive.
 *   struct gdrpin_range one pinned range; kref'd (the fd's table, the
 *                       ticket table, in-flight free callbacks and in-kernel API
 *                       users hold references).
 *   ticket              a u64 that never repeats; the free callback receives
 *                       it as its data and looks the pin up in a global hash
 *                       under gdrpin_ticket_lock. A callback for a ticket that
 *                       is gone finds nothing and returns: no raw pointer to
 *                       a pin is ever given to the NVIDIA driver.
 *
 * Lock order (outer first; a lock is never taken while holding one below it)
 *   0. gdrpin_user_lock       mutex: per-uid table (open/close; nests nothing)
 *   1. gdrpin_ctx_list_lock   mutex: global list of contexts (kapi lookups)
 *   2. ctx->lock              mutex: ctx->pins (slot -> pin), seq, provider
 *   3. gdrpin_prov_lock       mutex: provider symbol_get/symbol_put
 *   4. pin->notify_lock       mutex: pin->notifiers, pin->notified
 *   5. pin->map_lock          mutex: pin->maps and each map->m
 *   6. pin->lock              spinlock: state, cb_* flags, nv_busy, pt
 *   6. gdrpin_ticket_lock     spinlock: ticket hash (never nested with 6)
 *   7. ctx->ev_lock           spinlock: status page, revoked list, eventfd
 *
 * DMA-BUF pins (gdrpin_dmabuf.c): a buffer's dma_resv lock is taken with
 * no gdrpin lock held; move_notify runs under it and takes only
 * notify_lock, pin->lock and ctx->ev_lock (gdrpin_pin_revoke()).
 *
 * Peer-memory client (gdrpin_peer.c): ib_core's invalidate callback is
 * called from a kapi notifier (under notify_lock, maybe under NVIDIA's
 * locks) and may call the client's dma_unmap and put_pages; those and
 * release only record the hand-back and queue work, which unmaps and
 * unpins with no ib_core lock held. peer->lock is a spinlock that nests
 * nothing.
 *
 * nv-p2p calls that can take NVIDIA's internal locks (get_pages*,
 * put_pages*, dma_map_pages, dma_unmap_pages) are made with NO gdrpin lock
 * held. The free callback runs under NVIDIA's locks, so it may take
 * notify_lock, map_lock, pin->lock, gdrpin_ticket_lock and ctx->ev_lock
 * (none of which is held across an nv-p2p call) but never ctx->lock.
 * nvidia_p2p_free_page_table and nvidia_p2p_free_dma_mapping take no NVIDIA
 * lock and may be called with map_lock held.
 *
 * Who frees the page table (the gdrcopy PR #332 use-after-free came from
 * getting this wrong): a pin is torn down exactly once, by the first of
 *   (a) the owner (unpin, close): state ACTIVE -> RELEASING, then it calls
 *       put_pages; or
 *   (b) the free callback: state -> REVOKED, cb_fired.
 * After (b) the page table and DMA mappings must be released with the
 * free_* calls, never put_pages. They are released by whoever is last out:
 * the callback itself when no gdrpin thread is inside an nv-p2p call on the
 * pin (nv_busy == 0), otherwise the thread whose nv-p2p call ends last.
 * The pin memory itself is freed by kref, so a callback that races with
 * unpin/close never touches freed memory.
 */
#ifndef GDRPIN_H
#define GDRPIN_H

#include <linux/atomic.h>
#include <linux/hashtable.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mmu_notifier.h>
#include <linux/mutex.h>
#include <linux/rbtree.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>
#include <linux/xarray.h>

#include "gdrpin_ioctl.h"
#include "gdrpin_kapi.h"
#include "gdrpin_nvp2p.h"

struct device_attribute;
struct file;
struct inode;

#define GDRPIN_MAX_SLOTS	(1U << GDRPIN_HANDLE_SLOT_BITS)

/*
 * Module parameters, each defined beside its user so that no file reads
 * one from a layer above it.
 */
extern unsigned long gdrpin_max_pinned_bytes;		/* gdrpin_stats.c */
extern unsigned long gdrpin_max_user_pinned_bytes;	/* gdrpin_user.c */
extern unsigned int gdrpin_max_user_contexts;		/* gdrpin_user.c */
extern unsigned long gdrpin_max_pin_len;		/* gdrpin_pin.c */
extern unsigned int gdrpin_status_pages;		/* gdrpin_status.c */

/* --- provider (gdrpin_p2p.c) ------------------------------------------- */

struct gdrpin_provider {
	typeof(&nvidia_p2p_get_pages) get_pages;
	typeof(&nvidia_p2p_put_pages) put_pages;
	typeof(&nvidia_p2p_get_pages_persistent) get_pages_persistent;
	typeof(&nvidia_p2p_put_pages_persistent) put_pages_persistent;
	typeof(&nvidia_p2p_free_page_table) free_page_table;
	typeof(&nvidia_p2p_dma_map_pages) dma_map_pages;
	typeof(&nvidia_p2p_dma_unmap_pages) dma_unmap_pages;
	typeof(&nvidia_p2p_free_dma_mapping) free_dma_mapping;
};

/* Valid while a reference taken with gdrpin_provider_get() is held. */
extern struct gdrpin_provider gdrpin_nv;

int gdrpin_provider_get(void);
void gdrpin_provider_put(void);
u64 gdrpin_provider_caps(void);

/* --- per-fd context (gdrpin_ctx.c) ------------------------------------ */

struct gdrpin_ctx {
	struct kref ref;
	/*
	 * Frees the context (gdrpin_ctx.c); set at open, so that pins (below
	 * the context) drop their reference without calling up into it.
	 */
	void (*release)(struct kref *ref);
	struct list_head node;		/* gdrpin_ctx_list */
	struct pid *tgid;		/* opener */
	struct mm_struct *mm;		/* opener's mm (mmgrab'd, compared) */
	struct mmu_notifier mn;		/* on mm: release drains the pins */

	struct mutex lock;
	struct xarray pins;		/* slot -> pin (ACTIVE or REVOKED) */
	struct rb_root_cached itree;	/* listed pins by VA (interval tree) */
	u64 seq;			/* last generation handed out */
	bool prov_held;
	bool dead;			/* released: no new pins */
	u64 npins;			/* entries in pins */

	spinlock_t ev_lock;
	struct list_head revoked;	/* revoked pins not yet released */
	u64 nrevoked;
	u64 revocations;
	struct eventfd_ctx *evfd;
	wait_queue_head_t wq;

	struct gdrpin_status_header *status;	/* vmap of status_pages */
	struct page **status_pages;	/* memcg-charged */
	struct gdrpin_status_slot *slots;
	u32 status_size;
	u32 nslots;

	atomic64_t pinned_bytes;
	struct gdrpin_user *user;	/* the opener's uid: limits */
};

extern struct mutex gdrpin_ctx_list_lock;
extern struct list_head gdrpin_ctx_list;

extern atomic_t gdrpin_live_ctx;	/* gdrpin_stats.c */

static inline void gdrpin_ctx_get(struct gdrpin_ctx *ctx)
{
	kref_get(&ctx->ref);
}

static inline void gdrpin_ctx_put(struct gdrpin_ctx *ctx)
{
	kref_put(&ctx->ref, ctx->release);
}

int gdrpin_ctx_open(struct inode *inode, struct file *file);
int gdrpin_ctx_close(struct inode *inode, struct file *file);
bool gdrpin_ctx_is_owner(struct gdrpin_ctx *ctx);
void gdrpin_ctx_pin_release(struct gdrpin_ctx *ctx, struct gdrpin_range *pin,
			    bool unpin);
int gdrpin_ctx_unpin(struct gdrpin_ctx *ctx, u64 handle, bool unpin,
		     u32 *state_p);

/* --- pins (gdrpin_pin.c) ----------------------------------------------- */

enum gdrpin_pin_state {
	GDRPIN_PS_PINNING,
	GDRPIN_PS_ACTIVE,
	GDRPIN_PS_RELEASING,
	GDRPIN_PS_REVOKED,
};

struct gdrpin_dma_map {
	struct list_head node;		/* pin->maps */
	struct pci_dev *pdev;		/* referenced */
	struct nvidia_p2p_dma_mapping *m;	/* NULL once unmapped/freed */
	bool orphan;			/* user gave it back; gdrpin frees it */
};

/*
 * A pin mode: what the generic pin code (gdrpin_pin.c) calls. Each pin
 * gets its mode's ops when it is made and keeps them.
 */
struct gdrpin_pin_ops {
	/*
	 * Pin [pin->va, pin->va + pin->len) as @req (the mode's) asks and
	 * set mode, page_size, entries. The pin is PINNING, has its slot and
	 * its creator is busy on it (nv_busy). On failure the mode has
	 * released all but what its teardown releases.
	 */
	int (*pin)(struct gdrpin_range *pin, void *req);
	/*
	 * Release what the mode holds for an unlisted pin (unpin, close,
	 * exit, or a pin that failed to be made), unless a revocation got
	 * there first; an ACTIVE pin's kapi users are notified first.
	 */
	void (*teardown)(struct gdrpin_range *pin);
	/*
	 * Free what a revocation left to the last one out (see above): @pt
	 * and the DMA mappings. Only modes with a page table (pt_freed not
	 * set from the start) are ever asked.
	 */
	void (*free_revoked)(struct gdrpin_range *pin,
			     struct nvidia_p2p_page_table *pt);
};

struct gdrpin_range {
	struct kref ref;
	struct gdrpin_ctx *ctx;		/* referenced */
	const struct gdrpin_pin_ops *ops;	/* the mode, set once */
	u64 handle;
	u64 gen;
	u32 slot;
	u32 mode;
	u64 va;
	u64 len;
	u32 page_size;
	u32 entries;
	u8 uuid[16];
	u64 pin_ns;

	u64 ticket;
	struct hlist_node tnode;	/* gdrpin_ticket_hash */
	bool in_tickets;

	spinlock_t lock;
	enum gdrpin_pin_state state;
	bool cb_fired;			/* the free callback ran (or is running) */
	bool cb_running;		/* callback is still notifying */
	bool pt_freed;			/* page table released */
	int nv_busy;			/* gdrpin threads inside nv-p2p calls */
	wait_queue_head_t busy_wq;
	struct nvidia_p2p_page_table *pt;

	struct mutex map_lock;
	struct list_head maps;

	struct mutex notify_lock;
	struct list_head notifiers;
	bool notified;

	bool listed;			/* owns its slot (ctx->lock + ev_lock) */
	struct rb_node itnode;		/* ctx->itree while listed */
	u64 it_subtree_last;
	struct list_head revoked_node;	/* ctx->revoked, under ctx->ev_lock */
	struct list_head tmp_node;	/* private lists of the releasing thread */
	struct gdrpin_dmabuf *db;	/* GDRPIN_MODE_DMABUF (gdrpin_dmabuf.c) */
};

bool gdrpin_pin_range_ok(u64 va, u64 len);
struct gdrpin_range *gdrpin_pin_new(struct gdrpin_ctx *ctx,
				    const struct gdrpin_pin_ops *ops,
				    u64 va, u64 len);
int gdrpin_pin_make(struct gdrpin_range *pin, void *req, u64 t0);
struct gdrpin_range *gdrpin_pin_lookup(struct gdrpin_ctx *ctx, u64 handle);
struct gdrpin_range *gdrpin_pin_get_cover(struct gdrpin_ctx *ctx, u64 va,
					  u64 end);
void gdrpin_pin_unlist(struct gdrpin_ctx *ctx, struct gdrpin_range *pin);
void gdrpin_pin_teardown(struct gdrpin_range *pin);
void gdrpin_pin_get(struct gdrpin_range *pin);
void gdrpin_pin_put(struct gdrpin_range *pin);
void gdrpin_pin_notify(struct gdrpin_range *pin, int reason);
u32 gdrpin_pin_user_state(struct gdrpin_range *pin);
bool gdrpin_pin_busy_enter(struct gdrpin_range *pin);
void gdrpin_pin_busy_exit(struct gdrpin_range *pin);
bool gdrpin_claim_free(struct gdrpin_range *pin,
		       struct nvidia_p2p_page_table **pt_p);
bool gdrpin_pin_revoke(struct gdrpin_range *pin);

/* --- nv-p2p pins (gdrpin_nv.c) ----------------------------------------- */

int gdrpin_nv_pin(struct gdrpin_ctx *ctx, struct gdrpin_pin_args *args);
void gdrpin_pin_dma_unmap(struct gdrpin_range *pin, struct pci_dev *pdev,
			  struct nvidia_p2p_dma_mapping *m);
int gdrpin_pin_probe(u64 va, u64 len);

/* --- pins for kernel clients (gdrpin_ctx.c) ---------------------------- */

struct gdrpin_ctx *gdrpin_ctx_of_current(void);
int gdrpin_ctx_pin_kernel(struct gdrpin_ctx *ctx,
			  int (*pin_fn)(struct gdrpin_ctx *ctx,
					struct gdrpin_pin_args *args),
			  u64 va, u64 len, u32 flags,
			  struct gdrpin_range **pin_p);
void gdrpin_ctx_unpin_kernel(struct gdrpin_ctx *ctx, struct gdrpin_range *pin);

/* --- peer-memory client of ib_core (gdrpin_peer.c) --------------------- */

void gdrpin_peer_init(void);
void gdrpin_peer_exit(void);

/* --- DMA-BUF pins (gdrpin_dmabuf.c) ------------------------------------ */

void gdrpin_dmabuf_setup(struct device *dev);
int gdrpin_dmabuf_pin(struct gdrpin_ctx *ctx,
		      struct gdrpin_pin_dmabuf_args *args);

/*
 * The lock rules above, checked by lockdep: nv-p2p calls that can take
 * NVIDIA's locks are made with no gdrpin lock held.
 */
static inline void gdrpin_assert_nv_callable(struct gdrpin_range *pin)
{
	lockdep_assert_not_held(&gdrpin_ctx_list_lock);
	lockdep_assert_not_held(&pin->ctx->lock);
	lockdep_assert_not_held(&pin->notify_lock);
	lockdep_assert_not_held(&pin->map_lock);
	lockdep_assert_not_held(&pin->lock);
}

extern wait_queue_head_t gdrpin_live_wq;

/* --- status page and events (gdrpin_status.c) -------------------------- */

int gdrpin_status_alloc(struct gdrpin_ctx *ctx);
void gdrpin_status_free(struct gdrpin_ctx *ctx);
int gdrpin_status_mmap(struct gdrpin_ctx *ctx, struct vm_area_struct *vma);
void gdrpin_status_set(struct gdrpin_ctx *ctx, u32 slot, u64 gen, u32 state);
void gdrpin_status_revoked(struct gdrpin_ctx *ctx, struct gdrpin_range *pin);
int gdrpin_status_set_eventfd(struct gdrpin_ctx *ctx, int fd);

/* --- per-user limits (gdrpin_user.c) ----------------------------------- */

struct gdrpin_user *gdrpin_user_open(void);
void gdrpin_user_close(struct gdrpin_user *u);
bool gdrpin_user_reserve(struct gdrpin_user *u, u64 bytes);
void gdrpin_user_unreserve(struct gdrpin_user *u, u64 bytes);

/* --- accounting (gdrpin_stats.c) --------------------------------------- */

struct gdrpin_counters {
	atomic64_t pins;
	atomic64_t unpins;
	atomic64_t revocations;
	atomic64_t legacy_fallbacks;
	atomic64_t fail_nomem;
	atomic64_t fail_inval;
	atomic64_t fail_nospc;
	atomic64_t fail_nodev;
	atomic64_t fail_other;
	atomic64_t pin_ns_total;
	atomic64_t pin_ns_max;
	atomic64_t pinned_bytes;
	atomic64_t live_pins;
	atomic64_t kapi_refs;
	atomic64_t peer_regs;		/* live peer-memory registrations */
	atomic64_t peer_invalidations;	/* invalidations sent to ib_core */
	atomic64_t peer_client;		/* 1 while registered with ib_core */
};

extern struct gdrpin_counters gdrpin_cnt;
extern const struct attribute_group *gdrpin_attr_groups[];

bool gdrpin_quota_reserve(struct gdrpin_ctx *ctx, u64 bytes);
void gdrpin_quota_release(struct gdrpin_ctx *ctx, u64 bytes);
void gdrpin_count_failure(int err);
void gdrpin_count_pin_time(u64 ns);

#endif /* GDRPIN_H */
