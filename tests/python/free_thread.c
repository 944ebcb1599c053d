/* SPDX-License-Identifier: MIT */
/*
 * For tests/python: cuMemFree on a thread Python never saw, while the
 * Python thread that called free_on_thread() waits for it holding the
 * GIL (loaded with ctypes.PyDLL) -- what a C++ worker of PyTorch or NCCL
 * does while the interpreter's thread waits on a lock that worker holds.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>

int free_on_thread(uint64_t ptr);

struct job {
	uint64_t ptr;
	int rc;
};

static void *run(void *arg)
{
	struct job *j = arg;
	int (*mem_free)(uint64_t) = (int (*)(uint64_t))dlsym(RTLD_DEFAULT, "cuMemFree_v2");

	j->rc = mem_free ? mem_free(j->ptr) : -1;
	return NULL;
}

/* The real call's result, or -1 (no cuMemFree_v2), -2 (no thread). */
int free_on_thread(uint64_t ptr)
{
	struct job j = { .ptr = ptr, .rc = -1 };
	pthread_t th;

	if (pthread_create(&th, NULL, run, &j))
		return -2;
	pthread_join(th, NULL);
	return j.rc;
}
