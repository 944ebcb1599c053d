// SPDX-License-Identifier: MIT
/*
 * Memory that no allocation call makes, on the real driver: graph memory
 * nodes (capture, explicit nodes, instantiate, launch 3 times with and
 * without auto-free, trim, destroy), module and library globals, external
 * memory (an opaque-fd import of the process's own VMM allocation), pool
 * import (in a child process, with its real size) and the device alias of
 * host memory.
 *
 * At every step it prints one "DRV" line with what the driver says (the
 * range query and whether a BUFFER_ID query succeeds): run it with and
 * without LD_PRELOAD=libgdrhook.so and those lines must be identical (the
 * shim changes nothing the program can see).  Under the shim it also
 * prints "REG" lines: the registry's answer, and AGREE or DISAGREE with the
 * driver (tracked exactly while the driver backs the range).  At exit:
 * "SUMMARY disagree=N trusted=T audit=A" (audit: GDRHOOK_VALIDATE=1
 * disagreements counted by the shim), and for tests/gpu/gpu-check "GH-OK" or
 * "GH-FAIL" (any disagreement, audit record or untrusted registry).
 *
 *   cc -O2 -I$CUDA_HOME/include tests/gpu/kinds_proof.c -lcuda -ldl
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../include/gdrhook.h"

static int (*lookup)(const void *, size_t, struct gdrhook_range *);
static int (*trusted)(void);
static int (*stats)(struct gdrhook_stats *);
static int disagree;

#define CK(call)							\
	do {								\
		CUresult rc_ = (call);					\
		if (rc_ != CUDA_SUCCESS) {				\
			printf("FAIL line %d: %s -> %d\n", __LINE__, #call, \
			       (int)rc_);				\
			exit(1);					\
		}							\
	} while (0)

static const char *kind_name(unsigned int k)
{
	static const char *const n[] = { "none", "device", "managed", "host",
		"host_registered", "pool", "vmm", "ipc", "graph", "global",
		"external" };

	return k < sizeof(n) / sizeof(n[0]) ? n[k] : "?";
}

/* expect_kind 0: only check presence. */
static void step(const char *what, CUdeviceptr p, unsigned int expect_kind)
{
	unsigned long long id = 0;
	CUdeviceptr base = 0;
	size_t size = 0;
	CUresult rr = cuMemGetAddressRange_v2(&base, &size, p);
	CUresult ri = cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID,
					    p);
	struct gdrhook_range r;
	int lr, ok;

	printf("DRV %-44s range rc=%d off=%lld size=%zu  buffer_id rc=%d\n",
	       what, (int)rr, rr ? 0LL : (long long)(p - base), rr ? 0 : size,
	       (int)ri);
	if (!lookup)
		return;
	memset(&r, 0, sizeof(r));
	lr = lookup((void *)(uintptr_t)p, 1, &r);
	if (rr == CUDA_SUCCESS)
		ok = lr == 0 && (!expect_kind || r.kind == expect_kind);
	else
		ok = lr != 0;
	if (!ok)
		disagree++;
	printf("REG %-44s lookup=%d kind=%s size=%llu gen=%llu  %s\n", what,
	       lr, lr ? "-" : kind_name(r.kind),
	       lr ? 0ULL : (unsigned long long)r.size,
	       lr ? 0ULL : (unsigned long long)r.gen,
	       ok ? "AGREE" : "DISAGREE");
}

/* ------------------------------------------------------------ graphs */

