// SPDX-License-Identifier: MIT
/*
 * Test double of libibverbs (build/fakeverbs/libibverbs.so.1): just the
 * memory-registration entry points, with rdma-core's symbol versions
 * (ibv_reg_mr and ibv_dereg_mr in IBVERBS_1.0 and 1.1, ibv_reg_mr_iova in
 * 1.7, ibv_reg_mr_iova2 in 1.8, ibv_reg_dmabuf_mr in 1.12), and a "NIC"
 * that checks what a real one would enforce and what a stale cache would
 * break:
 *
 *  - like rdma-core, ibv_reg_mr@@IBVERBS_1.1 and ibv_reg_mr_iova call
 *    ibv_reg_mr_iova2 through the PLT (so an interposer sees that call);
 *  - a registration of GPU memory (the CUDA driver test double's) records
 *    the allocation's buffer ID, asked through fakecuda_snapshot() so an
 *    interposed cuPointerGetAttribute cannot answer for it;
 *  - a dmabuf registration maps the exported file, like a NIC holding the
 *    DMA-BUF: writes through it land wherever those pages now are;
 *  - fakeverbs_write() is an RDMA write by rkey: checks PD, REMOTE_WRITE
 *    and bounds, and counts writes through a registration whose memory
 *    was freed (stale) before doing them;
 *  - fakeverbs_stale_mrs() counts live registrations whose memory is no
 *    longer the allocation they were made on (a NIC with access to freed
 *    memory); ibv_dealloc_pd fails with EBUSY while the PD has MRs;
 *  - a registration over a page nothing is mapped at fails with EFAULT,
 *    as the kernel's ib_umem_get does (fv_mapped), the holes of a VMM
 *    reservation of the CUDA double included;
 *  - FAKEVERBS_PEERMEM=0: no peer-memory client (no nvidia-peermem): a
 *    plain registration of the CUDA double's device memory fails with
 *    EFAULT; default: one serves it;
 *  - the provider profile (FAKEVERBS_PROVIDER, fakeverbs_provider.c)
 *    decides what differs between providers: rxe imports no DMA-BUF;
 *    ibv_rereg_mr of a DMA-BUF MR is refused (EINVAL) on every one;
 *  - FAKEVERBS_NO_DMABUF=1 in the environment: a NIC that cannot import
 *    DMA-BUF (soft-RoCE): ibv_reg_dmabuf_mr fails with EOPNOTSUPP;
 *    FAKEVERBS_NO_DMABUF=fakenic1: only that NIC cannot (a second NIC,
 *    reached through fakeverbs_open_nic(1), not in the device list);
 *  - an MR's iova is only the name a peer uses: the NIC reaches the
 *    memory it pinned (the process address, or the dma-buf's pages), and
 *    staleness is judged there, per allocation the MR touched;
 *  - a slow NIC (a GPU registration takes 10 us - 2 ms), so races with
 *    a free are wide: FAKEVERBS_PIN_DELAY_US=N waits before the pages
 *    are pinned, FAKEVERBS_REG_DELAY_US=N after, before returning;
 *  - FAKEVERBS_DEBUG=1: every registration, deregistration and stale
 *    write said on stderr (what a failing race test needs);
 *  - the IBVERBS_1.0 compat ibv_reg_mr/ibv_dereg_mr behave like
 *    rdma-core's (a wrapper around the default version, called through
 *    the PLT); FAKEVERBS_COMPAT_DIRECT=1: a library whose compat entry
 *    registers by itself, unseen by an interposer of the default one.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "fakecuda.h"
#include "fakeverbs.h"
#include "fakeverbs_cost.h"
#include "fakeverbs_internal.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

/* Default visibility (FV_API, fakeverbs_internal.h); the version script
 * keeps only the ibv_* names and the fakeverbs_* test hooks (the fv_*
 * bodies carry versioned names). */

/* rdma-core's compat MR: a wrapper holding the default version's MR. */
struct fv_mr_1_0 {
	struct ibv_mr mr;
	struct ibv_mr *real;
};

