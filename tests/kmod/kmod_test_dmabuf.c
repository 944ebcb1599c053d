// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpin DMA-BUF pins (GDRPIN_IOC_PIN_DMABUF), exercised against
 * fake_dmabuf.ko, a real exporter of kernel pages that can call
 * move_notify. Included by kmod_test.c (its helpers, one case table).
 */
#include <linux/udmabuf.h>
#include "fake_dmabuf/fake_dmabuf.h"

#define FDB_PARAM "/sys/module/fake_dmabuf/parameters/"
/* A GPU address for the pins: lookups only, never dereferenced. */
#define FDB_VA	0x7e0000000000ULL

_Static_assert(sizeof(struct gdrpin_pin_dmabuf_args) == 72, "dmabuf size");
_Static_assert(sizeof(struct gdrpin_pin_dmabuf_args) % 8 == 0, "pad");
_Static_assert(offsetof(struct gdrpin_pin_dmabuf_args, va) == 16, "va");
_Static_assert(offsetof(struct gdrpin_pin_dmabuf_args, handle) == 24,
	       "handle");
_Static_assert(_IOC_SIZE(GDRPIN_IOC_PIN_DMABUF) ==
	       sizeof(struct gdrpin_pin_dmabuf_args),
	       "ioctl encodes the struct, not a pointer");

static int fdb_dev(void)
{
	int fd = open(FAKE_DMABUF_DEV, O_RDWR | O_CLOEXEC);

	CHECK(fd >= 0, "open " FAKE_DMABUF_DEV " (fake_dmabuf.ko loaded?)");
	return fd;
}

/* A dma-buf of @size bytes, word i holding seed + i. */
static int fdb_create(uint64_t size, uint32_t flags, uint32_t seed)
{
	struct fake_dmabuf_create c = { .size = size, .flags = flags,
					.seed = seed };
	int dev = fdb_dev();

	CHECK_OK(ioctl(dev, FAKE_DMABUF_CREATE, &c));
	close(dev);
	CHECK(c.fd >= 0, "dma-buf fd");
	return c.fd;
}

/* The exporter moves the buffer away from its importers. */
static void fdb_move(int buf)
{
	int dev = fdb_dev();

	CHECK_OK(ioctl(dev, FAKE_DMABUF_MOVE, &buf));
	close(dev);
}

static long long fdb_stat(const char *name)
{
	char path[256], b[64];

	snprintf(path, sizeof(path), FDB_PARAM "%s", name);
	CHECK(read_file(path, b, sizeof(b)) == 0, "read %s", path);
	return atoll(b);
}

/* The exporter holds nothing for anyone (waits for exited processes). */
static void fdb_idle(void)
{
	int i;

	for (i = 0; i < 500 && (fdb_stat("attachments") || fdb_stat("buffers"));
	     i++)
		usleep(20000);
	CHECK(fdb_stat("attachments") == 0, "attachments %lld",
	      fdb_stat("attachments"));
	CHECK(fdb_stat("maps") == 0, "maps %lld", fdb_stat("maps"));
	CHECK(fdb_stat("pins") == 0, "pins %lld", fdb_stat("pins"));
	CHECK(fdb_stat("buffers") == 0, "buffers %lld", fdb_stat("buffers"));
	check_idle();
}

static int do_pin_dmabuf(int fd, int buf, uint64_t va,
			 struct gdrpin_pin_dmabuf_args *out)
{
	struct gdrpin_pin_dmabuf_args a = { .size = sizeof(a), .fd = buf,
					    .va = va };
	int r = ioctl(fd, GDRPIN_IOC_PIN_DMABUF, &a);

	if (out)
		*out = a;
	return r;
}

static uint64_t pin_dmabuf_ok(int fd, int buf, uint64_t va)
{
	struct gdrpin_pin_dmabuf_args a;

	CHECK(do_pin_dmabuf(fd, buf, va, &a) == 0, "pin dma-buf %d", buf);
	return a.handle;
}

/* FNV-1a of bytes [off, off + len) of a buffer made with @seed. */
static uint64_t fdb_sum(uint32_t seed, uint64_t off, uint64_t len)
{
	uint32_t *w = malloc(off + len + 4);
	uint64_t i, h;

	CHECK(w, "malloc");
	for (i = 0; i < (off + len + 3) / 4; i++)
		w[i] = seed + (uint32_t)i;
	h = fnv1a((char *)w + off, len);
	free(w);
	return h;
}

