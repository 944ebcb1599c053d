// SPDX-License-Identifier: MIT
/*
 * GDRHOOK_* configuration: the tables of every layer (GH_OPT_TABLE),
 * parsed once from environ at init.  The README's variable table is
 * generated from the same rows (scripts/opt-rows.c and gen-doc.py, `make
 * doc`; `make check` verifies it).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "fmt.h"
#include "log.h"

/*
 * Every row the link brought, in the section gh_opts (GH_OPT_TABLE), put
 * in order once by gh_config_load: the listed rows by their order key,
 * then the old names by name.  The per-row state below is indexed alike.
 */
extern const struct gh_opt_table *const __start_gh_opts[]
	__attribute__((weak, visibility("hidden")));
extern const struct gh_opt_table *const __stop_gh_opts[]
	__attribute__((weak, visibility("hidden")));

#define GH_NOPTS 64		/* rows held; gh_config_check says if more */

struct slot {
	const struct gh_opt *o;
	void *values;		/* its table's */
};
static struct slot slots[GH_NOPTS];
static unsigned int n_slots, n_rows_seen;

/* a goes before b: the listed rows by order key, then the old names */
static int before(const struct gh_opt *a, const struct gh_opt *b)
{
	int old_a = a->type == GH_OPT_RENAMED, old_b = b->type == GH_OPT_RENAMED;

	if (old_a != old_b)
		return old_b;
	if (!old_a && a->order != b->order)
		return a->order < b->order;
	return strcmp(a->name, b->name) < 0;
}

static void index_rows(void)
{
	const struct gh_opt_table *const *t;

	n_slots = n_rows_seen = 0;
	for (t = __start_gh_opts; t && t < __stop_gh_opts; t++) {
		for (unsigned int r = 0; r < (*t)->n; r++) {
			const struct gh_opt *o = &(*t)->rows[r];
			unsigned int i = n_slots;

			n_rows_seen++;
			if (n_slots == GH_NOPTS)
				continue;
			for (; i && before(o, slots[i - 1].o); i--)
				slots[i] = slots[i - 1];
			slots[i] = (struct slot){ o, (*t)->values };
			n_slots++;
		}
	}
}

#define GH_PREFIX "GDRHOOK_"
#define GH_PREFIX_LEN 8

/* The spellings UCX, libfabric and NCCL users bring along. */
static const char *const bool_yes[] = { "1", "y", "yes", "on", "true", NULL };
static const char *const bool_no[] = { "0", "n", "no", "off", "false", NULL };

static int parse_bool(const char *s, int *v_p)
{
	for (size_t i = 0; bool_yes[i]; i++) {
		if (!strcasecmp(s, bool_yes[i])) {
			*v_p = 1;
			return 0;
		}
		if (!strcasecmp(s, bool_no[i])) {
			*v_p = 0;
			return 0;
		}
	}
	return -EINVAL;
}

/* Level i's names; the digits 0-4 as well. */
static const char *const level_names[] = {
	"none", "error", "warn", "warning", "info", "debug", "trace", NULL
};
static const int level_of[] = { 0, 1, 2, 2, 3, 4, 4 };

static int parse_level(const char *s, int *v_p)
{
	for (size_t i = 0; level_names[i]; i++) {
		if (!strcasecmp(s, level_names[i])) {
			*v_p = level_of[i];
			return 0;
		}
	}
	if (s[0] >= '0' && s[0] <= '4' && !s[1]) {
		*v_p = s[0] - '0';
		return 0;
	}
	return -EINVAL;
}

