/* SPDX-License-Identifier: MIT */
/*
 * The subscription relay of the gdrhook Python package (_relay.c): what
 * one event looks like once it is out of the hook.  scripts/python/
 * gen-abi.py declares it for ctypes from this file.
 */
#ifndef GDRHOOK_RELAY_H
#define GDRHOOK_RELAY_H

#include <stdint.h>
#include <gdrhook.h>

struct gdrhook_relay_event {
	struct gdrhook_event ev;	/* as delivered (ev.api: see api) */
	uint64_t t;		/* CLOCK_MONOTONIC ns when it was delivered */
	uint64_t tid;		/* the thread that made the call */
	char api[56];		/* ev.api, copied, NUL-terminated */
};

#endif
