// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpin in-guest tests. Run as root inside the test guest with gdrpin.ko,
 * fake_nvp2p.ko and gdrpin_consumer.ko loaded and debugfs mounted:
 *
 *   kmod_test list          names of all cases
 *   kmod_test CASE          run one case (exit 0 pass, 1 fail, 77 skip)
 *
 * tests/kmod/guest-run runs every case in its own process.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <grp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kmod_test.h"

/* --- ABI layout, checked at compile time -------------------------------- */

_Static_assert(sizeof(struct gdrpin_version_args) == 64, "version size");
_Static_assert(sizeof(struct gdrpin_pin_args) == 96, "pin size");
_Static_assert(sizeof(struct gdrpin_unpin_args) == 24, "unpin size");
_Static_assert(sizeof(struct gdrpin_query_args) == 72, "query size");
_Static_assert(sizeof(struct gdrpin_get_revoked_args) == 32, "revoked size");
_Static_assert(sizeof(struct gdrpin_set_eventfd_args) == 16, "eventfd size");
_Static_assert(sizeof(struct gdrpin_stats_args) == 72, "stats size");
_Static_assert(sizeof(struct gdrpin_status_header) == 64, "header size");
_Static_assert(sizeof(struct gdrpin_status_slot) == 16, "slot size");
_Static_assert(sizeof(struct gdrpin_version_args) % 8 == 0, "pad");
_Static_assert(sizeof(struct gdrpin_pin_args) % 8 == 0, "pad");
_Static_assert(sizeof(struct gdrpin_unpin_args) % 8 == 0, "pad");
_Static_assert(sizeof(struct gdrpin_query_args) % 8 == 0, "pad");
_Static_assert(sizeof(struct gdrpin_get_revoked_args) % 8 == 0, "pad");
_Static_assert(sizeof(struct gdrpin_set_eventfd_args) % 8 == 0, "pad");
_Static_assert(sizeof(struct gdrpin_stats_args) % 8 == 0, "pad");
_Static_assert(offsetof(struct gdrpin_pin_args, va) == 8, "pin va");
_Static_assert(offsetof(struct gdrpin_pin_args, handle) == 24, "pin handle");
_Static_assert(offsetof(struct gdrpin_pin_args, gpu_uuid) == 64, "pin uuid");
_Static_assert(offsetof(struct gdrpin_status_header, revoke_count) == 24,
	       "revoke_count");
_Static_assert(_IOC_SIZE(GDRPIN_IOC_PIN) == sizeof(struct gdrpin_pin_args),
	       "ioctl encodes the struct, not a pointer");
_Static_assert(_IOC_SIZE(GDRPIN_IOC_UNPIN) == sizeof(struct gdrpin_unpin_args),
	       "ioctl encodes the struct, not a pointer");

#define STATS_DIR "/sys/class/misc/gdrpin/stats/"
#define PARAM_DIR "/sys/module/gdrpin/parameters/"
#define FAKE_DIR "/sys/kernel/debug/fake_nvp2p/"
#define CONS_CTL "/sys/kernel/debug/gdrpin_consumer/ctl"

/* --- helpers ----------------------------------------------------------- */

static int open_dev(void)
{
	int fd = open("/dev/gdrpin", O_RDWR | O_CLOEXEC);

	CHECK(fd >= 0, "open /dev/gdrpin");
	return fd;
}

/* "GPU memory" for the fake provider: 64 KiB aligned, touched, patterned. */
static void *gpu_alloc(size_t len)
{
	size_t map = len + KT_ALIGN;
	char *p = mmap(NULL, map, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uintptr_t a;

	CHECK(p != MAP_FAILED, "mmap %zu", map);
	a = ((uintptr_t)p + KT_ALIGN - 1) & ~(uintptr_t)(KT_ALIGN - 1);
	memset((void *)a, 0xa5, len);
	return (void *)a;
}

static void fill_random(void *p, size_t len, unsigned int seed)
{
	uint32_t x = seed * 2654435761u + 1;
	uint8_t *b = p;
	size_t i;

	for (i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		b[i] = (uint8_t)x;
	}
}

static uint64_t fnv1a(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 0xcbf29ce484222325ULL;

	while (n--) {
		h ^= *b++;
		h *= 0x100000001b3ULL;
	}
	return h;
}

static int do_pin(int fd, const void *va, uint64_t len, uint32_t flags,
		  struct gdrpin_pin_args *out)
{
	struct gdrpin_pin_args a = { .size = sizeof(a), .flags = flags };
	int r;

	a.va = (uintptr_t)va;
	a.len = len;
	r = ioctl(fd, GDRPIN_IOC_PIN, &a);
	if (out)
		*out = a;
	return r;
}

static uint64_t pin_ok(int fd, const void *va, uint64_t len, uint32_t flags)
{
	struct gdrpin_pin_args a;

	CHECK(do_pin(fd, va, len, flags, &a) == 0, "pin %p+%#" PRIx64, va, len);
	return a.handle;
}

static int do_unpin(int fd, uint64_t h, uint32_t *state)
{
	struct gdrpin_unpin_args a = { .size = sizeof(a), .handle = h };
	int r = ioctl(fd, GDRPIN_IOC_UNPIN, &a);

	if (state)
		*state = a.state;
	return r;
}

static int do_query(int fd, uint64_t h, struct gdrpin_query_args *out)
{
	struct gdrpin_query_args a = { .size = sizeof(a), .handle = h };
	int r = ioctl(fd, GDRPIN_IOC_QUERY, &a);

	if (out)
		*out = a;
	return r;
}

static struct gdrpin_stats_args get_stats(int fd)
{
	struct gdrpin_stats_args a = { .size = sizeof(a) };

	CHECK_OK(ioctl(fd, GDRPIN_IOC_GET_STATS, &a));
	return a;
}

static struct gdrpin_version_args get_version(int fd)
{
	struct gdrpin_version_args a = { .size = sizeof(a) };

	CHECK_OK(ioctl(fd, GDRPIN_IOC_GET_VERSION, &a));
	return a;
}

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;
	int e;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	e = errno;
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -e;
}

static int read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

static long long stat_val(const char *name)
{
	char path[256], buf[64];

	snprintf(path, sizeof(path), STATS_DIR "%s", name);
	CHECK(read_file(path, buf, sizeof(buf)) == 0, "read %s", path);
	return atoll(buf);
}

