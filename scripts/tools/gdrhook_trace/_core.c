// SPDX-License-Identifier: MIT
/*
 * gdrhook-trace's optional reader in C: runs of one process's allocation
 * and registration-cache records in the library's own layout (reader._MEM,
 * parse_cache()), parsed, counted and turned into the replay's operations
 * as analysis.py does it for such records in Python.
 * The Python code stays the definition: a line this file is not sure
 * about (another layout, a number past 18 digits, an event the format
 * version does not give this layout) is left to it, and tests/trace/run
 * checks that both give the same outputs.
 *
 * Built against the stable ABI (Py_LIMITED_API), so one build serves any
 * python3 >= 3.9; the tool runs without it, only slower.
 */
#include "_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One parsed line.  Offsets are into the block's bytes. */
struct row {
	uint64_t t, ptr, size, gen, ctx, dur;
	int64_t pid, tid, dev, rc;
	uint32_t line, line_len;
	uint32_t api, api_len;
	uint32_t kind, kind_len;
	uint8_t ev, tracked, implicit, has_dur, pad[4];
};

/* The `mem` family (alloc, free, restore) and the registration cache's
 * events in the library's layout (hooks/events.table: families lookup,
 * pin, reg, revoke).  Their order is exported as EVENTS: analysis.py's
 * BlockReader builds emit()'s tables and segments()'s mask from it. */
enum {
	EV_ALLOC, EV_FREE, EV_RESTORE,
	EV_HIT, EV_MISS, EV_PIN, EV_UNPIN, EV_REG, EV_DEREG, EV_REVOKE,
	EV_N
};
static const char *const ev_name[EV_N] = {
	"alloc", "free", "restore",
	"hit", "miss", "pin", "unpin", "reg", "dereg", "revoke"
};
#define EVTAB (12 + EV_N - EV_HIT)	/* mem events x 4 flag sets, others */

static int is_mem(int ev)
{
	return ev <= EV_RESTORE;
}

static int evtab_index(const struct row *r)
{
	return is_mem(r->ev) ? r->ev * 4 + r->tracked * 2 + r->implicit :
			       12 + r->ev - EV_HIT;
}

/* Decimal numbers past this many digits go to Python (its ints have no
 * bound; 18 digits always fit, and sums of them fit in 128 bits). */
#define MAX_DEC 18
#define MAX_HEX 16

struct cur {
	const char *p, *end;
};

static int lit(struct cur *c, const char *s, size_t n)
{
	if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n))
		return 0;
	c->p += n;
	return 1;
}

#define LIT(c, s) lit(c, s, sizeof(s) - 1)

/* (0|[1-9][0-9]*) */
static int dec(struct cur *c, uint64_t *v)
{
	const char *p = c->p;
	uint64_t x = 0;
	int n = 0;

	if (p < c->end && *p == '0') {
		c->p = p + 1;
		*v = 0;
		return 1;
	}
	while (p < c->end && *p >= '0' && *p <= '9') {
		if (++n > MAX_DEC)
			return 0;
		x = x * 10 + (uint64_t)(*p++ - '0');
	}
	if (!n)
		return 0;
	c->p = p;
	*v = x;
	return 1;
}

/* -?(0|[1-9][0-9]*) */
static int sdec(struct cur *c, int64_t *v)
{
	int neg = c->p < c->end && *c->p == '-';
	uint64_t x;

	c->p += neg;
	if (!dec(c, &x))
		return 0;
	*v = neg ? -(int64_t)x : (int64_t)x;
	return 1;
}

/* "0x[0-9a-fA-F]{1,32}", here at most MAX_HEX digits */
static int hex(struct cur *c, uint64_t *v)
{
	uint64_t x = 0;
	int n = 0;

	if (!LIT(c, "\"0x"))
		return 0;
	for (; c->p < c->end; c->p++) {
		char ch = *c->p;
		unsigned d;

		if (ch >= '0' && ch <= '9')
			d = ch - '0';
		else if (ch >= 'a' && ch <= 'f')
			d = ch - 'a' + 10;
		else if (ch >= 'A' && ch <= 'F')
			d = ch - 'A' + 10;
		else
			break;
		if (++n > MAX_HEX)
			return 0;
		x = x << 4 | d;
	}
	*v = x;
	return n && LIT(c, "\"");
}

/* "[\x20\x21\x23-\x5b\x5d-\x7e]*": printable ASCII but '"' and '\' */
static int str(struct cur *c, const char *base, uint32_t *off, uint32_t *len)
{
	const char *s;

	if (!LIT(c, "\""))
		return 0;
	s = c->p;
	while (c->p < c->end && *c->p >= 0x20 && *c->p <= 0x7e &&
	       *c->p != '"' && *c->p != '\\')
		c->p++;
	*off = (uint32_t)(s - base);
	*len = (uint32_t)(c->p - s);
	return LIT(c, "\"");
}

/*
 * The fields of a registration-cache record, in the library's order
 * (BlockReader.C_LAYOUTS): lookup (hit, miss): api ptr size gen dev mr pd
 * access dur_ns; pin (pin, unpin): ptr size gen dev backend rc dur_ns;
 * reg (reg, dereg): ptr size gen mr pd access rc dur_ns; revoke: ptr size
 * gen dev.  Only ptr, size, gen, dev, rc, dur_ns and api are counted.
 */