static struct fv_mr *mrs[FV_MAX];
static int nmrs;
static uint32_t next_key = 0x100;
pthread_mutex_t fv_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const c_names[C_COUNT] = {
	"ibv_reg_mr@IBVERBS_1.0", "ibv_reg_mr", "ibv_reg_mr_iova",
	"ibv_reg_mr_iova2", "ibv_reg_dmabuf_mr", "ibv_dereg_mr@IBVERBS_1.0",
	"ibv_dereg_mr", "ibv_rereg_mr", "stale_writes",
	"stale_reads", "ibv_alloc_mw", "ibv_dealloc_mw", "ibv_bind_mw",
	"bind_mw", "local_inv", "wr_errors", "ibv_create_qp",
	"ibv_destroy_qp", "ibv_modify_qp", "ibv_create_cq", "ibv_destroy_cq",
	"ibv_post_send", "ibv_post_recv", "ibv_poll_cq", "ibv_query_device",
	"ibv_query_port", "mw_writes", "mw_reads", "cq_overruns",
};
static unsigned long calls[C_COUNT];

/* Counts a call; returns how many there were, this one included. */
unsigned long fv_count(enum fv_counter c)
{
	return __atomic_add_fetch(&calls[c], 1, __ATOMIC_RELAXED);
}

static void count(enum fv_counter c)
{
	fv_count(c);
}

int fv_debug(void)
{
	return getenv("FAKEVERBS_DEBUG") != NULL;
}

/* The CUDA double's live allocations (one snapshot buffer for every
 * thread; MRs have locks of their own). */
static pthread_mutex_t snap_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fakecuda_live snap[4096];

static size_t snapshot_locked(void)
{
	size_t (*fn)(struct fakecuda_live *, size_t) =
		(size_t (*)(struct fakecuda_live *, size_t))dlsym(
			RTLD_DEFAULT, "fakecuda_snapshot");
	size_t n;

	if (!fn)
		return 0;
	n = fn(snap, 4096);
	return n < 4096 ? n : 4096;
}

/* The buffer ID of the allocation containing p, or 0. */
static unsigned long long buffer_id_of(uint64_t p)
{
	unsigned long long id = 0;
	size_t n;

	pthread_mutex_lock(&snap_lock);
	n = snapshot_locked();
	for (size_t i = 0; i < n; i++)
		if (p >= snap[i].base && p - snap[i].base < snap[i].size)
			id = snap[i].buffer_id;
	pthread_mutex_unlock(&snap_lock);
	return id;
}

/* Pin: remember every GPU allocation [mem, mem + len) touches now. */
static void fv_pin(struct fv_mr *m, uint64_t mem, uint64_t len)
{
	size_t n;

	m->mem = mem;
	m->npins = 0;
	pthread_mutex_lock(&snap_lock);
	n = snapshot_locked();
	for (size_t i = 0; i < n && m->npins < FV_PINS; i++) {
		if (snap[i].base < mem + len && mem < snap[i].base + snap[i].size) {
			m->pin[m->npins].base = snap[i].base;
			m->pin[m->npins].size = snap[i].size;
			m->pin[m->npins].id = snap[i].buffer_id;
			m->npins++;
		}
	}
	pthread_mutex_unlock(&snap_lock);
}

/*
 * Would a NIC write to [w, w + len) of the pinned memory land in memory
 * that is no longer what was pinned (freed, or another allocation now)?
 * Bytes that were no GPU memory at registration are the host's (a real
 * NIC pinned host pages there, or refused): not judged.
 */
static int stale_at(const struct fv_mr *m, uint64_t w, uint64_t len)
{
	for (int i = 0; i < m->npins; i++) {
		uint64_t lo = m->pin[i].base, hi = lo + m->pin[i].size;

		if (lo >= w + len || w >= hi)
			continue;
		if (w > lo)
			lo = w;
		if (buffer_id_of(lo) != m->pin[i].id)
			return 1;
	}
	return 0;
}

static int is_stale(const struct fv_mr *m)
{
	for (int i = 0; i < m->npins; i++)
		if (buffer_id_of(m->pin[i].base) != m->pin[i].id)
			return 1;
	return 0;
}

/* A slow NIC: FAKEVERBS_PIN_DELAY_US before it pins the pages,
 * FAKEVERBS_REG_DELAY_US after (before the call returns). */
void fv_nic_wait(const char *var)
{
	const char *e = getenv(var);
	long us = e ? atol(e) : 0;

	if (us > 0)
		usleep((useconds_t)us);
}