static long long fake_stat(const char *name)
{
	char buf[2048], *p;
	size_t n = strlen(name);

	CHECK(read_file(FAKE_DIR "stats", buf, sizeof(buf)) == 0, "fake stats");
	for (p = buf; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (!strncmp(p, name, n) && p[n] == ' ')
			return atoll(p + n + 1);
	CHECK(0, "fake stat %s missing", name);
	return -1;
}

static void fake_set(const char *knob, const char *val)
{
	char path[256];

	snprintf(path, sizeof(path), FAKE_DIR "%s", knob);
	CHECK(write_file(path, val) == 0, "write %s=%s", path, val);
}

static void fake_free(const void *va, uint64_t len)
{
	char buf[96];

	snprintf(buf, sizeof(buf), "0 %" PRIxPTR " %" PRIx64, (uintptr_t)va, len);
	CHECK(write_file(FAKE_DIR "free", buf) == 0, "fake free");
}

static void fake_inject(int err, int count)
{
	char buf[48];

	snprintf(buf, sizeof(buf), "%d %d", err, count);
	CHECK(write_file(FAKE_DIR "inject", buf) == 0, "fake inject");
}

static void set_param(const char *name, const char *val)
{
	char path[256];

	snprintf(path, sizeof(path), PARAM_DIR "%s", name);
	CHECK(write_file(path, val) == 0, "write %s=%s", path, val);
}

/* Consumer: 0 and *sum on success, else -errno of the kernel operation. */
static int consumer_read(pid_t pid, const void *va, uint64_t len, uint64_t *sum)
{
	char cmd[128], res[128];
	int fd = open(CONS_CTL, O_RDWR);
	int r = 0;

	CHECK(fd >= 0, "open consumer");
	snprintf(cmd, sizeof(cmd), "read %d %" PRIxPTR " %" PRIx64, (int)pid,
		 (uintptr_t)va, len);
	if (write(fd, cmd, strlen(cmd)) < 0) {
		r = -errno;
	} else {
		ssize_t n = read(fd, res, sizeof(res) - 1);

		CHECK(n > 0, "consumer read");
		res[n] = '\0';
		CHECK(sscanf(res, "ok csum=%" SCNx64, sum) == 1, "result %s", res);
		CHECK(strstr(res, "dma=ok"), "consumer DMA check: %s", res);
	}
	close(fd);
	return r;
}

static int consumer_hold(pid_t pid, const void *va, uint64_t len)
{
	char cmd[128];
	int fd = open(CONS_CTL, O_RDWR);

	CHECK(fd >= 0, "open consumer");
	snprintf(cmd, sizeof(cmd), "hold %d %" PRIxPTR " %" PRIx64, (int)pid,
		 (uintptr_t)va, len);
	CHECK(write(fd, cmd, strlen(cmd)) == (ssize_t)strlen(cmd), "hold");
	return fd;
}

static void consumer_status(int cfd, int *revoked, int *reason)
{
	char res[128];
	ssize_t n = pread(cfd, res, sizeof(res) - 1, 0);

	CHECK(n > 0, "consumer status");
	res[n] = '\0';
	CHECK(sscanf(res, "held revoked=%d reason=%d", revoked, reason) == 2,
	      "status %s", res);
}

/* Everything of every process is released: module and provider idle. */
static void check_idle(void)
{
	int i;

	/* contexts of exited processes may take a moment to go */
	for (i = 0; i < 100 && (stat_val("live_pins") || stat_val("live_ctx")); i++)
		usleep(20000);
	CHECK(stat_val("live_pins") == 0, "live_pins %lld", stat_val("live_pins"));
	CHECK(stat_val("pinned_bytes") == 0, "pinned_bytes");
	CHECK(stat_val("kapi_refs") == 0, "kapi_refs");
	CHECK(fake_stat("live_pts") == 0, "fake live_pts %lld", fake_stat("live_pts"));
	CHECK(fake_stat("zombie_pts") == 0, "fake zombie_pts (free_page_table missing)");
	CHECK(fake_stat("live_maps") == 0, "fake live_maps");
	CHECK(fake_stat("dead_maps") == 0, "fake dead_maps (free_dma_mapping missing)");
	CHECK(fake_stat("pinned_pages") == 0, "fake pinned_pages");
	CHECK(fake_stat("errors") == 0, "fake saw API misuse");
}

static void reset_fake(void)
{
	fake_set("refuse_persistent", "0");
	fake_set("put_delay_ms", "0");
	fake_set("unmap_delay_ms", "0");
	fake_set("pt_version", "0x20000");
	fake_inject(1, 0);
	set_param("max_pinned_bytes", "0");
	set_param("max_user_pinned_bytes", "0");
	set_param("max_user_contexts", "256");
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static volatile struct gdrpin_status_header *map_status(int fd, size_t *len)
{
	struct gdrpin_version_args v = get_version(fd);
	void *p = mmap(NULL, v.status_map_size, PROT_READ, MAP_SHARED, fd, 0);

	CHECK(p != MAP_FAILED, "mmap status");
	if (len)
		*len = v.status_map_size;
	return p;
}

static volatile struct gdrpin_status_slot *
slot_of(volatile struct gdrpin_status_header *h, uint64_t handle)
{
	return (volatile struct gdrpin_status_slot *)((volatile char *)h +
		h->header_size) + GDRPIN_HANDLE_SLOT(handle);
}

/* --- cases -------------------------------------------------------------- */

static void t_abi(void)
{
	/* The _Static_asserts above did the work; check the header is sane. */
	CHECK(_IOC_TYPE(GDRPIN_IOC_GET_VERSION) == GDRPIN_IOCTL_TYPE, "type");
	CHECK(_IOC_DIR(GDRPIN_IOC_PIN) == (_IOC_READ | _IOC_WRITE), "dir");
	CHECK(GDRPIN_HANDLE_SLOT(0x12345ull << GDRPIN_HANDLE_SLOT_BITS | 7) == 7,
	      "slot macro");
}

static void t_version(void)
{
	int fd = open_dev();
	struct gdrpin_version_args v = get_version(fd), b;

	CHECK(v.abi_major == GDRPIN_ABI_MAJOR && v.abi_minor == GDRPIN_ABI_MINOR,
	      "abi %u.%u", v.abi_major, v.abi_minor);
	CHECK((v.caps & (GDRPIN_CAP_PROVIDER | GDRPIN_CAP_PERSISTENT |
			 GDRPIN_CAP_LEGACY | GDRPIN_CAP_STATUS_PAGE |
			 GDRPIN_CAP_POLL | GDRPIN_CAP_EVENTFD)) ==
	      (GDRPIN_CAP_PROVIDER | GDRPIN_CAP_PERSISTENT | GDRPIN_CAP_LEGACY |
	       GDRPIN_CAP_STATUS_PAGE | GDRPIN_CAP_POLL | GDRPIN_CAP_EVENTFD),
	      "caps %#llx", (unsigned long long)v.caps);
	CHECK(v.pin_align == GDRPIN_PIN_ALIGN, "align");
	CHECK(v.status_nslots > 0 && v.status_map_size >= v.status_header_size +
	      v.status_nslots * v.status_slot_size, "status geometry");
	CHECK(v.reserved[0] == 0 && v.reserved[1] == 0, "reserved out");

	b = (struct gdrpin_version_args){ .size = sizeof(b) - 8 };
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_GET_VERSION, &b), EINVAL);
	b = (struct gdrpin_version_args){ .size = sizeof(b), .flags = 1 };
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_GET_VERSION, &b), EINVAL);
	b = (struct gdrpin_version_args){ .size = sizeof(b), .reserved[1] = 1 };
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_GET_VERSION, &b), EINVAL);
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_GET_VERSION, (void *)16), EFAULT);
	close(fd);
}

static void t_unknown_cmd(void)
{
	int fd = open_dev();
	char buf[256] = { 0 };

	CHECK_ERR(ioctl(fd, _IOWR(GDRPIN_IOCTL_TYPE, 0x7f,
				  struct gdrpin_version_args), buf), ENOTTY);
	CHECK_ERR(ioctl(fd, _IOWR(GDRPIN_IOCTL_TYPE + 1, 0x00,
				  struct gdrpin_version_args), buf), ENOTTY);
	/* the right number with a pointer-sized (wrong) struct size */
	CHECK_ERR(ioctl(fd, _IOWR(GDRPIN_IOCTL_TYPE, 0x01, uint64_t), buf),
		  ENOTTY);
	CHECK_ERR(ioctl(fd, _IO(GDRPIN_IOCTL_TYPE, 0x02), buf), ENOTTY);
	CHECK_ERR(ioctl(fd, _IOR(GDRPIN_IOCTL_TYPE, 0x03,
				 struct gdrpin_query_args), buf), ENOTTY);
	close(fd);
}

static void t_pin_basic(void)
{
	int fd = open_dev();
	size_t len = 1 << 20;
	char *buf = gpu_alloc(len);
	long long pins0 = stat_val("pins"), unpins0 = stat_val("unpins");
	struct gdrpin_pin_args a;
	struct gdrpin_query_args q;
	struct gdrpin_stats_args s;
	uint32_t state;

	CHECK_OK(do_pin(fd, buf, len, 0, &a));
	CHECK(a.handle && GDRPIN_HANDLE_GEN(a.handle), "handle %#llx",
	      (unsigned long long)a.handle);
	CHECK(GDRPIN_HANDLE_SLOT(a.handle) == a.slot, "slot in handle");
	CHECK(a.pinned_va == (uintptr_t)buf && a.pinned_len == len, "range");
	CHECK(a.mode == GDRPIN_MODE_PERSISTENT, "mode %u", a.mode);
	CHECK(a.page_size == 4096 && a.entries == len / 4096, "pt %u x %u",
	      a.entries, a.page_size);
	CHECK(!memcmp(a.gpu_uuid, "fake-nvp2p-gpu-0", 16), "uuid");
	CHECK(stat_val("pins") == pins0 + 1, "pins counter");
	CHECK(stat_val("pinned_bytes") == (long long)len, "global bytes");
	CHECK(fake_stat("live_pts") == 1, "provider pinned");
	CHECK(fake_stat("pinned_pages") == (long long)(len / 4096), "pages");

	CHECK_OK(do_query(fd, a.handle, &q));
	CHECK(q.pinned_va == a.pinned_va && q.pinned_len == len &&
	      q.state == GDRPIN_SLOT_ACTIVE && q.mode == a.mode &&
	      q.page_size == 4096 && q.entries == a.entries && q.pin_ns > 0,
	      "query");
	s = get_stats(fd);
	CHECK(s.fd_pins == 1 && s.fd_pinned_bytes == len &&
	      s.global_pinned_bytes == len && s.fd_revoked == 0, "stats");

	CHECK_OK(do_unpin(fd, a.handle, &state));
	CHECK(state == GDRPIN_SLOT_ACTIVE, "unpin state %u", state);
	CHECK_ERR(do_query(fd, a.handle, NULL), ENOENT);
	CHECK(stat_val("unpins") == unpins0 + 1, "unpins counter");
	s = get_stats(fd);
	CHECK(s.fd_pins == 0 && s.fd_pinned_bytes == 0, "stats after");
	CHECK(stat_val("pin_ns_max") > 0 && stat_val("pin_ns_total") > 0, "lat");
	close(fd);
	check_idle();
}

static void t_pin_rounding(void)
{
	int fd = open_dev();
	char *buf = gpu_alloc(4 * KT_ALIGN);
	struct gdrpin_pin_args a;

	CHECK_OK(do_pin(fd, buf + 100, 10, 0, &a));
	CHECK(a.pinned_va == (uintptr_t)buf && a.pinned_len == KT_ALIGN,
	      "small range rounds to one 64K page");
	CHECK_OK(do_pin(fd, buf + KT_ALIGN - 1, 2, 0, &a));
	CHECK(a.pinned_va == (uintptr_t)buf && a.pinned_len == 2 * KT_ALIGN,
	      "straddling range rounds out to two pages");
	CHECK_OK(do_pin(fd, buf + KT_ALIGN, 2 * KT_ALIGN, 0, &a));
	CHECK(a.pinned_va == (uintptr_t)buf + KT_ALIGN &&
	      a.pinned_len == 2 * KT_ALIGN, "aligned range unchanged");
	close(fd);
	check_idle();
}

static void t_pin_legacy(void)
{
	int fd = open_dev();
	char *buf = gpu_alloc(KT_ALIGN);
	struct gdrpin_pin_args a;
	long long g0 = fake_stat("get_pages");

	CHECK_OK(do_pin(fd, buf, KT_ALIGN, GDRPIN_PIN_LEGACY, &a));
	CHECK(a.mode == GDRPIN_MODE_LEGACY, "mode");
	CHECK(fake_stat("get_pages") == g0 + 1, "legacy API used");
	CHECK_OK(do_unpin(fd, a.handle, NULL));
	CHECK_OK(do_pin(fd, buf, KT_ALIGN, GDRPIN_PIN_FORCE_BAR1, &a));
	CHECK(a.mode == GDRPIN_MODE_PERSISTENT, "force bar1 is persistent");
	close(fd);
	check_idle();
}

