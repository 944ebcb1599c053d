// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpin as a peer-memory client of ib_core, driven by fake_ibcore.ko
 * (acquire -> get_pages -> dma_map ... dma_unmap -> put_pages -> release,
 * and the invalidate callback). Included by kmod_test.c (its helpers, one
 * case table). guest-run loads fake_ibcore before gdrpin and checks the
 * case where it is absent itself (gdrpin must load without it).
 */
#define FIB_DIR "/sys/kernel/debug/fake_ibcore/"

struct fib_res {
	unsigned int id;
	int nmap;
	unsigned long page_size;
	uint64_t csum;
};

/* One ctl command; 0 and the result line in @res, else -errno. */
static int fib_ctl(const char *cmd, char *res, size_t len)
{
	int fd = open(FIB_DIR "ctl", O_RDWR | O_CLOEXEC);
	ssize_t n;
	int r = 0;

	CHECK(fd >= 0, "open fake_ibcore ctl (fake_ibcore.ko loaded?)");
	if (write(fd, cmd, strlen(cmd)) < 0) {
		r = -errno;
	} else if (res) {
		n = pread(fd, res, len - 1, 0);
		CHECK(n > 0, "fake_ibcore result of %s", cmd);
		res[n] = '\0';
	}
	close(fd);
	return r;
}

/* ibv_reg_mr on [va, va + len) through fake_ibcore: 0 or -errno. */
static int fib_reg(const void *va, uint64_t len, struct fib_res *out)
{
	char cmd[96], res[160];
	int r;

	snprintf(cmd, sizeof(cmd), "reg 0 %" PRIxPTR " %" PRIx64,
		 (uintptr_t)va, len);
	r = fib_ctl(cmd, res, sizeof(res));
	if (r)
		return r;
	CHECK(sscanf(res, "id=%u nmap=%d page_size=%lu csum=%" SCNx64,
		     &out->id, &out->nmap, &out->page_size, &out->csum) == 4,
	      "reg result %s", res);
	return 0;
}

static int fib_dereg(unsigned int id)
{
	char cmd[32];

	snprintf(cmd, sizeof(cmd), "dereg %u", id);
	return fib_ctl(cmd, NULL, 0);
}

/* The registration's bytes as the "HCA" reads them now. */
static int fib_csum(unsigned int id, uint64_t *sum)
{
	char cmd[32], res[64];
	int r;

	snprintf(cmd, sizeof(cmd), "csum %u", id);
	r = fib_ctl(cmd, res, sizeof(res));
	if (!r)
		CHECK(sscanf(res, "csum=%" SCNx64, sum) == 1, "csum %s", res);
	return r;
}