/* Digits and an optional k/m/g suffix; anything that overflows is refused. */
static int parse_size(const char *s, int inf_ok, uint64_t *v_p)
{
	uint64_t v = 0;
	unsigned int shift = 0;
	const char *p = s;

	if (inf_ok && (!strcasecmp(s, "inf") || !strcasecmp(s, "unlimited"))) {
		*v_p = 0;
		return 0;
	}
	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned int d = (unsigned int)(*p - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	switch (*p) {
	case 'k': case 'K': shift = 10; p++; break;
	case 'm': case 'M': shift = 20; p++; break;
	case 'g': case 'G': shift = 30; p++; break;
	}
	if (*p)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*v_p = v << shift;
	return 0;
}

/* The index of s among words (any case). */
static int parse_word(const char *s, const char *const *words, int *v_p)
{
	for (int i = 0; words[i]; i++) {
		if (!strcasecmp(s, words[i])) {
			*v_p = i;
			return 0;
		}
	}
	return -EINVAL;
}

static int apply(const struct slot *s, const char *val)
{
	const struct gh_opt *o = s->o;
	char *field = (char *)s->values + o->offset;
	char bad_esc[3];
	int err;

	switch (o->type) {
	case GH_OPT_BOOL:
		return parse_bool(val, (int *)field);
	case GH_OPT_BOOL_ALL:
		if (!strcmp(val, "all")) {
			*(int *)field = 2;
			return 0;
		}
		return parse_bool(val, (int *)field);
	case GH_OPT_LEVEL:
		err = parse_level(val, (int *)field);
		if (!err)
			gh_log_level = *(int *)field;
		return err;
	case GH_OPT_SIZE:
	case GH_OPT_SIZE_INF:
		return parse_size(val, o->type == GH_OPT_SIZE_INF,
				  (uint64_t *)field);
	case GH_OPT_ENUM:
		return parse_word(val, o->words, (int *)field);
	case GH_OPT_PATH:
		if (gh_path_check(val, bad_esc))
			return -EINVAL;
		/* fall through */
	case GH_OPT_STR:
		*(const char **)field = *val ? val : NULL;
		return 0;
	case GH_OPT_RENAMED:
		break;		/* read as its new row, never on its own */
	}
	return -EINVAL;
}

static const struct slot *find_opt(const char *name, size_t len)
{
	for (unsigned int i = 0; i < n_slots; i++)
		if (strlen(slots[i].o->name) == len &&
		    !strncmp(slots[i].o->name, name, len))
			return &slots[i];
	return NULL;
}

/* The row an old name's row is read as, or NULL (gh_config_check). */
static const struct slot *new_row(const struct slot *old)
{
	const char *to = old->o->renamed_to;
	const struct slot *n = find_opt(to, strlen(to));

	return n && n->o->type != GH_OPT_RENAMED ? n : NULL;
}

/* ------------------------------------------------------ did you mean */

#define GH_NAME_MAX 40

/*
 * Edits (insert, delete, change, swap two neighbours) from a to b, case
 * aside; names longer than GH_NAME_MAX are far from everything.  On the
 * stack, no malloc: the report runs inside the first hooked call.
 */
static unsigned int distance(const char *a, size_t la, const char *b,
			     size_t lb)
{
	unsigned char d[GH_NAME_MAX + 1][GH_NAME_MAX + 1];

	if (la > GH_NAME_MAX || lb > GH_NAME_MAX)
		return 255;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = (unsigned char)i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = (unsigned char)j;
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			int ca = a[i - 1] | 0x20, cb = b[j - 1] | 0x20;
			unsigned int v = d[i - 1][j - 1] + (ca != cb);

			if (d[i - 1][j] + 1u < v)
				v = d[i - 1][j] + 1u;
			if (d[i][j - 1] + 1u < v)
				v = d[i][j - 1] + 1u;
			if (i > 1 && j > 1 && ca == (b[j - 2] | 0x20) &&
			    (a[i - 2] | 0x20) == cb && d[i - 2][j - 2] + 1u < v)
				v = d[i - 2][j - 2] + 1u;
			d[i][j] = (unsigned char)v;
		}
	}
	return d[la][lb];
}

/* One name is the other's first or last words: CACHE for CACHE_MAX_SIZE,
 * BACKEND_TYPE for BACKEND. */
static int affix(const char *u, size_t ul, const char *k, size_t kl)
{
	const char *s = ul < kl ? u : k, *l = ul < kl ? k : u;
	size_t sl = ul < kl ? ul : kl, ll = ul < kl ? kl : ul;

	if (sl < 3 || sl == ll)
		return 0;
	if (!strncasecmp(l, s, sl) && l[sl] == '_')
		return 1;
	return !strncasecmp(l + ll - sl, s, sl) && l[ll - sl - 1] == '_';
}