static void t_pin_fallback(void)
{
	int fd = open_dev();
	char *buf = gpu_alloc(KT_ALIGN);
	struct gdrpin_pin_args a;
	long long fb0 = stat_val("legacy_fallbacks");

	reset_fake();
	fake_set("refuse_persistent", "1");
	CHECK_OK(do_pin(fd, buf, KT_ALIGN, 0, &a));
	CHECK(a.mode == GDRPIN_MODE_LEGACY, "fell back to legacy");
	CHECK(stat_val("legacy_fallbacks") == fb0 + 1, "fallback counted");
	/* FORCE_BAR1 is persistent-only: no fallback */
	CHECK_ERR(do_pin(fd, buf, KT_ALIGN, GDRPIN_PIN_FORCE_BAR1, NULL), EINVAL);
	fake_set("refuse_persistent", "0");
	/* a MIG-like -EINVAL injected into the persistent call only */
	fake_inject(EINVAL, 1);
	CHECK_OK(do_pin(fd, buf, KT_ALIGN, 0, &a));
	CHECK(a.mode == GDRPIN_MODE_LEGACY, "fell back after injected EINVAL");
	close(fd);
	reset_fake();
	check_idle();
}

static void t_pin_invalid(void)
{
	int fd = open_dev();
	char *buf = gpu_alloc(KT_ALIGN);
	struct gdrpin_pin_args a;
	long long inval0 = stat_val("fail_inval");

#define PIN_EXPECT(err, ...) do {					\
		a = (struct gdrpin_pin_args){ .size = sizeof(a),	\
			.va = (uintptr_t)buf, .len = KT_ALIGN };	\
		__VA_ARGS__;						\
		CHECK_ERR(ioctl(fd, GDRPIN_IOC_PIN, &a), err);		\
	} while (0)

	PIN_EXPECT(EINVAL, a.size = sizeof(a) + 8);
	PIN_EXPECT(EINVAL, a.size = 0);
	PIN_EXPECT(EINVAL, a.flags = 1u << 7);
	PIN_EXPECT(EINVAL, a.flags = 1u << 31);
	PIN_EXPECT(EINVAL, a.flags = GDRPIN_PIN_LEGACY | GDRPIN_PIN_FORCE_BAR1);
	PIN_EXPECT(EINVAL, a.reserved[0] = 1);
	PIN_EXPECT(EINVAL, a.reserved[1] = 1ull << 63);
	PIN_EXPECT(EINVAL, a.len = 0);
	PIN_EXPECT(EINVAL, a.va = ~0ull - 100; a.len = 1000);	/* overflow */
	PIN_EXPECT(EINVAL, a.va = ~0ull - 0xffff; a.len = 1);	/* rounds past 2^64 */
	PIN_EXPECT(EINVAL, a.len = ~0ull);			/* huge */
	PIN_EXPECT(EINVAL, a.len = (1ull << 40) + 1);		/* > max_pin_len */
	PIN_EXPECT(EINVAL, a.va = 1ull << 62; a.len = KT_ALIGN);	/* kernel half */
	/* not memory of this process: the provider refuses */
	PIN_EXPECT(EFAULT, a.va = 0x10000; a.len = KT_ALIGN);
	CHECK(stat_val("fail_inval") >= inval0 + 6, "failures counted");
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_PIN, NULL), EFAULT);
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_PIN, (void *)1), EFAULT);
	CHECK(get_stats(fd).fd_pins == 0, "nothing pinned");
	close(fd);
	check_idle();
#undef PIN_EXPECT
}

static void t_unpin_invalid(void)
{
	int fd = open_dev(), fd2 = open_dev();
	char *buf = gpu_alloc(KT_ALIGN);
	struct gdrpin_unpin_args u;
	struct gdrpin_version_args v = get_version(fd);
	uint64_t h = pin_ok(fd, buf, KT_ALIGN, 0);

	u = (struct gdrpin_unpin_args){ .size = sizeof(u) + 1, .handle = h };
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_UNPIN, &u), EINVAL);
	u = (struct gdrpin_unpin_args){ .size = sizeof(u), .handle = h, .flags = 2 };
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_UNPIN, &u), EINVAL);
	u = (struct gdrpin_unpin_args){ .size = sizeof(u), .handle = h, .pad = 1 };
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_UNPIN, &u), EINVAL);
	CHECK_ERR(do_unpin(fd, 0, NULL), ENOENT);
	CHECK_ERR(do_unpin(fd, ~0ull, NULL), ENOENT);
	CHECK_ERR(do_unpin(fd, h + (1ull << GDRPIN_HANDLE_SLOT_BITS), NULL),
		  ENOENT);				/* right slot, wrong gen */
	CHECK_ERR(do_unpin(fd, h ^ 1, NULL), ENOENT);	/* wrong slot */
	CHECK_ERR(do_unpin(fd, (h & ~0xffffull) | v.status_nslots, NULL), ENOENT);
	/* another fd (as another process would have) cannot unpin it */
	CHECK_ERR(do_unpin(fd2, h, NULL), ENOENT);
	CHECK_OK(do_unpin(fd, h, NULL));
	CHECK_ERR(do_unpin(fd, h, NULL), ENOENT);	/* double unpin */
	CHECK_ERR(do_query(fd, h, NULL), ENOENT);	/* stale */
	close(fd);
	close(fd2);
	check_idle();
}

static void t_query_invalid(void)
{
	int fd = open_dev();
	char *buf = gpu_alloc(KT_ALIGN);
	uint64_t h = pin_ok(fd, buf, KT_ALIGN, 0);
	struct gdrpin_query_args q;
	struct gdrpin_stats_args s;
	struct gdrpin_set_eventfd_args e;

	q = (struct gdrpin_query_args){ .size = 8, .handle = h };
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_QUERY, &q), EINVAL);
	q = (struct gdrpin_query_args){ .size = sizeof(q), .handle = h, .flags = 1 };
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_QUERY, &q), EINVAL);
	q = (struct gdrpin_query_args){ .size = sizeof(q), .handle = h,
					.reserved[0] = 9 };
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_QUERY, &q), EINVAL);
	CHECK_ERR(do_query(fd, h + 1, NULL), ENOENT);
	s = (struct gdrpin_stats_args){ .size = sizeof(s), .reserved[1] = 1 };
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_GET_STATS, &s), EINVAL);
	s = (struct gdrpin_stats_args){ .size = sizeof(s), .flags = 4 };
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_GET_STATS, &s), EINVAL);
	s = (struct gdrpin_stats_args){ .size = sizeof(s) * 2 };
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_GET_STATS, &s), EINVAL);
	e = (struct gdrpin_set_eventfd_args){ .size = 0, .fd = -1 };
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_SET_EVENTFD, &e), EINVAL);
	e = (struct gdrpin_set_eventfd_args){ .size = sizeof(e), .fd = -1,
					      .flags = 1 };
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_SET_EVENTFD, &e), EINVAL);
	e = (struct gdrpin_set_eventfd_args){ .size = sizeof(e), .fd = -1, .pad = 1 };
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_SET_EVENTFD, &e), EINVAL);
	e = (struct gdrpin_set_eventfd_args){ .size = sizeof(e), .fd = -2 };
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_SET_EVENTFD, &e), EINVAL);
	e = (struct gdrpin_set_eventfd_args){ .size = sizeof(e), .fd = 999 };
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_SET_EVENTFD, &e), EBADF);
	e = (struct gdrpin_set_eventfd_args){ .size = sizeof(e), .fd = fd };
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_SET_EVENTFD, &e), EINVAL); /* not an eventfd */
	e = (struct gdrpin_set_eventfd_args){ .size = sizeof(e), .fd = -1 };
	CHECK_OK(ioctl(fd, GDRPIN_IOC_SET_EVENTFD, &e));
	close(fd);
	check_idle();
}

static void t_get_revoked_invalid(void)
{
	int fd = open_dev();
	struct gdrpin_version_args v = get_version(fd);
	struct gdrpin_get_revoked_args g;
	uint64_t hs[4];

	g = (struct gdrpin_get_revoked_args){ .size = sizeof(g) - 8 };
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_GET_REVOKED, &g), EINVAL);
	g = (struct gdrpin_get_revoked_args){ .size = sizeof(g), .flags = 1 };
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_GET_REVOKED, &g), EINVAL);
	g = (struct gdrpin_get_revoked_args){ .size = sizeof(g), .count = 1 };
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_GET_REVOKED, &g), EINVAL);
	g = (struct gdrpin_get_revoked_args){ .size = sizeof(g), .max_handles = 2 };
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_GET_REVOKED, &g), EINVAL); /* NULL ptr */
	g = (struct gdrpin_get_revoked_args){ .size = sizeof(g),
		.handles_ptr = (uintptr_t)hs, .max_handles = v.status_nslots + 1 };
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_GET_REVOKED, &g), EINVAL);
	g = (struct gdrpin_get_revoked_args){ .size = sizeof(g),
		.handles_ptr = (uintptr_t)hs, .max_handles = 4 };
	CHECK_OK(ioctl(fd, GDRPIN_IOC_GET_REVOKED, &g));
	CHECK(g.count == 0 && g.pending == 0, "nothing revoked");

	/*
	 * A bad output pointer: EFAULT, and nothing is released: the handle
	 * is still pending and the next call with a good pointer returns it.
	 */
	char *buf = gpu_alloc(KT_ALIGN);
	uint64_t h = pin_ok(fd, buf, KT_ALIGN, GDRPIN_PIN_LEGACY);

	fake_free(buf, KT_ALIGN);
	g = (struct gdrpin_get_revoked_args){ .size = sizeof(g),
		.handles_ptr = 8, .max_handles = 4 };
	CHECK_ERR(ioctl(fd, GDRPIN_IOC_GET_REVOKED, &g), EFAULT);
	CHECK(get_stats(fd).fd_pins == 1 && get_stats(fd).fd_revoked == 1,
	      "EFAULT kept the revoked handle");
	memset(hs, 0xcc, sizeof(hs));
	g = (struct gdrpin_get_revoked_args){ .size = sizeof(g),
		.handles_ptr = (uintptr_t)hs, .max_handles = 4 };
	CHECK_OK(ioctl(fd, GDRPIN_IOC_GET_REVOKED, &g));
	CHECK(g.count == 1 && g.pending == 0 && hs[0] == h,
	      "count %u pending %llu handle %#llx want %#llx", g.count,
	      (unsigned long long)g.pending, (unsigned long long)hs[0],
	      (unsigned long long)h);
	CHECK(get_stats(fd).fd_pins == 0, "released after the good call");
	close(fd);
	check_idle();
}