static int parse_cache(struct cur *c, const char *base, struct row *r)
{
	uint64_t skip;
	uint32_t off, len;
	int lookup = r->ev == EV_HIT || r->ev == EV_MISS;
	int pin = r->ev == EV_PIN || r->ev == EV_UNPIN;
	int reg = r->ev == EV_REG || r->ev == EV_DEREG;

	if (lookup && (!LIT(c, ",\"api\":") ||
		       !str(c, base, &r->api, &r->api_len)))
		return 0;
	if (!LIT(c, ",\"ptr\":") || !hex(c, &r->ptr) ||
	    !LIT(c, ",\"size\":") || !dec(c, &r->size) ||
	    !LIT(c, ",\"gen\":") || !dec(c, &r->gen))
		return 0;
	if (!reg && (!LIT(c, ",\"dev\":") || !sdec(c, &r->dev)))
		return 0;
	if (pin && (!LIT(c, ",\"backend\":") || !str(c, base, &off, &len)))
		return 0;
	if ((lookup || reg) &&
	    (!LIT(c, ",\"mr\":") || !hex(c, &skip) ||
	     !LIT(c, ",\"pd\":") || !hex(c, &skip) ||
	     !LIT(c, ",\"access\":") || !dec(c, &skip)))
		return 0;
	if ((pin || reg) && (!LIT(c, ",\"rc\":") || !sdec(c, &r->rc)))
		return 0;
	if (r->ev != EV_REVOKE) {
		if (!LIT(c, ",\"dur_ns\":") || !dec(c, &r->dur))
			return 0;
		r->has_dur = 1;
	}
	return 1;
}

/* The fields of an alloc, free or restore record (reader._MEM). */
static int parse_mem(struct cur *c, const char *base, struct row *r)
{
	if (!LIT(c, ",\"api\":") || !str(c, base, &r->api, &r->api_len) ||
	    !LIT(c, ",\"ptr\":") || !hex(c, &r->ptr) ||
	    !LIT(c, ",\"size\":") || !dec(c, &r->size) ||
	    !LIT(c, ",\"dev\":") || !sdec(c, &r->dev) ||
	    !LIT(c, ",\"gen\":") || !dec(c, &r->gen) ||
	    !LIT(c, ",\"kind\":") || !str(c, base, &r->kind, &r->kind_len) ||
	    !LIT(c, ",\"ctx\":") || !hex(c, &r->ctx) ||
	    !LIT(c, ",\"rc\":") || !sdec(c, &r->rc) ||
	    !LIT(c, ",\"dur_ns\":") || !dec(c, &r->dur))
		return 0;
	r->has_dur = 1;
	r->tracked = LIT(c, ",\"tracked\":false");
	r->implicit = LIT(c, ",\"implicit\":true");
	return 1;
}

static int parse_line(struct cur *c, const char *base, struct row *r)
{
	memset(r, 0, sizeof(*r));
	r->line = (uint32_t)(c->p - base);
	if (!LIT(c, "{\"t\":") || !dec(c, &r->t) ||
	    !LIT(c, ",\"pid\":") || !sdec(c, &r->pid) ||
	    !LIT(c, ",\"tid\":") || !sdec(c, &r->tid) ||
	    !LIT(c, ",\"ev\":\""))
		return 0;
	for (r->ev = 0; r->ev < EV_N; r->ev++) {
		size_t n = strlen(ev_name[r->ev]);

		/* the name and its closing quote ("pin" is no "pinned") */
		if ((size_t)(c->end - c->p) > n &&
		    !memcmp(c->p, ev_name[r->ev], n) && c->p[n] == '"') {
			c->p += n + 1;
			break;
		}
	}
	if (r->ev == EV_N ||
	    !(is_mem(r->ev) ? parse_mem(c, base, r) : parse_cache(c, base, r)) ||
	    !LIT(c, "}"))
		return 0;
	r->line_len = (uint32_t)(c->p - base) - r->line;
	return LIT(c, "\n");
}

/* The segment being collected by segments(). */
struct seg {
	Py_ssize_t lo, line;	/* first byte, first line (0-based) */
	int layout;
	int64_t pid;
	struct row *rows;
	size_t n, cap;
};

static int seg_close(PyObject *list, struct seg *g, Py_ssize_t hi)
{
	PyObject *item;

	if (hi == g->lo)
		return 0;
	if (g->layout)
		item = Py_BuildValue("(nnnLy#)", g->lo, hi, g->line,
				     (long long)g->pid, (const char *)g->rows,
				     (Py_ssize_t)(g->n * sizeof(*g->rows)));
	else
		item = Py_BuildValue("(nnnOO)", g->lo, hi, g->line, Py_None,
				     Py_None);
	if (!item || PyList_Append(list, item)) {
		Py_XDECREF(item);
		return -1;
	}
	Py_DECREF(item);
	g->n = 0;
	return 0;
}

