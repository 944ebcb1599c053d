// SPDX-License-Identifier: MIT
/*
 * gdrhook-info: what gdrhook would do on this machine, the verdict first
 * (one line), then a screen of answers, or a view in the manner of
 * ucx_info: devices, routes, configuration; --json for tools.
 * Everything is in the library (gdrhook_info(), src/face/info.c); this links
 * it, so the library is in the process as if preloaded.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gdrhook.h"

#define COLS	100	/* what a line of the report and of stderr fits in */

static int usage(FILE *f, int rc)
{
	fprintf(f, "usage: gdrhook-info [-d] [-r] [-c] [-a] [--json] | -v | -h\n"
		"  what gdrhook would do here: a verdict on the first line, then\n"
		"  one screen of answers (GPUs, RDMA devices, pin backend,\n"
		"  interception, the variables set); the views show one part in full:\n"
		"  -d, --devices  versions, each GPU and RDMA device\n"
		"  -r, --routes   the pin backend and why, each NIC's route for an\n"
		"                 exact registration, the routes to the CUDA driver\n"
		"  -c, --config   every GDRHOOK_* variable, its value, source, meaning\n"
		"  -a, --all      all of them\n"
		"  --json         all of it as one JSON object\n"
		"  -v, --version  the library's version\n"
		"  -h, --help     this\n");
	return rc;
}

static int bad(const char *what, const char *arg)
{
	fprintf(stderr, "gdrhook-info: %s '%s'\n", what, arg);
	return usage(stderr, 2);
}

/*
 * The library's diagnostics (a driver that cannot be loaded, a variable
 * not valid) come at its first call, before the report's first line: they
 * are kept and written after the report, wrapped as the report is.
 */
static int capture_stderr(int *saved)
{
	int fd = memfd_create("gdrhook-info-stderr", MFD_CLOEXEC);

	*saved = -1;
	if (fd < 0)
		return -1;
	fflush(stderr);
	*saved = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
	if (*saved < 0 || dup2(fd, STDERR_FILENO) < 0) {
		if (*saved >= 0)
			close(*saved);
		*saved = -1;
		close(fd);
		return -1;
	}
	return fd;
}

static void release_stderr(int fd, int saved)
{
	char buf[8192], *p, *nl;
	ssize_t n;
	size_t len = 0;

	if (fd < 0)
		return;
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	if (lseek(fd, 0, SEEK_SET) == 0) {
		while ((n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0 ||
		       (n < 0 && errno == EINTR))
			if (n > 0 && (len += (size_t)n) == sizeof(buf) - 1)
				break;
	}
	close(fd);
	buf[len] = '\0';
	for (p = buf; *p; p = nl ? nl + 1 : p + strlen(p)) {
		size_t w = COLS;

		nl = strchr(p, '\n');
		if (nl)
			*nl = '\0';
		/* Broken at spaces; continuations indented by four. */
		while (strlen(p) > w) {
			size_t cut = w;

			while (cut && p[cut] != ' ')
				cut--;
			if (!cut)
				break;
			fprintf(stderr, "%s%.*s\n", w < COLS ? "    " : "",
				(int)cut, p);
			p += cut + 1;
			w = COLS - 4;
		}
		fprintf(stderr, "%s%s\n", w < COLS ? "    " : "", p);
	}
}

int main(int argc, char **argv)
{
	static const struct {
		const char *lng;
		char shrt;
		unsigned int flag;
	} opt[] = {
		{ "devices", 'd', GDRHOOK_INFO_DEVICES },
		{ "routes", 'r', GDRHOOK_INFO_ROUTES },
		{ "config", 'c', GDRHOOK_INFO_CONFIG },
		{ "all", 'a', GDRHOOK_INFO_ALL },
		{ "json", 0, GDRHOOK_INFO_JSON },
		{ "version", 'v', 0 },
		{ "help", 'h', 0 },
	};
	const size_t nopt = sizeof(opt) / sizeof(opt[0]);
	unsigned int flags = 0;
	int version = 0, help = 0, rc, cap, saved;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		size_t k;

		if (a[0] != '-' || !a[1])
			return bad("unexpected argument", a);
		if (a[1] == '-') {
			const char *eq = strchr(a + 2, '=');
			size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);

			for (k = 0; k < nopt; k++)
				if (strlen(opt[k].lng) == len &&
				    !strncmp(opt[k].lng, a + 2, len))
					break;
			if (k == nopt)
				return bad("unknown option", a);
			if (eq) {
				fprintf(stderr, "gdrhook-info: option '--%s' takes no value\n",
					opt[k].lng);
				return usage(stderr, 2);
			}
			flags |= opt[k].flag;
			version |= opt[k].shrt == 'v';
			help |= opt[k].shrt == 'h';
			continue;
		}
		/* Short options, together as -dc or apart. */
		for (const char *c = a + 1; *c; c++) {
			char one[3] = { '-', *c, '\0' };

			for (k = 0; k < nopt; k++)
				if (opt[k].shrt == *c)
					break;
			if (k == nopt)
				return bad("unknown option", one);
			flags |= opt[k].flag;
			version |= *c == 'v';
			help |= *c == 'h';
		}
	}
	if (help)
		return usage(stdout, 0);
	if (version) {
		printf("gdrhook-info %s\n", gdrhook_version());
		return 0;
	}
	fflush(stdout);
	cap = capture_stderr(&saved);
	rc = gdrhook_info(STDOUT_FILENO, flags);
	release_stderr(cap, saved);
	if (rc) {
		fprintf(stderr, "gdrhook-info: writing the report: %s\n",
			strerror(-rc));
		return 1;
	}
	return 0;
}
