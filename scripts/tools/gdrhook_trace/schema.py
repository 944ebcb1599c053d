# SPDX-License-Identifier: MIT
"""The event log's schema, as data: one table per log format version.

Each table maps an event name to a dict with
  "fields": {field: type}   fields besides the common t, pid, tid, ev
  "time":   "start"|"end"   what `t` of the record is for a hooked call:
                            the call's start, or its end (then the start
                            is the "t_start" field, or t - dur_ns)
  "call":   bool            a hooked call with its own duration (a
                            Perfetto slice)
Types: "u" unsigned integer, "i" signed integer, "x" address or handle
(hex string), "s" string, "b" boolean.

The library generates its table as JSON (hooks/events.schema.json:
{"version": N, "events": {name: {"t": "start"|"end"|"now"|"at", "meta":
bool, "fields": [{"name", "type"}...], "flags": [{"name", "value"}...]}}},
types u64/u32/i32/hex/str/kind/bool); from_json() reads that shape, or
this module's own.  The file bundled into the tool, or else the one in
the source tree, replaces the built-in table of its version.
"""

import json
import os
import pkgutil
import sys

COMMON = {"t": "u", "pid": "i", "tid": "i", "ev": "s"}

_ALLOC = {"api": "s", "ptr": "x", "size": "u", "dev": "i", "gen": "u",
          "kind": "s", "ctx": "x", "rc": "i", "dur_ns": "u"}
_CTX = {"api": "s", "ctx": "x", "dev": "i", "rc": "i", "dur_ns": "u",
        "dropped": "u", "dropped_bytes": "u"}
_POOL = {"api": "s", "pool": "x", "rc": "i", "dur_ns": "u"}
# Registration-cache events may also carry the call's api/rc/dur_ns/dev.
_CACHE_EXTRA = {"api": "s", "rc": "i", "dur_ns": "u", "dev": "i"}
_PIN = dict({"ptr": "x", "size": "u", "gen": "u", "backend": "s"},
            **_CACHE_EXTRA)
_REG = dict({"ptr": "x", "size": "u", "gen": "u", "mr": "x", "pd": "x",
             "access": "u", "hit": "b"}, **_CACHE_EXTRA)
_LOOKUP = dict({"ptr": "x", "size": "u", "gen": "u"}, **_CACHE_EXTRA)


def _ev(fields, call=False, time="start"):
    return {"fields": dict(fields), "call": call, "time": time}


# Format version 1: src/evlog (evlog_sink.c, gh_events.c) as of this tool.
V1 = {
    "start": _ev({"v": "u", "exe": "s", "wall_ns": "u"}),
    "fork": _ev({"parent": "i"}),
    "alloc": _ev(_ALLOC, call=True),
    "free": _ev(dict(_ALLOC, tracked="b", implicit="b"), call=True),
    "restore": _ev(dict(_ALLOC, implicit="b")),
    "ctx_destroy": _ev(_CTX, call=True),
    "ctx_reset": _ev(_CTX, call=True),
    "ctx_release": _ev(_CTX, call=True),
    "pool_trim": _ev(_POOL, call=True),
    "pool_destroy": _ev(_POOL, call=True),
    "untrusted": _ev({"api": "s", "why": "s"}),
    "audit": _ev({"api": "s", "ptr": "x", "size": "u", "gen": "u",
                  "what": "s"}),
    "pin": _ev(_PIN, call=True),
    "unpin": _ev(_PIN, call=True),
    "reg": _ev(_REG, call=True),
    "dereg": _ev(_REG, call=True),
    "hit": _ev(_LOOKUP),
    "miss": _ev(_LOOKUP),
    "revoke": _ev(_LOOKUP),
    "exit": _ev({"events": "u", "dropped": "u", "live": "u",
                 "live_bytes": "u"}),
}


