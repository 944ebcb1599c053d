// SPDX-License-Identifier: MIT
/*
 * reader.Sorter in C: the replay's operations kept as fixed records (72
 * bytes, no Python objects) up to `limit` in memory, sorted runs spilled
 * to an unlinked temporary file beyond that, merged with a heap, and
 * handed back as the same tuples, in batches.  The order is (key, seq),
 * which is the tuples' own order: seq is unique per record.  An operation
 * a record cannot hold (an int past 64 bits, another type) is refused;
 * reader.CSorter keeps it in a Python sorter and merges the two.
 */
#include "_core.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_NAMES (1 << 16)	/* hostile logs: no end of API names */
#define RUN_BUF 1024		/* records read at once from each run */

struct run {
	off_t off;		/* next record in the file */
	size_t left;		/* records not yet read */
	struct op *b;		/* read buffer */
	size_t bi, bn;
};

struct sorter {
	size_t limit;
	struct op *buf;
	size_t n, pos;
	char *tmpdir;
	int fd;
	off_t end;
	struct run *runs;
	size_t nruns;
	size_t *heap, hn;
	int state;		/* adding, in memory, merging, done */
	PyObject *names;	/* list of str */
	PyObject *index;	/* str -> its place in names */
};

enum { ADDING, IN_MEMORY, MERGING, DONE };

static void sorter_free(struct sorter *s)
{
	size_t i;

	free(s->buf);
	s->buf = NULL;
	for (i = 0; i < s->nruns; i++)
		free(s->runs[i].b);
	free(s->runs);
	s->runs = NULL;
	s->nruns = 0;
	free(s->heap);
	s->heap = NULL;
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	s->state = DONE;
}

static void capsule_free(PyObject *cap)
{
	struct sorter *s = PyCapsule_GetPointer(cap, "gdrhook_trace.sorter");

	if (!s)
		return;
	sorter_free(s);
	Py_XDECREF(s->names);
	Py_XDECREF(s->index);
	free(s->tmpdir);
	free(s);
}

struct sorter *core_sorter(PyObject *cap)
{
	return PyCapsule_GetPointer(cap, "gdrhook_trace.sorter");
}

/* sorter_new(limit, tmpdir) -> a sorter */
PyObject *core_sorter_new(PyObject *self, PyObject *args)
{
	Py_ssize_t limit;
	const char *tmpdir;
	struct sorter *s;
	PyObject *cap;

	if (!PyArg_ParseTuple(args, "ns:sorter_new", &limit, &tmpdir))
		return NULL;
	if (limit < 2)
		limit = 2;
	s = calloc(1, sizeof(*s));
	if (!s)
		return PyErr_NoMemory();
	s->fd = -1;
	s->limit = (size_t)limit;
	s->tmpdir = strdup(tmpdir);
	s->names = PyList_New(0);
	s->index = PyDict_New();
	if (!s->tmpdir || !s->names || !s->index) {
		Py_XDECREF(s->names);
		Py_XDECREF(s->index);
		free(s->tmpdir);
		free(s);
		return PyErr_NoMemory();
	}
	cap = PyCapsule_New(s, "gdrhook_trace.sorter", capsule_free);
	if (!cap) {
		Py_DECREF(s->names);
		Py_DECREF(s->index);
		free(s->tmpdir);
		free(s);
	}
	return cap;
}

long core_sorter_name(struct sorter *s, PyObject *str, int *full)
{
	PyObject *i = PyDict_GetItemWithError(s->index, str);
	Py_ssize_t n;

	*full = 0;
	if (i)
		return PyLong_AsLong(i);
	if (PyErr_Occurred())
		return -1;
	n = PyList_Size(s->names);
	if (n >= MAX_NAMES) {
		*full = 1;
		return -1;
	}
	i = PyLong_FromSsize_t(n);
	if (!i || PyDict_SetItem(s->index, str, i) ||
	    PyList_Append(s->names, str)) {
		Py_XDECREF(i);
		return -1;
	}
	Py_DECREF(i);
	return (long)n;
}

