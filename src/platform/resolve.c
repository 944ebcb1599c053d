// SPDX-License-Identifier: MIT
/*
 * Finding real entry points.
 *
 * We interpose dlsym and dlvsym themselves, so our own calls to them would
 * come back to us.  The real ones are found by reading libc's (or, before
 * glibc 2.34, libdl's) dynamic symbol table directly: no loader call, so
 * this works from the first hook, before any constructor ran.
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <string.h>

#include <cuda.h>

#include "gh_hooks.h"
#include "base/base.h"
#include "platform_opts.h"
#include "resolve.h"

typedef void *(*dlsym_fn)(void *, const char *);
typedef void *(*dlvsym_fn)(void *, const char *, const char *);

static dlsym_fn real_dlsym;
static dlvsym_fn real_dlvsym;

/*
 * This runs before anything else is set up, including a sanitizer runtime
 * (which looks up the functions it intercepts with dlsym(RTLD_NEXT, ...)
 * from its own init, i.e. through us).  So: no instrumentation, no libc
 * call a sanitizer intercepts (dl_iterate_phdr, strcmp, ...): walk the
 * loader's link map (_r_debug) with our own string helpers.
 */

GH_NO_SANITIZE static int raw_streq(const char *a, const char *b)
{
	while (*a && *a == *b) {
		a++;
		b++;
	}
	return *a == *b;
}

/* Does path name libc or libdl (".../libc.so.6", "libdl.so.2")? */
GH_NO_SANITIZE static int is_libc(const char *path)
{
	const char *base = path;

	for (const char *p = path; *p; p++)
		if (*p == '/')
			base = p + 1;
	return (base[0] == 'l' && base[1] == 'i' && base[2] == 'b' &&
		((base[3] == 'c' && base[4] == '.' && base[5] == 's' &&
		  base[6] == 'o') ||
		 (base[3] == 'd' && base[4] == 'l' && base[5] == '.' &&
		  base[6] == 's' && base[7] == 'o')));
}

/* d_ptr is relocated in place by glibc on most targets, not on all. */
GH_NO_SANITIZE static const void *dyn_ptr(ElfW(Addr) base, ElfW(Addr) p)
{
	return (const void *)(p < base ? base + p : p);
}

/* Look name up in one object's .dynsym, preferring its default version. */
GH_NO_SANITIZE static void *elf_lookup(const struct link_map *l,
				       const char *name)
{
	const ElfW(Dyn) *dyn = l->l_ld;
	const ElfW(Sym) *symtab = NULL;
	const char *strtab = NULL;
	const ElfW(Half) *versym = NULL;
	const uint32_t *gnu_hash = NULL;
	const ElfW(Word) *sysv_hash = NULL;
	uint32_t nsyms = 0;
	void *found = NULL;

	if (!dyn)
		return NULL;
	for (; dyn->d_tag != DT_NULL; dyn++) {
		switch (dyn->d_tag) {
		case DT_SYMTAB: symtab = dyn_ptr(l->l_addr, dyn->d_un.d_ptr); break;
		case DT_STRTAB: strtab = dyn_ptr(l->l_addr, dyn->d_un.d_ptr); break;
		case DT_VERSYM: versym = dyn_ptr(l->l_addr, dyn->d_un.d_ptr); break;
		case DT_GNU_HASH: gnu_hash = dyn_ptr(l->l_addr, dyn->d_un.d_ptr); break;
		case DT_HASH: sysv_hash = dyn_ptr(l->l_addr, dyn->d_un.d_ptr); break;
		}
	}
	if (!symtab || !strtab)
		return NULL;
	if (sysv_hash) {
		nsyms = sysv_hash[1];
	} else if (gnu_hash) {
		/* Symbol count: past the last chain end of the last bucket. */
		uint32_t nbuckets = gnu_hash[0], symoffset = gnu_hash[1];
		uint32_t bloom = gnu_hash[2];
		const ElfW(Addr) *bl = (const void *)&gnu_hash[4];
		const uint32_t *buckets = (const void *)&bl[bloom];
		const uint32_t *chain = &buckets[nbuckets];
		uint32_t last = 0;

		for (uint32_t b = 0; b < nbuckets; b++)
			if (buckets[b] > last)
				last = buckets[b];
		if (last < symoffset)
			return NULL;
		while (!(chain[last - symoffset] & 1))
			last++;
		nsyms = last + 1;
	}
	for (uint32_t i = 0; i < nsyms; i++) {
		const ElfW(Sym) *s = &symtab[i];

		if (!s->st_value || s->st_shndx == SHN_UNDEF ||
		    ELF64_ST_TYPE(s->st_info) != STT_FUNC ||
		    !raw_streq(strtab + s->st_name, name))
			continue;
		/* 0x8000: hidden (non-default) version; keep looking. */
		found = (void *)(l->l_addr + s->st_value);
		if (!versym || !(versym[i] & 0x8000))
			return found;
	}
	return found;
}

