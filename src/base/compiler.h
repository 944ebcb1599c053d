/* SPDX-License-Identifier: MIT */
/* Attributes and hints every file of gdrhook uses. */
#ifndef GH_COMPILER_H
#define GH_COMPILER_H

#define GH_HIDDEN __attribute__((visibility("hidden")))
#define GH_EXPORT __attribute__((visibility("default")))
/* For code a sanitizer runtime may run before it is initialized. */
#define GH_NO_SANITIZE __attribute__((no_sanitize_address, \
					no_sanitize_thread, \
					no_sanitize_undefined))
#define GH_LIKELY(x) __builtin_expect(!!(x), 1)
#define GH_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Words that lock-free readers load while a writer stores them. */
#define LD(p)		__atomic_load_n((p), __ATOMIC_RELAXED)
#define LD_ACQ(p)	__atomic_load_n((p), __ATOMIC_ACQUIRE)
#define ST(p, v)	__atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define ST_REL(p, v)	__atomic_store_n((p), (v), __ATOMIC_RELEASE)

#endif
