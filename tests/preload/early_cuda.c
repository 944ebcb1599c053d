// SPDX-License-Identifier: MIT
/*
 * A program that makes its first CUDA calls where EARLY_CUDA says: in
 * the constructor of a library it links (lib: libearly_cuda.so, before
 * gdrhook's constructors), in its own constructor (prog: after them) or
 * in main.  test_init runs it under LD_PRELOAD=libgdrhook.so.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int early_cuda_alloc(void);

static int when(const char *w)
{
	const char *e = getenv("EARLY_CUDA");

	return e && !strcmp(e, w);
}

__attribute__((constructor)) static void early_prog(void)
{
	if (when("prog") && early_cuda_alloc())
		_exit(4);
}

int main(void)
{
	if (when("main") && early_cuda_alloc())
		return 5;
	return 0;
}