static void t_dmabuf_pin(void)
{
	int fd = open_dev(), f;
	struct gdrpin_version_args v = get_version(fd);
	struct gdrpin_pin_dmabuf_args a;
	struct gdrpin_query_args q;
	uint64_t sz = 1 << 20, sum;
	long long pins0 = stat_val("pins");
	uint32_t st;

	CHECK(v.caps & GDRPIN_CAP_DMABUF, "caps %#llx",
	      (unsigned long long)v.caps);
	for (f = 0; f < 2; f++) {
		uint32_t flags = f ? FAKE_DMABUF_DYNAMIC : 0;
		int buf = fdb_create(sz, flags, 1000 + f);

		CHECK_OK(do_pin_dmabuf(fd, buf, FDB_VA, &a));
		CHECK(a.mode == GDRPIN_MODE_DMABUF && a.pinned_len == sz &&
		      a.slot == GDRPIN_HANDLE_SLOT(a.handle) && a.entries >= 1,
		      "out: mode %u len %llu slot %u entries %u", a.mode,
		      (unsigned long long)a.pinned_len, a.slot, a.entries);
		CHECK(a.pad == 0 && a.pad2 == 0 && !a.reserved[0] &&
		      !a.reserved[1], "pad out");
		/* the pin holds the buffer: the fd may go */
		close(buf);
		CHECK(fdb_stat("buffers") == 1 && fdb_stat("attachments") == 1 &&
		      fdb_stat("maps") == 1, "exporter sees one mapping");
		/* a dynamic exporter is followed where the kernel has
		 * move_notify (the capability says so), else pinned */
		CHECK(f && !(v.caps & GDRPIN_CAP_DMABUF_MOVE) ?
		      fdb_stat("pins") >= 1 : fdb_stat("pins") == 0,
		      "exporter pins %lld (caps %#llx)", fdb_stat("pins"),
		      (unsigned long long)v.caps);
		CHECK_OK(do_query(fd, a.handle, &q));
		CHECK(q.state == GDRPIN_SLOT_ACTIVE && q.mode == GDRPIN_MODE_DMABUF &&
		      q.pinned_va == FDB_VA && q.pinned_len == sz, "query");
		CHECK(get_stats(fd).fd_pinned_bytes == sz, "fd bytes");
		CHECK(stat_val("pinned_bytes") == (long long)sz, "global bytes");
		CHECK(stat_val("pins") == pins0 + f + 1, "pins counter");

		/* a consumer maps it for its own device and reads it */
		CHECK(consumer_read(getpid(), (void *)(FDB_VA + 4096), 8192,
				    &sum) == 0, "consumer read");
		CHECK(sum == fdb_sum(1000 + f, 4096, 8192),
		      "consumer read the exporter's bytes");
		CHECK(fdb_stat("attachments") == 1, "consumer unmapped");

		CHECK_OK(do_unpin(fd, a.handle, &st));
		CHECK(st == GDRPIN_SLOT_ACTIVE, "unpin state");
		CHECK_ERR(do_unpin(fd, a.handle, NULL), ENOENT);
		fdb_idle();
	}
	close(fd);
	fdb_idle();
}