/* ib_access_writable (the kernel's include/rdma/ib_verbs.h): the pages
 * are pinned for writing when any of these is asked. */
static int writable(unsigned int access)
{
	return !!(access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND));
}

struct vma { uint64_t lo, hi; int r, w; };

/* The process's mappings, from /proc/self/maps; malloc'd, *n_p of them. */
static struct vma *read_vmas(int *n_p)
{
	FILE *f = fopen("/proc/self/maps", "re");
	struct vma *v = NULL;
	int n = 0, cap = 0;
	char line[512];

	*n_p = 0;
	if (!f)
		return NULL;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long lo, hi;
		char perm[8];

		if (sscanf(line, "%llx-%llx %7s", &lo, &hi, perm) != 3)
			continue;
		if (n == cap) {
			struct vma *nv = realloc(v, (size_t)(cap = cap ? 2 * cap : 256) *
						 sizeof(*v));

			if (!nv)
				break;
			v = nv;
		}
		v[n].lo = lo;
		v[n].hi = hi;
		v[n].r = perm[0] == 'r';
		v[n].w = perm[1] == 'w';
		n++;
	}
	fclose(f);
	*n_p = n;
	return v;
}

/*
 * Would the kernel pin every page of [addr, addr + len)?  ib_umem_get
 * (drivers/infiniband/core/umem.c) pins them with pin_user_pages_fast,
 * FOLL_WRITE for a writable registration, and fails the registration
 * with EFAULT at the first it cannot pin.  A page counts when it lies in
 * a live allocation of the CUDA double (the peer-memory client pins GPU
 * memory the driver has mapped, whatever the CPU's protection: a VMM
 * mapping before cuMemSetAccess is PROT_NONE here), or in a mapping the
 * process may read (and write, when writable).  A hole of a VMM
 * reservation or a freed span is neither.  Without the double (the real
 * driver: its GPU ranges are PROT_NONE reservations to the CPU) a
 * PROT_NONE mapping is not judged.
 */
/*
 * Device memory of the CUDA double (not managed or host memory, which the
 * CPU maps): without a peer-memory client (FAKEVERBS_PEERMEM=0, a host
 * without nvidia-peermem) ib_umem_get cannot pin it, as it cannot pin
 * the real driver's device ranges, and the registration fails (EFAULT).
 */
static int device_kind(int kind)
{
	return kind != FAKECUDA_MANAGED && kind != FAKECUDA_HOST_ALLOC &&
	       kind != FAKECUDA_HOST_REG;
}

static int no_peer_client(void)
{
	const char *e = getenv("FAKEVERBS_PEERMEM");

	return e && !strcmp(e, "0");
}

static int fv_mapped(uint64_t addr, uint64_t len, unsigned int access)
{
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t cur = addr & ~(pg - 1), hi = (addr + len + pg - 1) & ~(pg - 1);
	int w = writable(access), nv, ok = 1, dbl, peer = !no_peer_client();
	struct vma *v = read_vmas(&nv);
	size_t n;

	if (!v)
		return 1;	/* cannot tell: not judged */
	pthread_mutex_lock(&snap_lock);
	dbl = dlsym(RTLD_DEFAULT, "fakecuda_snapshot") != NULL;
	n = snapshot_locked();
	while (ok && cur < hi) {
		uint64_t to = cur;
		int stop = 0;

		for (size_t i = 0; i < n; i++) {
			if (cur < snap[i].base || cur - snap[i].base >= snap[i].size)
				continue;
			if (!peer && device_kind(snap[i].kind))
				stop = 1;
			if (snap[i].base + snap[i].size > to)
				to = snap[i].base + snap[i].size;
		}
		for (int i = 0; i < nv; i++)
			if (cur >= v[i].lo && cur < v[i].hi && v[i].hi > to &&
			    ((v[i].r && (!w || v[i].w)) ||
			     (!dbl && !v[i].r && !v[i].w)))
				to = v[i].hi;
		if (to == cur || stop)
			ok = 0;
		cur = (to + pg - 1) & ~(pg - 1);
	}
	pthread_mutex_unlock(&snap_lock);
	free(v);
	if (!ok && fv_debug())
		fprintf(stderr, "fakeverbs: reg %#llx+%llu refused: page %#llx is not mapped\n",
			(unsigned long long)addr, (unsigned long long)len,
			(unsigned long long)cur);
	return ok;
}