static void t_handles_unique(void)
{
	int fd = open_dev();
	char *buf = gpu_alloc(KT_ALIGN);
	uint64_t prev = 0, h, first_slot = ~0ull;
	int i;

	for (i = 0; i < 2000; i++) {
		h = pin_ok(fd, buf, KT_ALIGN, i & 1 ? GDRPIN_PIN_LEGACY : 0);
		CHECK(h != prev && GDRPIN_HANDLE_GEN(h) > GDRPIN_HANDLE_GEN(prev),
		      "handle reused or not increasing");
		if (first_slot == ~0ull)
			first_slot = GDRPIN_HANDLE_SLOT(h);
		CHECK(GDRPIN_HANDLE_SLOT(h) == first_slot, "slot is reused");
		CHECK_OK(do_unpin(fd, h, NULL));
		CHECK_ERR(do_unpin(fd, prev, NULL), ENOENT);
		prev = h;
	}
	close(fd);
	check_idle();
}

static void t_slots_exhausted(void)
{
	int fd = open_dev();
	char *buf = gpu_alloc(KT_ALIGN);
	struct gdrpin_version_args v = get_version(fd);
	uint32_t i;

	/* the same 64 KiB may be pinned many times */
	for (i = 0; i < v.status_nslots; i++)
		pin_ok(fd, buf, KT_ALIGN, 0);
	CHECK_ERR(do_pin(fd, buf, KT_ALIGN, 0, NULL), ENOBUFS);
	CHECK(get_stats(fd).fd_pins == v.status_nslots, "all slots used");
	close(fd);
	check_idle();
}

static void t_status_page(void)
{
	int fd = open_dev();
	char *buf = gpu_alloc(KT_ALIGN);
	size_t len;
	volatile struct gdrpin_status_header *hd = map_status(fd, &len);
	volatile struct gdrpin_status_slot *s;
	uint64_t h;
	void *p;

	CHECK(hd->magic == GDRPIN_STATUS_MAGIC && hd->abi_version ==
	      GDRPIN_ABI_VERSION && hd->header_size == sizeof(*hd) &&
	      hd->slot_size == sizeof(*s) && hd->nslots > 0 &&
	      hd->revoke_count == 0, "header");
	h = pin_ok(fd, buf, KT_ALIGN, 0);
	s = slot_of(hd, h);
	CHECK(s->gen == GDRPIN_HANDLE_GEN(h) && s->state == GDRPIN_SLOT_ACTIVE,
	      "slot active");
	CHECK_OK(do_unpin(fd, h, NULL));
	CHECK(s->state == GDRPIN_SLOT_FREE, "slot freed");
	/* read-only, offset 0 only, not larger than the area */
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(p == MAP_FAILED && errno == EPERM, "writable mapping refused");
	CHECK(mprotect((void *)hd, len, PROT_READ | PROT_WRITE) == -1,
	      "mprotect to writable refused");
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 4096);
	CHECK(p == MAP_FAILED && errno == EINVAL, "offset != 0 refused");
	p = mmap(NULL, len + 4096, PROT_READ, MAP_SHARED, fd, 0);
	CHECK(p == MAP_FAILED && errno == EINVAL, "oversized refused");
	munmap((void *)hd, len);
	close(fd);
	check_idle();
}

static void t_revoke(void)
{
	int fd = open_dev();
	char *buf = gpu_alloc(4 * KT_ALIGN);
	volatile struct gdrpin_status_header *hd = map_status(fd, NULL);
	struct gdrpin_set_eventfd_args e = { .size = sizeof(e) };
	struct gdrpin_get_revoked_args g = { .size = sizeof(g) };
	struct gdrpin_query_args q;
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	long long rev0 = stat_val("revocations");
	uint64_t h, h2, got[4], cnt, sum;
	int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	CHECK(efd >= 0, "eventfd");
	e.fd = efd;
	CHECK_OK(ioctl(fd, GDRPIN_IOC_SET_EVENTFD, &e));
	h = pin_ok(fd, buf, 2 * KT_ALIGN, GDRPIN_PIN_LEGACY);
	h2 = pin_ok(fd, buf + 2 * KT_ALIGN, 2 * KT_ALIGN, GDRPIN_PIN_LEGACY);
	CHECK(poll(&pfd, 1, 0) == 0, "no event before revocation");
	CHECK(read(efd, &cnt, 8) == -1 && errno == EAGAIN, "eventfd quiet");
	CHECK(consumer_read(getpid(), buf, 100, &sum) == 0, "consumer sees pin");

	/* cuMemFree of the first buffer */
	fake_free(buf, 2 * KT_ALIGN);
	CHECK(hd->revoke_count == 1, "revoke_count %llu",
	      (unsigned long long)hd->revoke_count);
	CHECK(slot_of(hd, h)->state == GDRPIN_SLOT_REVOKED, "slot revoked");
	CHECK(slot_of(hd, h2)->state == GDRPIN_SLOT_ACTIVE, "other slot active");
	CHECK(poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN), "POLLIN");
	CHECK(read(efd, &cnt, 8) == 8 && cnt == 1, "eventfd signalled");
	CHECK_OK(do_query(fd, h, &q));
	CHECK(q.state == GDRPIN_SLOT_REVOKED, "query says revoked");
	CHECK(get_stats(fd).fd_revoked == 1, "fd_revoked");
	CHECK(stat_val("revocations") == rev0 + 1, "revocations counter");
	CHECK(consumer_read(getpid(), buf, 100, &sum) == -ENOENT,
	      "revoked range not found by kapi");
	CHECK(fake_stat("zombie_pts") == 0, "callback freed the page table");

	g.handles_ptr = (uintptr_t)got;
	g.max_handles = 4;
	CHECK_OK(ioctl(fd, GDRPIN_IOC_GET_REVOKED, &g));
	CHECK(g.count == 1 && got[0] == h && g.pending == 0, "drained");
	CHECK_ERR(do_query(fd, h, NULL), ENOENT);
	CHECK_ERR(do_unpin(fd, h, NULL), ENOENT);
	CHECK(slot_of(hd, h)->state == GDRPIN_SLOT_FREE, "slot free");
	pfd.revents = 0;
	CHECK(poll(&pfd, 1, 0) == 0, "no more events");

	/* second revocation acknowledged through UNPIN instead */
	fake_free(buf + 2 * KT_ALIGN, KT_ALIGN);
	CHECK(hd->revoke_count == 2, "second revocation");
	uint32_t st;

	CHECK_OK(do_unpin(fd, h2, &st));
	CHECK(st == GDRPIN_SLOT_REVOKED, "unpin reports revoked");
	CHECK(get_stats(fd).fd_revoked == 0, "acked");
	CHECK(get_stats(fd).fd_revocations == 2, "fd revocations");
	close(fd);
	close(efd);
	check_idle();
}

static void t_revoke_persistent(void)
{
	int fd = open_dev();
	char *buf = gpu_alloc(KT_ALIGN);
	volatile struct gdrpin_status_header *hd = map_status(fd, NULL);
	long long sk0 = fake_stat("persistent_free_skipped");
	uint64_t h = pin_ok(fd, buf, KT_ALIGN, 0);

	fake_free(buf, KT_ALIGN);
	CHECK(fake_stat("persistent_free_skipped") == sk0 + 1, "skipped");
	CHECK(hd->revoke_count == 0 && slot_of(hd, h)->state ==
	      GDRPIN_SLOT_ACTIVE, "persistent pins are not revoked");
	/* the mapping holds the file: unmap, or close() releases nothing */
	munmap((void *)hd, get_version(fd).status_map_size);
	close(fd);
	check_idle();
}

static void *poll_thread(void *arg)
{
	struct pollfd pfd = { .fd = *(int *)arg, .events = POLLIN };

	return (void *)(long)poll(&pfd, 1, 10000);
}

static void t_poll_wakeup(void)
{
	int fd = open_dev();
	char *buf = gpu_alloc(KT_ALIGN);
	pthread_t th;
	void *ret;

	pin_ok(fd, buf, KT_ALIGN, GDRPIN_PIN_LEGACY);
	CHECK_OK(pthread_create(&th, NULL, poll_thread, &fd));
	usleep(200000);
	fake_free(buf, KT_ALIGN);
	CHECK_OK(pthread_join(th, &ret));
	CHECK((long)ret == 1, "poll woke up with an event (%ld)", (long)ret);
	close(fd);
	check_idle();
}

