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

#endif