static void graph_case(CUstream s, int autofree)
{
	const char *tag = autofree ? "autofree" : "plain";
	CUgraphExec e;
	CUgraph g;
	CUdeviceptr p;
	char what[96];

	CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CK(cuMemAllocAsync(&p, 4 << 20, s));
	CK(cuMemsetD8Async(p, 0x5a, 4 << 20, s));
	snprintf(what, sizeof(what), "graph/%s captured", tag);
	step(what, p, GDRHOOK_KIND_GRAPH);
	CK(cuStreamEndCapture(s, &g));
	CK(cuGraphInstantiateWithFlags(&e, g, autofree ?
		CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH : 0));
	snprintf(what, sizeof(what), "graph/%s instantiated", tag);
	step(what, p, GDRHOOK_KIND_GRAPH);
	CK(cuGraphUpload(e, s));
	CK(cuStreamSynchronize(s));
	snprintf(what, sizeof(what), "graph/%s uploaded", tag);
	step(what, p, GDRHOOK_KIND_GRAPH);
	for (int i = 1; i <= 3; i++) {
		CK(cuGraphLaunch(e, s));
		CK(cuStreamSynchronize(s));
		snprintf(what, sizeof(what), "graph/%s launch %d", tag, i);
		step(what, p, GDRHOOK_KIND_GRAPH);
		if (!autofree) {
			CK(cuMemFreeAsync(p, s));
			CK(cuStreamSynchronize(s));
			snprintf(what, sizeof(what), "graph/%s freed %d", tag,
				 i);
			step(what, p, GDRHOOK_KIND_GRAPH);
		}
	}
	CK(cuDeviceGraphMemTrim(0));
	snprintf(what, sizeof(what), "graph/%s trimmed", tag);
	step(what, p, GDRHOOK_KIND_GRAPH);
	CK(cuGraphExecDestroy(e));
	snprintf(what, sizeof(what), "graph/%s exec destroyed", tag);
	step(what, p, GDRHOOK_KIND_GRAPH);
	CK(cuGraphDestroy(g));
	snprintf(what, sizeof(what), "graph/%s graph destroyed", tag);
	step(what, p, GDRHOOK_KIND_GRAPH);
	if (autofree) {
		CK(cuMemFree(p));
		step("graph/autofree freed after destroy", p,
		     GDRHOOK_KIND_GRAPH);
	}
	CK(cuDeviceGraphMemTrim(0));
}

static void graph_in_graph_free(CUstream s)
{
	CUgraphExec e;
	CUgraph g;
	CUdeviceptr p;

	CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CK(cuMemAllocAsync(&p, 1 << 20, s));
	CK(cuMemsetD8Async(p, 1, 1 << 20, s));
	CK(cuMemFreeAsync(p, s));
	CK(cuStreamEndCapture(s, &g));
	CK(cuGraphInstantiateWithFlags(&e, g, 0));
	for (int i = 0; i < 3; i++) {
		CK(cuGraphLaunch(e, s));
		CK(cuStreamSynchronize(s));
		step("graph/alloc+free in graph, launched", p,
		     GDRHOOK_KIND_GRAPH);
	}
	CK(cuGraphExecDestroy(e));
	CK(cuGraphDestroy(g));
}

static void graph_explicit(CUstream s)
{
	CUDA_MEM_ALLOC_NODE_PARAMS np;
	CUgraphExec ea, ef;
	CUgraphNode n;
	CUgraph ga, gf;

	CK(cuGraphCreate(&ga, 0));
	memset(&np, 0, sizeof(np));
	np.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	np.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	np.poolProps.location.id = 0;
	np.bytesize = 2 << 20;
	CK(cuGraphAddMemAllocNode(&n, ga, NULL, 0, &np));
	step("graph/explicit node made", np.dptr, GDRHOOK_KIND_GRAPH);
	CK(cuGraphCreate(&gf, 0));
	CK(cuGraphAddMemFreeNode(&n, gf, NULL, 0, np.dptr));
	CK(cuGraphInstantiateWithFlags(&ea, ga, 0));
	CK(cuGraphInstantiateWithFlags(&ef, gf, 0));
	for (int i = 0; i < 3; i++) {
		CK(cuGraphLaunch(ea, s));
		CK(cuStreamSynchronize(s));
		step("graph/explicit alloc launched", np.dptr,
		     GDRHOOK_KIND_GRAPH);
		CK(cuGraphLaunch(ef, s));
		CK(cuStreamSynchronize(s));
		step("graph/explicit free launched", np.dptr,
		     GDRHOOK_KIND_GRAPH);
	}
	CK(cuGraphExecDestroy(ea));
	CK(cuGraphExecDestroy(ef));
	CK(cuGraphDestroy(ga));
	CK(cuGraphDestroy(gf));
}