/* The variable an unknown name (without the prefix) probably meant. */
static const char *suggest(const char *name, size_t len)
{
	const struct gh_opt *best = NULL;
	unsigned int bestd = 3;		/* 2 edits at most */

	for (unsigned int i = 0; i < n_slots; i++) {
		const struct gh_opt *o = slots[i].o;
		unsigned int d = distance(name, len, o->name, strlen(o->name));

		if (d < bestd) {
			best = o;
			bestd = d;
		}
	}
	/* old names only by spelling: LOG_DIR does not mean the trace */
	for (unsigned int i = 0; !best && i < n_slots; i++)
		if (slots[i].o->type != GH_OPT_RENAMED &&
		    affix(name, len, slots[i].o->name,
			  strlen(slots[i].o->name)))
			best = slots[i].o;
	if (!best)
		return NULL;
	return best->renamed_to ? best->renamed_to : best->name;
}

/* ------------------------------------------------------------ loading */

/*
 * Unknown names, bad values and old names are reported at the first CUDA
 * or verbs call, not at load: a shell or tool that merely inherits the
 * environment should stay silent.
 */
#define GH_MAX_UNKNOWN 8
static const char *unknown[GH_MAX_UNKNOWN];
static int n_unknown;

struct bad_value {
	const struct gh_opt *opt;
	const char *name;	/* as set: the row's name or an old one */
	const char *val;
	int err;
};
static struct bad_value bad[GH_MAX_UNKNOWN];
static int n_bad;

/* Per row: the environment's "GDRHOOK_NAME=value" that set it, valid or
 * not (an old name's too), and whether it was valid. */
static const char *env_of[GH_NOPTS];
static unsigned char bad_row[GH_NOPTS];

/* Old names set, in the order met; shadowed: the new name was set too. */
struct old_set {
	const struct slot *old;
	const char *entry;
	int shadowed;
};
static struct old_set olds[GH_NOPTS];
static int n_olds;
static unsigned char by_new[GH_NOPTS];	/* set under the new name */

/* A problem found at init that only processes using CUDA hear about. */
static const char *deferred_msg;
static const char *deferred_arg;

void gh_config_defer_warning(const char *msg, const char *arg)
{
	deferred_msg = msg;
	deferred_arg = arg;
}

/* Appends words[] to buf as "a, b, c" (buf holds a string already). */
static void print_words(const char *const *words, char *buf, size_t cap)
{
	size_t n = strlen(buf);

	for (const char *const *w = words; w && *w; w++) {
		size_t l = strlen(*w);

		if (n + l + 3 >= cap)
			break;
		if (n) {
			memcpy(buf + n, ", ", 2);
			n += 2;
		}
		memcpy(buf + n, *w, l);
		n += l;
		buf[n] = '\0';
	}
}

/* The values o accepts, in words, from the tables the parsers use. */
static const char *accepted(const struct gh_opt *o, char *buf, size_t cap)
{
	buf[0] = '\0';
	switch (o->type) {
	case GH_OPT_BOOL:
	case GH_OPT_BOOL_ALL:
		print_words(bool_yes, buf, cap);
		print_words(bool_no, buf, cap);
		if (o->type == GH_OPT_BOOL_ALL)
			print_words((const char *const[]){ "all", NULL }, buf,
				    cap);
		break;
	case GH_OPT_LEVEL:
		print_words(level_names, buf, cap);
		print_words((const char *const[]){ "0", "1", "2", "3", "4",
						   NULL }, buf, cap);
		break;
	case GH_OPT_ENUM:
		print_words(o->words, buf, cap);
		break;
	case GH_OPT_SIZE:
		return "a whole number, optionally followed by k, m or g";
	case GH_OPT_SIZE_INF:
		return "a whole number, optionally followed by k, m or g; or inf or unlimited";
	case GH_OPT_PATH:
		return "a file name; the escapes: " GH_PATH_ESCAPES;
	case GH_OPT_STR:
	case GH_OPT_RENAMED:
		return "any string";
	}
	return buf;
}

