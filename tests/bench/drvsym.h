/* SPDX-License-Identifier: MIT */
/*
 * The CUDA driver's own entry points, for benchmarks that compare the
 * shim with the driver in one process (the shim preloaded).
 */
#ifndef GH_BENCH_DRVSYM_H
#define GH_BENCH_DRVSYM_H

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

/* The loaded libcuda: its file, load address and segments. */
struct find_obj {
	const char *path;
	uintptr_t base;
	const ElfW(Phdr) *phdr;
	size_t phnum;
};

static int find_libcuda(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct find_obj *f = arg;
	const char *slash = strrchr(info->dlpi_name, '/');

	(void)size;
	if (strncmp(slash ? slash + 1 : info->dlpi_name, "libcuda.so", 10))
		return 0;
	f->path = info->dlpi_name;
	f->base = info->dlpi_addr;
	f->phdr = info->dlpi_phdr;
	f->phnum = info->dlpi_phnum;
	return 1;
}

/* @addr is code of the loaded object (the file on disk may not be it). */
static int in_code(const struct find_obj *f, uintptr_t addr)
{
	for (size_t i = 0; i < f->phnum; i++) {
		uintptr_t lo = f->base + f->phdr[i].p_vaddr;

		if (f->phdr[i].p_type == PT_LOAD && (f->phdr[i].p_flags & PF_X) &&
		    addr >= lo && addr - lo < f->phdr[i].p_memsz)
			return 1;
	}
	return 0;
}

/*
 * The driver's own entry point @name, read from libcuda's symbol table on
 * disk: no loader call, so a preloaded shim cannot hand out its wrapper.
 * NULL when libcuda is not loaded or has no such symbol.
 */
static void *driver_sym(const char *name)
{
	struct find_obj f = { NULL, 0 };
	const Elf64_Ehdr *eh;
	const Elf64_Shdr *sh;
	struct stat st;
	void *map, *ret = NULL;
	int fd;

	dl_iterate_phdr(find_libcuda, &f);
	if (!f.path || (fd = open(f.path, O_RDONLY | O_CLOEXEC)) < 0)
		return NULL;
	if (fstat(fd, &st) || (size_t)st.st_size < sizeof(*eh)) {
		close(fd);
		return NULL;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return NULL;
	eh = map;
	sh = (const Elf64_Shdr *)((const char *)map + eh->e_shoff);
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(*sh) > (uint64_t)st.st_size)
		goto out;
	for (unsigned int i = 0; i < eh->e_shnum && !ret; i++) {
		const Elf64_Sym *sym = (const Elf64_Sym *)((const char *)map +
							   sh[i].sh_offset);
		const char *str;

		if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= eh->e_shnum)
			continue;
		str = (const char *)map + sh[sh[i].sh_link].sh_offset;
		for (size_t k = 0; k < sh[i].sh_size / sizeof(*sym); k++)
			if (sym[k].st_shndx != SHN_UNDEF && sym[k].st_value &&
			    ELF64_ST_TYPE(sym[k].st_info) == STT_FUNC &&
			    !strcmp(str + sym[k].st_name, name)) {
				if (in_code(&f, f.base + sym[k].st_value))
					ret = (void *)(f.base + sym[k].st_value);
				break;
			}
	}
out:
	munmap(map, (size_t)st.st_size);
	return ret;
}

#endif
