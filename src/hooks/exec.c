// SPDX-License-Identifier: MIT
/*
 * The exec* family: the event log is drained to its sink before the
 * process image is replaced, and stays locked until it is (so its writer
 * thread is never cut off mid-line); records made by other threads after
 * the drain stay in the spool, which the next image recovers.  If the
 * exec fails, the log is let go and the program goes on, errno intact.
 *
 * glibc's exec functions call its internal execve, not ours, so each one
 * is wrapped.  The list forms (execl, execle, execlp) build argv on the
 * stack, as glibc does, and call the vector forms: no malloc.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>

#include "hookrt.h"
#include "evlog/evlog.h"
#include "platform/platform.h"

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execv_fn)(const char *, char *const[]);
typedef int (*execveat_fn)(int, const char *, char *const[], char *const[],
			   int);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);

extern char **environ;

/* Drain the log; 1 when it must be let go if the exec returns. */
static int exec_prepare(void)
{
	return gh_evlog_enabled() && gh_evlog_exec_prepare();
}

/* The exec returned (it failed): rc is its result, errno its error. */
static int exec_returned(int held, int rc)
{
	if (held)
		gh_evlog_exec_failed();
	return rc;
}

static void *real(unsigned int sym)
{
	void *p = gh_real_get(sym);

	if (!p)
		errno = ENOSYS;
	return p;
}

int gh_manual_execve(const char *path, char *const argv[],
		     char *const envp[])
{
	execve_fn f = (execve_fn)real(GH_SYM_execve);
	int held;

	if (!f)
		return -1;
	held = exec_prepare();
	return exec_returned(held, f(path, argv, envp));
}

int gh_manual_execv(const char *path, char *const argv[])
{
	execv_fn f = (execv_fn)real(GH_SYM_execv);
	int held;

	if (!f)
		return -1;
	held = exec_prepare();
	return exec_returned(held, f(path, argv));
}

int gh_manual_execvp(const char *file, char *const argv[])
{
	execv_fn f = (execv_fn)real(GH_SYM_execvp);
	int held;

	if (!f)
		return -1;
	held = exec_prepare();
	return exec_returned(held, f(file, argv));
}

int gh_manual_execvpe(const char *file, char *const argv[],
		      char *const envp[])
{
	execve_fn f = (execve_fn)real(GH_SYM_execvpe);
	int held;

	if (!f)
		return -1;
	held = exec_prepare();
	return exec_returned(held, f(file, argv, envp));
}

int gh_manual_execveat(int dirfd, const char *path, char *const argv[],
		       char *const envp[], int flags)
{
	execveat_fn f = (execveat_fn)real(GH_SYM_execveat);
	int held;

	if (!f)
		return -1;
	held = exec_prepare();
	return exec_returned(held, f(dirfd, path, argv, envp, flags));
}

int gh_manual_fexecve(int fd, char *const argv[], char *const envp[])
{
	fexecve_fn f = (fexecve_fn)real(GH_SYM_fexecve);
	int held;

	if (!f)
		return -1;
	held = exec_prepare();
	return exec_returned(held, f(fd, argv, envp));
}

/* Arguments after arg up to the NULL that ends them (execl's list). */
static size_t list_len(va_list ap)
{
	size_t n = 0;

	while (va_arg(ap, const char *))
		n++;
	return n;
}

/*
 * The list forms: argv on the stack (arg, the rest, NULL); execle's envp
 * follows the NULL.  E2BIG past what a stack argv may hold, like glibc.
 */
#define GH_EXEC_LIST(arg, envp_out, call)				\
	do {								\
		va_list ap;						\
		size_t n_;						\
									\
		va_start(ap, arg);					\
		n_ = list_len(ap);					\
		va_end(ap);						\
		if (n_ >= INT_MAX / sizeof(char *) - 2) {		\
			errno = E2BIG;					\
			return -1;					\
		}							\
		{							\
			char *argv_[n_ + 2];				\
									\
			argv_[0] = (char *)(arg);			\
			va_start(ap, arg);				\
			for (size_t i_ = 1; i_ <= n_ + 1; i_++)	\
				argv_[i_] = va_arg(ap, char *);		\
			envp_out = va_arg(ap, char *const *);		\
			va_end(ap);					\
			return call;					\
		}							\
	} while (0)

int gh_manual_execl(const char *path, const char *arg, ...)
{
	char *const *envp __attribute__((unused));

	GH_EXEC_LIST(arg, envp, gh_manual_execve(path, argv_, environ));
}

int gh_manual_execle(const char *path, const char *arg, ...)
{
	char *const *envp;

	GH_EXEC_LIST(arg, envp, gh_manual_execve(path, argv_, envp));
}

int gh_manual_execlp(const char *file, const char *arg, ...)
{
	char *const *envp __attribute__((unused));

	GH_EXEC_LIST(arg, envp, gh_manual_execvp(file, argv_));
}

GH_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
	__attribute__((alias("gh_manual_execve")));
GH_EXPORT int execv(const char *path, char *const argv[])
	__attribute__((alias("gh_manual_execv")));
GH_EXPORT int execvp(const char *file, char *const argv[])
	__attribute__((alias("gh_manual_execvp")));
GH_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
	__attribute__((alias("gh_manual_execvpe")));
GH_EXPORT int execveat(int dirfd, const char *path, char *const argv[],
		       char *const envp[], int flags)
	__attribute__((alias("gh_manual_execveat")));
GH_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
	__attribute__((alias("gh_manual_fexecve")));
GH_EXPORT int execl(const char *path, const char *arg, ...)
	__attribute__((alias("gh_manual_execl")));
GH_EXPORT int execle(const char *path, const char *arg, ...)
	__attribute__((alias("gh_manual_execle")));
GH_EXPORT int execlp(const char *file, const char *arg, ...)
	__attribute__((alias("gh_manual_execlp")));
