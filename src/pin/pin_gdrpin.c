// SPDX-License-Identifier: MIT
/*
 * The "gdrpin" backend: the gdrpin kernel module (/dev/gdrpin,
 * include/gdrpin_ioctl.h) pins each GPU allocation, rounded out to 64 KiB,
 * for as long as the cache holds it, and tells us when the driver takes the
 * memory away (revocation); the NIC registration is a plain ibv_reg_mr of
 * exactly the allocation, iova = VA.
 *
 * What the pin does and does not do.  The pin keeps the pages where they
 * are and gives revocation notice; it does not make the NIC able to reach
 * them.  A plain ibv_reg_mr of GPU memory needs a peer-memory client in the
 * kernel (nvidia-peermem) on real hardware: the combination this backend is
 * for is gdrpin + nvidia-peermem, the pin supplying the revocation notice
 * and the BAR accounting (quota) that peermem lacks.  (The other way to let
 * the NIC reach the memory, DMA-BUF, needs no pin: that is the dmabuf
 * backend.)  In the QEMU lab the "GPU memory" is host pages (CUDA driver
 * double) and the provider is tests/kmod/fake_nvp2p, so rxe reaches the
 * pages on its own.
 *
 * Pins are legacy pins (GDRPIN_PIN_LEGACY: nvidia_p2p_get_pages with a free
 * callback), on purpose: a persistent pin is never revoked, so a free that
 * the hooks missed would go unnoticed, whereas a legacy pin is revoked by
 * the driver when the memory goes, and the cache drops it.  The hooks unpin
 * before every free they see, so the callback only fires for frees they
 * missed (or a driver teardown).
 *
 * Revocation, two ways:
 *  - data path: every cache hit checks the pin's status page slot
 *    (ops->valid: two loads from a read-only shared page, no syscall); a
 *    revoked pin turns the hit into a miss that drops it;
 *  - helper thread (started at the first pin, all signals blocked): waits
 *    in poll() on an eventfd the module signals, drains GET_REVOKED and
 *    tells the cache (the function it set with gh_pin_on_revoked: no
 *    call up into the cache's file), which drops the affected entries, so
 *    registrations of revoked memory do not linger until the next use.
 *
 * Pin route: NV-P2P (PIN) when the module has a provider with revocable
 * pins, else DMA-BUF (PIN_DMABUF: the dmabuf backend exports the range,
 * gdrpin pins the dma-buf and reports revocations the same way, the
 * registration goes through ibv_reg_dmabuf_mr where the NIC can). The
 * route and why are in gh_pin_gdrpin_open()'s answer, which is logged.
 *
 * Process rules: the fd is opened O_CLOEXEC and bound to this process by
 * the module; in a forked child every pin fails (-EACCES) and registrations
 * pass through uncached.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include "base/base.h"
#include "evlog/evlog.h"
#include "platform/platform.h"
#include "backend.h"
#include "gdrpin_ioctl.h"

static gh_pin_revoked_fn revoked_fn;

void gh_pin_on_revoked(gh_pin_revoked_fn fn)
{
	__atomic_store_n(&revoked_fn, fn, __ATOMIC_RELEASE);
}

const char *gh_gdrpin_dev = "/dev/" GDRPIN_DEVICE_NAME;

#define DRAIN_BATCH	64

static struct {
	pthread_mutex_t lock;		/* open, thread start, slot table */
	int state;			/* 0 untried, 1 usable, -errno failed */
	const char *why;
	/* known by their files, not their numbers (evspool.h): the
	 * program may close them and open its own files there */
	struct gh_ownfd ofd, oefd;
	int fd, efd;
	pid_t pid;
	uint64_t caps;
	const struct gdrpin_status_header *hdr;
	const struct gdrpin_status_slot *slot;
	uint32_t nslots;
	size_t map_len;
	/* slot -> (handle, allocation generation) of our pin in it */
	uint64_t *tab_handle, *tab_gen;
	int thread;
	int via_dmabuf;			/* no usable nv-p2p: PIN_DMABUF */
	char whybuf[160];
} gp = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .efd = -1,
	  .ofd = { .fd = -1 }, .oefd = { .fd = -1 } };

/* /dev/gdrpin's fd while its number still names it, else -1 (EBADF). */
static int gp_fd(void)
{
	return gh_fd_ours(&gp.ofd) ? gp.fd : -1;
}

static int fail_open(int err, const char *what)
{
	struct gh_buf b;

	gh_buf_init(&b, gp.whybuf, sizeof(gp.whybuf));
	gh_buf_puts(&b, what);
	if (err) {
		gh_buf_puts(&b, ": ");
		gh_buf_puts(&b, strerror(err));
	}
	gh_buf_cstr(&b);
	gp.why = gp.whybuf;
	if (gp.hdr)
		munmap((void *)gp.hdr, gp.map_len);
	gp.hdr = NULL;
	gh_fd_close(&gp.ofd);
	gp.fd = -1;
	return -(err ? err : ENODEV);
}