static void t_fork_child(void)
{
	int fd = open_dev();
	char *buf = gpu_alloc(KT_ALIGN);
	uint64_t h = pin_ok(fd, buf, KT_ALIGN, 0);
	int status;
	pid_t pid = fork();

	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		struct gdrpin_version_args v = { .size = sizeof(v) };
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int own;

		CHECK_ERR(ioctl(fd, GDRPIN_IOC_GET_VERSION, &v), EACCES);
		CHECK_ERR(do_pin(fd, buf, KT_ALIGN, 0, NULL), EACCES);
		CHECK_ERR(do_unpin(fd, h, NULL), EACCES);
		CHECK_ERR(do_query(fd, h, NULL), EACCES);
		CHECK(mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED &&
		      errno == EACCES, "mmap refused");
		CHECK(poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLERR), "POLLERR");
		/* its own fd works but cannot reach the parent's pin */
		own = open_dev();
		CHECK_ERR(do_unpin(own, h, NULL), ENOENT);
		close(own);
		close(fd);	/* not the last reference: parent's pin stays */
		_exit(0);
	}
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	      WEXITSTATUS(status) == 0, "child checks");
	CHECK_OK(do_query(fd, h, NULL));
	CHECK_OK(do_unpin(fd, h, NULL));
	close(fd);
	check_idle();
}

static void send_fd(int sock, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	char c = 'x';
	struct iovec iov = { .iov_base = &c, .iov_len = 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	CHECK(sendmsg(sock, &m, 0) == 1, "sendmsg");
}

static int recv_fd(int sock)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	char c;
	struct iovec iov = { .iov_base = &c, .iov_len = 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	int fd;

	CHECK(recvmsg(sock, &m, 0) == 1, "recvmsg");
	cm = CMSG_FIRSTHDR(&m);
	CHECK(cm && cm->cmsg_type == SCM_RIGHTS, "SCM_RIGHTS");
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

static void t_scm_rights(void)
{
	int sv[2], status, fd;
	char *buf = gpu_alloc(KT_ALIGN);
	pid_t pid;
	uint64_t h;

	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		uint64_t hh;
		int rfd = recv_fd(sv[1]);

		CHECK(read(sv[1], &hh, 8) == 8, "handle");
		CHECK_ERR(do_query(rfd, hh, NULL), EACCES);
		CHECK_ERR(do_unpin(rfd, hh, NULL), EACCES);
		CHECK_ERR(do_pin(rfd, buf, KT_ALIGN, 0, NULL), EACCES);
		CHECK(mmap(NULL, 4096, PROT_READ, MAP_SHARED, rfd, 0) ==
		      MAP_FAILED && errno == EACCES, "mmap refused");
		_exit(0);
	}
	fd = open_dev();		/* opened after fork: not inherited */
	h = pin_ok(fd, buf, KT_ALIGN, 0);
	send_fd(sv[0], fd);
	CHECK(write(sv[0], &h, 8) == 8, "send handle");
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	      WEXITSTATUS(status) == 0, "receiver checks");
	CHECK_OK(do_unpin(fd, h, NULL));
	close(fd);
	check_idle();
}

static void *thread_pin(void *arg)
{
	int fd = *(int *)arg, i;
	char *buf = gpu_alloc(KT_ALIGN);

	for (i = 0; i < 50; i++)
		CHECK_OK(do_unpin(fd, pin_ok(fd, buf, KT_ALIGN, i & 1), NULL));
	return NULL;
}

static void t_threads_same_process(void)
{
	int fd = open_dev(), i;
	pthread_t th[4];

	for (i = 0; i < 4; i++)
		CHECK_OK(pthread_create(&th[i], NULL, thread_pin, &fd));
	for (i = 0; i < 4; i++)
		CHECK_OK(pthread_join(th[i], NULL));
	close(fd);
	check_idle();
}

static void t_exit_releases(void)
{
	int p[2], status;
	pid_t pid;
	char c;

	CHECK_OK(pipe(p));
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		int fd = open_dev(), i, cfd;
		char *buf = gpu_alloc(16 * KT_ALIGN);

		map_status(fd, NULL);
		for (i = 0; i < 16; i++)
			pin_ok(fd, buf + i * KT_ALIGN, KT_ALIGN,
			       i & 1 ? GDRPIN_PIN_LEGACY : 0);
		fake_free(buf, 2 * KT_ALIGN);	/* one revoked, not acked */
		cfd = consumer_hold(getpid(), buf + 4 * KT_ALIGN, 100);
		(void)cfd;	/* consumer holds a kapi ref + DMA map */
		CHECK(write(p[1], "r", 1) == 1, "ready");
		pause();
		_exit(0);
	}
	close(p[1]);
	CHECK(read(p[0], &c, 1) == 1, "child ready");
	CHECK(stat_val("live_pins") == 16, "child pins live");
	CHECK(fake_stat("live_maps") == 1, "consumer mapped");
	kill(pid, SIGKILL);
	CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status), "killed");
	check_idle();
	CHECK(stat_val("live_ctx") == 0, "context freed");
}

/*
 * The opener exits while a child it forked still holds the fd: the
 * opener's pins go with its address space, not with the last fd reference
 * (persistent pins have no free callback that would ever release them).
 */
static void t_fork_parent_exit(void)
{
	int p[2], status, i;
	pid_t opener, holder;

	CHECK_OK(prctl(PR_SET_CHILD_SUBREAPER, 1));	/* the holder comes back here */
	CHECK_OK(pipe(p));
	opener = fork();
	CHECK(opener >= 0, "fork");
	if (opener == 0) {
		int fd = open_dev();
		char *buf = gpu_alloc(4 * KT_ALIGN);
		pid_t c;

		map_status(fd, NULL);
		for (i = 0; i < 4; i++)
			pin_ok(fd, buf + i * KT_ALIGN, KT_ALIGN,
			       i & 1 ? GDRPIN_PIN_LEGACY : 0);
		c = fork();
		CHECK(c >= 0, "fork holder");
		if (c == 0) {
			for (;;)
				pause();	/* holds the inherited fd */
		}
		CHECK(write(p[1], &c, sizeof(c)) == sizeof(c), "holder pid");
		_exit(0);
	}
	close(p[1]);
	CHECK(read(p[0], &holder, sizeof(holder)) == sizeof(holder), "holder");
	CHECK(waitpid(opener, &status, 0) == opener && WIFEXITED(status) &&
	      WEXITSTATUS(status) == 0, "opener exited");
	/* The fd (and its context) is alive in the holder, the pins are not. */
	for (i = 0; i < 100 && stat_val("live_pins"); i++)
		usleep(20000);
	CHECK(kill(holder, 0) == 0, "holder alive");
	CHECK(stat_val("live_ctx") == 1, "holder keeps the context: %lld",
	      stat_val("live_ctx"));
	CHECK(stat_val("live_pins") == 0, "opener's pins outlive it: %lld",
	      stat_val("live_pins"));
	CHECK(stat_val("pinned_bytes") == 0, "pinned_bytes");
	CHECK(fake_stat("pinned_pages") == 0, "provider still pins pages");
	kill(holder, SIGKILL);
	CHECK(waitpid(holder, &status, 0) == holder, "holder reaped");
	check_idle();
	CHECK(stat_val("live_ctx") == 0, "context freed");
}

/* A child that drops to @uid (group @gid for /dev/gdrpin, as udev does). */
static pid_t fork_as(uid_t uid, gid_t gid)
{
	pid_t pid = fork();

	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		CHECK_OK(setgroups(1, &gid));
		CHECK_OK(setresgid(gid, gid, gid));
		CHECK_OK(setresuid(uid, uid, uid));
	}
	return pid;
}

static void wait_ok(pid_t pid, const char *what)
{
	int status;

	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	      WEXITSTATUS(status) == 0, "%s", what);
}

#define USER_GID 4242

static pid_t user_limits_pid;

static void user_limits_restore(void)
{
	if (getpid() != user_limits_pid)
		return;		/* a child's exit: the case is not over */
	set_param("max_user_contexts", "256");
	set_param("max_user_pinned_bytes", "0");
	if (chown("/dev/gdrpin", 0, 0))
		perror("chown /dev/gdrpin");
}

/*
 * Per-uid limits: one uid cannot pin more than max_user_pinned_bytes nor
 * hold more than max_user_contexts open fds, whatever others do.
 */
static void t_user_limits(void)
{
	int p[2], fds[4], i;
	char *buf = gpu_alloc(1 << 20);
	pid_t a, b;
	char c;

	user_limits_pid = getpid();
	CHECK_OK(atexit(user_limits_restore));
	CHECK_OK(chown("/dev/gdrpin", 0, USER_GID));
	set_param("max_user_pinned_bytes", "524288");
	set_param("max_user_contexts", "3");
	CHECK_OK(pipe(p));

	a = fork_as(1000, USER_GID);
	if (a == 0) {
		for (i = 0; i < 3; i++)
			fds[i] = open_dev();
		errno = 0;
		CHECK(open("/dev/gdrpin", O_RDWR) == -1 && errno == EMFILE,
		      "fourth fd of uid 1000");
		pin_ok(fds[0], buf, 256 << 10, 0);
		pin_ok(fds[1], buf, 256 << 10, GDRPIN_PIN_LEGACY); /* full */
		CHECK_ERR(do_pin(fds[2], buf, KT_ALIGN, 0, NULL), ENOSPC);
		close(fds[2]);
		fds[2] = open_dev();	/* a closed fd frees its place */
		CHECK(write(p[1], "x", 1) == 1, "ready");
		pause();
		_exit(0);
	}
	close(p[1]);
	CHECK(read(p[0], &c, 1) == 1, "uid 1000 ready");
	/* uid 1000 is at both limits; uid 1001 has its own */
	b = fork_as(1001, USER_GID);
	if (b == 0) {
		for (i = 0; i < 3; i++)
			fds[i] = open_dev();
		pin_ok(fds[0], buf, 512 << 10, 0);
		CHECK_ERR(do_pin(fds[1], buf, KT_ALIGN, 0, NULL), ENOSPC);
		_exit(0);
	}
	wait_ok(b, "uid 1001 checks");
	/* root is a uid like the others */
	for (i = 0; i < 3; i++)
		fds[i] = open_dev();
	CHECK_ERR(open("/dev/gdrpin", O_RDWR), EMFILE);
	for (i = 0; i < 3; i++)
		close(fds[i]);
	kill(a, SIGKILL);
	waitpid(a, NULL, 0);
	user_limits_restore();
	check_idle();
}