/*
 * segments(data, max_line, events) -> [(lo, hi, first line, pid, rows)...]:
 * data (whole lines, each ended by a newline) cut into runs of lines in
 * order: a run of one process's records in the library's layout has its
 * pid and rows (the parsed lines, an opaque bytes object for emit()); any
 * other run has None for both and is read in Python.  events: a mask of
 * the events taken (bit i: EVENTS[i]); a line of max_line bytes or more
 * is never a record here.
 */
static PyObject *core_segments(PyObject *self, PyObject *args)
{
	const char *data, *p, *end;
	Py_ssize_t len, max_line, line = 0;
	struct seg g = { 0 };
	unsigned int events;
	PyObject *list;

	if (!PyArg_ParseTuple(args, "y#nI:segments", &data, &len, &max_line,
			      &events))
		return NULL;
	if (len > INT32_MAX) {
		PyErr_SetString(PyExc_ValueError, "segments: block too large");
		return NULL;
	}
	list = PyList_New(0);
	if (!list)
		return NULL;
	p = data;
	end = data + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *next = nl ? nl + 1 : end;
		struct cur c = { p, next };
		struct row r;
		int ok = nl && nl - p < max_line && parse_line(&c, data, &r) &&
			 c.p == next && (events >> r.ev & 1);

		if (!ok || !g.layout || r.pid != g.pid) {
			if (line && (ok || g.layout) &&
			    seg_close(list, &g, p - data))
				goto fail;
			if (!line || ok || g.layout) {
				g.lo = p - data;
				g.line = line;
				g.layout = ok;
				g.pid = ok ? r.pid : 0;
			}
		}
		if (ok) {
			if (g.n == g.cap) {
				size_t cap = g.cap ? g.cap * 2 : 256;
				struct row *rows = realloc(g.rows,
							   cap * sizeof(*rows));

				if (!rows) {
					PyErr_NoMemory();
					goto fail;
				}
				g.rows = rows;
				g.cap = cap;
			}
			g.rows[g.n++] = r;
		}
		p = next;
		line++;
	}
	if (line && seg_close(list, &g, len))
		goto fail;
	free(g.rows);
	return list;
fail:
	free(g.rows);
	Py_DECREF(list);
	return NULL;
}

/* API and kind names repeat: one str each, kept for the process's life. */
#define NAMES 64
#define NAME_MAX_LEN 64
static struct {
	uint32_t len;
	char s[NAME_MAX_LEN];
	PyObject *o;
} names[NAMES];
static int nnames;

/* The str of a name: a new reference, or NULL (error set). */
static PyObject *name_of(const char *s, uint32_t len, int *slot)
{
	PyObject *o;
	int i;

	*slot = -1;
	for (i = 0; i < nnames; i++)
		if (names[i].len == len && !memcmp(names[i].s, s, len)) {
			Py_INCREF(names[i].o);
			*slot = i;
			return names[i].o;
		}
	o = PyUnicode_FromStringAndSize(s, len);
	if (o && nnames < NAMES && len <= NAME_MAX_LEN) {
		names[nnames].len = len;
		memcpy(names[nnames].s, s, len);
		Py_INCREF(o);
		*slot = nnames;
		names[nnames++].o = o;
	}
	return o;
}

/* A name's index in the sorter's table; -1 with no error: the table is
 * full; -2: an error.  `cache` remembers the indexes of this call. */
static long sorter_name(struct sorter *srt, const char *s, uint32_t len,
			long *cache)
{
	int slot, full;
	PyObject *o = name_of(s, len, &slot);
	long i;

	if (!o)
		return -2;
	if (slot >= 0 && cache[slot] >= 0) {
		Py_DECREF(o);
		return cache[slot];
	}
	i = core_sorter_name(srt, o, &full);
	Py_DECREF(o);
	if (i < 0)
		return full ? -1 : -2;
	if (slot >= 0)
		cache[slot] = i;
	return i;
}

/* Per (API, operation) counts of one block, as ApiStat keeps them; the
 * operations: alloc, free, implicit free, then each cache event's own
 * (BlockReader.stat_ops). */
enum { OPC_ALLOC, OPC_FREE, OPC_IMPLICIT_FREE, OPC_CACHE };
#define STATS 32
struct apistat {
	const char *api;
	uint32_t api_len;
	int opc;
	uint64_t calls, failed, untracked, dur_n, dur_max;
	unsigned __int128 bytes, dur_sum;
};

static struct apistat *stat_of(struct apistat *st, int *nst, const char *api,
			    uint32_t len, int opc)
{
	int i;

	for (i = 0; i < *nst; i++)
		if (st[i].opc == opc && st[i].api_len == len &&
		    !memcmp(st[i].api, api, len))
			return &st[i];
	if (*nst == STATS)
		return NULL;
	st = &st[(*nst)++];
	memset(st, 0, sizeof(*st));
	st->api = api;
	st->api_len = len;
	st->opc = opc;
	return st;
}

