# SPDX-License-Identifier: MIT
"""Finding and loading libgdrhook: the copy the process has preloaded if
there is one, else the installed one (the place `make install` or the
package wrote into _build.py), else the build tree's, else the loader's
search path by SONAME."""

import ctypes
import os

from . import _abi

try:
    from . import _build        # written by make and make install
except ImportError:             # run from the source tree unbuilt
    _build = None

SONAME = getattr(_build, "SONAME", "libgdrhook.so.1")


def _mapped():
    try:
        with open("/proc/self/maps", encoding="utf-8",
                  errors="replace") as f:
            for ln in f:
                parts = ln.split(None, 5)
                if len(parts) < 6:
                    continue
                path = parts[5].strip()
                base = os.path.basename(path)
                if base == "libgdrhook.so" or base.startswith("libgdrhook.so."):
                    return path
    except OSError:
        pass
    return None


# Taken when the package is imported, before it may load a copy itself:
# a library mapped then came with the process (LD_PRELOAD, a program or
# extension linked with -lgdrhook), and its hooks are in the call path.
_PRELOADED = _mapped()


def preloaded_path():
    """The path of the libgdrhook this process had mapped when the
    package was imported, or None."""
    return _PRELOADED


def candidates():
    """Where an installed or built library may be, most specific first."""
    out = []
    libdir = getattr(_build, "LIBDIR", None)
    if libdir:
        out.append(os.path.join(libdir, SONAME))
    # The build tree: build/python/gdrhook/ -> build/libgdrhook.so
    here = os.path.dirname(os.path.abspath(__file__))
    out.append(os.path.join(here, "..", "..", "libgdrhook.so"))
    return [os.path.normpath(p) for p in out]


def _declare(lib):
    c = ctypes
    R = _abi.gdrhook_range
    for name, res, args in (
            ("gdrhook_lookup", c.c_int, [c.c_void_p, c.c_size_t,
                                         c.POINTER(R)]),
            ("gdrhook_trusted", c.c_int, []),
            ("gdrhook_subscribe", c.c_int, [c.c_uint32, c.c_void_p,
                                            c.c_void_p]),
            ("gdrhook_unsubscribe", c.c_int, [c.c_int]),
            ("gdrhook_get_stats", c.c_int, [c.POINTER(_abi.gdrhook_stats)]),
            ("gdrhook_flush_log", None, []),
            ("gdrhook_api_version", c.c_uint, []),
            ("gdrhook_version", c.c_char_p, []),
            ("gdrhook_info", c.c_int, [c.c_int, c.c_uint])):
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    return lib


_loaded = None


def load():
    """(ctypes library, its path, preloaded?); OSError when none is found."""
    global _loaded
    if _loaded is not None:
        return _loaded
    path = preloaded_path()
    if path is not None:
        # The mapped copy itself: RTLD_NOLOAD never maps a second one.
        lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LOCAL)
        _loaded = (_declare(lib), path, True)
        return _loaded
    tried = []
    for p in candidates() + [SONAME]:
        if os.sep in p and not os.path.exists(p):
            tried.append(p)
            continue
        try:
            lib = ctypes.CDLL(p)
        except OSError as e:
            tried.append("%s (%s)" % (p, e))
            continue
        _loaded = (_declare(lib), p, False)
        return _loaded
    raise OSError("gdrhook: no libgdrhook found: not preloaded, and none "
                  "at " + ", ".join(tried))
