/* SPDX-License-Identifier: MIT */
/* The loader and the real entry points of hooked symbols (resolve.c). */
#ifndef GH_RESOLVE_H
#define GH_RESOLVE_H

#include <stdint.h>

/* Loader access (resolve.c). */
void *gh_real_dlsym(void *handle, const char *name);
/* libc's dlsym/dlvsym themselves, found without any loader call. */
void *gh_libc_dlsym_fn(void);
void *gh_libc_dlvsym_fn(void);
void *gh_real_dlvsym(void *handle, const char *name, const char *version);
void *gh_libcuda_handle(void);
/* The name of the driver library in effect if the process has it loaded,
 * else NULL (never loads it). */
const char *gh_libcuda_loaded(void);
int gh_addr_is_ours(const void *p);
int gh_sym_find(const char *name);
/* Record p as the real function of hooked symbol sym (from a resolver);
 * -EEXIST if a different one was recorded before. */
int gh_real_set(unsigned int sym, void *p);
/* @name from the object that defines @fn (NULL if none or ours). */
void *gh_real_sibling(const void *fn, const char *name);

/* The real entry point of hooked symbol @sym (resolved lazily). */
void *gh_real_get(unsigned int sym);
/*
 * gh_real_get, else (a runtime entry point) the one in @caller's own
 * scope: a program's library that loaded libcudart locally.
 */
void *gh_real_get_for(unsigned int sym, const void *caller);

#endif