static PyObject *u128(unsigned __int128 v)
{
	PyObject *hi, *sh, *lo, *sum;

	if (v <= UINT64_MAX)
		return PyLong_FromUnsignedLongLong((unsigned long long)v);
	hi = PyLong_FromUnsignedLongLong((unsigned long long)(v >> 64));
	lo = PyLong_FromUnsignedLongLong((unsigned long long)v);
	sh = PyLong_FromLong(64);
	sum = NULL;
	if (hi && lo && sh) {
		PyObject *up = PyNumber_Lshift(hi, sh);

		if (up)
			sum = PyNumber_Add(up, lo);
		Py_XDECREF(up);
	}
	Py_XDECREF(hi);
	Py_XDECREF(lo);
	Py_XDECREF(sh);
	return sum;
}

/* What the format version says of each (event, tracked, implicit). */
struct evinfo {
	PyObject *name;
	int end, at_end, call;
};

static int evinfo_of(PyObject *tab, int i, struct evinfo *e)
{
	PyObject *t = PyTuple_GetItem(tab, i);

	if (!t)
		return -1;
	if (t == Py_None) {
		e->name = NULL;
		return 0;
	}
	if (!PyArg_ParseTuple(t, "Uppp", &e->name, &e->end, &e->at_end,
			      &e->call))
		return -1;
	return 0;
}

static int put(PyObject *tuple, Py_ssize_t i, PyObject *v)
{
	if (!v)
		return -1;
	return PyTuple_SetItem(tuple, i, v);
}

/* A growing text; the block's slices are handed over as one str. */
struct text {
	char *s;
	size_t len, cap;
};

static char *text_room(struct text *x, size_t n)
{
	if (x->len + n > x->cap) {
		size_t cap = x->cap ? x->cap : 1 << 16;
		char *s;

		while (cap < x->len + n)
			cap *= 2;
		s = realloc(x->s, cap);
		if (!s) {
			PyErr_NoMemory();
			return NULL;
		}
		x->s = s;
		x->cap = cap;
	}
	return x->s + x->len;
}

static int text_put(struct text *x, const char *s, size_t n)
{
	char *d = text_room(x, n);

	if (!d)
		return -1;
	memcpy(d, s, n);
	x->len += n;
	return 0;
}

#define TEXT_LIT(x, s) text_put(x, s, sizeof(s) - 1)