static void t_close_releases(void)
{
	int fd = open_dev(), i;
	char *buf = gpu_alloc(8 * KT_ALIGN);

	for (i = 0; i < 8; i++)
		pin_ok(fd, buf + i * KT_ALIGN, KT_ALIGN, i & 1);
	CHECK(stat_val("pinned_bytes") == (long long)(8 * KT_ALIGN), "bytes");
	close(fd);
	check_idle();
}

static void t_quota(void)
{
	int fd = open_dev();
	char *buf = gpu_alloc(1 << 20);
	long long nospc0 = stat_val("fail_nospc");
	uint64_t h;

	set_param("max_pinned_bytes", "1048576");
	h = pin_ok(fd, buf, 512 << 10, 0);
	CHECK_ERR(do_pin(fd, buf, 1 << 20, 0, NULL), ENOSPC);
	CHECK(stat_val("fail_nospc") == nospc0 + 1, "counted");
	CHECK(get_stats(fd).max_pinned_bytes == 1 << 20, "quota visible");
	pin_ok(fd, buf, 512 << 10, GDRPIN_PIN_LEGACY);	/* exactly full */
	CHECK_ERR(do_pin(fd, buf, KT_ALIGN, 0, NULL), ENOSPC);
	CHECK_OK(do_unpin(fd, h, NULL));
	pin_ok(fd, buf, KT_ALIGN, 0);
	set_param("max_pinned_bytes", "0");
	close(fd);
	check_idle();
}

static void t_inject_errors(void)
{
	int fd = open_dev();
	char *buf = gpu_alloc(KT_ALIGN);
	long long nomem0 = stat_val("fail_nomem");

	reset_fake();
	fake_inject(ENOMEM, 1);
	CHECK_ERR(do_pin(fd, buf, KT_ALIGN, 0, NULL), ENOMEM);
	CHECK(stat_val("fail_nomem") == nomem0 + 1, "counted");
	fake_inject(EINVAL, 2);	/* persistent and the legacy retry fail */
	CHECK_ERR(do_pin(fd, buf, KT_ALIGN, 0, NULL), EINVAL);
	fake_inject(EIO, 1);	/* not a fallback errno */
	CHECK_ERR(do_pin(fd, buf, KT_ALIGN, 0, NULL), EIO);
	fake_inject(ENOMEM, 1);
	CHECK_ERR(do_pin(fd, buf, KT_ALIGN, GDRPIN_PIN_LEGACY, NULL), ENOMEM);
	pin_ok(fd, buf, KT_ALIGN, 0);
	CHECK(get_stats(fd).fd_pins == 1, "failed pins left nothing");
	close(fd);
	check_idle();
}

static void t_pt_version(void)
{
	int fd = open_dev();
	char *buf = gpu_alloc(KT_ALIGN);

	reset_fake();
	fake_set("pt_version", "0x30000");
	CHECK_ERR(do_pin(fd, buf, KT_ALIGN, 0, NULL), EPROTO);
	CHECK_ERR(do_pin(fd, buf, KT_ALIGN, GDRPIN_PIN_LEGACY, NULL), EPROTO);
	fake_set("pt_version", "0x10000");	/* 1.0 predates gpu_uuid */
	CHECK_ERR(do_pin(fd, buf, KT_ALIGN, 0, NULL), EPROTO);
	fake_set("pt_version", "0x10002");	/* 1.2: accepted */
	pin_ok(fd, buf, KT_ALIGN, 0);
	fake_set("pt_version", "0x20001");	/* 2.x: accepted */
	pin_ok(fd, buf, KT_ALIGN, GDRPIN_PIN_LEGACY);
	reset_fake();
	close(fd);
	check_idle();
}

static void t_consumer_read(void)
{
	int fd = open_dev();
	size_t len = 4 << 20;
	char *buf = gpu_alloc(len);
	uint64_t sum;
	int i;

	fill_random(buf, len, 42);
	pin_ok(fd, buf, 1 << 20, 0);
	pin_ok(fd, buf + (1 << 20), 2 << 20, GDRPIN_PIN_LEGACY);
	for (i = 0; i < 40; i++) {
		size_t off = (size_t)rand() % (1 << 20);
		size_t n = 1 + (size_t)rand() % ((1 << 20) - off);
		char *base = buf + (i & 1 ? (1 << 20) : 0);

		CHECK(consumer_read(getpid(), base + off, n, &sum) == 0, "read");
		CHECK(sum == fnv1a(base + off, n), "data at %zu+%zu differs", off, n);
	}
	/* the consumer reads the live pages, not a copy */
	memset(buf + 5000, 0x3c, 100);
	CHECK(consumer_read(getpid(), buf + 4096, 8192, &sum) == 0 &&
	      sum == fnv1a(buf + 4096, 8192), "sees new data");
	CHECK(consumer_read(getpid(), buf, 1 << 20, &sum) == 0 &&
	      sum == fnv1a(buf, 1 << 20), "whole range");
	/* misses */
	CHECK(consumer_read(getpid(), buf + (3 << 20), 10, &sum) == -ENOENT,
	      "unpinned range");
	CHECK(consumer_read(getpid(), buf + (1 << 20) - 10, 20, &sum) == -ENOENT,
	      "range across two pins");
	CHECK(consumer_read(getppid(), buf, 10, &sum) == -ENOENT,
	      "other process");
	CHECK(consumer_read(999999, buf, 10, &sum) == -ESRCH, "no such pid");
	close(fd);
	check_idle();
}

static void t_consumer_revoke(void)
{
	int fd = open_dev(), cfd, rev, reason;
	char *buf = gpu_alloc(2 * KT_ALIGN);
	uint64_t h1, h2;

	h1 = pin_ok(fd, buf, KT_ALIGN, GDRPIN_PIN_LEGACY);
	h2 = pin_ok(fd, buf + KT_ALIGN, KT_ALIGN, GDRPIN_PIN_LEGACY);
	(void)h1;

	/* revocation by the driver while the consumer holds a DMA map */
	cfd = consumer_hold(getpid(), buf, 100);
	consumer_status(cfd, &rev, &reason);
	CHECK(rev == 0, "not revoked yet");
	CHECK(fake_stat("live_maps") == 1, "mapped");
	fake_free(buf, KT_ALIGN);
	consumer_status(cfd, &rev, &reason);
	CHECK(rev == 1 && reason == 1, "notified: freed (%d %d)", rev, reason);
	CHECK(fake_stat("dead_maps") == 0 && fake_stat("zombie_pts") == 0,
	      "gdrpin freed the mapping and the page table in the callback");
	CHECK(write(cfd, "release", 7) == 7, "release");
	close(cfd);

	/* unpin by the owner while the consumer holds a DMA map */
	cfd = consumer_hold(getpid(), buf + KT_ALIGN, 100);
	CHECK_OK(do_unpin(fd, h2, NULL));
	consumer_status(cfd, &rev, &reason);
	CHECK(rev == 1 && reason == 2, "notified: unpinned (%d %d)", rev, reason);
	CHECK(fake_stat("live_maps") == 0, "gdrpin unmapped before put_pages");
	close(cfd);		/* release without explicit command */

	/* close of the owner's fd while held */
	h2 = pin_ok(fd, buf, 2 * KT_ALIGN, 0);
	cfd = consumer_hold(getpid(), buf, 2 * KT_ALIGN);
	close(fd);
	consumer_status(cfd, &rev, &reason);
	CHECK(rev == 1 && reason == 2, "notified at close");
	CHECK(stat_val("kapi_refs") == 1, "consumer still holds a reference");
	close(cfd);
	check_idle();
}

static void t_unload_busy(void)
{
	int fd = open_dev();
	char *buf = gpu_alloc(KT_ALIGN);
	char rc[32];

	pin_ok(fd, buf, KT_ALIGN, GDRPIN_PIN_LEGACY);
	CHECK(system("rmmod gdrpin 2>/dev/null") != 0, "rmmod refused");
	CHECK(system("rmmod fake_nvp2p 2>/dev/null") != 0,
	      "provider held while pins exist");
	CHECK(read_file("/sys/module/gdrpin/refcnt", rc, sizeof(rc)) == 0 &&
	      atoi(rc) >= 1, "refcnt %s", rc);
	CHECK_OK(do_query(fd, pin_ok(fd, buf, KT_ALIGN, 0), NULL));
	close(fd);
	check_idle();
}

/* unpin racing the free callback; put_pages is slowed down to widen it */
struct race_arg {
	int fd;
	uint64_t h;
	char *buf;
};

static void *race_unpin(void *p)
{
	struct race_arg *a = p;
	uint32_t st;

	CHECK_OK(do_unpin(a->fd, a->h, &st));
	return NULL;
}

static void *race_free(void *p)
{
	struct race_arg *a = p;

	usleep(rand() % 3000);
	fake_free(a->buf, KT_ALIGN);
	return NULL;
}

