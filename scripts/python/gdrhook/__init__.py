# SPDX-License-Identifier: MIT
"""gdrhook from Python: the registry of live GPU allocations of this
process, its counters, allocation events, and event logs.

    import gdrhook
    gdrhook.preloaded()          # the preloaded library's path, or None
    gdrhook.lookup(ptr, nbytes)  # a Range, or None: not in a tracked allocation
    gdrhook.stats()              # {"allocs": ..., "frees": ..., ...}
    with gdrhook.subscribe() as sub:
        ...; sub.poll()          # [Event(alloc cuMemAlloc_v2 ...), ...]
    gdrhook.read_log("trace.jsonl")      # the event log as dicts
    gdrhook.log_dataframe("trace.jsonl") # ... as a pandas DataFrame

The library is libgdrhook through ctypes (include/gdrhook.h): the copy
the process has preloaded (LD_PRELOAD), else the installed one.  Only a
preloaded library sees the program's allocations; one this package loads
itself answers lookups with None and counts nothing.  Events are relayed
out of the hook by C code and delivered to Python afterwards (events.py
says why).  The struct layouts come from include/gdrhook.h, generated
(_abi.py), never written twice.
"""

import ctypes
import errno
import json as _json
import os
import tempfile

from . import _abi, _lib
from .log import log_dataframe, read_log
from .events import ALLOC, FREE, UNTRUSTED, Event, Subscription

__all__ = ["ALLOC", "FREE", "UNTRUSTED", "Event", "Range", "Subscription",
           "GdrhookError", "api_version", "flush_log", "info",
           "library_path", "log_dataframe", "lookup", "preloaded",
           "read_log", "stats", "subscribe", "trusted", "version"]

KINDS = _abi.KINDS


class GdrhookError(OSError):
    """A gdrhook call's -errno: ESTALE (the registry is untrusted: do not
    cache), ENODEV (disabled or not initialized), ERANGE (from lookup:
    the range runs past its allocation, which is in .range)."""

    def __init__(self, err, what, rng=None):
        super().__init__(err, "%s: %s" % (what, os.strerror(err)))
        self.range = rng


class Range:
    """A tracked allocation: base, size, gen (changes on every free and
    reallocation), ctx, pool, dev (-1: host), kind ("device", "pool", ...)
    and flags (RANGE_VOLATILE: pool memory, revalidate before use)."""

    __slots__ = ("base", "size", "gen", "ctx", "pool", "dev", "kind",
                 "flags")

    @classmethod
    def from_c(cls, r):
        self = cls()
        for k in ("base", "size", "gen", "ctx", "pool", "dev", "flags"):
            setattr(self, k, getattr(r, k))
        self.kind = KINDS.get(r.kind, str(r.kind))
        return self

    def __eq__(self, other):
        return isinstance(other, Range) and all(
            getattr(self, k) == getattr(other, k) for k in self.__slots__)

    def __repr__(self):
        return "Range(base=%#x, size=%d, gen=%d, dev=%d, kind=%s)" % (
            self.base, self.size, self.gen, self.dev, self.kind)


RANGE_VOLATILE = _abi.RANGE_VOLATILE


def _lib_():
    return _lib.load()[0]


def preloaded():
    """The path of the libgdrhook this process has preloaded, or None."""
    return _lib.preloaded_path()


def library_path():
    """The path (or SONAME) of the library this package uses."""
    return _lib.load()[1]


def version():
    """The library's release, e.g. "1.0"."""
    return _lib_().gdrhook_version().decode()


def api_version():
    return _lib_().gdrhook_api_version()


def trusted():
    """True while every allocation and free has been seen."""
    return bool(_lib_().gdrhook_trusted())


def lookup(ptr, size=0):
    """The tracked allocation holding [ptr, ptr + size) (size 0: one
    byte) as a Range; None when ptr is in none.  ptr: an int, or anything
    with data_ptr() (a torch tensor, whose whole size is then used when
    size is 0).  GdrhookError for ESTALE, ENODEV, ERANGE."""
    if hasattr(ptr, "data_ptr"):
        if not size:
            size = ptr.numel() * ptr.element_size()
        ptr = ptr.data_ptr()
    r = _abi.gdrhook_range()
    rc = _lib_().gdrhook_lookup(ptr, size, ctypes.byref(r))
    if rc == 0:
        return Range.from_c(r)
    if rc == -errno.ENOENT:
        return None
    raise GdrhookError(-rc, "gdrhook_lookup(%#x, %d)" % (ptr, size),
                       Range.from_c(r) if rc == -errno.ERANGE else None)


def stats():
    """The counters (struct gdrhook_stats; README's table), as a dict in
    the struct's order."""
    st = _abi.gdrhook_stats()
    st.size = ctypes.sizeof(st)
    rc = _lib_().gdrhook_get_stats(ctypes.byref(st))
    if rc < 0:
        raise GdrhookError(-rc, "gdrhook_get_stats")
    return {k: getattr(st, k) for k, _ in st._fields_ if k != "size"}


def flush_log():
    """Write every buffered event log record out now."""
    _lib_().gdrhook_flush_log()


def info(json=False):
    """What gdrhook would do in this process (gdrhook-info's text), or
    with json=True its JSON as a dict.  Initializes the CUDA driver and
    opens RDMA devices: a tool's call."""
    with tempfile.TemporaryFile() as f:
        rc = _lib_().gdrhook_info(f.fileno(), _abi.INFO_JSON if json else 0)
        if rc < 0:
            raise GdrhookError(-rc, "gdrhook_info")
        f.seek(0)
        text = f.read().decode("utf-8", "replace")
    return _json.loads(text) if json else text


def subscribe(mask=ALLOC | FREE | UNTRUSTED, capacity=1 << 16,
              callback=None, interval=0.01):
    """A Subscription to the events in mask (ALLOC, FREE, UNTRUSTED).
    Events reach Python after the call that made them, through a ring of
    `capacity` events: sub.poll(), or callback(event) on a thread every
    `interval` seconds.  See gdrhook.Subscription."""
    return Subscription(mask, capacity, callback, interval)