static long long fib_stat(const char *name)
{
	char buf[512], *p;
	size_t n = strlen(name);

	CHECK(read_file(FIB_DIR "stats", buf, sizeof(buf)) == 0,
	      "fake_ibcore stats");
	for (p = buf; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (!strncmp(p, name, n) && p[n] == ' ')
			return atoll(p + n + 1);
	CHECK(0, "fake_ibcore stat %s missing", name);
	return -1;
}

/* gdrpin hands pins back from a work item: wait for it. */
static void peer_wait(const char *what, long long want)
{
	int i;

	for (i = 0; i < 250 && stat_val(what) != want; i++)
		usleep(20000);
	CHECK(stat_val(what) == want, "%s %lld, want %lld", what,
	      stat_val(what), want);
}

static void peer_idle(void)
{
	CHECK(fib_stat("live_regs") == 0, "fake_ibcore live_regs %lld",
	      fib_stat("live_regs"));
	CHECK(fib_stat("errors") == 0, "client misbehaved");
	peer_wait("peer_regs", 0);
	check_idle();
}

static void t_peer_reg(void)
{
	size_t len = 4 * KT_ALIGN;
	char *buf = gpu_alloc(len);
	long long pins = stat_val("pins");
	struct fib_res a, b;
	int fd = open_dev();
	uint64_t sum;

	reset_fake();
	CHECK(stat_val("peer_client") == 1, "gdrpin registered with ib_core");
	CHECK(fib_stat("clients") == 1, "one client");
	fill_random(buf, len, 7);
	CHECK_OK(fib_reg(buf, len, &a));
	CHECK(a.page_size == 4096, "page size %lu", a.page_size);
	CHECK(a.nmap == (int)(len / 4096), "nmap %d", a.nmap);
	CHECK(a.csum == fnv1a(buf, len), "the HCA reads the process's bytes");
	/* a gdrpin pin of this fd, charged like PIN */
	CHECK(get_stats(fd).fd_pins == 1, "fd_pins %llu",
	      (unsigned long long)get_stats(fd).fd_pins);
	CHECK(stat_val("pins") == pins + 1, "pins");
	CHECK(stat_val("pinned_bytes") == (long long)len, "pinned_bytes");
	CHECK(stat_val("peer_regs") == 1, "peer_regs");

	/* unaligned: the sg list starts at the page holding va */
	CHECK_OK(fib_reg(buf + KT_ALIGN + 100, 3 * 4096, &b));
	CHECK(b.nmap == 4, "nmap %d", b.nmap);
	CHECK(b.csum == fnv1a(buf + KT_ALIGN + 100, 3 * 4096), "unaligned csum");
	CHECK(get_stats(fd).fd_pins == 2, "second pin");

	/* the same pages, not a copy */
	memset(buf + KT_ALIGN + 100, 0x5a, 3 * 4096);
	CHECK_OK(fib_csum(b.id, &sum));
	CHECK(sum == fnv1a(buf + KT_ALIGN + 100, 3 * 4096), "live pages");

	CHECK_OK(fib_dereg(a.id));
	CHECK_OK(fib_dereg(b.id));
	CHECK(fib_dereg(b.id) == -ENOENT, "dereg twice");
	peer_wait("peer_regs", 0);
	CHECK(get_stats(fd).fd_pins == 0, "fd_pins after dereg");
	close(fd);
	peer_idle();
}

static void t_peer_not_mine(void)
{
	char *buf = gpu_alloc(2 * KT_ALIGN);
	struct fib_res r;
	pid_t pid;
	int fd, status;

	reset_fake();
	/* no /dev/gdrpin open: not gdrpin's */
	CHECK(fib_reg(buf, KT_ALIGN, &r) == -ENXIO, "no fd, no claim");

	fd = open_dev();
	/* the provider cannot pin it (not GPU memory) */
	fake_inject(EINVAL, 1);
	CHECK(fib_reg(buf, KT_ALIGN, &r) == -ENXIO, "probe failed, no claim");
	reset_fake();

	/* a forked child holding the parent's fd is not its owner */
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0)
		_exit(fib_reg(buf, KT_ALIGN, &r) == -ENXIO ? 0 : 3);
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	      WEXITSTATUS(status) == 0, "child status %#x", status);

	/* quota: claimed, but get_pages is refused like PIN */
	set_param("max_pinned_bytes", "65536");
	CHECK(fib_reg(buf, 2 * KT_ALIGN, &r) == -ENOSPC, "quota");
	reset_fake();
	CHECK(get_stats(fd).fd_pins == 0, "nothing pinned");
	close(fd);
	peer_idle();
}

static void t_peer_invalidate(void)
{
	size_t len = 2 * KT_ALIGN;
	char *buf = gpu_alloc(len);
	long long inv = fib_stat("invalidations");
	long long unm = fib_stat("invalidate_unmaps");
	long long revs = stat_val("revocations");
	long long pinv = stat_val("peer_invalidations");
	volatile struct gdrpin_status_header *h;
	int fd = open_dev();
	struct fib_res r;
	uint64_t sum;

	reset_fake();
	h = map_status(fd, NULL);
	CHECK_OK(fib_reg(buf, len, &r));
	fake_free(buf, len);		/* cuMemFree */
	/* the callback ran synchronously inside the free */
	CHECK(fib_stat("invalidations") == inv + 1, "ib_core invalidated");
	CHECK(fib_stat("invalidate_unmaps") == unm + 1, "unmapped in it");
	CHECK(stat_val("peer_invalidations") == pinv + 1, "peer_invalidations");
	CHECK(stat_val("revocations") == revs + 1, "revocations");
	CHECK(h->revoke_count == 1, "status page reports it: %llu",
	      (unsigned long long)h->revoke_count);
	CHECK(fib_csum(r.id, &sum) == -ESTALE, "the HCA stopped");
	CHECK_OK(fib_dereg(r.id));
	peer_wait("peer_regs", 0);
	CHECK(get_stats(fd).fd_pins == 0, "the revoked pin is gone");
	CHECK(fib_stat("invalidations") == inv + 1, "told once");
	close(fd);
	peer_idle();
}

