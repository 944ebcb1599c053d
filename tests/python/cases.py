#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tests/python/cases.py CASE: one case of the gdrhook Python package's
tests, in a process of its own (tests/python/run sets the environment:
PYTHONPATH, the CUDA driver double, LD_PRELOAD).  Exit 0 pass, 1 fail
(the reason on stdout), 77 skip (the reason on stdout)."""

import ctypes
import json
import os
import re
import subprocess
import sys
import tempfile
import threading

TOP = os.path.normpath(os.path.join(os.path.dirname(
    os.path.abspath(__file__)), "..", ".."))
BUILD = os.path.join(TOP, os.environ.get("BUILD", "build"))
SCRATCH = os.environ.get("SCRATCH") or tempfile.mkdtemp()


class Fail(Exception):
    pass


def check(cond, what, got=None):
    if not cond:
        raise Fail(what + ("" if got is None else ": got %r" % (got,)))


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


class Cuda:
    """The CUDA driver (the double here) through ctypes: a context and
    device memory.  Under LD_PRELOAD gdrhook's dlsym hook hands ctypes
    its wrappers."""

    def __init__(self):
        c = ctypes
        self.lib = c.CDLL("libcuda.so.1", mode=os.RTLD_NOW | c.RTLD_GLOBAL)
        self.lib.cuMemAlloc_v2.argtypes = [c.POINTER(c.c_uint64), c.c_size_t]
        self.lib.cuMemFree_v2.argtypes = [c.c_uint64]
        check(self.lib.cuInit(0) == 0, "cuInit")
        dev = c.c_int()
        check(self.lib.cuDeviceGet(c.byref(dev), 0) == 0, "cuDeviceGet")
        ctx = c.c_void_p()
        check(self.lib.cuDevicePrimaryCtxRetain(c.byref(ctx), dev) == 0,
              "cuDevicePrimaryCtxRetain")
        check(self.lib.cuCtxSetCurrent(ctx) == 0, "cuCtxSetCurrent")

    def alloc(self, size):
        p = ctypes.c_uint64()
        rc = self.lib.cuMemAlloc_v2(ctypes.byref(p), size)
        check(rc == 0, "cuMemAlloc_v2(%d)" % size, rc)
        return p.value

    def free(self, ptr):
        rc = self.lib.cuMemFree_v2(ptr)
        check(rc == 0, "cuMemFree_v2", rc)


def need_preload():
    import gdrhook
    check(gdrhook.preloaded() is not None, "run under LD_PRELOAD (run sets it)")
    return gdrhook


# ---------------------------------------------------------------- cases

def case_abi():
    """Every generated ctypes struct has the C compiler's size and offsets."""
    from gdrhook import _abi
    import ctypes as c
    structs = [v for v in vars(_abi).values()
               if isinstance(v, type) and issubclass(v, c.Structure)]
    check(len(structs) >= 4, "structs generated", [s.__name__ for s in structs])
    lines, want = [], []
    for s in structs:
        lines.append('P("%s", sizeof(struct %s));' % (s.__name__, s.__name__))
        want.append("%s %d" % (s.__name__, c.sizeof(s)))
        for name, _ in s._fields_:
            lines.append('P("%s.%s", offsetof(struct %s, %s));'
                         % (s.__name__, name, s.__name__, name))
            want.append("%s.%s %d" % (s.__name__, name,
                                      getattr(s, name).offset))
    src = os.path.join(SCRATCH, "abi.c")
    with open(src, "w") as f:
        f.write("#include <stddef.h>\n#include <stdio.h>\n#include <gdrhook.h>\n"
                "#include \"_relay.h\"\n#define P(n, v) printf(\"%%s %%zu\\n\", n, "
                "(size_t)(v))\nint main(void)\n{\n%s\nreturn 0;\n}\n"
                % "\n".join(lines))
    exe = os.path.join(SCRATCH, "abi")
    cc = os.environ.get("CC", "cc")
    r = subprocess.run([cc, "-I" + os.path.join(TOP, "include"),
                        "-I" + os.path.join(TOP, "scripts/python/gdrhook"),
                        "-o", exe, src], capture_output=True, text=True)
    check(r.returncode == 0, "the probe compiles", r.stderr)
    got = subprocess.run([exe], capture_output=True, text=True).stdout.split("\n")
    diff = [(w, g) for w, g in zip(want, got) if w != g]
    check(not diff and len(got) - 1 == len(want), "ctypes = C layouts", diff)


