/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the event log's unit tests (test_evlog.c, test_evspool.c): a
 * directory of the case's own, the log read back as lines and parsed, a
 * record put, the rings of the spool.
 */
#ifndef GH_TEST_EVLOG_UTIL_H
#define GH_TEST_EVLOG_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#include "gdrhook.h"
#include "evlog/evlog.h"
#include "evlog/evlog_state.h"	/* white box: the ring list */


static char tdir[256];

static inline void mk_tdir(void)
{
	const char *base = getenv("TMPDIR");

	snprintf(tdir, sizeof(tdir), "%s/gh_evlog.XXXXXX",
		 base && *base ? base : "/tmp");
	CHECK(mkdtemp(tdir) != NULL);
}

static inline void rm_tdir(void)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tdir);
	if (system(cmd) != 0)
		fprintf(stderr, "  cannot remove %s\n", tdir);
}

static inline char *tpath(const char *name)
{
	static char p[4][512];
	static int i;

	i = (i + 1) % 4;
	snprintf(p[i], sizeof(p[i]), "%s/%s", tdir, name);
	return p[i];
}

struct lines {
	char **v;
	int n;
};

static inline struct lines read_lines(const char *path)
{
	struct lines l = { NULL, 0 };
	FILE *f = fopen(path, "r");
	int cap_v = 0;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;

	if (!f)
		return l;
	while ((len = getline(&line, &cap, f)) > 0) {
		CHECK(line[len - 1] == '\n');	/* whole lines only */
		line[len - 1] = '\0';
		if (l.n == cap_v) {
			cap_v = cap_v ? 2 * cap_v : 1024;
			l.v = realloc(l.v, sizeof(*l.v) * (size_t)cap_v);
			CHECK(l.v != NULL);
		}
		l.v[l.n++] = strdup(line);
	}
	free(line);
	fclose(f);
	return l;
}

/* Every line is a JSON object (python3's parser, when there is one). */
static inline void check_json(const char *path)
{
	char cmd[1024];
	int rc;

	if (system("python3 -c '' >/dev/null 2>&1") != 0)
		return;
	snprintf(cmd, sizeof(cmd),
		 "python3 -c 'import json,sys\n"
		 "for l in open(sys.argv[1], encoding=\"utf-8\"):\n"
		 "  assert isinstance(json.loads(l), dict), l\n' '%s'", path);
	rc = system(cmd);
	CHECK_EQ(rc, 0);
}

/*
 * Minimal parser for the flat objects we write: keys and raw values
 * (strings unescaped for the simple escapes the tests need).
 */
#define MAXKV 32
struct obj {
	int n;
	char k[MAXKV][32];
	char v[MAXKV][600];
	int is_str[MAXKV];
};

static inline int parse_obj(const char *s, struct obj *o)
{
	memset(o, 0, sizeof(*o));
	if (*s++ != '{')
		return -1;
	while (*s && *s != '}') {
		size_t i = 0;

		if (o->n == MAXKV || *s++ != '"')
			return -1;
		while (*s && *s != '"' && i < sizeof(o->k[0]) - 1)
			o->k[o->n][i++] = *s++;
		if (*s++ != '"' || *s++ != ':')
			return -1;
		i = 0;
		if (*s == '"') {
			s++;
			o->is_str[o->n] = 1;
			while (*s && *s != '"' && i < sizeof(o->v[0]) - 1) {
				if (*s == '\\') {
					s++;
					switch (*s) {
					case 'n':
						o->v[o->n][i++] = '\n';
						s++;
						continue;
					case 'u':
						o->v[o->n][i++] = '?';
						s += 5;
						continue;
					}
				}
				o->v[o->n][i++] = *s++;
			}
			if (*s++ != '"')
				return -1;
		} else {
			while (*s && *s != ',' && *s != '}' &&
			       i < sizeof(o->v[0]) - 1)
				o->v[o->n][i++] = *s++;
		}
		o->n++;
		if (*s == ',')
			s++;
	}
	return *s == '}' && s[1] == '\0' ? 0 : -1;
}

static inline const char *get(const struct obj *o, const char *k)
{
	for (int i = 0; i < o->n; i++)
		if (!strcmp(o->k[i], k))
			return o->v[i];
	return NULL;
}

static inline long long geti(const struct obj *o, const char *k)
{
	const char *v = get(o, k);

	if (!v)
		TH_FAIL("missing key %s", k);
	return strtoll(v, NULL, 0);
}

static inline int is_str(const struct obj *o, const char *k)
{
	for (int i = 0; i < o->n; i++)
		if (!strcmp(o->k[i], k))
			return o->is_str[i];
	return 0;
}

/* The object has exactly these keys, in this order. */
static inline void check_keys(const struct obj *o, const char *const *keys)
{
	int i;

	for (i = 0; keys[i]; i++) {
		if (i >= o->n)
			TH_FAIL("key %s missing (only %d keys)", keys[i], o->n);
		if (strcmp(o->k[i], keys[i]))
			TH_FAIL("key %d: got %s, want %s", i, o->k[i],
				keys[i]);
	}
	if (i != o->n)
		TH_FAIL("%d keys, want %d (extra: %s)", o->n, i, o->k[i]);
}

static inline struct obj *parse_line(const char *line)
{
	static struct obj o;

	if (parse_obj(line, &o))
		TH_FAIL("cannot parse: %s", line);
	return &o;
}

static inline struct gh_evrec mkrec(unsigned int ev, uint64_t ptr)
{
	struct gh_evrec r;

	memset(&r, 0, sizeof(r));
	r.t_ns = gh_now_ns();
	r.ev = (uint16_t)ev;
	r.u.mem.ptr = ptr;
	r.u.mem.size = 1 << 20;
	gh_evrec_str(r.u.mem.api, "cuMemAlloc_v2");
	r.u.mem.kind = GDRHOOK_KIND_DEVICE;
	return r;
}

static inline void put(unsigned int ev, uint64_t ptr)
{
	struct gh_evrec r = mkrec(ev, ptr);

	gh_evlog_put(&r);
}

static inline int count_ev(const struct lines *l, const char *ev)
{
	int n = 0;

	for (int i = 0; i < l->n; i++) {
		struct obj *o = parse_line(l->v[i]);
		const char *e = get(o, "ev");

		if (e && !strcmp(e, ev))
			n++;
	}
	return n;
}

/* A ring in the spool in state st (the first found), or NULL. */
static inline struct gh_ring *ring_in(uint32_t st)
{
	struct gh_ring *g;

	for (g = gh_ev_rings(); g; g = g->next)
		if (g->in_spool &&
		    __atomic_load_n(&g->state, __ATOMIC_ACQUIRE) == st)
			return g;
	return NULL;
}

#endif
