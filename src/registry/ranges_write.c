/* SPDX-License-Identifier: MIT */
/*
 * Registry of live GPU allocations: the writers' API (insert, remove,
 * the scans, the counters, fork and reset) over a radix table of 64 KiB
 * granules whose readers take no lock.  The layout and the concurrency
 * argument: ranges_impl.h; lookups: ranges_read.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "ranges_impl.h"

/*
 * Atomic, in one line: an insert changes both, so that under contention
 * it fetches one line, not two.
 */
static struct {
	uint64_t gen_next;
	uint64_t bytes;
	uint64_t peak;	/* most bytes at once, for the counters */
} gh_rtab_tot __attribute__((aligned(64))) = { .gen_next = 1 };

/*
 * Generations are handed out in blocks per thread, so that an insert
 * does not fetch the shared line for each: unique and never reused, but
 * not in allocation order across threads (nothing compares them).
 */
#define GH_REG_GEN_BLOCK	64
static __thread uint64_t gh_rtab_gen_next, gh_rtab_gen_end;

static uint64_t gh_rtab_gen_take(void)
{
	if (GH_REG_UNLIKELY(gh_rtab_gen_next == gh_rtab_gen_end)) {
		gh_rtab_gen_next = __atomic_fetch_add(&gh_rtab_tot.gen_next,
						      GH_REG_GEN_BLOCK,
						      __ATOMIC_RELAXED);
		gh_rtab_gen_end = gh_rtab_gen_next + GH_REG_GEN_BLOCK;
	}
	return gh_rtab_gen_next++;
}

/*
 * The live bytes and their peak, after the shard's lock is dropped: the
 * shared line is not fetched while other writers of the shard wait.
 * Each sum is the total at one instant: the peak is their maximum.
 */
static void gh_rtab_bytes_add(uint64_t size)
{
	uint64_t bytes = __atomic_add_fetch(&gh_rtab_tot.bytes, size,
					    __ATOMIC_RELAXED);
	uint64_t peak = GH_LD(&gh_rtab_tot.peak);

	while (bytes > peak &&
	       !__atomic_compare_exchange_n(&gh_rtab_tot.peak, &peak, bytes,
					    true, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED))
		;
}

/* The shards of the regions [base, end) touches (end > base), as bits. */
static uint64_t gh_rtab_shard_mask(uint64_t base, uint64_t end)
{
	uint64_t r0 = base >> GH_REG_REG_SHIFT, r1 = (end - 1) >> GH_REG_REG_SHIFT;
	uint64_t m = 0;

	if (r1 - r0 >= GH_REG_SHARDS - 1)
		return GH_REG_SHARDS_ALL;
	for (uint64_t r = r0; r <= r1; r++)
		m |= 1ull << (r & (GH_REG_SHARDS - 1));
	return m;
}

/* [base, end) lies in one 2 MiB region, so one shard (end > base). */
static inline bool gh_rtab_one_region(uint64_t base, uint64_t end)
{
	return !((base ^ (end - 1)) >> GH_REG_REG_SHIFT);
}

/* Lock order: shards by index, then gh_rtab_mem_lock. */
static void gh_rtab_lock_mask(uint64_t m)
{
	for (uint64_t b = m; b; b &= b - 1)
		pthread_mutex_lock(&gh_rtab_shard[__builtin_ctzll(b)].lock);
}

static void gh_rtab_unlock_mask(uint64_t m)
{
	for (uint64_t b = m; b; b &= b - 1)
		pthread_mutex_unlock(&gh_rtab_shard[__builtin_ctzll(b)].lock);
}

/* After the lock is dropped, as gh_rtab_bytes_add. */
static void gh_rtab_bytes_sub(uint64_t size)
{
	__atomic_sub_fetch(&gh_rtab_tot.bytes, size, __ATOMIC_RELAXED);
}

static void gh_rtab_ent_get(const struct gh_rtab_ent *e, struct gh_range *r)
{
	r->base = e->base;
	r->size = e->size;
	r->gen = e->gen;
	r->ctx = e->ctx;
	r->pool = e->pool;
	r->dev = (int32_t)(uint32_t)e->meta;
	r->kind = (uint16_t)(e->meta >> 32);
	r->flags = (uint16_t)(e->meta >> 48);
	r->buffer_id = e->buffer_id;
}

int gh_registry_init(void)
{
	return 0;	/* everything is static or created on demand */
}

