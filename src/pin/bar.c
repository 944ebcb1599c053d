// SPDX-License-Identifier: MIT
/*
 * BAR1 budget for eager whole-allocation pins.
 *
 * A NIC reaches GPU memory through the GPU's BAR1 aperture, and a pin
 * holds BAR1 space for as long as it lives.  Pinning whole allocations on
 * first use is what makes later registrations free, but a whole pin of a
 * large allocation can exhaust a small BAR1 (256 MiB on T4-class GPUs;
 * about 220 MiB pinnable on an RTX A4000).  So only allocations up to a
 * budget are pinned whole; larger ones pin the registered range, rounded
 * out to 64 KiB (the GPU BAR page).
 *
 * The default budget is a tenth of the smaller of BAR1 and device memory:
 * UCX registers whole allocations only up to a tenth of GPU memory, and
 * taking the smaller of the two keeps the same headroom on GPUs whose
 * BAR1 is smaller than their memory (ten such allocations pinned whole
 * still leave BAR1 room for others and for the driver's own mappings).
 * On an H100 80GB (BAR1 128 GiB, memory 79.2 GiB) it is 7.9 GiB; on a
 * 256 MiB BAR1 it is 25.6 MiB.
 *
 * BAR1 size: the largest memory resource of the GPU's PCI function in
 * sysfs (the framebuffer aperture; BAR0 is 16 MiB of registers), else
 * nvmlDeviceGetBAR1MemoryInfo through dlopen (no link-time NVML).  Both
 * read 128 GiB on the H100 we measured.  Everything is read once per
 * device, on the registration path, with no lock of the cache held and
 * without stdio or malloc.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "platform/platform.h"
#include "backend.h"
#include "bar.h"
#include "pin_opts.h"

#define BAR_MAX_DEV	64
#define BAR_RES_LINES	6	/* BARs 0-5; later lines are ROM, SR-IOV */

const char *gh_bar_sysfs = "/sys/bus/pci/devices";

static struct {
	uint64_t budget[BAR_MAX_DEV];	/* + 1; 0: not read yet (atomic) */
} bar;

static void *drv_sym(const char *name)
{
	void *h = gh_libcuda_handle();
	void *p = h ? gh_real_dlsym(h, name) : NULL;

	return p && !gh_addr_is_ours(p) ? p : NULL;
}

uint64_t gh_bar_parse_resource(const char *path)
{
	char buf[4096];
	uint64_t best = 0;
	char *p = buf;

	if (gh_read_text(path, buf, sizeof(buf)) < 0)
		return 0;
	/* "start end flags" in hex, one line per resource */
	for (int line = 0; line < BAR_RES_LINES && *p; line++) {
		char *q;
		uint64_t s = strtoull(p, &q, 16), e, fl;

		e = strtoull(q, &q, 16);
		fl = strtoull(q, &q, 16);
		if (s && e > s && (fl & 0x200))	/* IORESOURCE_MEM */
			if (e - s + 1 > best)
				best = e - s + 1;
		p = strchr(q, '\n');
		if (!p)
			break;
		p++;
	}
	return best;
}

uint64_t gh_bar_default_budget(uint64_t bar1, uint64_t mem)
{
	uint64_t m = bar1 && mem ? (bar1 < mem ? bar1 : mem) :
		     bar1 ? bar1 : mem;

	return m / 10;
}

static uint64_t bar1_sysfs(const char *bus)
{
	char path[256];
	size_t n = strlen(gh_bar_sysfs), b = strlen(bus);

	if (n + b + 16 > sizeof(path))
		return 0;
	memcpy(path, gh_bar_sysfs, n);
	path[n] = '/';
	for (size_t i = 0; i < b; i++)	/* sysfs spells hex in lower case */
		path[n + 1 + i] = bus[i] >= 'A' && bus[i] <= 'F' ?
				  (char)(bus[i] + 'a' - 'A') : bus[i];
	memcpy(path + n + 1 + b, "/resource", 10);
	return gh_bar_parse_resource(path);
}

struct nvml_bar1 {
	unsigned long long total, free, used;
};

