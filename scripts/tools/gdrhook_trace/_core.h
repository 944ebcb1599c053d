/* SPDX-License-Identifier: MIT */
/*
 * gdrhook-trace's C reader: what its two files share.  _core.c parses
 * and counts blocks of allocation records; _core_sort.c is the external
 * sort of the replay's operations (reader.Sorter in C).
 */
#ifndef GDRHOOK_TRACE_CORE_H
#define GDRHOOK_TRACE_CORE_H

#define Py_LIMITED_API 0x03090000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

/* analysis.py's ordered operation, (key, seq, proc index, op, gen, ptr,
 * size, dev, extra), with names as indexes into the sorter's table. */
enum {
	OPF_GEN = 1,		/* gen is not None */
	OPF_PTR = 2,
	OPF_SIZE = 4,
	OPF_DEV = 8,
	OPF_KIND = 16,		/* extra's kind is not None */
};

enum { XTRA_NONE, XTRA_NAME, XTRA_CALL };	/* None, a str, (api, tid, kind) */

struct op {
	uint64_t key;
	int64_t seq;
	uint64_t gen, ptr, size;
	int64_t dev, tid;
	uint32_t pi, api, kind;
	uint8_t op, flags, extra, pad;
};

struct sorter;

/* The sorter behind a capsule made by sorter_new(), or NULL (error set). */
struct sorter *core_sorter(PyObject *capsule);
/* Index of a str in the sorter's table of names, or -1 (error set, or
 * the table is full: then `full` is set and no error). */
long core_sorter_name(struct sorter *s, PyObject *str, int *full);
int core_sorter_put(struct sorter *s, const struct op *op);

PyObject *core_sorter_new(PyObject *self, PyObject *args);
PyObject *core_sorter_add(PyObject *self, PyObject *args);
PyObject *core_sorter_batch(PyObject *self, PyObject *args);
PyObject *core_sorter_close(PyObject *self, PyObject *args);

#endif