/* A slow NIC: FAKEVERBS_PIN_DELAY_US before it pins the pages,
 * FAKEVERBS_REG_DELAY_US after (before the call returns).  0, or
 * -EFAULT: a page of process memory [mem, mem + len) could not be
 * pinned (check: not a dma-buf, whose pages the exporter gives). */
static int fv_pin_slowly(struct fv_mr *m, uint64_t mem, uint64_t len,
			 int check)
{
	fv_nic_wait("FAKEVERBS_PIN_DELAY_US");
	if (check && !fv_mapped(mem, len, m->access))
		return -EFAULT;
	fv_pin(m, mem, len);
	if (getenv("FAKEVERBS_DEBUG"))
		fprintf(stderr, "fakeverbs: reg rkey %#x mem %#llx+%llu iova %#llx npins %d id0 %llu dmabuf %d\n", m->mr.rkey, (unsigned long long)mem, (unsigned long long)len, (unsigned long long)m->iova, m->npins, m->npins ? m->pin[0].id : 0, m->map != NULL);
	fv_nic_wait("FAKEVERBS_REG_DELAY_US");
	return 0;
}

static struct fv_mr *fv_new(struct ibv_pd *pd, void *addr, size_t len,
			    uint64_t iova, unsigned int access)
{
	struct fv_mr *m;

	if (!pd || !len) {
		errno = EINVAL;
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	pthread_mutex_lock(&fv_lock);
	if (nmrs >= FV_MAX) {
		pthread_mutex_unlock(&fv_lock);
		free(m);
		errno = ENOMEM;
		return NULL;
	}
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = len;
	m->mr.handle = next_key;
	m->mr.lkey = next_key;
	m->mr.rkey = next_key | 0x80000000u;
	next_key++;
	m->live = 1;
	m->access = access;
	m->iova = iova;
	mrs[nmrs++] = m;
	pthread_mutex_unlock(&fv_lock);
	return m;
}

/* A live MR of this NIC (not an interposer's object), or NULL. */
struct fv_mr *fv_find_mr_locked(const struct ibv_mr *mr)
{
	for (int i = 0; i < nmrs; i++)
		if (&mrs[i]->mr == mr)
			return mrs[i];
	return NULL;
}

int fv_mr_busy_pd_locked(const struct ibv_pd *pd)
{
	for (int i = 0; i < nmrs; i++)
		if (mrs[i]->mr.pd == pd)
			return 1;
	return 0;
}

/* Deregisters: EBUSY while a memory window is bound to the MR (the
 * parent cannot go before its windows), EINVAL if not one of ours. */
static int fv_destroy(struct fv_mr *m)
{
	pthread_mutex_lock(&fv_lock);
	for (int i = 0; i < nmrs; i++) {
		if (mrs[i] == m && m->nbound) {
			pthread_mutex_unlock(&fv_lock);
			if (fv_debug())
				fprintf(stderr, "fakeverbs: dereg rkey %#x refused: %d windows bound\n",
					m->mr.rkey, m->nbound);
			return fv_rules() ? fv_rules()->dereg_bound_err : EBUSY;
		}
		if (mrs[i] == m) {
			if (fv_debug())
				fprintf(stderr, "fakeverbs: dereg rkey %#x\n", m->mr.rkey);
			mrs[i] = mrs[--nmrs];
			pthread_mutex_unlock(&fv_lock);
			fv_cost_dereg(m);
			if (m->map)
				munmap(m->map, m->map_len);
			m->live = 0;
			free(m);
			return 0;
		}
	}
	pthread_mutex_unlock(&fv_lock);
	return EINVAL;
}

/* ---------------------------------------------------- IBVERBS entry points */

FV_API struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr,
				       size_t length, uint64_t iova,
				       unsigned int access)
{
	struct fv_mr *m;

	count(C_REG_MR_IOVA2);
	m = fv_new(pd, addr, length, iova, access);
	if (!m)
		return NULL;
	if (fv_pin_slowly(m, (uintptr_t)addr, length, 1)) {
		fv_destroy(m);
		errno = EFAULT;
		return NULL;
	}
	fv_cost_reg(m);
	return &m->mr;
}