def case_not_preloaded():
    """Without LD_PRELOAD: the build tree's library, not mistaken for a
    preloaded one."""
    import gdrhook
    from gdrhook import _abi
    check(gdrhook.preloaded() is None, "preloaded() is None",
          gdrhook.preloaded())
    check(os.path.realpath(gdrhook.library_path()) ==
          os.path.realpath(os.path.join(BUILD, "libgdrhook.so")),
          "the build tree's library", gdrhook.library_path())
    with open(os.path.join(TOP, "src/kmod/dkms.conf")) as f:
        ver = re.search(r'PACKAGE_VERSION="([^"]+)"', f.read()).group(1)
    check(gdrhook.version() == ver, "version() is the tree's", gdrhook.version())
    check(gdrhook.api_version() == _abi.API_VERSION, "api_version()")


def case_info():
    """info(): gdrhook_info()'s JSON as a dict, its text as a str."""
    gdrhook = need_preload()
    j = gdrhook.info(json=True)
    check(j["version"]["library"] == gdrhook.version() and
          len(j["cuda"]["gpus"]) == 2, "version and the double's 2 GPUs",
          j.get("version"))
    text = gdrhook.info()
    check(isinstance(text, str) and gdrhook.version() in text,
          "the text names the version", text[:200])


def case_lookup():
    """lookup: inside, past the end (ERANGE, with the range), host memory,
    after the free, a tensor-like object."""
    gdrhook = need_preload()
    cu = Cuda()
    p = cu.alloc(1 << 20)
    r = gdrhook.lookup(p + 100, 64)
    check(r is not None and r.base == p and r.size == 1 << 20 and
          r.kind == "device" and r.dev == 0 and r.gen > 0,
          "a range inside the allocation", r)
    try:
        gdrhook.lookup(p + 100, 1 << 20)
        raise Fail("a range past the end: no ERANGE")
    except gdrhook.GdrhookError as e:
        check(e.errno == 34 and e.range == r, "ERANGE with the range", e)
    buf = ctypes.create_string_buffer(64)
    check(gdrhook.lookup(ctypes.addressof(buf)) is None, "host memory: None")

    class Tensor:
        def data_ptr(self):
            return p + 4096

        def numel(self):
            return (1 << 20) // 4 - 1024

        def element_size(self):
            return 4
    check(gdrhook.lookup(Tensor()) == r, "a tensor: its whole extent")
    Tensor.numel = lambda self: (1 << 20) // 4
    try:
        gdrhook.lookup(Tensor())
        raise Fail("a tensor running past the allocation: no ERANGE")
    except gdrhook.GdrhookError as e:
        check(e.errno == 34, "a tensor past the end: ERANGE", e)
    cu.free(p)
    check(gdrhook.lookup(p) is None, "after the free: None")
    q = cu.alloc(1 << 20)
    r2 = gdrhook.lookup(q)
    check(r2 is not None and r2.gen != r.gen, "a new allocation, a new gen",
          (r, r2))
    check(gdrhook.trusted(), "the registry is trusted")


def case_stats():
    """stats(): the README's counters, in order, that count."""
    gdrhook = need_preload()
    with open(os.path.join(TOP, "README.md")) as f:
        text = f.read()
    table = text[text.index("<!-- stats:begin -->"):text.index("<!-- stats:end -->")]
    names = re.findall(r"^\| `(\w+)` \|", table, re.M)
    before = gdrhook.stats()
    check(list(before) == names, "keys = README's stats table", list(before))
    cu = Cuda()
    ps = [cu.alloc(4096 * (i + 1)) for i in range(3)]
    cu.free(ps[0])
    after = gdrhook.stats()
    check(after["allocs"] - before["allocs"] == 3 and
          after["frees"] - before["frees"] == 1 and
          after["live_bytes"] - before["live_bytes"] == 4096 * 5,
          "3 allocations, 1 free, their bytes live", after)


def case_subscribe():
    """poll(): each alloc and free, in order, with api, range, thread;
    the callback thread gets the same; none after close()."""
    gdrhook = need_preload()
    cu = Cuda()
    got = []
    cb = gdrhook.subscribe(callback=got.append, interval=0.001)
    with gdrhook.subscribe(gdrhook.ALLOC | gdrhook.FREE) as sub:
        p = cu.alloc(65536)
        r = gdrhook.lookup(p)
        cu.free(p)
        evs = sub.poll()
        check([(e.type, e.api) for e in evs] ==
              [("alloc", "cuMemAlloc_v2"), ("free", "cuMemFree_v2")],
              "alloc then free", evs)
        check(all(e.range == r for e in evs), "the allocation's range", evs)
        check(all(e.tid == threading.get_native_id() for e in evs),
              "this thread's tid", evs)
        check(sub.poll() == [] and sub.dropped == 0, "nothing more, none dropped")
    cb.close()
    check([(e.type, e.range.gen) for e in got] ==
          [(e.type, e.range.gen) for e in evs], "the callback: the same", got)
    after = gdrhook.subscribe(gdrhook.ALLOC)
    cu.alloc(4096)
    check(sub.poll() == [] and len(after.poll()) == 1,
          "closed: nothing; a new subscription: the alloc")
    after.close()
    try:
        gdrhook.subscribe(capacity=100)
        raise Fail("capacity 100 accepted")
    except ValueError:
        pass