static void t_dmabuf_revoke(void)
{
	int fd = open_dev(), efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	volatile struct gdrpin_status_header *hd = map_status(fd, NULL);
	struct gdrpin_set_eventfd_args e = { .size = sizeof(e) };
	struct gdrpin_get_revoked_args g = { .size = sizeof(g) };
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	long long rev0 = stat_val("revocations");
	int b1 = fdb_create(1 << 16, FAKE_DMABUF_DYNAMIC, 1);
	int b2 = fdb_create(1 << 16, FAKE_DMABUF_DYNAMIC, 2);
	uint64_t h1, h2, got[4], cnt, sum;
	struct gdrpin_query_args q;
	int cfd, revoked, reason;
	uint32_t st;

	CHECK(efd >= 0, "eventfd");
	e.fd = efd;
	CHECK_OK(ioctl(fd, GDRPIN_IOC_SET_EVENTFD, &e));
	h1 = pin_dmabuf_ok(fd, b1, FDB_VA);
	h2 = pin_dmabuf_ok(fd, b2, FDB_VA + (1 << 20));
	CHECK(poll(&pfd, 1, 0) == 0, "no event before revocation");

	fdb_move(b1);
	CHECK(hd->revoke_count == 1, "revoke_count %llu",
	      (unsigned long long)hd->revoke_count);
	CHECK(slot_of(hd, h1)->state == GDRPIN_SLOT_REVOKED, "slot revoked");
	CHECK(slot_of(hd, h2)->state == GDRPIN_SLOT_ACTIVE, "other active");
	CHECK(poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN), "POLLIN");
	CHECK(read(efd, &cnt, 8) == 8 && cnt == 1, "eventfd signalled");
	CHECK_OK(do_query(fd, h1, &q));
	CHECK(q.state == GDRPIN_SLOT_REVOKED, "query says revoked");
	CHECK(stat_val("revocations") == rev0 + 1, "revocations counter");
	CHECK(consumer_read(getpid(), (void *)FDB_VA, 100, &sum) == -ENOENT,
	      "revoked pin not found by kapi");
	/* a second move of a revoked pin changes nothing */
	fdb_move(b1);
	CHECK(hd->revoke_count == 1, "revoked once");

	g.handles_ptr = (uintptr_t)got;
	g.max_handles = 4;
	CHECK_OK(ioctl(fd, GDRPIN_IOC_GET_REVOKED, &g));
	CHECK(g.count == 1 && got[0] == h1 && g.pending == 0, "drained");
	CHECK_ERR(do_unpin(fd, h1, NULL), ENOENT);
	CHECK(fdb_stat("attachments") == 1, "revoked pin detached");

	/* a consumer holding its own mapping learns of the revocation */
	cfd = consumer_hold(getpid(), (void *)(FDB_VA + (1 << 20)), 4096);
	CHECK(fdb_stat("attachments") == 2, "consumer attached");
	fdb_move(b2);
	consumer_status(cfd, &revoked, &reason);
	CHECK(revoked == 1 && reason == 1,	/* GDRPIN_REVOKE_FREED */
	      "consumer revoked=%d reason=%d", revoked, reason);
	CHECK(slot_of(hd, h2)->state == GDRPIN_SLOT_REVOKED, "slot 2 revoked");
	close(cfd);
	CHECK_OK(do_unpin(fd, h2, &st));
	CHECK(st == GDRPIN_SLOT_REVOKED, "unpin reports revoked");
	CHECK(get_stats(fd).fd_revocations == 2, "fd revocations");
	close(b1);
	close(b2);
	close(fd);
	close(efd);
	fdb_idle();
}

static void t_dmabuf_invalid(void)
{
	int fd = open_dev(), buf = fdb_create(1 << 16, 0, 0);
	int file = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	struct gdrpin_pin_dmabuf_args a;
	long long inval0 = stat_val("fail_inval");

#define DPIN_EXPECT(err, ...) do {					\
		a = (struct gdrpin_pin_dmabuf_args){ .size = sizeof(a),	\
			.fd = buf, .va = FDB_VA };			\
		__VA_ARGS__;						\
		CHECK_ERR(ioctl(fd, GDRPIN_IOC_PIN_DMABUF, &a), err);	\
	} while (0)

	CHECK(file >= 0, "open a file");
	DPIN_EXPECT(EINVAL, a.size = sizeof(a) + 8);
	DPIN_EXPECT(EINVAL, a.size = 0);
	DPIN_EXPECT(EINVAL, a.flags = 1);
	DPIN_EXPECT(EINVAL, a.flags = 1u << 31);
	DPIN_EXPECT(EINVAL, a.pad = 1);
	DPIN_EXPECT(EINVAL, a.pad2 = 1);
	DPIN_EXPECT(EINVAL, a.reserved[0] = 1);
	DPIN_EXPECT(EINVAL, a.reserved[1] = 1ull << 63);
	DPIN_EXPECT(EINVAL, a.va = FDB_VA + 1);			/* unaligned */
	DPIN_EXPECT(EINVAL, a.va = ~0ull & ~4095ull);		/* wraps */
	DPIN_EXPECT(EINVAL, a.va = 1ull << 62);			/* kernel half */
	DPIN_EXPECT(EBADF, a.fd = -1);
	DPIN_EXPECT(EBADF, a.fd = 100000);
	DPIN_EXPECT(EINVAL, a.fd = file);			/* not a dma-buf */
	DPIN_EXPECT(EINVAL, a.fd = fd);				/* gdrpin itself */
	CHECK(stat_val("fail_inval") >= inval0 + 12, "failures counted");
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_PIN_DMABUF, NULL), EFAULT);
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_PIN_DMABUF, (void *)1), EFAULT);
	/* the right number with a pointer-sized (wrong) struct size */
	CHECK_ERR(ioctl(fd, _IOWR(GDRPIN_IOCTL_TYPE, 0x07, uint64_t), &a),
		  ENOTTY);
	CHECK(get_stats(fd).fd_pins == 0, "nothing pinned");
	CHECK(fdb_stat("attachments") == 0, "nothing attached");
	close(file);
	close(buf);
	close(fd);
	fdb_idle();
