# SPDX-License-Identifier: MIT
"""Subscriptions to allocation events, delivered outside the hook.

gdrhook_subscribe()'s callback runs inside the hooked call (cuMemFree
before the real free).  No Python runs there: the callback is _relay.c's,
which copies the event into a ring and returns, never waiting for the
GIL (why: _relay.c).  Python takes the events from the ring with poll(),
or a thread of this module hands them to a function every `interval`
seconds.  The price: a Python subscriber learns of a free after it
happened, never before, and events beyond the ring's capacity between
two polls are counted in `dropped`, not delivered.
"""

import ctypes
import os
import threading

from . import _abi, _lib

ALLOC = _abi.EVENT_ALLOC
FREE = _abi.EVENT_FREE
UNTRUSTED = _abi.EVENT_UNTRUSTED
_NAMES = {ALLOC: "alloc", FREE: "free", UNTRUSTED: "untrusted"}

_relay = None


def relay_path():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "_relay.so")


def _relay_lib():
    global _relay
    if _relay is None:
        c = ctypes
        lib = c.CDLL(relay_path())
        lib.gdrhook_relay_new.restype = c.c_void_p
        lib.gdrhook_relay_new.argtypes = [c.c_uint32]
        lib.gdrhook_relay_free.restype = None
        lib.gdrhook_relay_free.argtypes = [c.c_void_p]
        lib.gdrhook_relay_poll.restype = c.c_uint32
        lib.gdrhook_relay_poll.argtypes = [
            c.c_void_p, c.POINTER(_abi.gdrhook_relay_event), c.c_uint32]
        lib.gdrhook_relay_dropped.restype = c.c_uint64
        lib.gdrhook_relay_dropped.argtypes = [c.c_void_p]
        _relay = lib
    return _relay


class Event:
    """One event: type ("alloc", "free", "untrusted"), api, the range
    (an gdrhook.Range), t (CLOCK_MONOTONIC ns) and tid of the call."""

    __slots__ = ("type", "api", "range", "t", "tid")

    def __init__(self, raw):
        from . import Range
        self.type = _NAMES.get(raw.ev.type, str(raw.ev.type))
        self.api = raw.api.decode("ascii", "replace")
        self.range = Range.from_c(raw.ev.range)
        self.t = raw.t
        self.tid = raw.tid

    def __repr__(self):
        return "Event(%s %s %s tid=%d)" % (self.type, self.api, self.range,
                                           self.tid)


class Subscription:
    """gdrhook.subscribe(): events of the types in mask, in a ring of
    `capacity` events (a power of two).  With `callback`, a daemon thread
    calls callback(event) for each, every `interval` seconds; else call
    poll().  close() (or the end of a with block) unsubscribes."""

    def __init__(self, mask=ALLOC | FREE | UNTRUSTED, capacity=1 << 16,
                 callback=None, interval=0.01):
        lib, _, _ = _lib.load()
        relay = _relay_lib()
        self._lib = lib
        self._relay = relay
        self._lock = threading.Lock()
        self._ring = relay.gdrhook_relay_new(capacity)
        if not self._ring:
            raise ValueError("capacity must be a power of two, 2 to 2^24")
        self._buf = (_abi.gdrhook_relay_event * 256)()
        fn = ctypes.cast(relay.gdrhook_relay_push, ctypes.c_void_p)
        rc = lib.gdrhook_subscribe(mask, fn, self._ring)
        if rc < 0:
            relay.gdrhook_relay_free(self._ring)
            self._ring = None
            raise OSError(-rc, "gdrhook_subscribe: %s" % os.strerror(-rc))
        self.handle = rc
        self._thread = None
        self._stop = threading.Event()
        if callback is not None:
            self._thread = threading.Thread(
                target=self._run, args=(callback, interval),
                name="gdrhook-subscription", daemon=True)
            self._thread.start()

    @property
    def dropped(self):
        """Events lost to a full ring so far."""
        with self._lock:
            if self._ring is None:
                return self._dropped_at_close
            return self._relay.gdrhook_relay_dropped(self._ring)

    def poll(self):
        """The events delivered since the last poll, oldest first."""
        out = []
        with self._lock:
            if self._ring is None:
                return out
            buf = self._buf
            while True:
                n = self._relay.gdrhook_relay_poll(self._ring, buf, len(buf))
                out.extend(Event(buf[i]) for i in range(n))
                if n < len(buf):
                    return out

    def _run(self, callback, interval):
        while not self._stop.wait(interval):
            for ev in self.poll():
                callback(ev)
        for ev in self.poll():
            callback(ev)

    def close(self):
        """Unsubscribe: no event is added once this returns; the thread,
        if any, delivers what is left and ends.  The ring is freed only
        when gdrhook confirms no callback runs any more."""
        with self._lock:
            if self._ring is None or self.handle is None:
                return
            rc = self._lib.gdrhook_unsubscribe(self.handle)
            self.handle = None
        if self._thread is not None and \
                self._thread is not threading.current_thread():
            self._stop.set()
            self._thread.join()
        with self._lock:
            self._dropped_at_close = \
                self._relay.gdrhook_relay_dropped(self._ring)
            if rc == 0:
                self._relay.gdrhook_relay_free(self._ring)
            # else a callback may still write the ring: left to the process
            self._ring = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