struct ibv_mr *fv_reg_mr_1_1(struct ibv_pd *pd, void *addr, size_t length,
			     int access);
FV_API struct ibv_mr *fv_reg_mr_1_1(struct ibv_pd *pd, void *addr, size_t length,
			     int access)
{
	count(C_REG_MR);
	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr,
				(unsigned int)access);
}
__asm__(".symver fv_reg_mr_1_1, ibv_reg_mr@@IBVERBS_1.1");

/*
 * The compat entry point, as rdma-core's: a wrapper object around a
 * registration by the default version (through the PLT, so an
 * interposer of ibv_reg_mr sees it).  FAKEVERBS_COMPAT_DIRECT=1: one
 * that registers by itself.
 */
static int compat_direct(void)
{
	const char *e = getenv("FAKEVERBS_COMPAT_DIRECT");

	return e && !strcmp(e, "1");
}

struct ibv_mr *fv_reg_mr_1_0(struct ibv_pd *pd, void *addr, size_t length,
			     int access);
FV_API struct ibv_mr *fv_reg_mr_1_0(struct ibv_pd *pd, void *addr, size_t length,
			     int access)
{
	struct fv_mr *m;
	struct fv_mr_1_0 *w;
	struct ibv_mr *real;

	count(C_REG_MR_1_0);
	if (compat_direct()) {
		m = fv_new(pd, addr, length, (uintptr_t)addr,
			   (unsigned int)access);
		if (!m)
			return NULL;
		m->compat = 1;
		if (fv_pin_slowly(m, (uintptr_t)addr, length, 1)) {
			fv_destroy(m);
			errno = EFAULT;
			return NULL;
		}
		fv_cost_reg(m);
		return &m->mr;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	real = ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr,
				(unsigned int)access);
	if (!real) {
		free(w);
		return NULL;
	}
	w->mr = *real;
	w->real = real;
	return &w->mr;
}
__asm__(".symver fv_reg_mr_1_0, ibv_reg_mr@IBVERBS_1.0");

FV_API struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr,
				      size_t length, uint64_t iova, int access)
{
	count(C_REG_MR_IOVA);
	return ibv_reg_mr_iova2(pd, addr, length, iova, (unsigned int)access);
}

/*
 * A real dma-buf (the real CUDA driver's export, on a machine with a GPU
 * and no NIC): check that fd is a dma-buf and covers the range, as a NIC
 * driver's import would, without touching the pages (GPU memory exported
 * this way cannot be mapped by the CPU).
 */
static struct ibv_mr *reg_real_dmabuf(struct ibv_pd *pd, uint64_t offset,
				      size_t length, uint64_t iova, int fd,
				      int access)
{
	char link[64], target[256];
	struct fv_mr *m;
	ssize_t n;
	off_t size;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return NULL;
	target[n] = 0;
	if (!strstr(target, "dmabuf")) {
		errno = EBADF;
		return NULL;
	}
	size = lseek(fd, 0, SEEK_END);
	if (size < 0 || (uint64_t)size < offset + length) {
		errno = EINVAL;
		return NULL;
	}
	m = fv_new(pd, (void *)(uintptr_t)iova, length, iova,
		   (unsigned int)access);
	if (!m)
		return NULL;
	m->type = FV_MR_TYPE_DMABUF_MR;
	fprintf(stderr, "fakeverbs: imported dma-buf fd %d (%s, %lld bytes) for iova %#llx+%zu\n",
		fd, target, (long long)size, (unsigned long long)iova, length);
	return &m->mr;
}

/*
 * One device in the list, "fakenic0", so a program written for a real
 * NIC (the regcache_churn example) runs on the double unchanged; a
 * second, "fakenic1", only through fakeverbs_open_nic(1).
 */
static struct ibv_device fv_devs[2] = {
	{ .name = "fakenic0", .dev_name = "uverbs0",
	  .node_type = IBV_NODE_RNIC, .transport_type = IBV_TRANSPORT_IWARP },
	{ .name = "fakenic1", .dev_name = "uverbs1",
	  .node_type = IBV_NODE_RNIC, .transport_type = IBV_TRANSPORT_IWARP },
};