static int gh_rtab_insert_locked(const struct gh_range *r, uint64_t gen)
{
	uint64_t base = r->base, end = r->base + r->size;
	struct gh_rtab_shard *sh;
	struct gh_rtab_ent *e;
	int rc;

	/* Allocate everything first so that nothing fails once published. */
	if (gh_rtab_one_gran(base, end)) {
		rc = gh_rtab_prepare_gran(base, end);
	} else if (gh_rtab_first_overlap(base, end)) {
		rc = -EEXIST;
	} else {
		rc = gh_rtab_prepare(base, end);
	}
	if (rc)
		return rc;
	sh = gh_rtab_shard_of(base);
	e = gh_rtab_ent_alloc(sh);
	if (!e)
		return -ENOMEM;

	GH_ST(&e->seq, e->seq + 1);
	GH_FENCE_REL();
	GH_ST(&e->base, base);
	GH_ST(&e->gen, gen);
	GH_ST(&e->ctx, r->ctx);
	GH_ST(&e->pool, r->pool);
	GH_ST(&e->meta, (uint64_t)(uint32_t)r->dev |
			(uint64_t)r->kind << 32 | (uint64_t)r->flags << 48);
	GH_ST(&e->buffer_id, r->buffer_id);
	GH_ST(&e->size, r->size);
	GH_ST_REL(&e->seq, e->seq + 1);

	gh_rtab_publish(e, true);
	GH_ST(&sh->count, sh->count + 1);
	return 0;
}

int gh_registry_insert(const struct gh_range *r, uint64_t *gen_p)
{
	uint64_t end = r->base + r->size, m, gen;
	int rc;

	if (r->size == 0 || end < r->base || end > GH_REG_VA_END)
		return -EINVAL;
	gen = gh_rtab_gen_take();	/* a failed insert wastes one */
	if (gh_rtab_one_region(r->base, end)) {
		/* The common case, one shard: no mask to walk. */
		pthread_mutex_t *l = &gh_rtab_shard_of(r->base)->lock;

		pthread_mutex_lock(l);
		rc = gh_rtab_insert_locked(r, gen);
		pthread_mutex_unlock(l);
	} else {
		m = gh_rtab_shard_mask(r->base, end);
		gh_rtab_lock_mask(m);
		rc = gh_rtab_insert_locked(r, gen);
		gh_rtab_unlock_mask(m);
	}
	if (rc)
		return rc;
	gh_rtab_bytes_add(r->size);
	if (gen_p)
		*gen_p = gen;
	return 0;
}

int gh_registry_remove(uint64_t base, struct gh_range *out_p)
{
	pthread_mutex_t *l = &gh_rtab_shard_of(base)->lock;
	uint64_t m = 0, need;
	struct gh_rtab_ent *e;
	struct gh_range r;

	/*
	 * The base's shard finds the entry (its base is in that region); an
	 * entry that reaches into other shards' regions is looked up again
	 * with all of its shards held, in order.
	 */
	pthread_mutex_lock(l);
	e = gh_rtab_find_base(base);
	if (e && !gh_rtab_one_region(base, gh_rtab_ent_end(e))) {
		m = gh_rtab_shard_mask(base, gh_rtab_ent_end(e));
		pthread_mutex_unlock(l);
		for (;;) {
			gh_rtab_lock_mask(m);
			e = gh_rtab_find_base(base);
			if (!e)
				break;
			need = gh_rtab_shard_mask(base, gh_rtab_ent_end(e));
			if (!(need & ~m))
				break;
			gh_rtab_unlock_mask(m);
			m |= need;
		}
	}
	if (e) {
		gh_rtab_ent_get(e, &r);
		gh_rtab_unlink(e);
	}
	if (m)
		gh_rtab_unlock_mask(m);
	else
		pthread_mutex_unlock(l);
	if (!e)
		return -ENOENT;
	gh_rtab_bytes_sub(r.size);
	if (out_p)
		*out_p = r;
	return 0;
}

/* Visit live entries in pool order; @fn may unlink the one it is given. */
static size_t gh_rtab_scan(bool (*fn)(struct gh_rtab_ent *e, void *arg),
			  void *arg)
{
	size_t n = 0;

	for (uint32_t c = 0; c < gh_rtab_ent_nchunks; c++) {
		uint32_t lim = c + 1 == gh_rtab_ent_nchunks ?
			       gh_rtab_ent_bump : GH_REG_ENT_PER_CHUNK;

		for (uint32_t i = 0; i < lim; i++) {
			struct gh_rtab_ent *e = &gh_rtab_ent_chunk[c][i];

			if (e->size && fn(e, arg))
				n++;
		}
	}
	return n;
}

struct gh_rtab_rm_if {
	gh_range_match_fn match;
	void *match_arg;
	gh_range_fn on_remove;
	void *cb_arg;
};

static bool gh_rtab_rm_if_one(struct gh_rtab_ent *e, void *arg)
{
	struct gh_rtab_rm_if *a = arg;
	struct gh_range r;

	gh_rtab_ent_get(e, &r);
	if (a->match && !a->match(&r, a->match_arg))
		return false;
	if (a->on_remove)
		a->on_remove(&r, a->cb_arg);
	gh_rtab_unlink(e);
	gh_rtab_bytes_sub(r.size);
	return true;
}