static void report_bad(const struct bad_value *v)
{
	const struct gh_opt *o = v->opt;
	char words[256], esc[3];

	if (v->err == -ERANGE) {
		gh_warn("bad value \"%s\" for " GH_PREFIX "%s (too large), using \"%s\": %s, below 2^64",
			v->val, v->name, o->def, accepted(o, words, sizeof(words)));
	} else if (o->type == GH_OPT_PATH && gh_path_check(v->val, esc)) {
		/* "%" alone at the end shows as itself */
		gh_warn("bad value \"%s\" for " GH_PREFIX "%s: unknown escape \"%s\" (the escapes: %s), %s%s%s",
			v->val, v->name, esc, GH_PATH_ESCAPES,
			*o->def ? "using \"" : "left unset",
			o->def, *o->def ? "\"" : "");
	} else if (o->type == GH_OPT_SIZE || o->type == GH_OPT_SIZE_INF) {
		gh_warn("bad value \"%s\" for " GH_PREFIX "%s (%s), using \"%s\"",
			v->val, v->name, accepted(o, words, sizeof(words)),
			o->def);
	} else {
		gh_warn("bad value \"%s\" for " GH_PREFIX "%s (one of: %s), using \"%s\"",
			v->val, v->name, accepted(o, words, sizeof(words)),
			o->def);
	}
}

void gh_config_report(void)
{
	for (int i = 0; i < n_olds; i++) {
		const struct slot *n = new_row(olds[i].old);

		if (olds[i].shadowed)
			gh_warn("deprecated variable %s ignored: %s is set too and wins",
				olds[i].entry, env_of[n - slots]);
		else
			gh_warn("deprecated variable %s: read as " GH_PREFIX "%s, its new name",
				olds[i].entry, n->o->name);
	}
	for (int i = 0; i < n_unknown; i++) {
		const char *name = unknown[i] + GH_PREFIX_LEN;
		const char *s = suggest(name, strcspn(name, "="));

		if (s)
			gh_warn("unknown variable ignored: %s (did you mean " GH_PREFIX "%s?)",
				unknown[i], s);
		else
			gh_warn("unknown variable ignored: %s", unknown[i]);
	}
	for (int i = 0; i < n_bad; i++)
		report_bad(&bad[i]);
	if (deferred_msg)
		gh_warn("%s \"%s\"", deferred_msg, deferred_arg);
}

/* The i-th unknown GDRHOOK_* "NAME=value" of the environment, or NULL. */
const char *gh_config_unknown(unsigned int i)
{
	return i < (unsigned int)n_unknown ? unknown[i] : NULL;
}

const char *gh_config_setting(const char *name)
{
	const struct slot *s = find_opt(name, strlen(name));

	if (!s || s->o->type == GH_OPT_RENAMED || bad_row[s - slots])
		return NULL;
	return env_of[s - slots];
}

/* entry ("GDRHOOK_NAME=value") sets s, named name in messages. */
static int set_one(const struct slot *s, const char *name,
		   const char *entry)
{
	const char *val = strchr(entry, '=') + 1;
	size_t i = (size_t)(s - slots);
	int err = apply(s, val);

	env_of[i] = entry;
	bad_row[i] = !!err;
	if (err) {
		apply(s, s->o->def);
		if (n_bad < GH_MAX_UNKNOWN)
			bad[n_bad++] = (struct bad_value){ s->o, name, val, err };
	}
	return !!err;
}

/*
 * Defaults first, then environ, then the old names whose new name was not
 * set.  getenv-free walk of environ so unknown GDRHOOK_* names (typos) can
 * be reported.  Returns the number of bad values (each reported later by
 * gh_config_report(); its default is kept).
 */
int gh_config_load(void)
{
	extern char **environ;
	const struct gh_opt_table *const *t;
	int nbad = 0;

	index_rows();
	for (unsigned int i = 0; i < n_slots; i++)
		if (slots[i].o->type != GH_OPT_RENAMED)
			apply(&slots[i], slots[i].o->def);
	for (char **e = environ; e && *e; e++) {
		const char *name, *eq;
		const struct slot *s;

		if (strncmp(*e, GH_PREFIX, GH_PREFIX_LEN))
			continue;
		name = *e + GH_PREFIX_LEN;
		eq = strchr(name, '=');
		if (!eq)
			continue;
		s = find_opt(name, (size_t)(eq - name));
		if (!s) {
			if (n_unknown < GH_MAX_UNKNOWN)
				unknown[n_unknown++] = *e;
			continue;
		}
		if (s->o->type == GH_OPT_RENAMED) {
			if (new_row(s) && n_olds < GH_NOPTS)
				olds[n_olds++] = (struct old_set){ s, *e, 0 };
			continue;
		}
		by_new[s - slots] = 1;
		nbad += set_one(s, s->o->name, *e);
	}
	for (int i = 0; i < n_olds; i++) {
		const struct slot *n = new_row(olds[i].old);

		if (by_new[n - slots])
			olds[i].shadowed = 1;	/* the new name wins */
		else
			nbad += set_one(n, olds[i].old->o->name, olds[i].entry);
	}
	for (t = __start_gh_opts; t && t < __stop_gh_opts; t++)
		if ((*t)->loaded)
			(*t)->loaded();
	return nbad;
}