static uint64_t bar1_nvml(const char *bus)
{
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	int (*init)(void), (*shut)(void);
	int (*by_bus)(const char *, void **);
	int (*get)(void *, struct nvml_bar1 *);
	struct nvml_bar1 m = { 0, 0, 0 };
	void *d = NULL;

	if (!h)
		return 0;
	init = (int (*)(void))gh_real_dlsym(h, "nvmlInit_v2");
	shut = (int (*)(void))gh_real_dlsym(h, "nvmlShutdown");
	by_bus = (int (*)(const char *, void **))gh_real_dlsym(
		h, "nvmlDeviceGetHandleByPciBusId_v2");
	get = (int (*)(void *, struct nvml_bar1 *))gh_real_dlsym(
		h, "nvmlDeviceGetBAR1MemoryInfo");
	if (init && shut && by_bus && get && !init()) {
		if (by_bus(bus, &d) || get(d, &m))
			m.total = 0;
		shut();
	}
	dlclose(h);
	return m.total;
}

uint64_t gh_bar1_size(const char *bus, const char **src_p)
{
	uint64_t b1 = bar1_sysfs(bus);

	*src_p = "sysfs";
	if (!b1) {
		b1 = bar1_nvml(bus);
		*src_p = b1 ? "nvml" : "unknown";
	}
	return b1;
}

static void read_device(int dev)
{
	CUresult (*bus_id)(char *, int, CUdevice) =
		(CUresult (*)(char *, int, CUdevice))drv_sym("cuDeviceGetPCIBusId");
	CUresult (*total)(size_t *, CUdevice) =
		(CUresult (*)(size_t *, CUdevice))drv_sym("cuDeviceTotalMem_v2");
	char bus[32] = "";
	size_t mem = 0;
	uint64_t b1 = 0, budget;
	const char *src = "unknown";

	if (bus_id && bus_id(bus, sizeof(bus), (CUdevice)dev) == CUDA_SUCCESS)
		b1 = gh_bar1_size(bus, &src);
	if (!total || total(&mem, (CUdevice)dev) != CUDA_SUCCESS)
		mem = 0;
	budget = gh_pin_cfg.pin_whole_max ? gh_pin_cfg.pin_whole_max :
		 gh_bar_default_budget(b1, mem);
	gh_info("device %d: BAR1 %llu MiB (%s), memory %llu MiB: allocations up to %llu MiB are pinned whole%s",
		dev, (unsigned long long)(b1 >> 20), src,
		(unsigned long long)(mem >> 20),
		(unsigned long long)(budget >> 20),
		gh_pin_cfg.pin_whole_max ? " (GDRHOOK_PIN_WHOLE_MAX)" : "");
	__atomic_store_n(&bar.budget[dev], budget + 1, __ATOMIC_RELEASE);
}

/* The budget for dev (bytes; 0: no limit known), computed once per
 * device (logged at info level with the BAR1 size it rests on). */
static uint64_t gh_bar_whole_max(int dev)
{
	uint64_t b;

	if (dev < 0 || dev >= BAR_MAX_DEV)
		return gh_pin_cfg.pin_whole_max;
	b = __atomic_load_n(&bar.budget[dev], __ATOMIC_ACQUIRE);
	if (GH_UNLIKELY(!b)) {
		/* Racing first readers compute the same figures. */
		read_device(dev);
		b = __atomic_load_n(&bar.budget[dev], __ATOMIC_ACQUIRE);
	}
	return b - 1;
}

int gh_bar_extent(int dev, uint64_t base, uint64_t size, uint64_t addr,
		  uint64_t len, uint64_t *lo_p, uint64_t *hi_p)
{
	uint64_t max = gh_bar_whole_max(dev), lo, hi;

	if (!max || size <= max) {
		*lo_p = base;
		*hi_p = base + size;
		return 1;
	}
	lo = addr & ~(GH_PIN_ALIGN - 1);
	hi = (addr + len + GH_PIN_ALIGN - 1) & ~(GH_PIN_ALIGN - 1);
	*lo_p = lo < base ? base : lo;
	*hi_p = hi > base + size ? base + size : hi;
	return *lo_p == base && *hi_p == base + size;
}
