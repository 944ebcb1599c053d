// SPDX-License-Identifier: MIT
/*
 * dlsym and dlvsym: the CUDA runtime finds the driver with
 * dlopen("libcuda.so.1") + dlsym(handle, "cuGetProcAddress_v2"), and NCCL
 * loads verbs with dlvsym.  A lookup on a handle never searches preloaded
 * objects, so we interpose the lookup itself: resolve for real, then hand
 * out our wrapper for what was found.
 *
 * RTLD_NEXT is relative to the caller's object, which glibc finds from
 * the return address.  That path is a tail call (a jump), so the real
 * dlsym sees the original caller's return address, not ours.
 */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>

#include "internal.h"

typedef void *(*dlsym_fn)(void *, const char *);
typedef void *(*dlvsym_fn)(void *, const char *, const char *);

static dlsym_fn next_dlsym(void)
{
	static dlsym_fn fn;

	if (!fn) {
		/* gh_real_dlsym bootstraps from libc's symbol table. */
		gh_real_dlsym(NULL, "");
		fn = (dlsym_fn)gh_real_dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
		if (!fn)
			fn = (dlsym_fn)gh_real_dlvsym(RTLD_NEXT, "dlsym",
						      "GLIBC_2.2.5");
		if (!fn)
			fn = (dlsym_fn)gh_real_dlvsym(RTLD_NEXT, "dlsym",
						      "GLIBC_2.17");
	}
	return fn;
}

static dlvsym_fn next_dlvsym(void)
{
	static dlvsym_fn fn;

	if (!fn) {
		fn = (dlvsym_fn)gh_real_dlvsym(RTLD_NEXT, "dlvsym",
					       "GLIBC_2.34");
		if (!fn)
			fn = (dlvsym_fn)gh_real_dlvsym(RTLD_NEXT, "dlvsym",
						       "GLIBC_2.2.5");
		if (!fn)
			fn = (dlvsym_fn)gh_real_dlvsym(RTLD_NEXT, "dlvsym",
						       "GLIBC_2.17");
	}
	return fn;
}

static void *substitute(const char *name, void *p, const char *route)
{
	int saved;

	if (!p || !name ||
	    ((name[0] != 'c' || name[1] != 'u') && strncmp(name, "ibv_", 4)))
		return p;
	saved = errno;
	if (gh_active())
		p = gh_substitute(name, p, route);
	errno = saved;
	return p;
}

void *gh_manual_dlsym(void *handle, const char *name);
void *gh_manual_dlvsym(void *handle, const char *name, const char *version);

__attribute__((optimize("O2", "optimize-sibling-calls")))
void *gh_manual_dlsym(void *handle, const char *name)
{
	if (handle == RTLD_NEXT)
		return next_dlsym()(handle, name);
	return substitute(name, gh_real_dlsym(handle, name), "dlsym");
}

__attribute__((optimize("O2", "optimize-sibling-calls")))
void *gh_manual_dlvsym(void *handle, const char *name, const char *version)
{
	if (handle == RTLD_NEXT)
		return next_dlvsym()(handle, name, version);
	return substitute(name, gh_real_dlvsym(handle, name, version),
			  "dlvsym");
}

GH_EXPORT void *dlsym(void *handle, const char *name)
	__attribute__((alias("gh_manual_dlsym")));
GH_EXPORT void *dlvsym(void *handle, const char *name, const char *version)
	__attribute__((alias("gh_manual_dlvsym")));
