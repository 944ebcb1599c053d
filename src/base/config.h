/* SPDX-License-Identifier: MIT */
/*
 * The GDRHOOK_* configuration (config.c): the row types, the parser and
 * the list of tables.  Each layer declares its own options beside their
 * users (src/<layer>/<layer>_opts.c: its rows, their words and the struct
 * their values live in) and registers the table with GH_OPT_TABLE.  A
 * layer reads its own options and those of the layers below it; a value
 * a lower layer needs from an upper one is handed down as an argument.
 */
#ifndef GH_CONFIG_H
#define GH_CONFIG_H

#include <stddef.h>
#include <stdint.h>

enum gh_opt_type {
	GH_OPT_BOOL,
	GH_OPT_BOOL_ALL,	/* a boolean, or "all" (stored as 2) */
	GH_OPT_STR,
	GH_OPT_LEVEL,		/* a log level; sets gh_log_level at once */
	GH_OPT_SIZE,		/* bytes or a count */
	GH_OPT_SIZE_INF,	/* same; "inf" (UCX, libfabric) means 0: no limit */
	GH_OPT_ENUM,		/* one of words[], stored as its index (an int) */
	GH_OPT_PATH,		/* a file name template (gh_path_check) */
	GH_OPT_RENAMED,		/* an old name: read as the row renamed_to */
};

/*
 * One GDRHOOK_* variable.  order places it in the README's table and in
 * gdrhook-info's listing: the rows of every table are walked by it, so
 * the documented order does not depend on which layer declares a row or
 * on the link.  The keys are unique (make check: scripts/opt-rows.c) and
 * go in tens, so a new row fits between two.
 */
struct gh_opt {
	unsigned int order;
	const char *name;	/* without the GDRHOOK_ prefix */
	const char *def;
	enum gh_opt_type type;
	size_t offset;		/* of the value in its table's struct */
	const char *doc;
	const char *const *words;	/* GH_OPT_ENUM: NULL-terminated */
	const char *renamed_to;		/* GH_OPT_RENAMED: the new name */
};

/* Rows of a table whose values are the struct type vt. */
#define GH_OPT(order, n, d, t, vt, field, doc) \
	{ order, n, d, t, offsetof(vt, field), doc, NULL, NULL }
/* words: in the order of the field's enum */
#define GH_OPT_WORDS(order, n, d, vt, field, doc, words) \
	{ order, n, d, GH_OPT_ENUM, offsetof(vt, field), doc, words, NULL }
/*
 * A name the variable had before: still read, with one deprecation line
 * (mimalloc and UCX keep theirs the same way).  The new name wins when
 * both are set.  Not a row of the README's table: the new row's doc says
 * its old name.  In the table of the new row.
 */
#define GH_OPT_OLD(old, new) \
	{ 0, old, NULL, GH_OPT_RENAMED, 0, NULL, NULL, new }

/*
 * A layer's rows, the struct their values live in, and what to run once
 * every table is loaded (NULL: nothing): how a layer applies its values
 * without base knowing its names.
 */
struct gh_opt_table {
	const struct gh_opt *rows;
	unsigned int n;
	void *values;
	void (*loaded)(void);
};

/*
 * Registers the table of rows (an array, by name) over the struct values,
 * in the section gh_opts, where config.c finds every table the link
 * brought (__start_gh_opts): no constructor hands a table over, so all
 * are in place when gh_config_load runs, whichever constructor or hook
 * runs it first.  One per layer, in src/<layer>/<layer>_opts.c, a file
 * that needs nothing but base: the README's table is generated from
 * those files alone (scripts/opt-rows.c, make doc).
 */
#define GH_OPT_TABLE_LOADED(rows, values, loaded)			\
	static const struct gh_opt_table gh_opt_table_##rows = {	\
		rows, sizeof(rows) / sizeof((rows)[0]), &(values),	\
		loaded };						\
	static const struct gh_opt_table *const gh_opt_entry_##rows	\
	__attribute__((section("gh_opts"), used)) = &gh_opt_table_##rows
#define GH_OPT_TABLE(rows, values) GH_OPT_TABLE_LOADED(rows, values, NULL)

int gh_config_load(void);
/* Warn about old names, unknown GDRHOOK_* names (with the name probably
 * meant) and bad values, as written (once, at the first CUDA or verbs
 * call: processes that merely inherit the environment stay silent). */
void gh_config_report(void);
/* Keep one warning ("msg \"arg\"") for gh_config_report(). */
void gh_config_defer_warning(const char *msg, const char *arg);

/* One configuration table row and the value in effect (config.c). */
enum gh_cfg_source {
	GH_CFG_DEFAULT,		/* not set */
	GH_CFG_ENV,		/* from the environment */
	GH_CFG_BAD_ENV,		/* set, but not valid: the default is used */
};
struct gh_config_row {
	const char *name;	/* without the GDRHOOK_ prefix */
	const char *def, *doc, *value;	/* value: as written */
	enum gh_cfg_source source;
	const char *via;	/* set under this old name (no prefix), or NULL */
};
/* Row i, in order (after gh_config_load); -ENOENT: past the end. */
int gh_config_row(unsigned int i, struct gh_config_row *r_p);
const char *gh_config_unknown(unsigned int i);	/* "GDRHOOK_X=v" or NULL */
/*
 * The environment's "GDRHOOK_X=value" that set option name (no prefix;
 * maybe under an old name), as written: for messages that echo a value
 * ("100g", not its bytes).  NULL when the default is in effect.
 */
const char *gh_config_setting(const char *name);
/*
 * Whether the tables agree (after gh_config_load): names and order keys
 * unique, each old name's new row there, every row held.  0, or -EINVAL
 * with the first problem in why.
 */
int gh_config_check(char *why, size_t cap);

#endif
