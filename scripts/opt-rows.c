// SPDX-License-Identifier: MIT
/*
 * The GDRHOOK_* rows as the library has them, in order, one a line:
 * name, default and meaning, tab-separated, for scripts/gen-doc.py (the
 * README's table; make doc, make check).  Linked with the option files
 * (those with a GH_OPT_TABLE row, src/<layer>/<layer>_opts.c) and base
 * alone, so nothing runs but the parser.  Fails when the tables disagree
 * (gh_config_check) or a text would break the line format.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

int main(void)
{
	struct gh_config_row r;
	char why[256];
	unsigned int i;

	clearenv();		/* the defaults, and nothing to report */
	gh_config_load();
	if (gh_config_check(why, sizeof(why))) {
		fprintf(stderr, "opt-rows: %s\n", why);
		return 1;
	}
	for (i = 0; !gh_config_row(i, &r); i++) {
		if (strpbrk(r.def, "\t\n") || strpbrk(r.doc, "\t\n")) {
			fprintf(stderr, "opt-rows: GDRHOOK_%s: a tab or a newline in its text\n",
				r.name);
			return 1;
		}
		printf("%s\t%s\t%s\n", r.name, r.def, r.doc);
	}
	if (!i) {
		fprintf(stderr, "opt-rows: no GH_OPT_TABLE linked\n");
		return 1;
	}
	return 0;
}