static CUgraphNodeParams alloc_params(size_t size)
{
	CUgraphNodeParams np;

	memset(&np, 0, sizeof(np));
	np.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
	np.alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	np.alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	np.alloc.poolProps.location.id = 0;
	np.alloc.bytesize = size;
	return np;
}

/* The generic node API, a child graph moved into its parent (its free
 * node freeing a parent allocation inside the graph), a node added after
 * instantiation, capture into an existing graph; what the driver says of
 * cloning such graphs and updating their instances is printed. */
static void graph_generic(CUstream s)
{
	CUgraphNodeParams na = alloc_params(2 << 20), nb = alloc_params(4 << 20),
			  nc = alloc_params(1 << 20), nf, ng;
	CUgraphExecUpdateResultInfo ri;
	CUgraph g, child, parent, clone;
	CUgraphExec e1, e2, ep;
	CUgraphNode n;
	CUdeviceptr p;
	CUresult rc;

	CK(cuGraphCreate(&g, 0));
	CK(cuGraphAddNode(&n, g, NULL, NULL, 0, &na));
	step("graph/generic node made", na.alloc.dptr, GDRHOOK_KIND_GRAPH);
	CK(cuGraphInstantiateWithFlags(
		&e1, g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
	CK(cuGraphAddNode(&n, g, NULL, NULL, 0, &nb));
	CK(cuGraphLaunch(e1, s));
	CK(cuStreamSynchronize(s));
	step("graph/generic a, old instance launched", na.alloc.dptr,
	     GDRHOOK_KIND_GRAPH);
	step("graph/generic b (added later), old instance", nb.alloc.dptr,
	     GDRHOOK_KIND_GRAPH);
	rc = cuGraphClone(&clone, g);
	printf("DRV graph/clone with memory nodes: rc=%d\n", (int)rc);
	rc = cuGraphExecUpdate(e1, g, &ri);
	printf("DRV graph/exec update with memory nodes: rc=%d result=%d\n",
	       (int)rc, (int)ri.result);
	/* one instance at a time for a graph with memory nodes (the H100:
	 * CUDA_ERROR_NOT_SUPPORTED while the first lives) */
	rc = cuGraphInstantiateWithFlags(
		&e2, g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH);
	printf("DRV graph/second instance while the first lives: rc=%d\n",
	       (int)rc);
	if (rc == CUDA_SUCCESS)
		CK(cuGraphExecDestroy(e2));
	CK(cuGraphExecDestroy(e1));
	step("graph/generic a, first instance destroyed", na.alloc.dptr,
	     GDRHOOK_KIND_GRAPH);
	CK(cuMemFree_v2(na.alloc.dptr));
	step("graph/generic a freed", na.alloc.dptr, GDRHOOK_KIND_GRAPH);
	CK(cuGraphInstantiateWithFlags(
		&e2, g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
	CK(cuGraphLaunch(e2, s));
	CK(cuStreamSynchronize(s));
	step("graph/generic a, new instance launched", na.alloc.dptr,
	     GDRHOOK_KIND_GRAPH);
	step("graph/generic b, new instance launched", nb.alloc.dptr,
	     GDRHOOK_KIND_GRAPH);
	CK(cuGraphExecDestroy(e2));
	CK(cuGraphDestroy(g));
	CK(cuMemFree_v2(na.alloc.dptr));
	CK(cuMemFree_v2(nb.alloc.dptr));
	step("graph/generic freed", na.alloc.dptr, GDRHOOK_KIND_GRAPH);

	/* a moved child frees the parent's allocation inside the graph */
	CK(cuGraphCreate(&parent, 0));
	CK(cuGraphAddNode(&n, parent, NULL, NULL, 0, &nc));
	CK(cuGraphCreate(&child, 0));
	memset(&nf, 0, sizeof(nf));
	nf.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
	nf.free.dptr = nc.alloc.dptr;
	rc = cuGraphAddNode(&n, child, NULL, NULL, 0, &nf);
	printf("DRV graph/child free node of a parent allocation: rc=%d\n",
	       (int)rc);
	memset(&ng, 0, sizeof(ng));
	ng.type = CU_GRAPH_NODE_TYPE_GRAPH;
	ng.graph.graph = child;
	ng.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE;
	printf("DRV graph/child with memory nodes cloned: rc=%d\n",
	       (int)cuGraphAddNode(&n, parent, &n, NULL, 0, &ng));
	ng.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
	if (rc == CUDA_SUCCESS &&
	    cuGraphAddNode(&n, parent, NULL, NULL, 0, &ng) == CUDA_SUCCESS &&
	    cuGraphInstantiateWithFlags(&ep, parent, 0) == CUDA_SUCCESS) {
		CK(cuGraphLaunch(ep, s));
		CK(cuStreamSynchronize(s));
		step("graph/moved child freed it in the graph", nc.alloc.dptr,
		     GDRHOOK_KIND_GRAPH);
		CK(cuGraphExecDestroy(ep));
	} else {
		printf("DRV graph/moved child: not accepted by the driver\n");
	}
	cuGraphDestroy(parent);

	/* capture into an existing graph */
	CK(cuGraphCreate(&g, 0));
	na = alloc_params(2 << 20);
	CK(cuGraphAddNode(&n, g, NULL, NULL, 0, &na));
	CK(cuStreamBeginCaptureToGraph(s, g, &n, NULL, 1,
				       CU_STREAM_CAPTURE_MODE_GLOBAL));
	CK(cuMemAllocAsync(&p, 3 << 20, s));
	CK(cuStreamEndCapture(s, &g));
	CK(cuGraphInstantiateWithFlags(&e1, g, 0));
	CK(cuGraphLaunch(e1, s));
	CK(cuStreamSynchronize(s));
	step("graph/capture-to-graph explicit node", na.alloc.dptr,
	     GDRHOOK_KIND_GRAPH);
	step("graph/capture-to-graph captured node", p, GDRHOOK_KIND_GRAPH);
	CK(cuGraphExecDestroy(e1));
	CK(cuGraphDestroy(g));
	CK(cuMemFree_v2(na.alloc.dptr));
	CK(cuMemFree_v2(p));
	step("graph/capture-to-graph freed", p, GDRHOOK_KIND_GRAPH);
}

/* ----------------------------------------------------------- globals */

static const char ptx[] =
	".version 8.0\n.target sm_90\n.address_size 64\n"
	".visible .global .align 4 .u32 flag;\n"
	".visible .global .align 8 .b8 table[65536];\n"
	".visible .global .attribute(.managed) .align 4 .u32 mvar;\n";

static void globals_case(void)
{
	CUdeviceptr a, b, m, a2;
	size_t na, nb, nm;
	CUlibrary lib;
	CUmodule mod;

	CK(cuModuleLoadData(&mod, ptx));
	CK(cuModuleGetGlobal(&a, &na, mod, "flag"));
	CK(cuModuleGetGlobal(&b, &nb, mod, "table"));
	printf("DRV module globals sizes flag=%zu table=%zu\n", na, nb);
	step("global/module flag", a, GDRHOOK_KIND_GLOBAL);
	step("global/module table", b, GDRHOOK_KIND_GLOBAL);
	CK(cuModuleGetGlobal(&a2, NULL, mod, "flag"));
	printf("DRV module flag again same=%d\n", a2 == a);
	step("global/module flag again", a, GDRHOOK_KIND_GLOBAL);
	CK(cuModuleUnload(mod));
	step("global/module flag unloaded", a, GDRHOOK_KIND_GLOBAL);
	step("global/module table unloaded", b, GDRHOOK_KIND_GLOBAL);

	CK(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0));
	CK(cuLibraryGetGlobal(&a, &na, lib, "flag"));
	CK(cuLibraryGetManaged(&m, &nm, lib, "mvar"));
	printf("DRV library sizes flag=%zu mvar=%zu\n", na, nm);
	step("global/library flag", a, GDRHOOK_KIND_GLOBAL);
	step("global/library managed mvar", m, GDRHOOK_KIND_GLOBAL);
	CK(cuLibraryUnload(lib));
	step("global/library flag unloaded", a, GDRHOOK_KIND_GLOBAL);
	step("global/library mvar unloaded", m, GDRHOOK_KIND_GLOBAL);
}

/* ---------------------------------------------------- external memory */

static void external_case(void)
{
	CUDA_EXTERNAL_MEMORY_HANDLE_DESC hd;
	CUDA_EXTERNAL_MEMORY_BUFFER_DESC bd;
	CUmemAllocationProp prop;
	CUmemGenericAllocationHandle h;
	CUexternalMemory x;
	CUdeviceptr p;
	size_t gran = 0, size;
	int fd = -1;
	CUresult rc;

	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	CK(cuMemGetAllocationGranularity(&gran, &prop,
					 CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	size = 4 * gran;
	CK(cuMemCreate(&h, size, &prop, 0));
	CK(cuMemExportToShareableHandle(&fd, h,
					CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
					0));
	memset(&hd, 0, sizeof(hd));
	hd.type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD;
	hd.handle.fd = fd;
	hd.size = size;
	rc = cuImportExternalMemory(&x, &hd);
	printf("DRV external import rc=%d\n", (int)rc);
	if (rc) {
		CK(cuMemRelease(h));
		return;
	}
	memset(&bd, 0, sizeof(bd));
	bd.offset = gran;
	bd.size = 2 * gran;
	CK(cuExternalMemoryGetMappedBuffer(&p, x, &bd));
	step("external/mapped buffer", p, GDRHOOK_KIND_EXTERNAL);
	CK(cuMemFree(p));
	step("external/buffer freed", p, GDRHOOK_KIND_EXTERNAL);
	CK(cuExternalMemoryGetMappedBuffer(&p, x, &bd));
	step("external/mapped again", p, GDRHOOK_KIND_EXTERNAL);
	CK(cuDestroyExternalMemory(x));
	step("external/object destroyed", p, GDRHOOK_KIND_EXTERNAL);
	rc = cuMemFree(p);
	printf("DRV external/free after destroy rc=%d\n", (int)rc);
	step("external/freed after destroy", p, GDRHOOK_KIND_EXTERNAL);
	CK(cuMemRelease(h));
}

/* --------------------------------------------------------- pool import */

static void send_fd(int sock, int fd, const void *data, size_t len)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { (void *)data, len };
	struct msghdr msg = { 0 };
	struct cmsghdr *c;

	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cbuf;
	msg.msg_controllen = sizeof(cbuf);
	c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	if (sendmsg(sock, &msg, 0) < 0)
		perror("sendmsg");
}

static int recv_fd(int sock, void *data, size_t len)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { data, len };
	struct msghdr msg = { 0 };
	struct cmsghdr *c;
	int fd = -1;

	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cbuf;
	msg.msg_controllen = sizeof(cbuf);
	if (recvmsg(sock, &msg, MSG_WAITALL) < 0)
		return -1;
	c = CMSG_FIRSTHDR(&msg);
	if (c && c->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

/* Child: started before the parent touches CUDA. */
static void import_child(int sock)
{
	CUmemPoolPtrExportData data;
	CUmemoryPool pool;
	CUcontext ctx;
	CUdeviceptr p;
	char done = 0;
	int fd = recv_fd(sock, &data, sizeof(data));

	CK(cuInit(0));
	CK(cuDevicePrimaryCtxRetain(&ctx, 0));
	CK(cuCtxSetCurrent(ctx));
	lookup = (void *)dlsym(RTLD_DEFAULT, "gdrhook_lookup");
	CK(cuMemPoolImportFromShareableHandle(&pool, (void *)(uintptr_t)fd,
		CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	CK(cuMemPoolImportPointer(&p, pool, &data));
	step("pool-import/imported (exporter: 3 MiB)", p, GDRHOOK_KIND_POOL);
	CK(cuMemFree(p));
	step("pool-import/freed", p, GDRHOOK_KIND_POOL);
	fflush(stdout);
	if (write(sock, &done, 1) != 1)
		perror("write");
	exit(disagree ? 3 : 0);
}

static void pool_import_case(pid_t child, int sock)
{
	CUmemPoolPtrExportData data;
	CUmemPoolProps props;
	CUmemoryPool pool;
	CUdeviceptr p;
	int fd = -1, st;
	char done;

	memset(&props, 0, sizeof(props));
	props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	props.location.id = 0;
	CK(cuMemPoolCreate(&pool, &props));
	CK(cuMemAllocFromPoolAsync(&p, 3 << 20, pool, NULL));
	CK(cuStreamSynchronize(NULL));
	CK(cuMemPoolExportToShareableHandle(&fd, pool,
		CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	CK(cuMemPoolExportPointer(&data, p));
	fflush(stdout);
	send_fd(sock, fd, &data, sizeof(data));
	if (read(sock, &done, 1) != 1)
		perror("read");
	waitpid(child, &st, 0);
	printf("DRV pool-import child exit=%d\n",
	       WIFEXITED(st) ? WEXITSTATUS(st) : 128);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		disagree++;
	CK(cuMemFreeAsync(p, NULL));
	CK(cuStreamSynchronize(NULL));
	CK(cuMemPoolDestroy(pool));
}

/* ------------------------------------------------- host device alias */

static void host_case(void)
{
	CUdeviceptr d;
	void *h, *m;

	CK(cuMemHostAlloc(&h, 1 << 20, CU_MEMHOSTALLOC_DEVICEMAP));
	CK(cuMemHostGetDevicePointer(&d, h, 0));
	printf("DRV host/alloc alias same=%d\n", d == (CUdeviceptr)(uintptr_t)h);
	step("host/alloc device alias", d, GDRHOOK_KIND_HOST);
	CK(cuMemFreeHost(h));
	m = aligned_alloc(4096, 1 << 20);
	CK(cuMemHostRegister(m, 1 << 20, CU_MEMHOSTREGISTER_DEVICEMAP));
	CK(cuMemHostGetDevicePointer(&d, m, 0));
	printf("DRV host/registered alias same=%d\n",
	       d == (CUdeviceptr)(uintptr_t)m);
	step("host/registered device alias", d, GDRHOOK_KIND_HOST_REGISTERED);
	CK(cuMemHostUnregister(m));
	free(m);
}

int main(void)
{
	struct gdrhook_stats st;
	CUcontext ctx;
	CUstream s;
	pid_t child;
	int sv[2];

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("GH-PID %d\n", (int)getpid());
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return 1;
	child = fork();
	if (child == 0) {
		close(sv[0]);
		import_child(sv[1]);
	}
	close(sv[1]);
	lookup = (void *)dlsym(RTLD_DEFAULT, "gdrhook_lookup");
	trusted = (void *)dlsym(RTLD_DEFAULT, "gdrhook_trusted");
	stats = (void *)dlsym(RTLD_DEFAULT, "gdrhook_get_stats");
	CK(cuInit(0));
	CK(cuDevicePrimaryCtxRetain(&ctx, 0));
	CK(cuCtxSetCurrent(ctx));
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	graph_case(s, 0);
	graph_case(s, 1);
	graph_in_graph_free(s);
	graph_explicit(s);
	graph_generic(s);
	globals_case();
	external_case();
	pool_import_case(child, sv[0]);
	host_case();
	memset(&st, 0, sizeof(st));
	if (stats)
		stats(&st);
	printf("SUMMARY disagree=%d trusted=%d audit=%llu\n", disagree,
	       trusted ? trusted() : -1,
	       (unsigned long long)st.audit_disagreements);
	if (disagree || st.audit_disagreements || (trusted && !trusted()))
		printf("GH-FAIL kinds: %d disagreements, %llu audit, trusted %d\n",
		       disagree, (unsigned long long)st.audit_disagreements,
		       trusted ? trusted() : -1);
	else
		printf("GH-OK kinds: graph nodes, globals, external memory, %s\n",
		       "pool import, host aliases");
	return 0;
}
