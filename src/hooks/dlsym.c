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

#include "hookrt.h"
#include "platform/platform.h"
#include "init.h"
#include "substitute.h"

typedef void *(*dlsym_fn)(void *, const char *);
typedef void *(*dlvsym_fn)(void *, const char *, const char *);

/*
 * A sanitizer runtime resolves what it intercepts with dlsym from its own
 * init, before it can run instrumented code: every path a name that is not
 * ours takes is uninstrumented and calls nothing a sanitizer intercepts.
 */

/* Only driver, runtime and verbs names can have wrappers. */
GH_NO_SANITIZE static int maybe_ours(const char *n)
{
	return (n[0] == 'c' && n[1] == 'u') ||
	       (n[0] == 'i' && n[1] == 'b' && n[2] == 'v' && n[3] == '_');
}

static void *substitute_slow(const char *name, void *p, const char *route)
{
	int saved = errno;

	if (gh_active())
		p = gh_substitute(name, p, route);
	errno = saved;
	return p;
}

GH_NO_SANITIZE static void *substitute(const char *name, void *p,
				       const char *route)
{
	if (!p || !name || !maybe_ours(name))
		return p;
	return substitute_slow(name, p, route);
}

void *gh_manual_dlsym(void *handle, const char *name);
void *gh_manual_dlvsym(void *handle, const char *name, const char *version);

GH_NO_SANITIZE __attribute__((optimize("O2", "optimize-sibling-calls")))
void *gh_manual_dlsym(void *handle, const char *name)
{
	if (handle == RTLD_NEXT)
		return ((dlsym_fn)gh_libc_dlsym_fn())(handle, name);
	return substitute(name, gh_real_dlsym(handle, name), "dlsym");
}

GH_NO_SANITIZE __attribute__((optimize("O2", "optimize-sibling-calls")))
void *gh_manual_dlvsym(void *handle, const char *name, const char *version)
{
	if (handle == RTLD_NEXT)
		return ((dlvsym_fn)gh_libc_dlvsym_fn())(handle, name, version);
	return substitute(name, gh_real_dlvsym(handle, name, version),
			  "dlvsym");
}

GH_EXPORT void *dlsym(void *handle, const char *name)
	__attribute__((alias("gh_manual_dlsym")));
GH_EXPORT void *dlvsym(void *handle, const char *name, const char *version)
	__attribute__((alias("gh_manual_dlvsym")));
