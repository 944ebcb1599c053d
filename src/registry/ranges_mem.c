/* SPDX-License-Identifier: MIT */
/*
 * The registry's memory: its shared state, the dirs, mid and sub tables
 * created on demand, the entries and the shards' node reserves, all from
 * mmap and type-stable (why: ranges_impl.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>

#include "ranges_impl.h"

struct gh_rtab_shard gh_rtab_shard[GH_REG_SHARDS] = {
	[0 ... GH_REG_SHARDS - 1] = {
		.lock = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP,
	},
};
pthread_mutex_t gh_rtab_mem_lock = PTHREAD_MUTEX_INITIALIZER;
struct gh_rtab_dir gh_rtab_dir0 __attribute__((aligned(4096)));
struct gh_rtab_dir *gh_rtab_dirhi[GH_REG_TOPS];

/* Under gh_rtab_mem_lock. */
struct gh_rtab_ent *gh_rtab_ent_chunk[GH_REG_MAX_ENT_CHUNKS];
uint32_t gh_rtab_ent_nchunks;
uint32_t gh_rtab_ent_bump;	/* carved entries in the last chunk */
static char *gh_rtab_arena;		/* bump allocator for tables, nodes */
static size_t gh_rtab_arena_left;

static void *gh_rtab_map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/*
 * A 2 MiB-aligned 2 MiB mapping that may use a transparent huge page:
 * lookups touch tables and entries at random, and TLB misses would
 * otherwise cost as much as the cache misses.
 */
static void *gh_rtab_map_huge(void)
{
	char *p = gh_rtab_map(2 * GH_REG_ARENA), *a;

	if (!p)
		return NULL;
	a = (char *)(((uintptr_t)p + GH_REG_ARENA - 1) & ~(GH_REG_ARENA - 1));
	if (a > p)
		munmap(p, a - p);
	munmap(a + GH_REG_ARENA, p + GH_REG_ARENA - a);
#ifdef MADV_HUGEPAGE
	madvise(a, GH_REG_ARENA, MADV_HUGEPAGE);
#endif
	return a;
}

/*
 * Zeroed, type-stable memory for tables and nodes; never given back.
 * Under gh_rtab_mem_lock.
 */
static void *gh_rtab_carve_locked(size_t len)
{
	void *p;

	len = (len + 63) & ~(size_t)63;
	if (len > GH_REG_ARENA)
		return NULL;
	if (len > gh_rtab_arena_left) {
		char *a = gh_rtab_map_huge();

		if (!a)
			return NULL;
		gh_rtab_arena = a;
		gh_rtab_arena_left = GH_REG_ARENA;
	}
	p = gh_rtab_arena;
	gh_rtab_arena += len;
	gh_rtab_arena_left -= len;
	return p;
}

void *gh_rtab_carve(size_t len)
{
	void *p;

	pthread_mutex_lock(&gh_rtab_mem_lock);
	p = gh_rtab_carve_locked(len);
	pthread_mutex_unlock(&gh_rtab_mem_lock);
	return p;
}

struct gh_rtab_dir *gh_rtab_dir_get(uint64_t top)
{
	struct gh_rtab_dir *d = gh_rtab_dir_peek(top);

	if (d)
		return d;
	pthread_mutex_lock(&gh_rtab_mem_lock);
	d = gh_rtab_dirhi[top];
	if (!d) {
		d = gh_rtab_map(sizeof(*d));
		if (d)
			GH_ST_REL(&gh_rtab_dirhi[top], d);
	}
	pthread_mutex_unlock(&gh_rtab_mem_lock);
	return d;
}

/*
 * The mid table of the window at @ws, created and published if new.
 * Callers only ask for windows that no entry covers whole.
 */
struct gh_rtab_mid *gh_rtab_mid_get(uint64_t ws)
{
	struct gh_rtab_dir *d = gh_rtab_dir_get(ws >> GH_REG_DIR_SHIFT);
	uint32_t i = (ws >> GH_REG_WIN_SHIFT) & 0xffff;
	struct gh_rtab_mid *m;

	if (!d)
		return NULL;
	m = GH_LD_ACQ(&d->mid[i]);
	if (m)
		return m;
	/* The window's regions may belong to other shards. */
	pthread_mutex_lock(&gh_rtab_mem_lock);
	m = d->mid[i];
	if (!m) {
		m = gh_rtab_carve_locked(sizeof(*m));
		if (m) {
			GH_ST_REL(&d->mid[i], m);
			GH_ST_REL(&d->slot[i], (uint64_t)m);
		}
	}
	pthread_mutex_unlock(&gh_rtab_mem_lock);
	return m;
}

/* Likewise the sub table of the region at @rs. */
struct gh_rtab_sub *gh_rtab_sub_get(uint64_t rs)
{
	struct gh_rtab_mid *m = gh_rtab_mid_get(rs & ~(GH_REG_WIN - 1));
	uint32_t i = (rs >> GH_REG_REG_SHIFT) & (GH_REG_MID_SLOTS - 1);
	struct gh_rtab_sub *s;

	if (!m)
		return NULL;
	if (m->sub[i])
		return m->sub[i];
	s = gh_rtab_carve(sizeof(*s));
	if (!s)
		return NULL;
	m->sub[i] = s;
	gh_rtab_mid_set(m, i, (uint64_t)s);
	return s;
}

/* An entry for shard @sh (held): its free list, else a new one. */
struct gh_rtab_ent *gh_rtab_ent_alloc(struct gh_rtab_shard *sh)
{
	struct gh_rtab_ent *e = sh->ent_free, *chunk;

	if (e) {
		sh->ent_free = (struct gh_rtab_ent *)e->ctx;
		return e;
	}
	pthread_mutex_lock(&gh_rtab_mem_lock);
	if (gh_rtab_ent_nchunks == 0 || gh_rtab_ent_bump == GH_REG_ENT_PER_CHUNK) {
		chunk = gh_rtab_ent_nchunks == GH_REG_MAX_ENT_CHUNKS ? NULL :
			gh_rtab_map_huge();
		if (!chunk) {
			pthread_mutex_unlock(&gh_rtab_mem_lock);
			return NULL;
		}
		gh_rtab_ent_chunk[gh_rtab_ent_nchunks++] = chunk;
		gh_rtab_ent_bump = 0;
	}
	e = &gh_rtab_ent_chunk[gh_rtab_ent_nchunks - 1][gh_rtab_ent_bump++];
	pthread_mutex_unlock(&gh_rtab_mem_lock);
	return e;
}

static size_t gh_rtab_node_bytes(uint32_t cls)
{
	return sizeof(struct gh_rtab_node) + 16ull * (1ull << cls) +
	       (cls >= GH_REG_NODE_IDX_CLS ? 8ull * GH_REG_NODE_SLOTS : 0);
}

/*
 * Make sure class @cls of shard @sh has at least @want free nodes.  A
 * node serves granules of one shard only: it goes back where it came from.
 */
int gh_rtab_node_reserve(struct gh_rtab_shard *sh, uint32_t cls,
				uint32_t want)
{
	while (sh->node_nfree[cls] < want) {
		struct gh_rtab_node *n = gh_rtab_carve(gh_rtab_node_bytes(cls));

		if (!n)
			return -ENOMEM;
		n->cls = cls;
		n->next_free = sh->node_free[cls];
		sh->node_free[cls] = n;
		sh->node_nfree[cls]++;
	}
	return 0;
}