static void t_race_unpin_callback(void)
{
	int fd = open_dev(), i;
	char *buf = gpu_alloc(KT_ALIGN);
	struct race_arg a = { .fd = fd, .buf = buf };
	pthread_t t1, t2;

	reset_fake();
	fake_set("put_delay_ms", "2");
	for (i = 0; i < 60; i++) {
		a.h = pin_ok(fd, buf, KT_ALIGN, GDRPIN_PIN_LEGACY);
		CHECK_OK(pthread_create(&t1, NULL, race_unpin, &a));
		CHECK_OK(pthread_create(&t2, NULL, race_free, &a));
		pthread_join(t1, NULL);
		pthread_join(t2, NULL);
		CHECK(fake_stat("errors") == 0, "misuse at iteration %d", i);
	}
	reset_fake();
	CHECK(get_stats(fd).fd_pins == 0, "all gone");
	close(fd);
	check_idle();
}

/*
 * A kernel consumer unmaps its DMA mapping while the memory is freed: the
 * revocation takes the mapping first, the unmap fails, and the mapping must
 * still be freed (free_dma_mapping) exactly once.
 */
static void *race_consumer(void *p)
{
	struct race_arg *a = p;
	uint64_t sum;

	consumer_read(getpid(), a->buf, KT_ALIGN, &sum);
	return NULL;
}

static void t_race_unmap_callback(void)
{
	int fd = open_dev(), i;
	char *buf = gpu_alloc(KT_ALIGN);
	struct race_arg a = { .fd = fd, .buf = buf };
	pthread_t t1, t2;

	reset_fake();
	fake_set("unmap_delay_ms", "2");
	for (i = 0; i < 60; i++) {
		uint32_t st;

		a.h = pin_ok(fd, buf, KT_ALIGN, GDRPIN_PIN_LEGACY);
		CHECK_OK(pthread_create(&t1, NULL, race_consumer, &a));
		CHECK_OK(pthread_create(&t2, NULL, race_free, &a));
		pthread_join(t1, NULL);
		pthread_join(t2, NULL);
		CHECK(do_unpin(fd, a.h, &st) == 0 || errno == ENOENT,
		      "unpin at iteration %d", i);
		CHECK(fake_stat("errors") == 0, "misuse at iteration %d", i);
		CHECK(fake_stat("dead_maps") == 0 && fake_stat("live_maps") == 0,
		      "mapping left at iteration %d (dead %lld live %lld)", i,
		      fake_stat("dead_maps"), fake_stat("live_maps"));
	}
	reset_fake();
	CHECK(get_stats(fd).fd_pins == 0, "all gone");
	close(fd);
	check_idle();
}

/* --- concurrency: processes x threads pin, unpin, revoke, close --------- */

#define CONC_SECONDS 5
#define CONC_PROCS 4
#define CONC_THREADS 3
#define CONC_BUF (32 * KT_ALIGN)

struct conc {
	int fd;
	char *buf;
	pthread_mutex_t lock;
	uint64_t handles[64];
	uint64_t deadline;
	unsigned long ops;
};

static void *conc_thread(void *p)
{
	struct conc *c = p;
	unsigned int seed = (unsigned int)pthread_self() ^ getpid();

	while (now_ns() < c->deadline) {
		int op = rand_r(&seed) % 10, idx = rand_r(&seed) % 64;
		uint64_t off = (rand_r(&seed) % 32) * KT_ALIGN;
		uint64_t len = (1 + rand_r(&seed) % 4) * KT_ALIGN, h, sum;

		if (off + len > CONC_BUF)
			len = CONC_BUF - off;
		switch (op) {
		case 0: case 1: case 2: {
			struct gdrpin_pin_args a;

			if (do_pin(c->fd, c->buf + off, len, rand_r(&seed) & 1, &a))
				break;
			pthread_mutex_lock(&c->lock);
			h = c->handles[idx];
			c->handles[idx] = a.handle;
			pthread_mutex_unlock(&c->lock);
			if (h)
				do_unpin(c->fd, h, NULL);
			break;
		}
		case 3: case 4:
			pthread_mutex_lock(&c->lock);
			h = c->handles[idx];
			c->handles[idx] = 0;
			pthread_mutex_unlock(&c->lock);
			if (h) {
				int r = do_unpin(c->fd, h, NULL);

				/* ENOENT: drained as revoked by another thread */
				CHECK(r == 0 || errno == ENOENT, "unpin");
			}
			break;
		case 5:
			fake_free(c->buf + off, len);
			break;
		case 6: {
			struct gdrpin_get_revoked_args g = { .size = sizeof(g) };
			uint64_t got[8];

			g.handles_ptr = (uintptr_t)got;
			g.max_handles = 8;
			CHECK_OK(ioctl(c->fd, GDRPIN_IOC_GET_REVOKED, &g));
			break;
		}
		case 7:
			consumer_read(getpid(), c->buf + off, 4096, &sum);
			break;
		case 8:
			pthread_mutex_lock(&c->lock);
			h = c->handles[idx];
			pthread_mutex_unlock(&c->lock);
			do_query(c->fd, h, NULL);
			break;
		case 9:
			get_stats(c->fd);
			break;
		}
		c->ops++;
	}
	return NULL;
}

static void conc_process(int id)
{
	struct conc c = { .lock = PTHREAD_MUTEX_INITIALIZER };
	pthread_t th[CONC_THREADS];
	uint64_t end = now_ns() + CONC_SECONDS * 1000000000ull;
	unsigned long ops = 0;
	int i, round = 0;

	c.buf = gpu_alloc(CONC_BUF);
	/* reopen the fd every 0.5 s with pins still live */
	while (now_ns() < end) {
		c.fd = open_dev();
		memset(c.handles, 0, sizeof(c.handles));
		c.deadline = now_ns() + 500000000ull;
		if (c.deadline > end)
			c.deadline = end;
		for (i = 0; i < CONC_THREADS; i++)
			CHECK_OK(pthread_create(&th[i], NULL, conc_thread, &c));
		for (i = 0; i < CONC_THREADS; i++)
			pthread_join(th[i], NULL);
		ops += c.ops;
		c.ops = 0;
		close(c.fd);
		round++;
	}
	printf("proc %d: %lu ops in %d rounds\n", id, ops, round);
	exit(0);
}

static void t_concurrency(void)
{
	pid_t pids[CONC_PROCS];
	int i, status;

	reset_fake();
	fake_set("put_delay_ms", "1");
	for (i = 0; i < CONC_PROCS; i++) {
		pids[i] = fork();
		CHECK(pids[i] >= 0, "fork");
		if (pids[i] == 0)
			conc_process(i);
	}
	/* one worker dies mid-run with pins, revocations and threads live */
	usleep(CONC_SECONDS * 1000000 / 2);
	kill(pids[0], SIGKILL);
	CHECK(waitpid(pids[0], &status, 0) == pids[0] && WIFSIGNALED(status),
	      "worker 0 killed");
	for (i = 1; i < CONC_PROCS; i++)
		CHECK(waitpid(pids[i], &status, 0) == pids[i] &&
		      WIFEXITED(status) && WEXITSTATUS(status) == 0, "worker %d", i);
	reset_fake();
	printf("revocations %lld pins %lld unpins %lld\n", stat_val("revocations"),
	       stat_val("pins"), stat_val("unpins"));
	check_idle();
}

/* --- fuzz ---------------------------------------------------------------- */