static int text_u64(struct text *x, uint64_t v)
{
	char b[24];
	int i = sizeof(b);

	do {
		b[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	return text_put(x, b + i, sizeof(b) - (size_t)i);
}

static int text_i64(struct text *x, int64_t v)
{
	if (v < 0) {
		if (TEXT_LIT(x, "-"))
			return -1;
		return text_u64(x, -(uint64_t)v);
	}
	return text_u64(x, (uint64_t)v);
}

/* ns as microseconds with three decimals, as perfetto.us() writes them */
static int text_us(struct text *x, uint64_t ns)
{
	char *d;

	if (text_u64(x, ns / 1000) || !(d = text_room(x, 4)))
		return -1;
	ns %= 1000;
	d[0] = '.';
	d[1] = (char)('0' + ns / 100);
	d[2] = (char)('0' + ns / 10 % 10);
	d[3] = (char)('0' + ns % 10);
	x->len += 4;
	return 0;
}

/* The end of a Perfetto event of record r: category, start, duration (a
 * slice's), process, thread, and the record itself as its arguments. */
static int add_event_end(struct text *x, const char *data,
			 const struct row *r, const char *ev, uint64_t t,
			 int slice, long long trace_pid)
{
	if (TEXT_LIT(x, "\",\"cat\":\"") || text_put(x, ev, strlen(ev)) ||
	    TEXT_LIT(x, "\",\"ts\":") || text_us(x, t) ||
	    (slice && (TEXT_LIT(x, ",\"dur\":") || text_us(x, r->dur))) ||
	    TEXT_LIT(x, ",\"pid\":") || text_i64(x, trace_pid) ||
	    TEXT_LIT(x, ",\"tid\":") || text_i64(x, r->tid) ||
	    TEXT_LIT(x, ",\"args\":") ||
	    text_put(x, data + r->line, r->line_len) || TEXT_LIT(x, "}"))
		return -1;
	return 0;
}

/* perfetto.Writer._slice()'s text of a hooked call; slices of one block
 * are separated as the writer joins its parts */
static int add_slice(struct text *x, const char *data, const struct row *r,
		     const char *name, size_t name_len, const char *ev,
		     long long trace_pid, uint64_t t)
{
	if ((x->len && TEXT_LIT(x, ",\n")) ||
	    TEXT_LIT(x, "{\"ph\":\"X\",\"name\":\"") ||
	    text_put(x, name, name_len))
		return -1;
	if (r->rc && (TEXT_LIT(x, " (rc=") || text_i64(x, r->rc) ||
		      TEXT_LIT(x, ")")))
		return -1;
	return add_event_end(x, data, r, ev, t, 1, trace_pid);
}

/* perfetto.Writer.record()'s text of a record that is not a hooked call
 * (a revocation; a hit or miss of format version 1 is never read here) */
static int add_instant(struct text *x, const char *data, const struct row *r,
		       const char *name, size_t name_len, const char *ev,
		       long long trace_pid, uint64_t t)
{
	if ((x->len && TEXT_LIT(x, ",\n")) ||
	    TEXT_LIT(x, "{\"ph\":\"i\",\"s\":\"t\",\"name\":\""))
		return -1;
	/* the event's name for those perfetto.NAMED_INSTANTS has, else
	 * "event: api" */
	if (r->ev == EV_HIT || r->ev == EV_MISS || r->ev == EV_REVOKE) {
		if (text_put(x, ev, strlen(ev)))
			return -1;
	} else if (text_put(x, ev, strlen(ev)) || TEXT_LIT(x, ": ") ||
		   text_put(x, name, name_len)) {
		return -1;
	}
	return add_event_end(x, data, r, ev, t, 0, trace_pid);
}

/* The record's API, or its event's name for a record without one, as
 * analysis.py's `r.get("api") or ev`. */
static const char *api_of(const char *data, const struct row *r,
			  uint32_t *len)
{
	if (r->api_len) {
		*len = r->api_len;
		return data + r->api;
	}
	*len = (uint32_t)strlen(ev_name[r->ev]);
	return ev_name[r->ev];
}

/* A tid seen in the block, for the process's set of threads. */
static int tid_add(int64_t *set, uint8_t *used, size_t mask, int64_t tid)
{
	size_t h = ((uint64_t)tid * 0x9e3779b97f4a7c15ull) >> 20 & mask;

	while (used[h]) {
		if (set[h] == tid)
			return 0;
		h = (h + 1) & mask;
	}
	used[h] = 1;
	set[h] = tid;
	return 1;
}

/* What a block adds to the registration-cache counts of its process
 * (analysis.Result.cache, and whether it saw any cache event). */
struct cache_counts {
	uint64_t rows;
	uint64_t n[EV_N - EV_HIT];
	unsigned __int128 pin_bytes;
};

/*
 * emit(data, rows, evtab, seq, pi, ops, sorter, parts, trace_pid) ->
 *      (records, stats, implicit frees, untracked frees, restores,
 *      (cache records, hit, miss, pin, unpin, reg, dereg, revoke,
 *      pinned bytes), earliest start, latest effect time, tids) or None.
 *
 * stats: (API, operation, calls, failed, bytes, untracked, timed calls,
 * their time, the longest) per API and operation in order of first
 * appearance; operation: 0 alloc, 1 free, 2 implicit free, 3 on: the
 * cache events from hit on, as BlockReader.STAT_OPS names them.
 * evtab: [ev * 4 + tracked * 2 + implicit] for alloc, free and restore,
 * then one entry for each cache event from hit on: None (that record does
 * not have this layout in this version: None, read it in Python) or
 * (event name, time is "end", effect at the end, a hooked call).
 * ops: the codes of (OP_ALLOC, OP_FREE, OP_RESTORE, OP_MARK, OP_PIN,
 * OP_UNPIN) and the mark of a failed allocation, "failed".
 * sorter: gets each operation.  parts: None, or the Perfetto writer's
 * list that gets the block's text: a slice per hooked call, an instant
 * per other cache record (None if an allocation record is neither: an
 * implicit free).  Nothing is handed out unless the whole block is taken.
 */
static PyObject *core_emit(PyObject *self, PyObject *args)
{
	const char *data, *rb;
	Py_ssize_t dlen, rlen, n, i;
	PyObject *evtab, *cap, *parts, *failed, *res = NULL;
	long long seq, trace_pid;
	unsigned int pi;
	int op_alloc, op_free, op_restore, op_mark, op_pin, op_unpin;
	uint64_t t_first = UINT64_MAX, t_last = 0;
	struct evinfo ev[EVTAB];
	struct apistat st[STATS];
	int nst = 0;
	uint64_t n_implicit = 0, n_untracked = 0, n_restore = 0;
	struct cache_counts cc;
	long mark_idx[2] = { -1, -1 };	/* "hit", "miss" */
	uint64_t *keys = NULL, *ts = NULL;
	uint32_t *api_idx = NULL, *kind_idx = NULL;
	long cache[NAMES];
	long failed_idx;
	int64_t *tidset = NULL;
	uint8_t *tidused = NULL;
	size_t tmask = 0, ntids = 0;
	const struct row *rows;
	struct sorter *srt;
	PyObject *stats = NULL, *tids = NULL, *counts = NULL;
	struct text slices = { 0 };
	int full;

	if (!PyArg_ParseTuple(args, "y#y#O!LI(iiiiiiU)OOL:emit", &data,
			      &dlen, &rb, &rlen, &PyTuple_Type, &evtab, &seq,
			      &pi, &op_alloc, &op_free, &op_restore, &op_mark,
			      &op_pin, &op_unpin, &failed, &cap, &parts,
			      &trace_pid))
		return NULL;
	srt = core_sorter(cap);
	if (!srt)
		return NULL;
	if (parts != Py_None && !PyList_Check(parts)) {
		PyErr_SetString(PyExc_TypeError, "parts: a list or None");
		return NULL;
	}
	if (rlen % (Py_ssize_t)sizeof(struct row) || rlen == 0 ||
	    PyTuple_Size(evtab) != EVTAB) {
		PyErr_SetString(PyExc_ValueError, "emit: bad arguments");
		return NULL;
	}
	for (i = 0; i < EVTAB; i++)
		if (evinfo_of(evtab, (int)i, &ev[i]))
			return NULL;
	for (i = 0; i < NAMES; i++)
		cache[i] = -1;
	memset(&cc, 0, sizeof(cc));
	rows = (const struct row *)rb;
	n = rlen / (Py_ssize_t)sizeof(struct row);
	for (i = 0; i < n; i++) {
		const struct row *r = &rows[i];

		if ((Py_ssize_t)r->line + r->line_len > dlen ||
		    (Py_ssize_t)r->api + r->api_len > dlen ||
		    (Py_ssize_t)r->kind + r->kind_len > dlen ||
		    r->ev >= EV_N || r->tracked > 1 || r->implicit > 1) {
			PyErr_SetString(PyExc_ValueError, "emit: rows do not "
					"belong to data");
			return NULL;
		}
	}
	failed_idx = core_sorter_name(srt, failed, &full);
	if (failed_idx < 0) {
		if (full)
			Py_RETURN_NONE;
		return NULL;
	}

	/* First pass: decide, and count; nothing is handed out yet. */
	keys = malloc((size_t)n * sizeof(*keys));
	ts = malloc((size_t)n * sizeof(*ts));
	api_idx = malloc((size_t)n * sizeof(*api_idx));
	kind_idx = malloc((size_t)n * sizeof(*kind_idx));
	for (tmask = 64; tmask < (size_t)n * 2; tmask <<= 1)
		;
	tidset = malloc(tmask * sizeof(*tidset));
	tidused = calloc(tmask, 1);
	tmask--;
	if (!keys || !ts || !api_idx || !kind_idx || !tidset || !tidused) {
		PyErr_NoMemory();
		goto done;
	}
	for (i = 0; i < n; i++) {
		const struct row *r = &rows[i];
		const struct evinfo *e = &ev[evtab_index(r)];
		uint64_t t = r->t, key;
		uint32_t api_len;
		const char *api = api_of(data, r, &api_len);
		struct apistat *s;
		long ai, ki;
		int opc;

		if (!e->name)
			goto none;
		/* Perfetto: an allocation record is always a slice here */
		if (parts != Py_None && is_mem(r->ev) &&
		    (!e->call || r->implicit))
			goto none;
		if (e->end) {
			key = t;
			t = t > r->dur ? t - r->dur : 0;
			if (!e->at_end)
				key = t;
		} else {
			key = e->at_end ? t + r->dur : t;
		}
		keys[i] = key;
		ts[i] = t;
		if (t < t_first)
			t_first = t;
		if (key > t_last)
			t_last = key;
		ntids += tid_add(tidset, tidused, tmask, r->tid);
		if (r->ev == EV_RESTORE || (r->ev == EV_ALLOC && !r->rc)) {
			ai = sorter_name(srt, api, api_len, cache);
			ki = sorter_name(srt, data + r->kind, r->kind_len,
					 cache);
			if (ai == -2 || ki == -2)
				goto done;
			if (ai < 0 || ki < 0)
				goto none;
			api_idx[i] = (uint32_t)ai;
			kind_idx[i] = (uint32_t)ki;
		}
		if (r->ev == EV_RESTORE) {
			n_restore++;
			continue;
		}
		if (!is_mem(r->ev)) {
			/* analysis.Result.cache_event() */
			int k = r->ev - EV_HIT;

			cc.rows++;
			s = NULL;
			if (r->has_dur || r->ev == EV_PIN ||
			    r->ev == EV_UNPIN || r->ev == EV_REG ||
			    r->ev == EV_DEREG) {
				s = stat_of(st, &nst, api, api_len,
					    OPC_CACHE + k);
				if (!s)
					goto none;
				s->calls++;
				if (r->rc)
					s->failed++;
				if (r->has_dur) {
					s->dur_n++;
					s->dur_sum += r->dur;
					if (r->dur > s->dur_max)
						s->dur_max = r->dur;
				}
			}
			if (r->rc)
				continue;
			cc.n[k]++;
			if (r->ev == EV_PIN) {
				cc.pin_bytes += r->size;
				s->bytes += r->size;
			}
			if ((r->ev == EV_HIT || r->ev == EV_MISS) &&
			    mark_idx[k] < 0) {
				mark_idx[k] = core_sorter_name(srt, e->name,
							       &full);
				if (mark_idx[k] < 0) {
					if (full)
						goto none;
					goto done;
				}
			}
			continue;
		}
		opc = r->ev == EV_ALLOC ? OPC_ALLOC :
		      r->implicit ? OPC_IMPLICIT_FREE : OPC_FREE;
		s = stat_of(st, &nst, api, api_len, opc);
		if (!s)
			goto none;
		s->calls++;
		if (opc != OPC_IMPLICIT_FREE) {
			s->dur_n++;
			s->dur_sum += r->dur;
			if (r->dur > s->dur_max)
				s->dur_max = r->dur;
		}
		if (opc == OPC_IMPLICIT_FREE)
			n_implicit++;
		if (r->rc)
			s->failed++;
		else if (opc != OPC_ALLOC && r->tracked) {
			s->untracked++;
			n_untracked++;
		} else {
			s->bytes += r->size;
		}
	}

	/* Second pass: the operations (and Perfetto text), in line order. */
	for (i = 0; i < n; i++, seq++) {
		const struct row *r = &rows[i];
		const struct evinfo *e = &ev[evtab_index(r)];
		uint32_t api_len;
		const char *api = api_of(data, r, &api_len);
		struct op o;

		if (parts != Py_None &&
		    (e->call ?
		     add_slice(&slices, data, r, api, api_len, ev_name[r->ev],
			       trace_pid, ts[i]) :
		     add_instant(&slices, data, r, api, api_len,
				 ev_name[r->ev], trace_pid, ts[i])))
			goto done;
		if (r->rc && (r->ev == EV_FREE || !is_mem(r->ev)))
			continue;	/* a failed free or cache call */
		memset(&o, 0, sizeof(o));
		o.key = keys[i];
		o.seq = seq;
		o.pi = pi;
		o.flags = OPF_SIZE | OPF_DEV;
		switch (r->ev) {
		case EV_HIT:
		case EV_MISS:
			/* (key, seq, pi, OP_MARK, None, None, 0, dev, "hit") */
			o.op = (uint8_t)op_mark;
			o.dev = r->dev;
			o.extra = XTRA_NAME;
			o.api = (uint32_t)mark_idx[r->ev - EV_HIT];
			break;
		case EV_PIN:
			/* (key, seq, pi, OP_PIN, gen, ptr, size, dev, None) */
			o.op = (uint8_t)op_pin;
			o.flags |= OPF_GEN | OPF_PTR;
			o.gen = r->gen;
			o.ptr = r->ptr;
			o.size = r->size;
			o.dev = r->dev;
			break;
		case EV_UNPIN:
		case EV_REVOKE:
			/* (key, seq, pi, OP_UNPIN, gen, ptr, 0, 0, None) */
			o.op = (uint8_t)op_unpin;
			o.flags |= OPF_GEN | OPF_PTR;
			o.gen = r->gen;
			o.ptr = r->ptr;
			break;
		case EV_REG:
		case EV_DEREG:
			continue;	/* counted only */
		case EV_FREE:
			if (r->tracked)
				continue;
			/* (key, seq, pi, OP_FREE, gen, ptr, 0, 0, None) */
			o.op = (uint8_t)op_free;
			o.flags |= OPF_GEN | OPF_PTR;
			o.gen = r->gen;
			o.ptr = r->ptr;
			break;
		default:
			if (r->ev == EV_ALLOC && r->rc) {
				/* (key, seq, pi, OP_MARK, None, None, 0,
				 * dev, "failed") */
				o.op = (uint8_t)op_mark;
				o.dev = r->dev;
				o.extra = XTRA_NAME;
				o.api = (uint32_t)failed_idx;
				break;
			}
			/* (key, seq, pi, OP_ALLOC | OP_RESTORE, gen, ptr,
			 * size, dev, (api, tid, kind)) */
			o.op = (uint8_t)(r->ev == EV_ALLOC ? op_alloc :
					 op_restore);
			o.flags |= OPF_GEN | OPF_PTR | OPF_KIND;
			o.gen = r->gen;
			o.ptr = r->ptr;
			o.size = r->size;
			o.dev = r->dev;
			o.extra = XTRA_CALL;
			o.api = api_idx[i];
			o.tid = r->tid;
			o.kind = kind_idx[i];
			break;
		}
		if (core_sorter_put(srt, &o))
			goto done;
	}

	if (slices.len) {
		PyObject *str = PyUnicode_FromStringAndSize(
			slices.s, (Py_ssize_t)slices.len);

		if (!str || PyList_Append(parts, str)) {
			Py_XDECREF(str);
			goto done;
		}
		Py_DECREF(str);
	}
	stats = PyList_New(0);
	tids = PyTuple_New((Py_ssize_t)ntids);
	if (!stats || !tids)
		goto done;
	for (i = 0; i < nst; i++) {
		struct apistat *s = &st[i];
		int slot;
		PyObject *item = Py_BuildValue(
			"(NiKKNKKNK)", name_of(s->api, s->api_len, &slot),
			s->opc, (unsigned long long)s->calls,
			(unsigned long long)s->failed, u128(s->bytes),
			(unsigned long long)s->untracked,
			(unsigned long long)s->dur_n, u128(s->dur_sum),
			(unsigned long long)s->dur_max);

		if (!item || PyList_Append(stats, item)) {
			Py_XDECREF(item);
			goto done;
		}
		Py_DECREF(item);
	}
	for (i = 0, ntids = 0; i <= (Py_ssize_t)tmask; i++)
		if (tidused[i] &&
		    put(tids, (Py_ssize_t)ntids++,
			PyLong_FromLongLong(tidset[i])))
			goto done;
	counts = Py_BuildValue("(KKKKKKKKN)", (unsigned long long)cc.rows,
			       (unsigned long long)cc.n[0],
			       (unsigned long long)cc.n[1],
			       (unsigned long long)cc.n[2],
			       (unsigned long long)cc.n[3],
			       (unsigned long long)cc.n[4],
			       (unsigned long long)cc.n[5],
			       (unsigned long long)cc.n[6],
			       u128(cc.pin_bytes));
	if (!counts)
		goto done;
	res = Py_BuildValue("(nOKKKOKKO)", n, stats,
			    (unsigned long long)n_implicit,
			    (unsigned long long)n_untracked,
			    (unsigned long long)n_restore, counts,
			    (unsigned long long)t_first,
			    (unsigned long long)t_last, tids);
	goto done;
none:
	res = Py_None;
	Py_INCREF(res);
done:
	Py_XDECREF(stats);
	Py_XDECREF(tids);
	Py_XDECREF(counts);
	free(keys);
	free(ts);
	free(api_idx);
	free(kind_idx);
	free(tidset);
	free(tidused);
	free(slices.s);
	return res;
}

/*
 * counters(pts) -> str or None: perfetto.Writer._counters()'s text of one
 * series' points, pts = [head, t, v, t, v...]: for each point head, t in
 * microseconds, ',"args":{"bytes":' v '}}', joined by ",\n".  None when a
 * value is not an int of 64 bits (Python writes those).
 */
static PyObject *core_counters(PyObject *self, PyObject *args)
{
	PyObject *pts, *head_b = NULL, *res = NULL;
	const char *head;
	Py_ssize_t head_len, n, i;
	struct text x = { 0 };

	if (!PyArg_ParseTuple(args, "O!:counters", &PyList_Type, &pts))
		return NULL;
	n = PyList_Size(pts);
	if (n < 1 || !PyUnicode_Check(PyList_GetItem(pts, 0)) || !(n & 1)) {
		PyErr_SetString(PyExc_ValueError, "counters: [head, t, v...]");
		return NULL;
	}
	head_b = PyUnicode_AsUTF8String(PyList_GetItem(pts, 0));
	if (!head_b || PyBytes_AsStringAndSize(head_b, (char **)&head,
					       &head_len))
		goto out;
	for (i = 1; i + 1 < n; i += 2) {
		PyObject *to = PyList_GetItem(pts, i);
		PyObject *vo = PyList_GetItem(pts, i + 1);
		unsigned long long t, v;

		if (!PyLong_CheckExact(to) || !PyLong_CheckExact(vo))
			goto none;
		t = PyLong_AsUnsignedLongLong(to);
		if (t == (unsigned long long)-1 && PyErr_Occurred())
			goto none;
		v = PyLong_AsUnsignedLongLong(vo);
		if (v == (unsigned long long)-1 && PyErr_Occurred())
			goto none;
		if ((i > 1 && TEXT_LIT(&x, ",\n")) ||
		    text_put(&x, head, (size_t)head_len) || text_us(&x, t) ||
		    TEXT_LIT(&x, ",\"args\":{\"bytes\":") || text_u64(&x, v) ||
		    TEXT_LIT(&x, "}}"))
			goto out;
	}
	res = PyUnicode_FromStringAndSize(x.s ? x.s : "", (Py_ssize_t)x.len);
	goto out;
none:
	PyErr_Clear();
	res = Py_None;
	Py_INCREF(res);
out:
	Py_XDECREF(head_b);
	free(x.s);
	return res;
}

static PyMethodDef core_methods[] = {
	{ "segments", core_segments, METH_VARARGS,
	  "segments(data, max_line, events) -> "
	  "[(lo, hi, first line, pid, rows)...]" },
	{ "emit", core_emit, METH_VARARGS,
	  "emit(data, rows, evtab, seq, pi, ops, sorter, parts, trace_pid) "
	  "-> counts or None" },
	{ "counters", core_counters, METH_VARARGS,
	  "counters([head, t, v, t, v...]) -> Perfetto counter events" },
	{ "sorter_new", core_sorter_new, METH_VARARGS,
	  "sorter_new(limit, tmpdir) -> a sorter of operations" },
	{ "sorter_add", core_sorter_add, METH_VARARGS,
	  "sorter_add(sorter, op) -> True, or False: not one it can hold" },
	{ "sorter_batch", core_sorter_batch, METH_VARARGS,
	  "sorter_batch(sorter, n) -> up to n operations in order" },
	{ "sorter_close", core_sorter_close, METH_VARARGS,
	  "sorter_close(sorter): free it now" },
	{ NULL, NULL, 0, NULL }
};

static struct PyModuleDef core_module = {
	PyModuleDef_HEAD_INIT, "_core",
	"gdrhook-trace's reader of allocation and registration-cache "
	"records, in C", -1,
	core_methods, NULL, NULL, NULL, NULL
};

/* core.py refuses a module whose calls differ from what it expects. */
#define CORE_ABI 7

PyMODINIT_FUNC PyInit__core(void);
PyMODINIT_FUNC PyInit__core(void)
{
	PyObject *m = PyModule_Create(&core_module);
	PyObject *events = PyTuple_New(EV_N);
	int i;

	for (i = 0; events && i < EV_N; i++) {
		PyObject *name = PyUnicode_FromString(ev_name[i]);

		if (!name || PyTuple_SetItem(events, i, name))
			Py_CLEAR(events);
	}
	if (!m || !events || PyModule_AddIntConstant(m, "ABI", CORE_ABI) ||
	    PyModule_AddObject(m, "EVENTS", events)) {
		Py_XDECREF(events);
		Py_XDECREF(m);
		return NULL;
	}
	return m;
}
