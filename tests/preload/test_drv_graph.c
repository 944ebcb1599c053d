// SPDX-License-Identifier: MIT
/*
 * Graph memory nodes (src/hooks/drv_graph.c), captured and explicit,
 * through instantiate, launch, auto-free relaunch and destroy.  Each case
 * checks the registry against the driver double at every step: tracked
 * exactly while the driver backs the range.
 */
#include <cuda.h>
#include <errno.h>

/* Exported CUDA 11.0 entry point; cuda.h no longer declares it. */
CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph,
			       CUgraphNode *phErrorNode, char *logBuffer,
			       size_t bufferSize);

/* Not every helper of the shared header is used here. */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "agree.h"

static void capture(CUstream s, CUgraph *g, CUdeviceptr *p, size_t size,
		    int free_in_graph)
{
	CU_OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CU_OK(cuMemAllocAsync(p, size, s));
	if (free_in_graph)
		CU_OK(cuMemFreeAsync(*p, s));
	CU_OK(cuStreamEndCapture(s, g));
}

static uint64_t gen_of(CUdeviceptr p)
{
	struct gdrhook_range r;

	CHECK_EQ(tracked(p, &r), 0);
	return r.gen;
}

TEST(captured_alloc_is_graph_memory_from_launch_to_free)
{
	CUgraphExec e;
	CUstream s;
	CUgraph g;
	CUdeviceptr p;

	primary_ctx(0);
	CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	capture(s, &g, &p, 1 << 20, 0);
	CHECK(p != 0);
	CHECK_EQ(agree(p, GDRHOOK_KIND_GRAPH, 1 << 20), 0);
	CU_OK(cuGraphInstantiateWithFlags(&e, g, 0));
	CHECK_EQ(agree(p, GDRHOOK_KIND_GRAPH, 1 << 20), 0);
	CU_OK(cuGraphUpload(e, s));
	CHECK_EQ(agree(p, GDRHOOK_KIND_GRAPH, 1 << 20), 0);
	for (int i = 0; i < 3; i++) {
		uint64_t gen;

		CU_OK(cuGraphLaunch(e, s));
		CHECK_EQ(agree(p, GDRHOOK_KIND_GRAPH, 1 << 20), 1);
		gen = gen_of(p);
		/* Not freed: the driver refuses a relaunch, nothing changes. */
		CHECK(cuGraphLaunch(e, s) != CUDA_SUCCESS);
		CHECK_EQ(gen_of(p), gen);
		CU_OK(cuMemFreeAsync(p, s));
		CHECK_EQ(agree(p, GDRHOOK_KIND_GRAPH, 1 << 20), 0);
	}
	CU_OK(cuDeviceGraphMemTrim(0));
	CU_OK(cuGraphExecDestroy(e));
	CU_OK(cuGraphDestroy(g));
	CHECK_EQ(agree(p, GDRHOOK_KIND_GRAPH, 1 << 20), 0);
	CHECK_EQ(gdrhook_trusted(), 1);
}