static uint64_t xs64(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void t_fuzz(void)
{
	static const unsigned long cmds[] = {
		GDRPIN_IOC_GET_VERSION, GDRPIN_IOC_PIN, GDRPIN_IOC_UNPIN,
		GDRPIN_IOC_QUERY, GDRPIN_IOC_GET_REVOKED, GDRPIN_IOC_SET_EVENTFD,
		GDRPIN_IOC_GET_STATS,
	};
	const char *env = getenv("GDRPIN_FUZZ_SEED");
	uint64_t seed = env ? strtoull(env, NULL, 0) : 0x6764727069ull;
	uint64_t s = seed, handles[32] = { 0 };
	int fd = open_dev(), i, ok = 0;
	size_t blen = 16 * KT_ALIGN;
	char *buf = gpu_alloc(blen);
	uint64_t arg[16];

	printf("fuzz seed %#llx, 20000 calls\n", (unsigned long long)seed);
	for (i = 0; i < 20000; i++) {
		uint64_t r = xs64(&s);
		unsigned long cmd;
		int j;

		if (r % 8 == 0)
			cmd = _IOC(r >> 8 & 3, (r >> 10) % 2 ? GDRPIN_IOCTL_TYPE :
				   (r >> 11) & 0xff, (r >> 20) & 0xff,
				   (r >> 30) & 0x3fff);
		else
			cmd = cmds[(r >> 3) % (sizeof(cmds) / sizeof(cmds[0]))];
		for (j = 0; j < 16; j++)
			arg[j] = (xs64(&s) % 4 == 0) ? xs64(&s) : 0;
		/* mostly well-formed headers and plausible fields */
		if (xs64(&s) % 4)
			arg[0] = _IOC_SIZE(cmd) | (xs64(&s) % 8 == 0 ?
				 (uint64_t)(xs64(&s) & 7) << 32 : 0);
		if (cmd == GDRPIN_IOC_PIN && xs64(&s) % 2) {
			arg[1] = (uintptr_t)buf + xs64(&s) % blen;
			arg[2] = 1 + xs64(&s) % (blen / 2);
		}
		if ((cmd == GDRPIN_IOC_UNPIN || cmd == GDRPIN_IOC_QUERY) &&
		    xs64(&s) % 2)
			arg[1] = handles[xs64(&s) % 32];
		if (cmd == GDRPIN_IOC_SET_EVENTFD)
			arg[1] &= 0xffffffff00000000ull;
		if (cmd == GDRPIN_IOC_GET_REVOKED && xs64(&s) % 2)
			arg[2] &= 0xff;
		if (ioctl(fd, cmd, arg) == 0) {
			ok++;
			if (cmd == GDRPIN_IOC_PIN)
				handles[xs64(&s) % 32] = arg[3];
		}
		if (xs64(&s) % 500 == 0)
			fake_free(buf + (xs64(&s) % 16) * KT_ALIGN, KT_ALIGN);
	}
	printf("fuzz: %d of 20000 calls succeeded, %lld pins live\n", ok,
	       (long long)get_stats(fd).fd_pins);
	close(fd);
	check_idle();
}

/* --- latency ------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void lat_run(int fd, size_t len, uint32_t flags, int n)
{
	uint64_t *tp = calloc(n, 8), *tu = calloc(n, 8);
	char *buf = gpu_alloc(len);
	int i;

	CHECK(tp && tu, "calloc");
	for (i = 0; i < n; i++) {
		struct gdrpin_pin_args a;
		uint64_t t0 = now_ns(), t1, t2;

		CHECK_OK(do_pin(fd, buf, len, flags, &a));
		t1 = now_ns();
		CHECK_OK(do_unpin(fd, a.handle, NULL));
		t2 = now_ns();
		tp[i] = t1 - t0;
		tu[i] = t2 - t1;
	}
	qsort(tp, n, 8, cmp_u64);
	qsort(tu, n, 8, cmp_u64);
	printf("latency %-10s %5zu KiB x %d: pin p50 %" PRIu64 " ns p99 %" PRIu64
	       " ns; unpin p50 %" PRIu64 " ns p99 %" PRIu64 " ns\n",
	       flags & GDRPIN_PIN_LEGACY ? "legacy" : "persistent", len >> 10, n,
	       tp[n / 2], tp[n * 99 / 100], tu[n / 2], tu[n * 99 / 100]);
	munmap(buf, len);
	free(tp);
	free(tu);
}

/* ns per in-kernel lookup of [va, va+len) of this process, best of 5. */
static uint64_t consumer_lookup_ns(const void *va, uint64_t len)
{
	uint64_t best = UINT64_MAX, ns;
	char cmd[128], res[128];
	int fd, i;
	ssize_t n;
	unsigned int cnt;

	for (i = 0; i < 5; i++) {
		fd = open(CONS_CTL, O_RDWR);
		CHECK(fd >= 0, "open consumer");
		snprintf(cmd, sizeof(cmd), "lookup %d %" PRIxPTR " %" PRIx64 " 2000",
			 (int)getpid(), (uintptr_t)va, len);
		CHECK(write(fd, cmd, strlen(cmd)) == (ssize_t)strlen(cmd),
		      "lookup %p", va);
		n = read(fd, res, sizeof(res) - 1);
		CHECK(n > 0, "lookup result");
		res[n] = '\0';
		CHECK(sscanf(res, "lookup ns=%" SCNu64 " n=%u", &ns, &cnt) == 2,
		      "result %s", res);
		close(fd);
		if (ns < best)
			best = ns;
	}
	return best;
}

#define SCALE_PINS	10000
#define SCALE_FDS	3

/*
 * In-kernel lookup cost against the number of pins of the process: 100
 * pins, then 10 000 (over three fds, as a process that outgrows one fd's
 * slots does). Distinct VAs, all backed by the same 64 KiB of a memfd, so
 * 10 000 pins cost no memory. A lookup over a list grows ~100x from 100 to
 * 10 000 pins; over the interval trees it stays within a few times.
 */
static void t_lookup_scale(void)
{
	size_t span = (size_t)(SCALE_PINS + 1) * KT_ALIGN;
	int fds[SCALE_FDS], mfd, i, per_fd;
	uint64_t small, large;
	char *base, *p;

	mfd = memfd_create("gdrpin-scale", 0);
	CHECK(mfd >= 0, "memfd");
	CHECK_OK(ftruncate(mfd, KT_ALIGN));
	p = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(p != MAP_FAILED, "reserve");
	base = (char *)(((uintptr_t)p + KT_ALIGN - 1) & ~(uintptr_t)(KT_ALIGN - 1));
	for (i = 0; i < SCALE_PINS; i++)
		CHECK(mmap(base + (size_t)i * KT_ALIGN, KT_ALIGN,
			   PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, mfd,
			   0) != MAP_FAILED, "map %d", i);
	for (i = 0; i < SCALE_FDS; i++)
		fds[i] = open_dev();
	per_fd = (SCALE_PINS + SCALE_FDS - 1) / SCALE_FDS;
	CHECK((uint32_t)per_fd <= get_version(fds[0]).status_nslots,
	      "slots per fd");

	for (i = 0; i < 100; i++)
		pin_ok(fds[0], base + (size_t)i * KT_ALIGN, KT_ALIGN, 0);
	small = consumer_lookup_ns(base + 99 * KT_ALIGN, 4096);
	for (i = 100; i < SCALE_PINS; i++)
		pin_ok(fds[i / per_fd], base + (size_t)i * KT_ALIGN, KT_ALIGN, 0);
	large = consumer_lookup_ns(base + (size_t)(SCALE_PINS - 1) * KT_ALIGN,
				   4096);
	printf("lookup: %" PRIu64 " ns at 100 pins, %" PRIu64 " ns at %d pins "
	       "(%d fds), x%.1f\n", small, large, SCALE_PINS, SCALE_FDS,
	       (double)large / (double)(small ? small : 1));
	CHECK(large < 8 * small, "lookup grows with the pins: %" PRIu64
	      " ns at 100, %" PRIu64 " ns at %d", small, large, SCALE_PINS);
	for (i = 0; i < SCALE_FDS; i++)
		close(fds[i]);
	check_idle();
}

static void t_latency(void)
{
	int fd = open_dev();
	const char *env = getenv("GDRPIN_LAT_N");
	int n = env ? atoi(env) : 10000;

	printf("module + fake provider overhead, not GPU numbers\n");
	lat_run(fd, 64 << 10, 0, n);
	lat_run(fd, 2 << 20, 0, n);
	lat_run(fd, 64 << 10, GDRPIN_PIN_LEGACY, n);
	close(fd);
	check_idle();
}

#include "kmod_test_dmabuf.c"
#include "kmod_test_peer.c"

/* --- driver --------------------------------------------------------------- */

static const struct {
	const char *name;
	void (*fn)(void);
} cases[] = {
	{ "abi", t_abi },
	{ "version", t_version },
	{ "unknown_cmd", t_unknown_cmd },
	{ "pin_basic", t_pin_basic },
	{ "pin_rounding", t_pin_rounding },
	{ "pin_legacy", t_pin_legacy },
	{ "pin_fallback", t_pin_fallback },
	{ "pin_invalid", t_pin_invalid },
	{ "unpin_invalid", t_unpin_invalid },
	{ "query_invalid", t_query_invalid },
	{ "get_revoked_invalid", t_get_revoked_invalid },
	{ "handles_unique", t_handles_unique },
	{ "slots_exhausted", t_slots_exhausted },
	{ "status_page", t_status_page },
	{ "revoke", t_revoke },
	{ "revoke_persistent", t_revoke_persistent },
	{ "poll_wakeup", t_poll_wakeup },
	{ "fork_child", t_fork_child },
	{ "scm_rights", t_scm_rights },
	{ "threads_same_process", t_threads_same_process },
	{ "exit_releases", t_exit_releases },
	{ "fork_parent_exit", t_fork_parent_exit },
	{ "user_limits", t_user_limits },
	{ "close_releases", t_close_releases },
	{ "quota", t_quota },
	{ "inject_errors", t_inject_errors },
	{ "pt_version", t_pt_version },
	{ "consumer_read", t_consumer_read },
	{ "consumer_revoke", t_consumer_revoke },
	{ "unload_busy", t_unload_busy },
	{ "race_unpin_callback", t_race_unpin_callback },
	{ "race_unmap_callback", t_race_unmap_callback },
	{ "concurrency", t_concurrency },
	{ "fuzz", t_fuzz },
	{ "latency", t_latency },
	{ "lookup_scale", t_lookup_scale },
	{ "dmabuf_pin", t_dmabuf_pin },
	{ "dmabuf_revoke", t_dmabuf_revoke },
	{ "dmabuf_invalid", t_dmabuf_invalid },
	{ "dmabuf_quota", t_dmabuf_quota },
	{ "dmabuf_exit", t_dmabuf_exit },
	{ "dmabuf_race", t_dmabuf_race },
	{ "dmabuf_udmabuf", t_dmabuf_udmabuf },
	{ "peer_reg", t_peer_reg },
	{ "peer_not_mine", t_peer_not_mine },
	{ "peer_invalidate", t_peer_invalidate },
	{ "peer_close", t_peer_close },
	{ "peer_race", t_peer_race },
	/* leaves a registration for guest-run's unload check: keep it last */
	{ "peer_unload_live", t_peer_unload_live },
};

int main(int argc, char **argv)
{
	size_t i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 2) {
		fprintf(stderr, "usage: %s list | CASE\n", argv[0]);
		return 2;
	}
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (!strcmp(argv[1], "list")) {
			printf("%s\n", cases[i].name);
		} else if (!strcmp(argv[1], cases[i].name)) {
			srand(1234);
			cases[i].fn();
			return 0;
		}
	}
	if (strcmp(argv[1], "list")) {
		fprintf(stderr, "unknown case %s\n", argv[1]);
		return 2;
	}
	return 0;
}