size_t gh_registry_remove_if(gh_range_match_fn match, void *match_arg,
			     gh_range_fn on_remove, void *cb_arg)
{
	struct gh_rtab_rm_if a = { match, match_arg, on_remove, cb_arg };
	size_t n;

	gh_rtab_lock_mask(GH_REG_SHARDS_ALL);
	n = gh_rtab_scan(gh_rtab_rm_if_one, &a);
	gh_rtab_unlock_mask(GH_REG_SHARDS_ALL);
	return n;
}

/* The end of [start, start + len) inside the registry's address space;
 * start itself when nothing of it is. */
static uint64_t clip_end(uint64_t start, uint64_t len)
{
	uint64_t end = start + len;

	if (len == 0 || start >= GH_REG_VA_END)
		return start;
	if (end < start || end > GH_REG_VA_END)
		end = GH_REG_VA_END;
	return end;
}

size_t gh_registry_remove_overlap(uint64_t start, uint64_t len,
				  gh_range_fn on_remove, void *cb_arg)
{
	uint64_t end = clip_end(start, len);
	struct gh_rtab_ent *e;
	struct gh_range r;
	size_t n = 0;

	/* Every shard: what overlaps may reach into any region. */
	gh_rtab_lock_mask(GH_REG_SHARDS_ALL);
	while (start < end && (e = gh_rtab_first_overlap(start, end))) {
		uint64_t e_end = gh_rtab_ent_end(e);

		gh_rtab_ent_get(e, &r);
		if (on_remove)
			on_remove(&r, cb_arg);
		gh_rtab_unlink(e);
		gh_rtab_bytes_sub(r.size);
		n++;
		if (e_end > start)
			start = e_end;	/* the next overlap starts at or after */
	}
	gh_rtab_unlock_mask(GH_REG_SHARDS_ALL);
	return n;
}

size_t gh_registry_overlaps(uint64_t start, uint64_t len,
			    gh_range_match_fn fn, void *arg)
{
	uint64_t end = clip_end(start, len);
	struct gh_rtab_ent *e;
	struct gh_range r;
	size_t n = 0;
	uint64_t m;

	if (start >= end)
		return 0;
	/*
	 * The shards of [start, end) suffice: an entry overlapping it is in
	 * one of their regions, so it cannot be removed while they are held.
	 */
	m = gh_rtab_shard_mask(start, end);
	gh_rtab_lock_mask(m);
	while (start < end && (e = gh_rtab_first_overlap(start, end))) {
		gh_rtab_ent_get(e, &r);
		n++;
		if (fn(&r, arg))
			break;
		start = gh_rtab_ent_end(e);
	}
	gh_rtab_unlock_mask(m);
	return n;
}

struct gh_rtab_each {
	gh_range_fn fn;
	void *arg;
};

static bool gh_rtab_each_one(struct gh_rtab_ent *e, void *arg)
{
	struct gh_rtab_each *a = arg;
	struct gh_range r;

	gh_rtab_ent_get(e, &r);
	a->fn(&r, a->arg);
	return true;
}

void gh_registry_foreach(gh_range_fn fn, void *arg)
{
	struct gh_rtab_each a = { fn, arg };

	gh_rtab_lock_mask(GH_REG_SHARDS_ALL);
	gh_rtab_scan(gh_rtab_each_one, &a);
	gh_rtab_unlock_mask(GH_REG_SHARDS_ALL);
}

uint64_t gh_registry_count(void)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < GH_REG_SHARDS; i++)
		n += GH_LD(&gh_rtab_shard[i].count);
	return n;
}

uint64_t gh_registry_bytes(void)
{
	return GH_LD(&gh_rtab_tot.bytes);
}

uint64_t gh_registry_peak_bytes(void)
{
	return GH_LD(&gh_rtab_tot.peak);
}

void gh_registry_atfork_prepare(void)
{
	gh_rtab_lock_mask(GH_REG_SHARDS_ALL);
	pthread_mutex_lock(&gh_rtab_mem_lock);
}

void gh_registry_atfork_parent(void)
{
	pthread_mutex_unlock(&gh_rtab_mem_lock);
	gh_rtab_unlock_mask(GH_REG_SHARDS_ALL);
}

void gh_registry_atfork_child(void)
{
	/* Only the forking thread exists, and it holds the locks. */
	pthread_mutex_unlock(&gh_rtab_mem_lock);
	gh_rtab_unlock_mask(GH_REG_SHARDS_ALL);
}

static bool gh_rtab_reset_one(struct gh_rtab_ent *e, void *arg)
{
	gh_rtab_bytes_sub(e->size);
	gh_rtab_unlink(e);
	return true;
}

void gh_registry_reset(void)
{
	gh_rtab_lock_mask(GH_REG_SHARDS_ALL);
	gh_rtab_scan(gh_rtab_reset_one, NULL);
	gh_rtab_unlock_mask(GH_REG_SHARDS_ALL);
}