static int op_cmp(const void *a, const void *b)
{
	const struct op *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

static int less(const struct op *x, const struct op *y)
{
	return x->key < y->key || (x->key == y->key && x->seq < y->seq);
}

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = write(fd, c, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

static int spill(struct sorter *s)
{
	struct run *runs;

	if (!s->n)
		return 0;
	if (s->fd < 0) {
		size_t len = strlen(s->tmpdir) + 32;
		char *path = malloc(len);

		if (!path) {
			PyErr_NoMemory();
			return -1;
		}
		snprintf(path, len, "%s/gdrhook-trace.XXXXXX", s->tmpdir);
		s->fd = mkstemp(path);
		if (s->fd >= 0)
			unlink(path);
		if (s->fd < 0) {
			PyErr_SetFromErrnoWithFilename(PyExc_OSError, path);
			free(path);
			return -1;
		}
		free(path);
	}
	runs = realloc(s->runs, (s->nruns + 1) * sizeof(*runs));
	if (!runs) {
		PyErr_NoMemory();
		return -1;
	}
	s->runs = runs;
	qsort(s->buf, s->n, sizeof(*s->buf), op_cmp);
	if (write_all(s->fd, s->buf, s->n * sizeof(*s->buf))) {
		PyErr_SetFromErrno(PyExc_OSError);
		return -1;
	}
	memset(&runs[s->nruns], 0, sizeof(*runs));
	runs[s->nruns].off = s->end;
	runs[s->nruns].left = s->n;
	s->nruns++;
	s->end += (off_t)(s->n * sizeof(*s->buf));
	s->n = 0;
	return 0;
}

int core_sorter_put(struct sorter *s, const struct op *op)
{
	if (s->state != ADDING) {
		PyErr_SetString(PyExc_ValueError, "sorter: already read");
		return -1;
	}
	if (!s->buf) {
		s->buf = malloc(s->limit * sizeof(*s->buf));
		if (!s->buf) {
			PyErr_NoMemory();
			return -1;
		}
	}
	if (s->n == s->limit && spill(s))
		return -1;
	s->buf[s->n++] = *op;
	return 0;
}

/* An int that fits, or -1 with no error: not representable. */
static int as_u64(PyObject *o, uint64_t *v)
{
	if (Py_TYPE(o) != &PyLong_Type)
		return -1;
	*v = PyLong_AsUnsignedLongLong(o);
	if (*v == (uint64_t)-1 && PyErr_Occurred()) {
		PyErr_Clear();
		return -1;
	}
	return 0;
}

static int as_i64(PyObject *o, int64_t *v)
{
	if (Py_TYPE(o) != &PyLong_Type)
		return -1;
	*v = PyLong_AsLongLong(o);
	if (*v == -1 && PyErr_Occurred()) {
		PyErr_Clear();
		return -1;
	}
	return 0;
}

static int opt_u64(PyObject *o, uint64_t *v, struct op *op, int flag)
{
	if (o == Py_None)
		return 0;
	op->flags |= flag;
	return as_u64(o, v);
}

/* 0: a name's index in *v; -1: not representable; -2: an error */
static int name_idx(struct sorter *s, PyObject *o, uint32_t *v)
{
	long i;
	int full;

	if (!PyUnicode_CheckExact(o))
		return -1;
	i = core_sorter_name(s, o, &full);
	if (i < 0)
		return full ? -1 : -2;
	*v = (uint32_t)i;
	return 0;
}

static int from_tuple(struct sorter *s, PyObject *t, struct op *op)
{
	uint64_t pi, code;
	PyObject *x;
	int rc;

	memset(op, 0, sizeof(*op));
	if (!PyTuple_CheckExact(t) || PyTuple_Size(t) != 9)
		return -1;
	if (as_u64(PyTuple_GetItem(t, 0), &op->key) ||
	    as_i64(PyTuple_GetItem(t, 1), &op->seq) ||
	    as_u64(PyTuple_GetItem(t, 2), &pi) || pi > UINT32_MAX ||
	    as_u64(PyTuple_GetItem(t, 3), &code) || code > 255 ||
	    opt_u64(PyTuple_GetItem(t, 4), &op->gen, op, OPF_GEN) ||
	    opt_u64(PyTuple_GetItem(t, 5), &op->ptr, op, OPF_PTR) ||
	    opt_u64(PyTuple_GetItem(t, 6), &op->size, op, OPF_SIZE))
		return -1;
	op->pi = (uint32_t)pi;
	op->op = (uint8_t)code;
	x = PyTuple_GetItem(t, 7);
	if (x != Py_None) {
		op->flags |= OPF_DEV;
		if (as_i64(x, &op->dev))
			return -1;
	}
	x = PyTuple_GetItem(t, 8);
	if (x == Py_None) {
		op->extra = XTRA_NONE;
		return 0;
	}
	if (PyUnicode_CheckExact(x)) {
		op->extra = XTRA_NAME;
		return name_idx(s, x, &op->api);
	}
	if (!PyTuple_CheckExact(x) || PyTuple_Size(x) != 3)
		return -1;
	op->extra = XTRA_CALL;
	rc = name_idx(s, PyTuple_GetItem(x, 0), &op->api);
	if (rc)
		return rc;
	if (as_i64(PyTuple_GetItem(x, 1), &op->tid))
		return -1;
	x = PyTuple_GetItem(x, 2);
	if (x == Py_None)
		return 0;
	op->flags |= OPF_KIND;
	return name_idx(s, x, &op->kind);
}

/* sorter_add(sorter, item) -> True, or False: item is not one this
 * sorter can hold (keep it elsewhere) */
PyObject *core_sorter_add(PyObject *self, PyObject *args)
{
	PyObject *cap, *item;
	struct sorter *s;
	struct op op;
	int rc;

	if (!PyArg_ParseTuple(args, "OO:sorter_add", &cap, &item))
		return NULL;
	s = core_sorter(cap);
	if (!s)
		return NULL;
	rc = from_tuple(s, item, &op);
	if (rc == -2)
		return NULL;
	if (rc)
		Py_RETURN_FALSE;
	if (core_sorter_put(s, &op))
		return NULL;
	Py_RETURN_TRUE;
}

static PyObject *opt_int(int has, PyObject *v)
{
	if (has)
		return v;
	Py_XDECREF(v);
	Py_RETURN_NONE;
}

static PyObject *name_at(struct sorter *s, uint32_t i)
{
	PyObject *o = PyList_GetItem(s->names, (Py_ssize_t)i);

	Py_XINCREF(o);
	return o;
}

static PyObject *to_tuple(struct sorter *s, const struct op *o)
{
	PyObject *v[9], *t;
	int i;

	v[0] = PyLong_FromUnsignedLongLong(o->key);
	v[1] = PyLong_FromLongLong(o->seq);
	v[2] = PyLong_FromUnsignedLong(o->pi);
	v[3] = PyLong_FromLong(o->op);
	v[4] = opt_int(o->flags & OPF_GEN,
		       PyLong_FromUnsignedLongLong(o->gen));
	v[5] = opt_int(o->flags & OPF_PTR,
		       PyLong_FromUnsignedLongLong(o->ptr));
	v[6] = opt_int(o->flags & OPF_SIZE,
		       PyLong_FromUnsignedLongLong(o->size));
	v[7] = opt_int(o->flags & OPF_DEV, PyLong_FromLongLong(o->dev));
	if (o->extra == XTRA_NONE) {
		v[8] = Py_None;
		Py_INCREF(v[8]);
	} else if (o->extra == XTRA_NAME) {
		v[8] = name_at(s, o->api);
	} else {
		PyObject *a = name_at(s, o->api);
		PyObject *b = PyLong_FromLongLong(o->tid);
		PyObject *c = o->flags & OPF_KIND ? name_at(s, o->kind) :
			      (Py_INCREF(Py_None), Py_None);

		v[8] = NULL;
		if (a && b && c && (v[8] = PyTuple_New(3))) {
			PyTuple_SetItem(v[8], 0, a);
			PyTuple_SetItem(v[8], 1, b);
			PyTuple_SetItem(v[8], 2, c);
		} else {
			Py_XDECREF(a);
			Py_XDECREF(b);
			Py_XDECREF(c);
		}
	}
	t = NULL;
	for (i = 0; i < 9; i++)
		if (!v[i])
			goto fail;
	t = PyTuple_New(9);
	if (!t)
		goto fail;
	for (i = 0; i < 9; i++)
		PyTuple_SetItem(t, i, v[i]);
	return t;
fail:
	for (i = 0; i < 9; i++)
		Py_XDECREF(v[i]);
	return NULL;
}

static int run_fill(struct sorter *s, struct run *r)
{
	size_t want = r->left < RUN_BUF ? r->left : RUN_BUF;
	size_t got = 0, bytes = want * sizeof(struct op);
	char *p = (char *)r->b;

	while (got < bytes) {
		ssize_t n = pread(s->fd, p + got, bytes - got,
				  r->off + (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = EIO;
			PyErr_SetFromErrno(PyExc_OSError);
			return -1;
		}
		got += (size_t)n;
	}
	r->off += (off_t)bytes;
	r->left -= want;
	r->bi = 0;
	r->bn = want;
	return 0;
}

static const struct op *run_head(struct sorter *s, size_t i)
{
	return &s->runs[i].b[s->runs[i].bi];
}

static void sift_down(struct sorter *s, size_t i)
{
	size_t *h = s->heap;

	for (;;) {
		size_t l = 2 * i + 1, m = i;

		if (l < s->hn && less(run_head(s, h[l]), run_head(s, h[m])))
			m = l;
		if (l + 1 < s->hn &&
		    less(run_head(s, h[l + 1]), run_head(s, h[m])))
			m = l + 1;
		if (m == i)
			return;
		size_t x = h[i];

		h[i] = h[m];
		h[m] = x;
		i = m;
	}
}

static int finish_adding(struct sorter *s)
{
	size_t i;

	if (!s->nruns) {
		if (s->n)
			qsort(s->buf, s->n, sizeof(*s->buf), op_cmp);
		s->pos = 0;
		s->state = IN_MEMORY;
		return 0;
	}
	if (spill(s))
		return -1;
	free(s->buf);
	s->buf = NULL;
	s->heap = malloc(s->nruns * sizeof(*s->heap));
	if (!s->heap) {
		PyErr_NoMemory();
		return -1;
	}
	for (i = 0; i < s->nruns; i++) {
		/* a short run (a small --buffer) gets a short buffer */
		size_t want = s->runs[i].left < RUN_BUF ? s->runs[i].left :
			      RUN_BUF;

		s->runs[i].b = malloc(want * sizeof(struct op));
		if (!s->runs[i].b) {
			PyErr_NoMemory();
			return -1;
		}
		if (run_fill(s, &s->runs[i]))
			return -1;
		s->heap[i] = i;
	}
	s->hn = s->nruns;
	for (i = s->hn / 2; i-- > 0;)
		sift_down(s, i);
	s->state = MERGING;
	return 0;
}

/* The next operation in order, or NULL at the end (or an error set). */
static const struct op *next_op(struct sorter *s, struct op *tmp)
{
	struct run *r;

	if (s->state == IN_MEMORY)
		return s->pos < s->n ? &s->buf[s->pos++] : NULL;
	if (s->state != MERGING || !s->hn)
		return NULL;
	r = &s->runs[s->heap[0]];
	*tmp = r->b[r->bi++];
	if (r->bi == r->bn) {
		if (r->left) {
			if (run_fill(s, r))
				return NULL;
		} else {
			s->heap[0] = s->heap[--s->hn];
		}
	}
	if (s->hn)
		sift_down(s, 0);
	return tmp;
}

/* sorter_batch(sorter, n) -> up to n tuples in order; [] at the end */
PyObject *core_sorter_batch(PyObject *self, PyObject *args)
{
	PyObject *cap, *list;
	Py_ssize_t n, i;
	struct sorter *s;

	if (!PyArg_ParseTuple(args, "On:sorter_batch", &cap, &n))
		return NULL;
	s = core_sorter(cap);
	if (!s)
		return NULL;
	if (s->state == ADDING && finish_adding(s))
		return NULL;
	list = PyList_New(0);
	if (!list)
		return NULL;
	for (i = 0; i < n; i++) {
		struct op tmp;
		const struct op *o = next_op(s, &tmp);
		PyObject *t;

		if (!o)
			break;
		t = to_tuple(s, o);
		if (!t || PyList_Append(list, t)) {
			Py_XDECREF(t);
			Py_DECREF(list);
			return NULL;
		}
		Py_DECREF(t);
	}
	if (PyErr_Occurred()) {
		Py_DECREF(list);
		return NULL;
	}
	return list;
}

/* sorter_close(sorter): its memory and temporary file, now */
PyObject *core_sorter_close(PyObject *self, PyObject *args)
{
	PyObject *cap;
	struct sorter *s;

	if (!PyArg_ParseTuple(args, "O:sorter_close", &cap))
		return NULL;
	s = core_sorter(cap);
	if (!s)
		return NULL;
	sorter_free(s);
	Py_RETURN_NONE;
}