def case_drops():
    """A full ring counts what it cannot hold; the hook never waits."""
    gdrhook = need_preload()
    cu = Cuda()
    sub = gdrhook.subscribe(gdrhook.ALLOC, capacity=4)
    ps = [cu.alloc(4096) for _ in range(10)]
    evs = sub.poll()
    check([e.range.base for e in evs] == ps[:4] and sub.dropped == 6,
          "the first 4 delivered, 6 dropped", (evs, sub.dropped))
    cu.alloc(4096)
    check(len(sub.poll()) == 1, "room again after the poll")
    sub.close()
    check(sub.dropped == 6, "dropped kept after close", sub.dropped)


def free_thread_lib():
    so = os.path.join(SCRATCH, "libfree_thread.so")
    if not os.path.exists(so):
        r = subprocess.run([os.environ.get("CC", "cc"), "-shared", "-fPIC",
                            "-O1", "-o", so,
                            os.path.join(TOP, "tests/python/free_thread.c"),
                            "-ldl", "-lpthread"], capture_output=True, text=True)
        check(r.returncode == 0, "free_thread.c builds", r.stderr)
    lib = ctypes.PyDLL(so)          # PyDLL: the GIL stays held in the call
    lib.free_on_thread.argtypes = [ctypes.c_uint64]
    return lib


def case_gil():
    """A free on a thread Python never saw, while this thread waits for it
    holding the GIL: the subscription must not need the GIL (a ctypes
    callback would wait for it for ever: case hazard)."""
    gdrhook = need_preload()
    cu = Cuda()
    lib = free_thread_lib()
    with gdrhook.subscribe(gdrhook.FREE) as sub:
        p = cu.alloc(1 << 16)
        check(lib.free_on_thread(p) == 0, "cuMemFree_v2 on the other thread")
        evs = sub.poll()
    check(len(evs) == 1 and evs[0].range.base == p and
          evs[0].tid != threading.get_native_id(),
          "the free, from the other thread", evs)