static int do_open(void)
{
	struct gdrpin_version_args v;
	void *map;
	size_t tab;

	gp.fd = open(gh_gdrpin_dev, O_RDWR | O_CLOEXEC);
	if (gp.fd < 0 || gh_fd_own(gp.fd, &gp.ofd))
		return fail_open(errno, gh_gdrpin_dev);
	gp.fd = gp.ofd.fd;
	memset(&v, 0, sizeof(v));
	v.size = sizeof(v);
	if (ioctl(gp.fd, GDRPIN_IOC_GET_VERSION, &v))
		return fail_open(errno, "GDRPIN_IOC_GET_VERSION (not a gdrpin device?)");
	if (v.abi_major != GDRPIN_ABI_MAJOR)
		return fail_open(EPROTO, "gdrpin ABI major version differs");
	if (!(v.caps & GDRPIN_CAP_STATUS_PAGE) ||
	    !(v.caps & (GDRPIN_CAP_EVENTFD | GDRPIN_CAP_POLL)))
		return fail_open(EPROTO, "gdrpin lacks the status page or revocation events");
	if (!(v.caps & GDRPIN_CAP_PROVIDER) && !(v.caps & GDRPIN_CAP_DMABUF))
		return fail_open(ENODEV, "gdrpin: no nv-p2p provider (NVIDIA driver) loaded");
	if (!(v.caps & GDRPIN_CAP_LEGACY) && !(v.caps & GDRPIN_CAP_DMABUF))
		return fail_open(ENOTSUP, "gdrpin: the provider has no revocable (legacy) pins");
	gp.via_dmabuf = !(v.caps & GDRPIN_CAP_PROVIDER) ||
			!(v.caps & GDRPIN_CAP_LEGACY);
	if (v.status_slot_size != sizeof(struct gdrpin_status_slot) ||
	    v.status_header_size < sizeof(struct gdrpin_status_header) ||
	    !v.status_nslots || v.status_nslots > (1U << GDRPIN_HANDLE_SLOT_BITS) ||
	    v.status_map_size < v.status_header_size +
	    (uint64_t)v.status_nslots * v.status_slot_size)
		return fail_open(EPROTO, "gdrpin status page layout unexpected");
	map = mmap(NULL, v.status_map_size, PROT_READ, MAP_SHARED, gp.fd, 0);
	if (map == MAP_FAILED)
		return fail_open(errno, "mmap of the gdrpin status page");
	gp.hdr = map;
	gp.map_len = v.status_map_size;
	if (gp.hdr->magic != GDRPIN_STATUS_MAGIC)
		return fail_open(EPROTO, "gdrpin status page has a bad magic");
	gp.slot = (const struct gdrpin_status_slot *)
		  ((const char *)map + v.status_header_size);
	gp.nslots = v.status_nslots;
	tab = sizeof(uint64_t) * v.status_nslots;
	gp.tab_handle = mmap(NULL, 2 * tab, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (gp.tab_handle == MAP_FAILED) {
		gp.tab_handle = NULL;
		return fail_open(ENOMEM, "gdrpin slot table");
	}
	gp.tab_gen = gp.tab_handle + v.status_nslots;
	gp.caps = v.caps;
	gp.pid = getpid();
	gh_info("gdrpin: %s ABI %u.%u, %u status slots, caps %#llx",
		gh_gdrpin_dev, v.abi_major, v.abi_minor, v.status_nslots,
		(unsigned long long)v.caps);
	return 0;
}

int gh_pin_gdrpin_open(const char **why)
{
	int st;

	pthread_mutex_lock(&gp.lock);
	if (!gp.state) {
		st = do_open();
		gp.state = st ? st : 1;
	}
	st = gp.state;
	pthread_mutex_unlock(&gp.lock);
	if (why)
		*why = st != 1 ? gp.why : gp.via_dmabuf ?
		       "/dev/gdrpin answers, pins through DMA-BUF (no nv-p2p provider with revocable pins)" :
		       "/dev/gdrpin answers, pins through nv-p2p";
	return st == 1 ? 0 : st;
}

/* ------------------------------------------------- revocation helper */

/* Drain GET_REVOKED; drop what the cache holds of each handle. */
static void drain(void)
{
	uint64_t h[DRAIN_BATCH], gen[DRAIN_BATCH];
	struct gdrpin_get_revoked_args a;

	do {
		uint32_t n;

		memset(&a, 0, sizeof(a));
		a.size = sizeof(a);
		a.handles_ptr = (uintptr_t)h;
		a.max_handles = DRAIN_BATCH;
		/* The lock keeps a released slot from being reused (by a
		 * pin) before its table entry is read. */
		pthread_mutex_lock(&gp.lock);
		if (ioctl(gp_fd(), GDRPIN_IOC_GET_REVOKED, &a)) {
			pthread_mutex_unlock(&gp.lock);
			gh_warn("gdrpin: GET_REVOKED failed: %s", gh_errtext(errno));
			return;
		}
		n = a.count <= DRAIN_BATCH ? a.count : DRAIN_BATCH;
		for (uint32_t i = 0; i < n; i++) {
			uint32_t s = GDRPIN_HANDLE_SLOT(h[i]);

			gen[i] = s < gp.nslots && gp.tab_handle[s] == h[i] ?
				 gp.tab_gen[s] : 0;
		}
		pthread_mutex_unlock(&gp.lock);
		for (uint32_t i = 0; i < n; i++) {
			gh_pin_revoked_fn fn = __atomic_load_n(&revoked_fn,
							       __ATOMIC_ACQUIRE);
			int hit = gen[i] && fn && fn(gen[i], h[i]);

			gh_info("gdrpin: pin %#llx (generation %llu) revoked by the driver%s",
				(unsigned long long)h[i],
				(unsigned long long)gen[i],
				hit ? ": cache entries dropped" : "");
		}
	} while (a.pending);
}

/*
 * The program closed the fd the helper waits on (and may have opened its
 * own file there): never poll or read a file of the program's.
 */
static int helper_fd_gone(const struct gh_ownfd *o, short revents)
{
	if (!(revents & POLLNVAL) && gh_fd_ours(o))
		return 0;
	gh_warn("gdrpin: the program closed gdrhook's descriptor of /dev/gdrpin: revocations are seen at the next registration only");
	return 1;
}

static void *helper(void *arg)
{
	const struct gh_ownfd *o = gp.efd >= 0 ? &gp.oefd : &gp.ofd;
	struct pollfd pf;

	pf.fd = o->fd;
	pf.events = POLLIN;
	for (;;) {
		pf.revents = 0;
		if (helper_fd_gone(o, 0))
			return NULL;
		if (poll(&pf, 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			gh_warn("gdrpin: revocation helper: poll failed: %s",
				gh_errtext(errno));
			return NULL;
		}
		if (helper_fd_gone(o, pf.revents))
			return NULL;
		if (gp.efd >= 0) {
			uint64_t v;

			if (read(gp.efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				continue;
		}
		drain();
	}
	return NULL;
}

/* gp.lock held. */
static void helper_start(void)
{
	struct gdrpin_set_eventfd_args e;
	sigset_t all, old;
	pthread_t t;
	int rc;

	if (gp.thread)
		return;
	gp.thread = 1;
	if (gp.caps & GDRPIN_CAP_EVENTFD) {
		gp.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (gp.efd >= 0 && gh_fd_own(gp.efd, &gp.oefd))
			gp.efd = -1;
		else if (gp.efd >= 0)
			gp.efd = gp.oefd.fd;
		memset(&e, 0, sizeof(e));
		e.size = sizeof(e);
		e.fd = gp.efd;
		if (gp.efd >= 0 && ioctl(gp_fd(), GDRPIN_IOC_SET_EVENTFD, &e)) {
			gh_fd_close(&gp.oefd);
			gp.efd = -1;
		}
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&t, NULL, helper, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		gh_warn("gdrpin: no revocation helper thread (%s): revocations are seen at the next registration only",
			gh_errtext(rc));
		return;
	}
	pthread_detach(t);
	pthread_setname_np(t, "gdrhook-gdrpin");
}

/* ------------------------------------------------------------- the ops */

/* gp.lock held: pin the range through a dma-buf the driver exports. */
static int pin_dmabuf(struct gh_pin *p)
{
	struct gdrpin_pin_dmabuf_args a;
	int err = gh_pin_dmabuf.pin(p);

	if (err)
		return err;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.fd = p->fd;
	a.va = p->pin_base;
	if (ioctl(gp_fd(), GDRPIN_IOC_PIN_DMABUF, &a))
		err = errno ? -errno : -EIO;
	else if (a.slot >= gp.nslots || a.slot != GDRPIN_HANDLE_SLOT(a.handle))
		err = -EPROTO;
	if (err) {
		gh_pin_dmabuf.unpin(p);
		return err;
	}
	__atomic_store_n(&gp.tab_handle[a.slot], a.handle, __ATOMIC_RELAXED);
	__atomic_store_n(&gp.tab_gen[a.slot], p->gen, __ATOMIC_RELAXED);
	p->pin_size = a.pinned_len;
	p->cookie = a.handle;
	return 0;
}

static int gdrpin_pin(struct gh_pin *p)
{
	struct gdrpin_pin_args a;
	int err = 0;

	if (gh_pin_gdrpin_open(NULL))
		return -ENODEV;
	if (getpid() != gp.pid)
		return -EACCES;		/* a forked child: the fd is not ours */
	if (gp.via_dmabuf) {
		pthread_mutex_lock(&gp.lock);
		helper_start();
		err = pin_dmabuf(p);
		pthread_mutex_unlock(&gp.lock);
		if (err)
			gh_dbg("gdrpin: DMA-BUF pin of %#llx+%llu failed: %s",
			       (unsigned long long)p->base,
			       (unsigned long long)p->size, gh_errtext(-err));
		return err == -ENOSPC || err == -ENOBUFS ? -ENOSPC : err;
	}
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.flags = GDRPIN_PIN_LEGACY;
	a.va = p->base;
	a.len = p->size;
	pthread_mutex_lock(&gp.lock);
	helper_start();
	if (ioctl(gp_fd(), GDRPIN_IOC_PIN, &a)) {
		err = errno ? -errno : -EIO;
	} else if (a.slot >= gp.nslots ||
		   a.slot != GDRPIN_HANDLE_SLOT(a.handle)) {
		err = -EPROTO;
	} else {
		__atomic_store_n(&gp.tab_handle[a.slot], a.handle,
				 __ATOMIC_RELAXED);
		__atomic_store_n(&gp.tab_gen[a.slot], p->gen,
				 __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&gp.lock);
	if (err) {
		gh_dbg("gdrpin: pin of %#llx+%llu failed: %s",
		       (unsigned long long)p->base,
		       (unsigned long long)p->size, gh_errtext(-err));
		return err == -ENOSPC || err == -ENOBUFS ? -ENOSPC : err;
	}
	p->pin_base = a.pinned_va;
	p->pin_size = a.pinned_len;
	p->cookie = a.handle;
	p->fd = -1;
	return 0;
}

static void gdrpin_unpin(struct gh_pin *p)
{
	struct gdrpin_unpin_args a;
	uint32_t s = GDRPIN_HANDLE_SLOT(p->cookie);

	if (!p->cookie || getpid() != gp.pid) {
		if (p->fd >= 0)
			gh_pin_dmabuf.unpin(p);
		return;
	}
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.handle = p->cookie;
	pthread_mutex_lock(&gp.lock);
	/* -ENOENT: revoked and already released by GET_REVOKED */
	if (ioctl(gp_fd(), GDRPIN_IOC_UNPIN, &a) && errno != ENOENT)
		gh_warn("gdrpin: unpin of %#llx failed: %s",
			(unsigned long long)p->cookie, gh_errtext(errno));
	if (s < gp.nslots && gp.tab_handle[s] == p->cookie)
		__atomic_store_n(&gp.tab_handle[s], 0, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&gp.lock);
	p->cookie = 0;
	if (p->fd >= 0)
		gh_pin_dmabuf.unpin(p);	/* closes the exported dma-buf */
}

/* The data path: is the pin still there?  Two loads, no syscall. */
static int gdrpin_valid(uint64_t cookie)
{
	uint32_t s = GDRPIN_HANDLE_SLOT(cookie);
	const struct gdrpin_status_slot *sl;

	if (s >= gp.nslots)
		return 0;
	sl = &gp.slot[s];
	return __atomic_load_n(&sl->gen, __ATOMIC_ACQUIRE) ==
	       GDRPIN_HANDLE_GEN(cookie) &&
	       __atomic_load_n(&sl->state, __ATOMIC_RELAXED) ==
	       GDRPIN_SLOT_ACTIVE;
}

static int gdrpin_reg(const struct gh_pin *p, struct ibv_pd *pd,
		      uint64_t addr, uint64_t len, unsigned int access,
		      struct ibv_mr **mr_p)
{
	int err;

	/* A DMA-BUF pin: the NIC reaches the memory through the dma-buf. */
	if (p->fd >= 0) {
		err = gh_pin_dmabuf.reg(p, pd, addr, len, access, mr_p);
		if (err != -ENOTSUP && err != -EOPNOTSUPP && err != -ENOSYS)
			return err;
	}
	/* Else the NIC reaches the pinned pages by VA, as with peermem. */
	return gh_pin_peermem.reg(p, pd, addr, len, access, mr_p);
}

const struct gh_pin_ops gh_pin_gdrpin = {
	.name = "gdrpin",
	.pin = gdrpin_pin,
	.unpin = gdrpin_unpin,
	.reg = gdrpin_reg,
	.dereg = gh_vreal_dereg_mr,
	.valid = gdrpin_valid,
};