const struct ibv_device *fv_device_of(const struct ibv_context *ctx)
{
	return ctx && ctx->device ? ctx->device : &fv_devs[0];
}

/* FAKEVERBS_NO_DMABUF, FAKEVERBS_NO_MW: 1 (every NIC) or one NIC's name. */
int fv_env_nic(const char *var, const struct ibv_context *ctx)
{
	const char *e = getenv(var);

	return e && (!strcmp(e, "1") || !strcmp(e, fv_device_of(ctx)->name));
}

static int no_dmabuf(const struct ibv_pd *pd)
{
	return fv_env_nic("FAKEVERBS_NO_DMABUF", pd ? pd->context : NULL);
}

FV_API struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
					size_t length, uint64_t iova, int fd,
					int access)
{
	int (*off_fn)(int, uint64_t *) = (int (*)(int, uint64_t *))dlsym(
		RTLD_DEFAULT, "fakecuda_dmabuf_offset");
	int (*va_fn)(int, uint64_t *) = (int (*)(int, uint64_t *))dlsym(
		RTLD_DEFAULT, "fakecuda_dmabuf_address");
	uint64_t base = 0, pg = (uint64_t)sysconf(_SC_PAGESIZE), at, va = 0;
	struct fv_mr *m;
	void *map;

	count(C_REG_DMABUF);
	if (!fv_rules() || !fv_rules()->dmabuf || no_dmabuf(pd)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!off_fn)
		return reg_real_dmabuf(pd, offset, length, iova, fd, access);
	if (off_fn(fd, &base) || !va_fn || va_fn(fd, &va)) {
		errno = EBADF;
		return NULL;
	}
	at = base + offset;
	map = mmap(NULL, length + (at & (pg - 1)), PROT_READ | PROT_WRITE,
		   MAP_SHARED, fd, (off_t)(at & ~(pg - 1)));
	if (map == MAP_FAILED)
		return NULL;
	m = fv_new(pd, (void *)(uintptr_t)iova, length, iova,
		   (unsigned int)access);
	if (!m) {
		munmap(map, length + (at & (pg - 1)));
		return NULL;
	}
	m->map = map;
	m->map_len = length + (at & (pg - 1));
	m->map_delta = at & (pg - 1);
	m->type = FV_MR_TYPE_DMABUF_MR;
	/* the exported pages, whatever iova the program chose */
	fv_pin_slowly(m, va + offset, length, 0);
	fv_cost_reg(m);
	return &m->mr;
}

int fv_dereg_mr_1_1(struct ibv_mr *mr);
FV_API int fv_dereg_mr_1_1(struct ibv_mr *mr)
{
	count(C_DEREG);
	return fv_destroy((struct fv_mr *)mr);
}
__asm__(".symver fv_dereg_mr_1_1, ibv_dereg_mr@@IBVERBS_1.1");

int fv_dereg_mr_1_0(struct ibv_mr *mr);
FV_API int fv_dereg_mr_1_0(struct ibv_mr *mr)
{
	struct fv_mr_1_0 *w = (struct fv_mr_1_0 *)mr;
	int rc;

	count(C_DEREG_1_0);
	if (fakeverbs_is_mr(mr))	/* FAKEVERBS_COMPAT_DIRECT's own */
		return fv_destroy((struct fv_mr *)mr);
	rc = ibv_dereg_mr(w->real);
	if (!rc)
		free(w);
	return rc;
}
__asm__(".symver fv_dereg_mr_1_0, ibv_dereg_mr@IBVERBS_1.0");

