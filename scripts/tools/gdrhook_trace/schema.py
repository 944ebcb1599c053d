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

The library's build may generate the same table as JSON (the same shape,
{"version": N, "events": {...}}); a file events.schema.json next to this
module replaces the built-in table of its version (load_json()).
"""

import json
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


# Format version 1: src/evlog.c as of this tool.
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
    # Provisional until the library's generated table is dropped in
    # (events.schema.json): v1's events, each call also stamped with its
    # end; alloc/free/restore say when they took effect, at the end.
    t = {k: {"fields": dict(v["fields"]), "call": v["call"],
             "time": v["time"]} for k, v in V1.items()}
    for k, v in t.items():
        if v["call"] or k == "restore":
            v["fields"]["t_start"] = "u"
            v["time"] = "end"
    t["start"]["fields"].update(lost="u")
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


def check_table(events):
    """Raise SchemaError unless `events` has the shape described above."""
    if type(events) is not dict or not events:
        raise SchemaError("'events' is not a non-empty object")
    for name, e in events.items():
        if type(e) is not dict or type(e.get("fields")) is not dict:
            raise SchemaError("event %r has no 'fields' object" % name)
        for f, ty in e["fields"].items():
            if ty not in TYPES:
                raise SchemaError("event %r field %r: unknown type %r"
                                  % (name, f, ty))
        if e.get("time", "start") not in ("start", "end"):
            raise SchemaError("event %r: 'time' is neither start nor end"
                              % name)
        e.setdefault("time", "start")
        e["call"] = bool(e.get("call", False))
    return events


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
    # pkgutil reads it inside the zip application too.
    try:
        data = pkgutil.get_data(__package__, "events.schema.json")
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