GH_NO_SANITIZE static void *libc_symbol(const char *name)
{
	for (const struct link_map *l = _r_debug.r_map; l; l = l->l_next) {
		void *p;

		if (!l->l_name || !is_libc(l->l_name))
			continue;
		p = elf_lookup(l, name);
		if (p)
			return p;
	}
	return NULL;
}

GH_NO_SANITIZE static void bootstrap(void)
{
	if (__atomic_load_n(&real_dlsym, __ATOMIC_ACQUIRE))
		return;
	__atomic_store_n(&real_dlvsym, (dlvsym_fn)libc_symbol("dlvsym"),
			 __ATOMIC_RELEASE);
	__atomic_store_n(&real_dlsym, (dlsym_fn)libc_symbol("dlsym"),
			 __ATOMIC_RELEASE);
}

/* libc's own dlsym/dlvsym (default versions), for tail calls. */
GH_NO_SANITIZE void *gh_libc_dlsym_fn(void)
{
	bootstrap();
	return (void *)real_dlsym;
}

GH_NO_SANITIZE void *gh_libc_dlvsym_fn(void)
{
	bootstrap();
	return (void *)real_dlvsym;
}

GH_NO_SANITIZE void *gh_real_dlsym(void *handle, const char *name)
{
	bootstrap();
	return real_dlsym ? real_dlsym(handle, name) : NULL;
}

GH_NO_SANITIZE void *gh_real_dlvsym(void *handle, const char *name,
				    const char *version)
{
	bootstrap();
	return real_dlvsym ? real_dlvsym(handle, name, version) : NULL;
}

static void *libcuda;

#define GH_LIBCUDA_DEFAULT "libcuda.so.1"

/* @name loaded and a CUDA driver, else NULL and why in *why_p. */
static void *open_driver(const char *name, const char **why_p)
{
	void *h;

	/* Prefer the copy the program already loaded. */
	h = dlopen(name, RTLD_NOW | RTLD_NOLOAD);
	if (!h)
		h = dlopen(name, RTLD_NOW);
	if (!h) {
		const char *why = dlerror();

		*why_p = why ? why : "unknown error";
		return NULL;
	}
	if (!gh_real_dlsym(h, "cuGetProcAddress_v2") &&
	    !gh_real_dlsym(h, "cuInit")) {
		*why_p = "not a CUDA driver (no cuInit, no cuGetProcAddress_v2)";
		dlclose(h);
		return NULL;
	}
	return h;
}

/*
 * The driver library in effect: GDRHOOK_LIBCUDA when it is a CUDA
 * driver that can be loaded, else the default (what gh_libcuda_handle
 * loads).  Is it in the process already (loaded by the program, or by
 * a hook on its behalf)?  Never loads it.
 */