def _v2():
    # Version 2 as the library's table (hooks/events.table) defines it
    # while this is written; the generated events.schema.json, when
    # present, replaces it.  Each record's t is when it took effect: an
    # allocation's at the end of its call, everything else at the start.
    t = {k: {"fields": dict(v["fields"]), "call": v["call"],
             "time": v["time"]} for k, v in V1.items()}
    for k in ("alloc", "restore"):
        t[k]["time"] = "end"
        t[k]["fields"].update(tracked="b", implicit="b")
    t["restore"]["call"] = True         # it has a duration: a slice
    for k in ("reg", "dereg"):
        del t[k]["fields"]["hit"]
    for k in ("hit", "miss"):
        t[k] = _ev(dict(_LOOKUP, mr="x", pd="x", access="u"), call=True)
    t["revoke"]["fields"].update(dev="i")
    t["start"]["fields"].update(crash_safe="b", mode="s")
    t["recovered"] = _ev({"wall_ns": "u", "events": "u", "dropped": "u",
                          "by": "i"})
    return t


V2 = _v2()

SCHEMAS = {1: V1, 2: V2}

# Events whose effect starts when their call returns (an allocation exists
# from then on); every other event acts when its call starts (a free is
# revoked before the real free runs).  The replay orders by this time.
EFFECT_AT_END = frozenset(("alloc", "restore"))
TYPES = ("u", "i", "x", "s", "b")


class SchemaError(Exception):
    pass


# The library's type names -> ours.
TYPE_NAMES = {"u64": "u", "u32": "u", "i32": "i", "i64": "i", "hex": "x",
              "str": "s", "kind": "s", "bool": "b"}


def _type(ty):
    if ty in TYPES:
        return ty
    if type(ty) is str:
        return TYPE_NAMES.get(ty.split(":", 1)[0])
    return None


def check_table(events):
    """Our table from `events` in either shape; SchemaError if neither."""
    if type(events) is not dict or not events:
        raise SchemaError("'events' is not a non-empty object")
    out = {}
    for name, e in events.items():
        if type(e) is not dict:
            raise SchemaError("event %r is not an object" % name)
        fl = e.get("fields")
        if type(fl) is list:
            try:
                fl = {f["name"]: f["type"] for f in fl}
                fl.update({f["name"]: "b" for f in e.get("flags") or []})
            except (TypeError, KeyError):
                raise SchemaError("event %r: a field without name or type"
                                  % name) from None
        if type(fl) is not dict:
            raise SchemaError("event %r has no 'fields'" % name)
        fields = {}
        for f, ty in fl.items():
            fields[f] = _type(ty)
            if fields[f] is None:
                raise SchemaError("event %r field %r: unknown type %r"
                                  % (name, f, ty))
        time = e.get("time", e.get("t", "start"))
        if time not in ("start", "end", "now", "at"):
            raise SchemaError("event %r: unknown time %r" % (name, time))
        call = e.get("call")
        if call is None:    # the library's shape: a call has a duration
            call = "dur_ns" in fields and not e.get("meta", False)
        out[name] = {"fields": fields, "call": bool(call),
                     "time": "end" if time == "end" else "start"}
    return out


def from_json(js, name):
    """A generated schema (decoded JSON) -> (version, events)."""
    if type(js) is not dict or type(js.get("version")) is not int:
        raise SchemaError("%s: no integer 'version'" % name)
    return js["version"], check_table(js.get("events"))


def load_json(path):
    """Read a generated schema file; return (version, events)."""
    try:
        with open(path, encoding="utf-8") as f:
            js = json.load(f)
    except (OSError, ValueError, RecursionError) as e:
        raise SchemaError("cannot read %s: %s" % (path, e)) from None
    return from_json(js, path)


def _plug_generated():
    # pkgutil reads it inside the zip application too; from a source tree
    # the tree's own file.
    try:
        data = pkgutil.get_data(__package__, "events.schema.json")
    except OSError:
        here = os.path.dirname(os.path.abspath(__file__))
        try:
            with open(os.path.join(here, "..", "..", "..", "hooks",
                                   "events.schema.json"), "rb") as f:
                data = f.read()
        except OSError:
            return
    try:
        v, ev = from_json(json.loads(data), "events.schema.json")
    except (ValueError, RecursionError, SchemaError) as e:
        sys.stderr.write("gdrhook-trace: warning: bundled event schema "
                         "ignored: %s\n" % e)
        return
    SCHEMAS[v] = ev


_plug_generated()

LATEST = max(SCHEMAS)
# Hex fields of any version, for printing.
HEX_FIELDS = frozenset(f for t in SCHEMAS.values() for e in t.values()
                       for f, ty in e["fields"].items() if ty == "x")
