/* SPDX-License-Identifier: MIT */
/*
 * BAR1 budget for eager whole-allocation pins (src/pin/bar.c): what the
 * registration cache pins for a registration, given the allocation (or
 * span of VMM mappings) it falls in.
 */
#ifndef GH_BAR_H
#define GH_BAR_H

#include <stdint.h>

/*
 * The extent to pin for a registration of [addr, addr + len) inside
 * [base, base + size) on device dev: all of [base, base + size) while
 * size is at most the budget (GDRHOOK_PIN_WHOLE_MAX, else a tenth of the
 * smaller of BAR1 and device memory), else [addr, addr + len) rounded out
 * to 64 KiB and clamped to [base, base + size).  Returns 1 when whole.
 */
int gh_bar_extent(int dev, uint64_t base, uint64_t size, uint64_t addr,
		  uint64_t len, uint64_t *lo_p, uint64_t *hi_p);

/* BAR1 bytes of the PCI device at bus ("0000:00:06.0", either case): the
 * largest memory BAR in sysfs, else NVML's figure; 0 if neither knows.
 * *src_p: "sysfs", "nvml" or "unknown". */
uint64_t gh_bar1_size(const char *bus, const char **src_p);

/* Pure parts, for tests: the largest memory BAR in a sysfs "resource"
 * file (the framebuffer aperture, BAR1 in NVIDIA's naming), 0 if none;
 * the default budget from BAR1 and memory sizes (0 = unknown). */
uint64_t gh_bar_parse_resource(const char *path);
uint64_t gh_bar_default_budget(uint64_t bar1, uint64_t mem);

/* Where PCI devices are listed ("/sys/bus/pci/devices"; tests change it). */
extern const char *gh_bar_sysfs;

#endif
