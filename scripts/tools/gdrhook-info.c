// SPDX-License-Identifier: MIT
/*
 * gdrhook-info: what gdrhook would do on this machine (versions, devices,
 * pin backend and why, interception self-test; then the configuration).
 * Everything is in the library (gdrhook_info(), src/face/info.c); this links
 * it, so the library is in the process as if preloaded.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gdrhook.h"

static int usage(FILE *f, int rc)
{
	fprintf(f, "usage: gdrhook-info [--json] [--version] [--help]\n"
		"  what gdrhook would do here, the answers first: version, GPUs and\n"
		"  RDMA devices, the pin backend auto would choose and why, whether\n"
		"  every route to a CUDA allocation reaches gdrhook; then the\n"
		"  configuration in effect (GDRHOOK_* variables, source, meaning).\n"
		"  --json     one JSON object on stdout\n"
		"  --version  the library's version\n");
	return rc;
}

int main(int argc, char **argv)
{
	unsigned int flags = 0;
	int rc;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			flags |= GDRHOOK_INFO_JSON;
		else if (!strcmp(argv[i], "--version")) {
			printf("gdrhook-info %s\n", gdrhook_version());
			return 0;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return usage(stdout, 0);
		else
			return usage(stderr, 2);
	}
	fflush(stdout);
	rc = gdrhook_info(STDOUT_FILENO, flags);
	if (rc) {
		fprintf(stderr, "gdrhook-info: writing the report: %s\n",
			strerror(-rc));
		return 1;
	}
	return 0;
}