#undef DPIN_EXPECT
}

static void t_dmabuf_quota(void)
{
	int fd = open_dev(), buf = fdb_create(1 << 20, 0, 0);
	long long nospc0 = stat_val("fail_nospc");
	uint64_t h;

	set_param("max_pinned_bytes", "1572864");	/* 1.5 MiB */
	h = pin_dmabuf_ok(fd, buf, FDB_VA);
	CHECK_ERR(do_pin_dmabuf(fd, buf, FDB_VA + (1 << 20), NULL), ENOSPC);
	CHECK(stat_val("fail_nospc") == nospc0 + 1, "counted");
	CHECK(fdb_stat("attachments") == 1, "refused pin left nothing");
	CHECK_OK(do_unpin(fd, h, NULL));
	h = pin_dmabuf_ok(fd, buf, FDB_VA);
	set_param("max_pinned_bytes", "0");
	set_param("max_user_pinned_bytes", "1048575");
	CHECK_ERR(do_pin_dmabuf(fd, buf, FDB_VA + (1 << 20), NULL), ENOSPC);
	set_param("max_user_pinned_bytes", "0");
	close(buf);
	close(fd);
	fdb_idle();
}

/* The opener exits holding pins and the only reference to the buffers. */
static void t_dmabuf_exit(void)
{
	pid_t pid = fork();
	int status;

	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		int fd = open_dev(), i;

		for (i = 0; i < 8; i++) {
			int buf = fdb_create(1 << 16, i & 1 ? FAKE_DMABUF_DYNAMIC : 0,
					     i);

			pin_dmabuf_ok(fd, buf, FDB_VA + ((uint64_t)i << 20));
			close(buf);
		}
		_exit(fdb_stat("buffers") == 8 ? 0 : 3);
	}
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	      WEXITSTATUS(status) == 0, "child status %#x", status);
	fdb_idle();
}

struct dmabuf_race_arg {
	int buf;
	volatile int stop;
	long moves;
};

/*
 * A real exporter: udmabuf turns memfd pages into a dma-buf (kernels with
 * CONFIG_UDMABUF: the lab's debug kernel). The consumer reads the pinned
 * pages and sees what the process wrote through the memfd, twice.
 */