const char *gh_libcuda_loaded(void)
{
	const char *name = gh_platform_cfg.libcuda;
	void *h;

	if (name && (h = dlopen(name, RTLD_LAZY | RTLD_NOLOAD))) {
		int driver = gh_real_dlsym(h, "cuGetProcAddress_v2") ||
			     gh_real_dlsym(h, "cuInit");

		dlclose(h);
		if (driver)
			return name;
	}
	h = dlopen(GH_LIBCUDA_DEFAULT, RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return NULL;
	dlclose(h);
	return GH_LIBCUDA_DEFAULT;
}

void *gh_libcuda_handle(void)
{
	void *h = __atomic_load_n(&libcuda, __ATOMIC_ACQUIRE);
	const char *name = gh_platform_cfg.libcuda, *why;

	if (h)
		return h;
	/*
	 * A bad GDRHOOK_LIBCUDA is a bad value like any other: said once,
	 * and the default used, not every hooked call failing.
	 */
	if (name && strcmp(name, GH_LIBCUDA_DEFAULT)) {
		h = open_driver(name, &why);
		if (!h)
			gh_log_once(GH_LOG_WARN,
				    "GDRHOOK_LIBCUDA=%s refused: %s; using the default " GH_LIBCUDA_DEFAULT,
				    name, why);
	}
	if (!h)
		h = open_driver(GH_LIBCUDA_DEFAULT, &why);
	if (!h) {
		/* every hooked call would fail: say why, once */
		gh_log_once(GH_LOG_WARN, "cannot load the CUDA driver "
			    GH_LIBCUDA_DEFAULT ": %s", why);
		return NULL;
	}
	__atomic_store_n(&libcuda, h, __ATOMIC_RELEASE);
	return h;
}

static void *self_base;
static size_t self_size;

static int self_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	uintptr_t me = (uintptr_t)data;

	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && me >= lo && me < lo + ph->p_memsz) {
			uintptr_t min = UINTPTR_MAX, max = 0;

			for (int j = 0; j < info->dlpi_phnum; j++) {
				const ElfW(Phdr) *q = &info->dlpi_phdr[j];

				if (q->p_type != PT_LOAD)
					continue;
				if (info->dlpi_addr + q->p_vaddr < min)
					min = info->dlpi_addr + q->p_vaddr;
				if (info->dlpi_addr + q->p_vaddr + q->p_memsz > max)
					max = info->dlpi_addr + q->p_vaddr +
					      q->p_memsz;
			}
			self_base = (void *)min;
			self_size = max - min;
			return 1;
		}
	}
	return 0;
}

int gh_addr_is_ours(const void *p)
{
	if (!self_base)
		dl_iterate_phdr(self_cb, (void *)(uintptr_t)&gh_addr_is_ours);
	return (uintptr_t)p - (uintptr_t)self_base < self_size;
}

/* Symbol table index by name: binary search over a sorted index. */
static unsigned short by_name[GH_SYM_COUNT];
static pthread_once_t by_name_once = PTHREAD_ONCE_INIT;

static void by_name_build(void)
{
	for (unsigned int i = 0; i < GH_SYM_COUNT; i++) {
		unsigned int j = i;

		while (j && strcmp(gh_syms[by_name[j - 1]].name,
				   gh_syms[i].name) > 0) {
			by_name[j] = by_name[j - 1];
			j--;
		}
		by_name[j] = (unsigned short)i;
	}
}

int gh_sym_find(const char *name)
{
	int lo = 0, hi = GH_SYM_COUNT - 1;

	pthread_once(&by_name_once, by_name_build);
	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		int c = strcmp(name, gh_syms[by_name[mid]].name);

		if (!c)
			return by_name[mid];
		if (c < 0)
			hi = mid - 1;
		else
			lo = mid + 1;
	}
	return -1;
}

/* Real entry points, filled lazily or by the resolvers. */
static void *gh_real[GH_SYM_COUNT];

/* The row's symbol version first (libibverbs), then the default one. */
static void *lookup_in(void *h, const struct gh_sym *s)
{
	void *p = s->version ? gh_real_dlvsym(h, s->name, s->version) : NULL;

	if (!p)
		p = gh_real_dlsym(h, s->name);
	if (p && gh_addr_is_ours(p))
		p = NULL;
	return p;
}

static void *resolve_one(unsigned int sym)
{
	const struct gh_sym *s = &gh_syms[sym];
	void *p = NULL, *h;
	/* Loader calls may set errno (glibc's dlopen restores it on success;
	 * not every loader does): the program's errno is not ours to change. */
	int saved = errno;

	switch (s->family) {
	case GH_FAM_DRIVER:
		h = gh_libcuda_handle();
		if (h)
			p = lookup_in(h, s);
		break;
	case GH_FAM_VERBS:
		p = lookup_in(RTLD_NEXT, s);
		if (p)
			break;
		/* A program that dlopen'ed libibverbs RTLD_LOCAL (NCCL). */
		h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
		if (h) {
			p = lookup_in(h, s);
			dlclose(h);
		}
		break;
	default:
		/* The next definition after us: libcudart. */
		p = lookup_in(RTLD_NEXT, s);
		break;
	}
	errno = saved;
	return p;
}