FV_API int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd,
			void *addr, size_t length, int access)
{
	struct fv_mr *m = (struct fv_mr *)mr;
	struct fv_mr t;

	count(C_REREG);
	/* libibverbs/verbs.c ibv_rereg_mr:608: only an IBV_MR_TYPE_MR */
	pthread_mutex_lock(&fv_lock);
	if (fv_find_mr_locked(mr) && m->type != FV_MR_TYPE_MR) {
		pthread_mutex_unlock(&fv_lock);
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	/* not while memory windows are bound to it */
	if (fv_find_mr_locked(mr) && m->nbound) {
		pthread_mutex_unlock(&fv_lock);
		return EBUSY;
	}
	t.access = (unsigned int)access;
	if (!(flags & IBV_REREG_MR_CHANGE_ACCESS) && fv_find_mr_locked(mr))
		t.access = m->access;
	pthread_mutex_unlock(&fv_lock);
	/* the new pages pinned first, then the MR changed at once under the
	 * NIC's lock (a peer's access sees the old or the new, whole) */
	if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) &&
	    fv_pin_slowly(&t, (uintptr_t)addr, length, 1)) {
		errno = EFAULT;
		return IBV_REREG_MR_ERR_CMD;
	}
	pthread_mutex_lock(&fv_lock);
	if (flags & IBV_REREG_MR_CHANGE_PD)
		m->mr.pd = pd;
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		m->mr.addr = addr;
		m->mr.length = length;
		m->iova = (uintptr_t)addr;
		if (m->map) {
			munmap(m->map, m->map_len);
			m->map = NULL;
		}
		m->mem = t.mem;
		m->npins = t.npins;
		memcpy(m->pin, t.pin, sizeof(m->pin));
	}
	if (flags & IBV_REREG_MR_CHANGE_ACCESS)
		m->access = (unsigned int)access;
	pthread_mutex_unlock(&fv_lock);
	return 0;
}

FV_API struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct ibv_pd *pd = calloc(1, sizeof(*pd));

	if (pd)
		pd->context = context;
	return pd;
}

FV_API int ibv_dealloc_pd(struct ibv_pd *pd)
{
	int busy;

	/* like the kernel: not while MRs, memory windows or QPs use it */
	pthread_mutex_lock(&fv_lock);
	busy = fv_mr_busy_pd_locked(pd) || fv_pd_busy_locked(pd);
	pthread_mutex_unlock(&fv_lock);
	if (busy)
		return EBUSY;
	free(pd);
	return 0;
}

FV_API int ibv_close_device(struct ibv_context *context)
{
	fv_ctx_destroy_windows(context);
	for (;;) {
		struct fv_mr *m = NULL;

		pthread_mutex_lock(&fv_lock);
		for (int i = 0; i < nmrs && !m; i++)
			if (mrs[i]->mr.context == context)
				m = mrs[i];
		pthread_mutex_unlock(&fv_lock);
		if (!m)
			break;
		fv_destroy(m);
	}
	fv_ctx_destroy_cqs(context);
	fv_ctx_free(context);
	return 0;
}


FV_API struct ibv_device **ibv_get_device_list(int *num_devices)
{
	struct ibv_device **list;

	if (!fv_rules()) {	/* FAKEVERBS_PROVIDER names no profile */
		errno = EINVAL;
		return NULL;
	}
	list = calloc(2, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	list[0] = &fv_devs[0];
	if (num_devices)
		*num_devices = 1;
	return list;
}

FV_API void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

FV_API const char *ibv_get_device_name(struct ibv_device *device)
{
	return device->name;
}

FV_API struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	return fv_ctx_new(device);
}

/* ------------------------------------------------------------ test hooks */

FV_API struct ibv_context *fakeverbs_open(void)
{
	return fv_ctx_new(&fv_devs[0]);
}

FV_API struct ibv_context *fakeverbs_open_nic(int n)
{
	if (n < 0 || n > 1) {
		errno = ENODEV;
		return NULL;
	}
	return fv_ctx_new(&fv_devs[n]);
}

FV_API unsigned long fakeverbs_calls(const char *name)
{
	for (int i = 0; i < C_COUNT; i++)
		if (!strcmp(c_names[i], name))
			return __atomic_load_n(&calls[i], __ATOMIC_RELAXED);
	return 0;
}

FV_API int fakeverbs_live_mrs(void)
{
	int n;

	pthread_mutex_lock(&fv_lock);
	n = nmrs;
	pthread_mutex_unlock(&fv_lock);
	return n;
}

FV_API int fakeverbs_stale_mrs(void)
{
	int n = 0;

	pthread_mutex_lock(&fv_lock);
	for (int i = 0; i < nmrs; i++)
		n += is_stale(mrs[i]);
	pthread_mutex_unlock(&fv_lock);
	return n;
}

/* Is mr a live registration of this NIC (not an interposer's object)? */
FV_API int fakeverbs_is_mr(const struct ibv_mr *mr)
{
	int found = 0;

	pthread_mutex_lock(&fv_lock);
	for (int i = 0; i < nmrs; i++)
		found |= &mrs[i]->mr == mr;
	pthread_mutex_unlock(&fv_lock);
	return found;
}