static int valid(const struct gh_opt *o, const char *s)
{
	char esc[3];
	int i;
	uint64_t u;

	switch (o->type) {
	case GH_OPT_BOOL:
		return !parse_bool(s, &i);
	case GH_OPT_BOOL_ALL:
		return !strcmp(s, "all") || !parse_bool(s, &i);
	case GH_OPT_LEVEL:
		return !parse_level(s, &i);
	case GH_OPT_SIZE:
	case GH_OPT_SIZE_INF:
		return !parse_size(s, o->type == GH_OPT_SIZE_INF, &u);
	case GH_OPT_ENUM:
		return !parse_word(s, o->words, &i);
	case GH_OPT_PATH:
		return !gh_path_check(s, esc);
	case GH_OPT_STR:
		return 1;
	case GH_OPT_RENAMED:
		break;
	}
	return 0;
}

/* The value of GDRHOOK_<name> in the environment now (the last one), or
 * NULL. */
static const char *env_now(const char *name)
{
	extern char **environ;
	size_t len = strlen(name);
	const char *v = NULL;

	for (char **e = environ; e && *e; e++) {
		const char *n = *e + GH_PREFIX_LEN;

		if (!strncmp(*e, GH_PREFIX, GH_PREFIX_LEN) &&
		    !strncmp(n, name, len) && n[len] == '=')
			v = n + len + 1;
	}
	return v;
}

/* Row i of the table as it applies now (gdrhook-info, src/face/info.c):
 * the value as written, under the new name or, failing that, an old one.
 * The listed rows come first in slots[], old names after them. */
int gh_config_row(unsigned int i, struct gh_config_row *r_p)
{
	const struct gh_opt *o = i < n_slots ? slots[i].o : NULL;
	const char *v, *via = NULL;

	if (!o || o->type == GH_OPT_RENAMED)
		return -ENOENT;
	v = env_now(o->name);
	for (unsigned int k = 0; !v && k < n_slots; k++) {
		if (slots[k].o->type != GH_OPT_RENAMED ||
		    strcmp(slots[k].o->renamed_to, o->name))
			continue;
		v = env_now(slots[k].o->name);
		via = v ? slots[k].o->name : NULL;
	}
	r_p->name = o->name;
	r_p->def = o->def;
	r_p->doc = o->doc;
	r_p->value = o->def;
	r_p->source = GH_CFG_DEFAULT;
	r_p->via = via;
	if (v && valid(o, v)) {
		r_p->value = v;
		r_p->source = GH_CFG_ENV;
	} else if (v) {
		r_p->source = GH_CFG_BAD_ENV;
	}
	return 0;
}

int gh_config_check(char *why, size_t cap)
{
	if (n_rows_seen > n_slots) {
		gh_str_printf(why, cap, "%u rows, more than the %u config.c holds (GH_NOPTS)",
			      n_rows_seen, n_slots);
		return -EINVAL;
	}
	for (unsigned int i = 0; i < n_slots; i++) {
		const struct gh_opt *o = slots[i].o;

		if (o->type == GH_OPT_RENAMED && !new_row(&slots[i])) {
			gh_str_printf(why, cap, "GDRHOOK_%s: renamed to GDRHOOK_%s, which no table has",
				      o->name, o->renamed_to);
			return -EINVAL;
		}
		for (unsigned int k = 0; k < i; k++) {
			const struct gh_opt *p = slots[k].o;

			if (!strcmp(o->name, p->name)) {
				gh_str_printf(why, cap, "GDRHOOK_%s: in two rows", o->name);
				return -EINVAL;
			}
			if (o->type != GH_OPT_RENAMED &&
			    p->type != GH_OPT_RENAMED && o->order == p->order) {
				gh_str_printf(why, cap, "GDRHOOK_%s and GDRHOOK_%s: the same order key %u",
					      p->name, o->name, o->order);
				return -EINVAL;
			}
		}
	}
	return 0;
}