void *gh_real_get(unsigned int sym)
{
	void *p = __atomic_load_n(&gh_real[sym], __ATOMIC_ACQUIRE);

	if (GH_LIKELY(p != NULL))
		return p;
	p = resolve_one(sym);
	if (p) {
		void *expected = NULL;

		if (!__atomic_compare_exchange_n(&gh_real[sym], &expected, p, 0,
						 __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE))
			p = expected;
	}
	return p;
}

/*
 * The object that holds @addr, opened again (RTLD_NOLOAD) for a lookup in
 * its own scope: it and its dependencies, whether or not they are global.
 * NULL for the main program (the global scope, where we come first).
 */
static void *object_of(const void *addr)
{
	Dl_info info;

	if (!addr || !dladdr(addr, &info) || !info.dli_fname ||
	    !info.dli_fname[0] || gh_addr_is_ours(addr))
		return NULL;
	return dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
}

/* Loaded shared runtimes (libcudart.so*), by path; no allocation. */
#define GH_RT_MAX	8
struct rt_paths {
	char path[GH_RT_MAX][256];
	int n;
};

static int rt_path_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct rt_paths *rp = data;
	const char *name = info->dlpi_name, *base;

	(void)size;
	if (!name || !name[0] || rp->n == GH_RT_MAX)
		return 0;
	base = strrchr(name, '/');
	base = base ? base + 1 : name;
	if (!strncmp(base, "libcudart.so", 12) && strlen(name) < 256)
		strcpy(rp->path[rp->n++], name);
	return 0;
}

/* @s in the first loaded shared runtime that defines it. */
static void *in_any_runtime(const struct gh_sym *s)
{
	static struct rt_paths rp;	/* too big for a hook's stack */
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	void *p = NULL, *h;

	pthread_mutex_lock(&lock);
	rp.n = 0;
	/* The loader's lock is held in there: dlopen after. */
	dl_iterate_phdr(rt_path_cb, &rp);
	for (int i = 0; i < rp.n && !p; i++) {
		h = dlopen(rp.path[i], RTLD_NOW | RTLD_NOLOAD);
		if (h) {
			p = lookup_in(h, s);
			dlclose(h);
		}
	}
	pthread_mutex_unlock(&lock);
	return p;
}

void *gh_real_get_for(unsigned int sym, const void *caller)
{
	void *p = gh_real_get(sym), *h;
	int saved;

	if (GH_LIKELY(p != NULL) || gh_syms[sym].family != GH_FAM_RUNTIME)
		return p;
	/*
	 * A runtime that is not global (a library dlopen'ed RTLD_LOCAL with
	 * libcudart among its dependencies, or with a static runtime whose
	 * entry points it exports): RTLD_NEXT cannot see it.  The caller's
	 * own scope can, else (a tail call hides the caller) any loaded
	 * libcudart.
	 */
	saved = errno;
	h = object_of(caller);
	if (h) {
		p = lookup_in(h, &gh_syms[sym]);
		dlclose(h);
	}
	if (!p)
		p = in_any_runtime(&gh_syms[sym]);
	errno = saved;
	if (p && gh_real_set(sym, p))
		p = gh_real_get(sym);	/* another thread's find won */
	return p;
}

void *gh_real_sibling(const void *fn, const char *name)
{
	void *h, *p = NULL;
	int saved = errno;

	h = object_of(fn);
	if (h) {
		p = gh_real_dlsym(h, name);
		dlclose(h);
	}
	if (p && gh_addr_is_ours(p))
		p = NULL;
	errno = saved;
	return p;
}

/* Record p as the real function behind sym; 0 if consistent. */
int gh_real_set(unsigned int sym, void *p)
{
	void *expected = NULL;

	if (__atomic_compare_exchange_n(&gh_real[sym], &expected, p, 0,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return 0;
	return expected == p ? 0 : -EEXIST;
}