/* Closing the fd (or exit) unpins: ib_core hears about it first. */
static void t_peer_close(void)
{
	char *buf = gpu_alloc(KT_ALIGN);
	long long inv = fib_stat("invalidations");
	int fd = open_dev();
	struct fib_res r;
	uint64_t sum;

	reset_fake();
	CHECK_OK(fib_reg(buf, KT_ALIGN, &r));
	close(fd);
	CHECK(fib_stat("invalidations") == inv + 1, "invalidated on close");
	CHECK(fib_csum(r.id, &sum) == -ESTALE, "the HCA stopped");
	CHECK_OK(fib_dereg(r.id));
	peer_idle();
}

struct peer_race {
	char *buf;
	unsigned int id;
};

static void *peer_race_dereg(void *p)
{
	struct peer_race *a = p;

	CHECK_OK(fib_dereg(a->id));
	return NULL;
}

static void *peer_race_free(void *p)
{
	struct peer_race *a = p;

	usleep(rand() % 3000);
	fake_free(a->buf, KT_ALIGN);
	return NULL;
}

/*
 * Deregistration (dma_unmap, put_pages) racing the free callback, with
 * nv-p2p's unmap or put slowed down to widen the window.
 */
static void t_peer_race(void)
{
	static const char *const knobs[] = { "put_delay_ms", "unmap_delay_ms" };
	char *buf = gpu_alloc(KT_ALIGN);
	struct peer_race a = { .buf = buf };
	int fd = open_dev(), k, i;
	pthread_t t1, t2;
	struct fib_res r;

	for (k = 0; k < 2; k++) {
		reset_fake();
		fake_set(knobs[k], "2");
		for (i = 0; i < 40; i++) {
			CHECK_OK(fib_reg(buf, KT_ALIGN, &r));
			a.id = r.id;
			CHECK_OK(pthread_create(&t1, NULL, peer_race_dereg, &a));
			CHECK_OK(pthread_create(&t2, NULL, peer_race_free, &a));
			pthread_join(t1, NULL);
			pthread_join(t2, NULL);
			CHECK(fake_stat("errors") == 0, "%s: misuse at %d",
			      knobs[k], i);
			CHECK(fib_stat("errors") == 0, "%s: client error at %d",
			      knobs[k], i);
		}
	}
	reset_fake();
	peer_wait("peer_regs", 0);
	CHECK(get_stats(fd).fd_pins == 0, "all gone");
	close(fd);
	peer_idle();
}

/*
 * Leaves a registration behind on purpose (run it last): gdrpin holds
 * fake_ibcore while registered, is held by the open fd, and guest-run's
 * unload then checks that unregistering at rmmod gdrpin released it
 * through the client.
 */
static void t_peer_unload_live(void)
{
	char *buf = gpu_alloc(KT_ALIGN);
	int fd = open_dev();
	struct fib_res r;

	reset_fake();
	CHECK_OK(fib_reg(buf, KT_ALIGN, &r));
	CHECK(system("rmmod fake_ibcore 2>/dev/null") != 0,
	      "ib_core held by its client");
	CHECK(system("rmmod gdrpin 2>/dev/null") != 0, "gdrpin held by the fd");
	CHECK(fib_stat("live_regs") == 1, "left registered");
	/* exit closes the fd: the registration is invalidated, not released */
	(void)fd;
}