static void t_dmabuf_udmabuf(void)
{
	const uint64_t sz = 1 << 20;
	int fd, ufd = open("/dev/udmabuf", O_RDWR | O_CLOEXEC), mfd, buf, r;
	struct udmabuf_create c = { .flags = UDMABUF_FLAGS_CLOEXEC,
				    .size = sz };
	struct gdrpin_pin_dmabuf_args a;
	uint64_t sum, i;
	uint32_t *w, st;

	if (ufd < 0 && errno == ENOENT) {
		printf("no /dev/udmabuf (kernel without CONFIG_UDMABUF)\n");
		exit(77);
	}
	CHECK(ufd >= 0, "open /dev/udmabuf");
	fd = open_dev();
	mfd = memfd_create("gdrpin-udmabuf", MFD_ALLOW_SEALING | MFD_CLOEXEC);
	CHECK(mfd >= 0, "memfd_create");
	CHECK_OK(ftruncate(mfd, (off_t)sz));
	w = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	CHECK(w != MAP_FAILED, "mmap memfd");
	for (i = 0; i < sz / 4; i++)
		w[i] = 7000 + (uint32_t)i;
	CHECK_OK(fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK));
	c.memfd = (uint32_t)mfd;
	buf = ioctl(ufd, UDMABUF_CREATE, &c);
	CHECK(buf >= 0, "UDMABUF_CREATE");

	CHECK_OK(do_pin_dmabuf(fd, buf, FDB_VA, &a));
	CHECK(a.mode == GDRPIN_MODE_DMABUF && a.pinned_len == sz,
	      "out: mode %u len %llu", a.mode, (unsigned long long)a.pinned_len);
	close(buf);	/* the pin holds the dma-buf */
	CHECK(get_stats(fd).fd_pinned_bytes == sz, "fd bytes");
	CHECK(consumer_read(getpid(), (void *)(FDB_VA + 4096), 8192, &sum) == 0,
	      "consumer read");
	CHECK(sum == fnv1a((char *)w + 4096, 8192),
	      "consumer read the memfd's bytes");
	/* the same pages, not a copy: a write through the memfd shows */
	for (i = 0; i < sz / 4; i++)
		w[i] ^= 0x5a5a5a5a;
	r = consumer_read(getpid(), (void *)(FDB_VA + sz - 8192), 8192, &sum);
	CHECK(r == 0, "consumer read 2: %d", r);
	CHECK(sum == fnv1a((char *)w + sz - 8192, 8192),
	      "consumer read the rewritten bytes");
	CHECK_OK(do_unpin(fd, a.handle, &st));
	CHECK(st == GDRPIN_SLOT_ACTIVE, "unpin state");
	munmap(w, sz);
	close(mfd);
	close(ufd);
	close(fd);
	check_idle();
}

static void *dmabuf_race_mover(void *p)
{
	struct dmabuf_race_arg *r = p;
	int dev = fdb_dev();

	while (!r->stop) {
		CHECK_OK(ioctl(dev, FAKE_DMABUF_MOVE, &r->buf));
		r->moves++;
	}
	close(dev);
	return NULL;
}

/* move_notify racing with pin, unpin, GET_REVOKED and a consumer's map. */
static void t_dmabuf_race(void)
{
	struct dmabuf_race_arg r = { .buf = fdb_create(1 << 16, FAKE_DMABUF_DYNAMIC, 7) };
	struct gdrpin_get_revoked_args g;
	int fd = open_dev(), i, ok = 0, stale = 0, cons = 0, revoked = 0;
	uint64_t got[4], sum;
	pthread_t t;

	CHECK(pthread_create(&t, NULL, dmabuf_race_mover, &r) == 0, "thread");
	for (i = 0; i < 400; i++) {
		struct gdrpin_pin_dmabuf_args a;
		int rc;

		if (do_pin_dmabuf(fd, r.buf, FDB_VA, &a)) {
			CHECK(errno == ESTALE, "pin: errno %d", errno);
			stale++;
			continue;
		}
		ok++;
		if (i % 4 == 0) {
			rc = consumer_read(getpid(), (void *)FDB_VA, 4096, &sum);
			CHECK(rc == 0 || rc == -ENOENT || rc == -ESTALE,
			      "consumer %d", rc);
			cons += rc == 0;
			CHECK(rc || sum == fdb_sum(7, 0, 4096), "data");
		}
		if (i & 1) {
			uint32_t st;

			CHECK_OK(do_unpin(fd, a.handle, &st));
			revoked += st == GDRPIN_SLOT_REVOKED;
		} else {
			g = (struct gdrpin_get_revoked_args){
				.size = sizeof(g), .max_handles = 4,
				.handles_ptr = (uintptr_t)got };
			CHECK_OK(ioctl(fd, GDRPIN_IOC_GET_REVOKED, &g));
			CHECK(g.count <= 1 && (!g.count || got[0] == a.handle),
			      "revoked: %u", g.count);
			revoked += g.count;
			if (!g.count)
				CHECK_OK(do_unpin(fd, a.handle, NULL));
		}
	}
	r.stop = 1;
	pthread_join(t, NULL);
	printf("  %d pins (%d revoked before release), %d refused as moved (ESTALE), %d consumer reads, %ld moves\n",
	       ok, revoked, stale, cons, r.moves);
	CHECK(ok > 0 && r.moves > 0, "the race ran");
	close(r.buf);
	close(fd);
	fdb_idle();
}