/*
 * The NIC moves len bytes at offset at of MR m (a peer's write or read),
 * rkey only for the debug line.  A write through a registration whose
 * memory was freed is counted (stale_writes) and not done (the double
 * may have unmapped freed memory; a real NIC would write whoever's pages
 * are there now); a stale read likewise (stale_reads), returning zeros.
 * Elsewhere through the process's own mapping, which may have none there
 * (a range a real NIC would have refused to pin): -EFAULT, a NIC fault,
 * not a crash.
 */
static int mr_move_locked(struct fv_mr *m, uint64_t at, void *buf, size_t len,
			  int write, uint32_t rkey)
{
	int stale = stale_at(m, m->mem + at, len);
	struct iovec l = { buf, len };
	struct iovec r = { (void *)(uintptr_t)(m->mem + at), len };

	if (stale) {
		count(write ? C_STALE_WRITES : C_STALE_READS);
		if (fv_debug())
			for (int i = 0; i < m->npins; i++)
				fprintf(stderr, "fakeverbs: stale %s through rkey %#x at mem %#llx+%zu: pinned %#llx+%llu id %llu, now id %llu\n",
					write ? "write" : "read", rkey,
					(unsigned long long)(m->mem + at), len,
					(unsigned long long)m->pin[i].base,
					(unsigned long long)m->pin[i].size,
					m->pin[i].id, buffer_id_of(m->pin[i].base));
	}
	if (m->map) {
		char *p = (char *)m->map + m->map_delta + at;

		if (write)
			memcpy(p, buf, len);
		else
			memcpy(buf, p, len);
		return 0;
	}
	if (stale) {
		if (!write)
			memset(buf, 0, len);
		return 0;
	}
	if ((write ? process_vm_writev(getpid(), &l, 1, &r, 1, 0) :
		     process_vm_readv(getpid(), &l, 1, &r, 1, 0)) != (ssize_t)len)
		return -EFAULT;
	return 0;
}

/* A peer's RDMA access by rkey: an MR's, or a bound memory window's. */
static int peer_access(struct ibv_pd *pd, uint32_t rkey, uint64_t raddr,
		       void *buf, size_t len, int write)
{
	unsigned int need = write ? IBV_ACCESS_REMOTE_WRITE :
				    IBV_ACCESS_REMOTE_READ;
	struct fv_mr *m = NULL;
	uint64_t at = 0;
	int rc = 0;

	pthread_mutex_lock(&fv_lock);
	for (int i = 0; i < nmrs; i++)
		if (mrs[i]->mr.rkey == rkey)
			m = mrs[i];
	if (!m) {
		rc = fv_mw_resolve_locked(pd, rkey, raddr, len, need, &m, &at);
		if (!rc)
			count(write ? C_MW_WRITES : C_MW_READS);
	} else if (m->mr.pd != pd) {
		rc = -EPERM;
	} else if (!(m->access & need)) {
		rc = -EACCES;
	} else if (raddr < m->iova || len > m->mr.length ||
		   raddr - m->iova > m->mr.length - len) {
		rc = -ERANGE;
	} else {
		/* iova names the memory; the NIC reaches what it pinned */
		at = raddr - m->iova;
	}
	if (!rc)
		rc = mr_move_locked(m, at, buf, len, write, rkey);
	pthread_mutex_unlock(&fv_lock);
	return rc;
}

/* An RDMA write from a peer: 0, -EPERM (PD), -EACCES, -ERANGE, -ENOENT,
 * -EFAULT (nothing mapped where it lands). */
FV_API int fakeverbs_write(struct ibv_pd *pd, uint32_t rkey, uint64_t raddr,
			   const void *src, size_t len)
{
	return peer_access(pd, rkey, raddr, (void *)(uintptr_t)src, len, 1);
}

/* An RDMA read by a peer (IBV_ACCESS_REMOTE_READ), as fakeverbs_write. */
FV_API int fakeverbs_read(struct ibv_pd *pd, uint32_t rkey, uint64_t raddr,
			  void *dst, size_t len)
{
	return peer_access(pd, rkey, raddr, dst, len, 0);
}