TEST(auto_free_on_launch_gives_a_new_generation_each_launch)
{
	CUgraphExec e;
	CUstream s;
	CUgraph g;
	CUdeviceptr p;
	uint64_t last = 0;

	primary_ctx(0);
	CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	capture(s, &g, &p, 3 << 20, 0);
	CU_OK(cuGraphInstantiateWithFlags(
		&e, g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
	for (int i = 0; i < 3; i++) {
		CU_OK(cuGraphLaunch(e, s));
		CHECK_EQ(agree(p, GDRHOOK_KIND_GRAPH, 3 << 20), 1);
		CHECK(gen_of(p) != last);
		last = gen_of(p);
	}
	/* Destroying graph and instance leaves the allocation live. */
	CU_OK(cuGraphExecDestroy(e));
	CU_OK(cuGraphDestroy(g));
	CHECK_EQ(agree(p, GDRHOOK_KIND_GRAPH, 3 << 20), 1);
	CU_OK(cuMemFree_v2(p));
	CHECK_EQ(agree(p, GDRHOOK_KIND_GRAPH, 3 << 20), 0);
	CHECK_EQ(gdrhook_trusted(), 1);
}

/* PyTorch destroys the graph right after instantiating it; the next
 * graph may get the destroyed one's handle. */
TEST(instance_outlives_its_graph)
{
	CUgraphExec e1, e2;
	CUstream s;
	CUgraph g1, g2;
	CUdeviceptr p1, p2;

	primary_ctx(0);
	CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	capture(s, &g1, &p1, 1 << 20, 0);
	CU_OK(cuGraphInstantiateWithFlags(&e1, g1, 0));
	CU_OK(cuGraphDestroy(g1));
	capture(s, &g2, &p2, 2 << 20, 0);
	CU_OK(cuGraphInstantiateWithFlags(&e2, g2, 0));
	CU_OK(cuGraphLaunch(e1, s));
	CHECK_EQ(agree(p1, GDRHOOK_KIND_GRAPH, 1 << 20), 1);
	CHECK_EQ(agree(p2, GDRHOOK_KIND_GRAPH, 2 << 20), 0);
	CU_OK(cuGraphLaunch(e2, s));
	CHECK_EQ(agree(p2, GDRHOOK_KIND_GRAPH, 2 << 20), 1);
	CU_OK(cuGraphExecDestroy(e1));
	CU_OK(cuGraphDestroy(g2));
	CU_OK(cuMemFreeAsync(p1, s));
	CU_OK(cuMemFreeAsync(p2, s));
	CHECK_EQ(agree(p1, GDRHOOK_KIND_GRAPH, 1 << 20), 0);
	CHECK_EQ(agree(p2, GDRHOOK_KIND_GRAPH, 2 << 20), 0);
	/* e2 still runs g2's node after its graph is gone */
	CU_OK(cuGraphLaunch(e2, s));
	CHECK_EQ(agree(p2, GDRHOOK_KIND_GRAPH, 2 << 20), 1);
	CU_OK(cuGraphExecDestroy(e2));
	CU_OK(cuMemFreeAsync(p2, s));
	CHECK_EQ(agree(p2, GDRHOOK_KIND_GRAPH, 2 << 20), 0);
	CHECK_EQ(gdrhook_trusted(), 1);
}

TEST(legacy_instantiate_is_followed_too)
{
	CUgraphExec e;
	CUstream s;
	CUgraph g;
	CUdeviceptr p;

	primary_ctx(0);
	CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	capture(s, &g, &p, 1 << 20, 0);
	CU_OK(cuGraphInstantiate_v2(&e, g, NULL, NULL, 0));
	CU_OK(cuGraphLaunch(e, s));
	CHECK_EQ(agree(p, GDRHOOK_KIND_GRAPH, 1 << 20), 1);
	CU_OK(cuMemFreeAsync(p, s));
	CHECK_EQ(agree(p, GDRHOOK_KIND_GRAPH, 1 << 20), 0);
}

/* What torch.cuda.graph with backend:cudaMallocAsync captures (measured on
 * the H100): a temporary freed inside the graph, and the output allocated
 * after it at the same address. */
TEST(address_reused_inside_a_graph_is_live_after_launch)
{
	CUgraphExec e;
	CUstream s;
	CUgraph g;
	CUdeviceptr tmp, keep, out;

	primary_ctx(0);
	CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CU_OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CU_OK(cuMemAllocAsync(&tmp, 4 << 20, s));
	CU_OK(cuMemAllocAsync(&keep, 4 << 20, s));
	CU_OK(cuMemFreeAsync(tmp, s));
	CU_OK(cuMemAllocAsync(&out, 4 << 20, s));
	CU_OK(cuStreamEndCapture(s, &g));
	CHECK_EQ(out, tmp);
	CU_OK(cuGraphInstantiateWithFlags(
		&e, g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
	for (int i = 0; i < 3; i++) {
		CU_OK(cuGraphLaunch(e, s));
		CHECK_EQ(agree(out, GDRHOOK_KIND_GRAPH, 4 << 20), 1);
		CHECK_EQ(agree(keep, GDRHOOK_KIND_GRAPH, 4 << 20), 1);
	}
	CU_OK(cuMemFreeAsync(out, s));
	CU_OK(cuMemFreeAsync(keep, s));
	CHECK_EQ(agree(out, GDRHOOK_KIND_GRAPH, 4 << 20), 0);
	CHECK_EQ(agree(keep, GDRHOOK_KIND_GRAPH, 4 << 20), 0);
	CHECK_EQ(gdrhook_trusted(), 1);
}

TEST(alloc_freed_inside_its_graph_is_never_registered)
{
	CUgraphExec e;
	CUstream s;
	CUgraph g;
	CUdeviceptr p;

	primary_ctx(0);
	CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	capture(s, &g, &p, 1 << 20, 1);
	CU_OK(cuGraphInstantiateWithFlags(&e, g, 0));
	for (int i = 0; i < 3; i++) {
		CU_OK(cuGraphLaunch(e, s));
		CHECK_EQ(agree(p, GDRHOOK_KIND_GRAPH, 1 << 20), 0);
	}
	CHECK_EQ(gdrhook_trusted(), 1);
}

TEST(explicit_alloc_node_and_free_node_in_another_graph)
{
	CUDA_MEM_ALLOC_NODE_PARAMS np;
	CUDA_GRAPH_INSTANTIATE_PARAMS ip;
	CUgraphExec ea, ef;
	CUgraphNode n;
	CUstream s;
	CUgraph ga, gf;

	primary_ctx(0);
	CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CU_OK(cuGraphCreate(&ga, 0));
	memset(&np, 0, sizeof(np));
	np.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	np.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	np.poolProps.location.id = 0;
	np.bytesize = 5 << 20;
	CU_OK(cuGraphAddMemAllocNode(&n, ga, NULL, 0, &np));
	CHECK(np.dptr != 0);
	CU_OK(cuGraphCreate(&gf, 0));
	CU_OK(cuGraphAddMemFreeNode(&n, gf, NULL, 0, np.dptr));
	memset(&ip, 0, sizeof(ip));
	CU_OK(cuGraphInstantiateWithParams(&ea, ga, &ip));
	CU_OK(cuGraphInstantiateWithFlags(&ef, gf, 0));
	for (int i = 0; i < 3; i++) {
		CU_OK(cuGraphLaunch(ea, s));
		CHECK_EQ(agree(np.dptr, GDRHOOK_KIND_GRAPH, 5 << 20), 1);
		CU_OK(cuGraphLaunch(ef, s));
		CHECK_EQ(agree(np.dptr, GDRHOOK_KIND_GRAPH, 5 << 20), 0);
	}
	CHECK_EQ(gdrhook_trusted(), 1);
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

typedef CUresult (*add_node_12020_fn)(CUgraphNode *, CUgraph,
				      const CUgraphNode *, size_t,
				      CUgraphNodeParams *);

/* The generic node API, both ABIs (12.3's through the macro, 12.2's
 * through cuGetProcAddress): memory nodes made there are followed. */
TEST(generic_add_node_makes_memory_nodes)
{
	CUgraphNodeParams na = alloc_params(3 << 20), nb = alloc_params(1 << 20),
			  nf;
	add_node_12020_fn add12020 = NULL;
	CUdriverProcAddressQueryResult st;
	CUgraphExec ea, ef;
	CUgraphNode n;
	CUstream s;
	CUgraph ga, gf;

	primary_ctx(0);
	CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CU_OK(cuGetProcAddress("cuGraphAddNode", (void **)&add12020, 12020,
			       CU_GET_PROC_ADDRESS_DEFAULT, &st));
	CHECK(add12020 != NULL);
	CU_OK(cuGraphCreate(&ga, 0));
	CU_OK(cuGraphAddNode(&n, ga, NULL, NULL, 0, &na));
	CU_OK(add12020(&n, ga, NULL, 0, &nb));
	CHECK(na.alloc.dptr != 0 && nb.alloc.dptr != 0);
	CU_OK(cuGraphCreate(&gf, 0));
	memset(&nf, 0, sizeof(nf));
	nf.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
	nf.free.dptr = na.alloc.dptr;
	CU_OK(cuGraphAddNode(&n, gf, NULL, NULL, 0, &nf));
	nf.free.dptr = nb.alloc.dptr;
	CU_OK(add12020(&n, gf, NULL, 0, &nf));
	CU_OK(cuGraphInstantiateWithFlags(&ea, ga, 0));
	CU_OK(cuGraphInstantiateWithFlags(&ef, gf, 0));
	CHECK_EQ(agree(na.alloc.dptr, GDRHOOK_KIND_GRAPH, 3 << 20), 0);
	for (int i = 0; i < 3; i++) {
		CU_OK(cuGraphLaunch(ea, s));
		CHECK_EQ(agree(na.alloc.dptr, GDRHOOK_KIND_GRAPH, 3 << 20), 1);
		CHECK_EQ(agree(nb.alloc.dptr, GDRHOOK_KIND_GRAPH, 1 << 20), 1);
		CU_OK(cuGraphLaunch(ef, s));
		CHECK_EQ(agree(na.alloc.dptr, GDRHOOK_KIND_GRAPH, 3 << 20), 0);
		CHECK_EQ(agree(nb.alloc.dptr, GDRHOOK_KIND_GRAPH, 1 << 20), 0);
	}
	CHECK_EQ(gdrhook_trusted(), 1);
}

/* A child graph with memory nodes moved into its parent: the parent's
 * instance runs them.  Cloning such a graph (cuGraphClone, a cloned
 * child) is refused by the driver, so no copy holds them unseen. */
TEST(child_graph_moved_into_parent_brings_its_memory_nodes)
{
	CUgraphNodeParams na = alloc_params(2 << 20), nc;
	CUgraph child, parent, clone;
	CUgraphExec e;
	CUgraphNode n;
	CUstream s;

	primary_ctx(0);
	CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CU_OK(cuGraphCreate(&child, 0));
	CU_OK(cuGraphAddNode(&n, child, NULL, NULL, 0, &na));
	CHECK(cuGraphClone(&clone, child) != CUDA_SUCCESS);
	CU_OK(cuGraphCreate(&parent, 0));
	memset(&nc, 0, sizeof(nc));
	nc.type = CU_GRAPH_NODE_TYPE_GRAPH;
	nc.graph.graph = child;
	nc.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE;
	CHECK(cuGraphAddNode(&n, parent, NULL, NULL, 0, &nc) != CUDA_SUCCESS);
	nc.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
	CU_OK(cuGraphAddNode(&n, parent, NULL, NULL, 0, &nc));
	CU_OK(cuGraphInstantiateWithFlags(
		&e, parent, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
	CU_OK(cuGraphDestroy(parent));	/* the child goes with it */
	for (int i = 0; i < 3; i++) {
		CU_OK(cuGraphLaunch(e, s));
		CHECK_EQ(agree(na.alloc.dptr, GDRHOOK_KIND_GRAPH, 2 << 20), 1);
	}
	CU_OK(cuMemFree_v2(na.alloc.dptr));
	CHECK_EQ(agree(na.alloc.dptr, GDRHOOK_KIND_GRAPH, 2 << 20), 0);
	CU_OK(cuGraphExecDestroy(e));
	CHECK_EQ(gdrhook_trusted(), 1);
}

/* A moved child's free node frees the parent's allocation inside the
 * graph: backed only while the graph runs, never registered. */
TEST(moved_child_frees_a_parent_allocation_inside_the_graph)
{
	CUgraphNodeParams na = alloc_params(2 << 20), nf, nc;
	CUgraph child, parent;
	CUgraphExec e;
	CUgraphNode n;
	CUstream s;

	primary_ctx(0);
	CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CU_OK(cuGraphCreate(&parent, 0));
	CU_OK(cuGraphAddNode(&n, parent, NULL, NULL, 0, &na));
	CU_OK(cuGraphCreate(&child, 0));
	memset(&nf, 0, sizeof(nf));
	nf.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
	nf.free.dptr = na.alloc.dptr;
	CU_OK(cuGraphAddNode(&n, child, NULL, NULL, 0, &nf));
	memset(&nc, 0, sizeof(nc));
	nc.type = CU_GRAPH_NODE_TYPE_GRAPH;
	nc.graph.graph = child;
	nc.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
	CU_OK(cuGraphAddNode(&n, parent, NULL, NULL, 0, &nc));
	CU_OK(cuGraphInstantiateWithFlags(&e, parent, 0));
	for (int i = 0; i < 3; i++) {
		CU_OK(cuGraphLaunch(e, s));
		CHECK_EQ(agree(na.alloc.dptr, GDRHOOK_KIND_GRAPH, 2 << 20), 0);
	}
	CHECK_EQ(gdrhook_trusted(), 1);
}

/* An instance runs the nodes its graph had when it was made: a node added
 * afterwards is run only by instances made after it.  A graph with memory
 * nodes has one instance at a time (the H100 refuses a second with
 * CUDA_ERROR_NOT_SUPPORTED): the refused one registers nothing. */
TEST(node_added_after_instantiate_runs_only_in_later_instances)
{
	CUgraphNodeParams na = alloc_params(1 << 20), nb = alloc_params(4 << 20);
	CUgraphExec e1, e2;
	CUgraphNode n;
	CUstream s;
	CUgraph g;

	primary_ctx(0);
	CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CU_OK(cuGraphCreate(&g, 0));
	CU_OK(cuGraphAddNode(&n, g, NULL, NULL, 0, &na));
	CU_OK(cuGraphInstantiateWithFlags(
		&e1, g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
	CU_OK(cuGraphAddNode(&n, g, NULL, NULL, 0, &nb));
	CU_OK(cuGraphLaunch(e1, s));
	CHECK_EQ(agree(na.alloc.dptr, GDRHOOK_KIND_GRAPH, 1 << 20), 1);
	CHECK_EQ(agree(nb.alloc.dptr, GDRHOOK_KIND_GRAPH, 4 << 20), 0);
	CHECK_EQ(cuGraphInstantiateWithFlags(
			 &e2, g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH),
		 CUDA_ERROR_NOT_SUPPORTED);
	CU_OK(cuGraphExecDestroy(e1));	/* a stays allocated */
	CHECK_EQ(agree(na.alloc.dptr, GDRHOOK_KIND_GRAPH, 1 << 20), 1);
	CU_OK(cuMemFree_v2(na.alloc.dptr));
	CHECK_EQ(agree(na.alloc.dptr, GDRHOOK_KIND_GRAPH, 1 << 20), 0);
	CU_OK(cuGraphInstantiateWithFlags(
		&e2, g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
	CU_OK(cuGraphDestroy(g));
	CU_OK(cuGraphLaunch(e2, s));
	CHECK_EQ(agree(na.alloc.dptr, GDRHOOK_KIND_GRAPH, 1 << 20), 1);
	CHECK_EQ(agree(nb.alloc.dptr, GDRHOOK_KIND_GRAPH, 4 << 20), 1);
	CU_OK(cuGraphLaunch(e2, s));	/* auto-frees both, backs them again */
	CHECK_EQ(agree(na.alloc.dptr, GDRHOOK_KIND_GRAPH, 1 << 20), 1);
	CHECK_EQ(agree(nb.alloc.dptr, GDRHOOK_KIND_GRAPH, 4 << 20), 1);
	CU_OK(cuGraphExecDestroy(e2));
	CU_OK(cuMemFree_v2(na.alloc.dptr));
	CU_OK(cuMemFree_v2(nb.alloc.dptr));
	CHECK_EQ(agree(na.alloc.dptr, GDRHOOK_KIND_GRAPH, 1 << 20), 0);
	CHECK_EQ(agree(nb.alloc.dptr, GDRHOOK_KIND_GRAPH, 4 << 20), 0);
	CHECK_EQ(gdrhook_trusted(), 1);
}

/* Capture into an existing graph: captured nodes join its explicit ones. */
TEST(capture_to_an_existing_graph)
{
	CUgraphNodeParams na = alloc_params(1 << 20);
	CUgraphExec e;
	CUgraphNode n;
	CUdeviceptr p;
	CUstream s;
	CUgraph g, out;

	primary_ctx(0);
	CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CU_OK(cuGraphCreate(&g, 0));
	CU_OK(cuGraphAddNode(&n, g, NULL, NULL, 0, &na));
	CU_OK(cuStreamBeginCaptureToGraph(s, g, NULL, NULL, 0,
					  CU_STREAM_CAPTURE_MODE_GLOBAL));
	CU_OK(cuMemAllocAsync(&p, 3 << 20, s));
	CU_OK(cuStreamEndCapture(s, &out));
	CHECK(out == g);
	CHECK_EQ(agree(p, GDRHOOK_KIND_GRAPH, 3 << 20), 0);
	CU_OK(cuGraphInstantiateWithFlags(&e, g, 0));
	CU_OK(cuGraphLaunch(e, s));
	CHECK_EQ(agree(na.alloc.dptr, GDRHOOK_KIND_GRAPH, 1 << 20), 1);
	CHECK_EQ(agree(p, GDRHOOK_KIND_GRAPH, 3 << 20), 1);
	CHECK_EQ(gdrhook_trusted(), 1);
}

/* Destroying a memory node is not modelled: the registry says so. */
TEST(destroying_a_memory_node_marks_untrusted)
{
	CUgraphNodeParams na = alloc_params(1 << 20);
	CUgraphNode n;
	CUgraph g;

	primary_ctx(0);
	CU_OK(cuGraphCreate(&g, 0));
	CU_OK(cuGraphAddNode(&n, g, NULL, NULL, 0, &na));
	CHECK_EQ(gdrhook_trusted(), 1);
	CHECK(cuGraphDestroyNode((CUgraphNode)(uintptr_t)0x7777) !=
	      CUDA_SUCCESS);
	CHECK_EQ(gdrhook_trusted(), 1);
	CU_OK(cuGraphDestroyNode(n));
	CHECK_EQ(gdrhook_trusted(), 0);
}

/* An update the driver refuses changes nothing; one without memory nodes
 * on either side leaves the registry trusted. */
TEST(exec_update_without_memory_nodes_stays_trusted)
{
	CUgraphNodeParams na = alloc_params(1 << 20);
	CUgraphExecUpdateResultInfo ri;
	CUgraph g0, g1, gm;
	CUgraphExec e0, em;
	CUgraphNode n;

	primary_ctx(0);
	CU_OK(cuGraphCreate(&g0, 0));
	CU_OK(cuGraphCreate(&g1, 0));
	CU_OK(cuGraphInstantiateWithFlags(&e0, g0, 0));
	CU_OK(cuGraphExecUpdate(e0, g1, &ri));
	CU_OK(cuGraphCreate(&gm, 0));
	CU_OK(cuGraphAddNode(&n, gm, NULL, NULL, 0, &na));
	CU_OK(cuGraphInstantiateWithFlags(&em, gm, 0));
	CHECK(cuGraphExecUpdate(em, gm, &ri) != CUDA_SUCCESS);
	CHECK(cuGraphExecUpdate(e0, gm, &ri) != CUDA_SUCCESS);
	CHECK_EQ(gdrhook_trusted(), 1);
}

TEST(capture_free_of_ordinary_pool_memory_happens_at_launch)
{
	CUgraphExec e;
	CUstream s;
	CUgraph g;
	CUdeviceptr p;

	primary_ctx(0);
	CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CU_OK(cuMemAllocAsync(&p, 1 << 20, s));
	CHECK_EQ(agree(p, GDRHOOK_KIND_POOL, 1 << 20), 1);
	CU_OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CU_OK(cuMemFreeAsync(p, s));
	CU_OK(cuStreamEndCapture(s, &g));
	CHECK_EQ(agree(p, GDRHOOK_KIND_POOL, 1 << 20), 1);
	CU_OK(cuGraphInstantiateWithFlags(&e, g, 0));
	CU_OK(cuGraphLaunch(e, s));
	CHECK_EQ(agree(p, GDRHOOK_KIND_POOL, 1 << 20), 0);
	CHECK_EQ(gdrhook_trusted(), 1);
}

TEST(more_graph_nodes_than_followed_marks_untrusted)
{
	CUDA_MEM_ALLOC_NODE_PARAMS np;
	CUgraphNode n;
	CUgraph g;

	primary_ctx(0);
	memset(&np, 0, sizeof(np));
	np.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	np.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	np.bytesize = 4096;
	/* 65 graphs of 64 nodes (the double's limit) pass 4096. */
	for (int i = 0; i < 65 && gdrhook_trusted(); i++) {
		CU_OK(cuGraphCreate(&g, 0));
		for (int k = 0; k < 64; k++)
			CU_OK(cuGraphAddMemAllocNode(&n, g, NULL, 0, &np));
	}
	CHECK_EQ(gdrhook_trusted(), 0);
}

TEST_MAIN()