def case_hazard():
    """What the relay avoids, shown: the same free with a ctypes callback
    subscribed straight to gdrhook_subscribe never returns."""
    need_preload()
    free_thread_lib()               # built here, not in the child
    child = subprocess.Popen([sys.executable, __file__, "_naive"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
    first = child.stdout.readline()
    try:
        check(first == "freeing\n", "the child gets to the free", first)
        # Stuck for good: nothing can give the GIL back.  3 s only bound
        # how long this waits to say so.
        out, _ = child.communicate(timeout=3)
        raise Fail("a ctypes callback in the hook did not deadlock: rc %d %s"
                   % (child.returncode, out))
    except subprocess.TimeoutExpired:
        pass
    finally:
        child.kill()
        child.communicate()


def case__naive():
    import gdrhook
    from gdrhook import _abi, _lib
    lib = _lib.load()[0]
    cu = Cuda()
    free = free_thread_lib()
    fn_t = ctypes.CFUNCTYPE(None, ctypes.POINTER(_abi.gdrhook_event),
                            ctypes.c_void_p)
    cb = fn_t(lambda ev, arg: None)
    check(lib.gdrhook_subscribe(gdrhook.FREE, ctypes.cast(cb, ctypes.c_void_p),
                                None) >= 0, "subscribed")
    p = cu.alloc(1 << 16)
    print("freeing", flush=True)
    free.free_on_thread(p)
    print("returned", flush=True)


def write_log():
    log = os.path.join(SCRATCH, "trace.jsonl")
    env = dict(os.environ, GDRHOOK_TRACE=log,
               LD_PRELOAD=os.path.join(BUILD, "libgdrhook.so"),
               LD_LIBRARY_PATH=os.path.join(BUILD, "fake"))
    r = subprocess.run([os.path.join(BUILD, "examples", "driver_api")],
                       env=env, capture_output=True, text=True)
    check(r.returncode == 0, "driver_api under the shim", r.stderr)
    return log


def case_log_rows():
    """read_log: every record of a log, as the trace tool reads it."""
    import gdrhook
    log = write_log()
    counts = {}
    allocs = []
    with open(log) as f:
        for ln in f:
            o = json.loads(ln)
            counts[o["ev"]] = counts.get(o["ev"], 0) + 1
            if o["ev"] == "alloc":
                allocs.append((o["api"], int(o["ptr"], 16), o["size"]))
    rows = gdrhook.read_log(log, exe=True)
    got = {}
    for r in rows:
        got[r["ev"]] = got.get(r["ev"], 0) + 1
    check(got == counts and "alloc" in got and "start" in got,
          "one row per record", (got, counts))
    check([(r["api"], r["ptr"], r["size"]) for r in rows
           if r["ev"] == "alloc"] == allocs, "alloc rows: api, ptr, size", rows)
    check(all(r["exe"].endswith("driver_api") for r in rows), "exe", rows[0])
    gz = log + ".gz"
    subprocess.run(["gzip", "-k", log], check=True)
    check(gdrhook.read_log(gz) == gdrhook.read_log(log), "gzip: the same")
    empty = os.path.join(SCRATCH, "empty.jsonl")
    open(empty, "w").close()
    try:
        gdrhook.read_log(empty)
        raise Fail("an empty log: no ValueError")
    except ValueError as e:
        check("no usable events" in str(e), "an empty log: said", e)


def case_pandas():
    """log_dataframe: the rows as a DataFrame."""
    try:
        import pandas  # noqa: F401
    except ImportError:
        skip("pandas is not installed (apt-get install python3-pandas)")
    import gdrhook
    log = write_log()
    rows = gdrhook.read_log(log)
    df = gdrhook.log_dataframe(log)
    check(len(df) == len(rows) and {"t", "pid", "tid", "ev", "api", "ptr",
                                    "size"} <= set(df.columns),
          "a row per record, a column per field", list(df.columns))
    a = df[df.ev == "alloc"]
    check(int(a["size"].sum()) == sum(r["size"] for r in rows
                                      if r["ev"] == "alloc"),
          "alloc sizes add up", a)


def case_torch_example():
    """examples/torch_train.py uses the package and declares no struct."""
    src = os.path.join(TOP, "examples", "torch_train.py")
    with open(src) as f:
        text = f.read()
    check("import gdrhook" in text and "Structure" not in text,
          "imports gdrhook, declares no ctypes struct")
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)     # it finds the build tree's package
    r = subprocess.run([sys.executable, src, "--steps", "1"], env=env,
                       capture_output=True, text=True)
    check(r.returncode == 0 and "gdrhook is preloaded" in r.stdout,
          "runs, and sees gdrhook preloaded", r.stdout + r.stderr)
    env.pop("LD_PRELOAD", None)
    r = subprocess.run([sys.executable, src, "--steps", "1"], env=env,
                       capture_output=True, text=True)
    check(r.returncode == 0 and "gdrhook is not preloaded" in r.stdout,
          "without the shim: says so", r.stdout + r.stderr)


def case_installed():
    """make install: the package finds the installed library, preloaded
    or not, and the tool's reader; make uninstall leaves nothing."""
    prefix = os.path.join(SCRATCH, "prefix")
    env = dict(os.environ)
    for k in ("PYTHONPATH", "LD_PRELOAD", "MAKEFLAGS", "MAKELEVEL"):
        env.pop(k, None)
    mk = ["make", "--no-print-directory", "-C", TOP,
          "BUILD=" + os.path.relpath(BUILD, TOP), "PREFIX=" + prefix]
    r = subprocess.run(mk + ["install"], env=env, capture_output=True,
                       text=True)
    check(r.returncode == 0, "make install", r.stdout[-2000:] + r.stderr)
    env["PYTHONPATH"] = os.path.join(prefix, "lib/python3/dist-packages")
    log = write_log()
    prog = ("import gdrhook, sys; print(gdrhook.library_path()); "
            "print(gdrhook.preloaded()); "
            "print(len(gdrhook.read_log(sys.argv[1])))")
    r = subprocess.run([sys.executable, "-c", prog, log], env=env, cwd="/",
                       capture_output=True, text=True)
    out = r.stdout.split("\n")
    check(r.returncode == 0 and out[0] == prefix + "/lib/libgdrhook.so.1" and
          out[1] == "None" and int(out[2]) > 0,
          "the installed library and reader", r.stdout + r.stderr)
    env["LD_PRELOAD"] = prefix + "/lib/libgdrhook.so.1"
    r = subprocess.run([sys.executable, "-c", prog, log], env=env, cwd="/",
                       capture_output=True, text=True)
    out = r.stdout.split("\n")
    check(r.returncode == 0 and os.path.realpath(out[0]) ==
          os.path.realpath(prefix + "/lib/libgdrhook.so.1") and
          out[0] == out[1], "preloaded: that one", r.stdout + r.stderr)
    del env["LD_PRELOAD"], env["PYTHONPATH"]
    r = subprocess.run(mk + ["uninstall"], env=env, capture_output=True,
                       text=True)
    check(r.returncode == 0 and not os.path.exists(prefix),
          "make uninstall: nothing left, not even empty folders",
          r.stderr + str(list(os.walk(prefix))))


def main():
    name = sys.argv[1]
    fn = globals().get("case_" + name)
    if fn is None:
        print("no case %s" % name)
        return 2
    try:
        fn()
    except Fail as e:
        print("FAIL: %s" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
