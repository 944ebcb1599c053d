/* SPDX-License-Identifier: MIT */
/*
 * Memory windows (src/pin/mwin.c): the NIC operations that give exact remote
 * exposure at cache speed.  A window (type 1: it belongs to the PD, so
 * every QP of the program reaches it) is bound to a byte range of a
 * registration the cache keeps (with LOCAL_WRITE | MW_BIND, no remote
 * rights) by a work request on a queue pair gdrhook owns, one per PD,
 * connected to itself; it gets its own rkey and exactly the remote access
 * asked, and is unbound by another work request.  Windows are kept in a
 * pool per PD and rotated (the least recently used is bound next, each
 * bind moving the rkey's tag on), so an rkey comes back no sooner than
 * natively.
 *
 * gh_mw_bind and gh_mw_invalidate are called with the cache's lock held
 * (mwin.c's own lock nests inside it); gh_mw_supported, gh_mw_drop_pd and
 * gh_mw_drop_context without it: mwin.c guards its state with its own
 * lock.  The real libibverbs only (vreal.h).  All return 0 or -errno.
 */
#ifndef GH_MWIN_H
#define GH_MWIN_H

#include <stdint.h>

struct ibv_context;
struct ibv_pd;
struct ibv_mr;
struct gh_mw;

/*
 * Can pd's NIC bind (type-1) windows?  Probed once per device context
 * (ibv_query_device), and off for good once a bind of that NIC failed
 * in a way that is not the request's fault.  why (may be NULL): the
 * reason it cannot, in words.
 */
int gh_mw_supported(struct ibv_pd *pd, const char **why);

/*
 * Exact exposure's route for one registration (the cache asks before
 * each; mwin.c argues each rule): 1, a window bound on the cached
 * parent; 0, a NIC registration of exactly the range (the pin and, for
 * DMA-BUF, the export stay cached), the reason said once per NIC.
 * Windows are taken only where every provider that has them binds them:
 *   - the parent is an ordinary MR (peermem, gdrpin): providers/mlx5
 *     refuses a type-1 bind over any other MR type, a DMA-BUF MR
 *     included (ENOTSUP), as irdma and zxdh do, and rxe imports none;
 *   - at most GH_MW_MAX_LEN bytes: mlx5 binds no more (its UMR);
 *   - not zero-based: no provider binds a zero-based type-1 window;
 *   - the NIC has type-1 windows (gh_mw_supported).
 * dmabuf_parent: the cache's parents are ibv_reg_dmabuf_mr's.
 */
#define GH_MW_MAX_LEN	(1ULL << 31)
int gh_mw_route(struct ibv_pd *pd, int dmabuf_parent, uint64_t len,
		unsigned int access);

/*
 * The same choice in one line, for gdrhook-info: the route an exact
 * registration takes on a NIC with (windows) or without type-1 windows,
 * over parents of the named backend ("dmabuf", "peermem", "gdrpin"),
 * what it costs in NIC operations, and why.
 */
void gh_mw_route_text(int windows, const char *backend, char *buf,
		      unsigned int cap);

/*
 * Bind a window of pd to [addr, addr + len) of parent (a registration in
 * pd with MW_BIND) with access (remote bits only).  *w_p, *rkey_p on
 * success.  -EOPNOTSUPP: windows are not available on this NIC (said
 * once); other errors: this bind failed.
 */
int gh_mw_bind(struct ibv_pd *pd, struct ibv_mr *parent, uint64_t addr,
	       uint64_t len, unsigned int access, struct gh_mw **w_p,
	       uint32_t *rkey_p);

/*
 * Invalidate w; returns once its rkey is refused by the NIC (the work
 * request completed, or the window was destroyed), and w is back in its
 * pool.
 */
void gh_mw_invalidate(struct gh_mw *w);

/* Forget w without any NIC call (a forked child: it is the parent's). */
void gh_mw_forget(struct gh_mw *w);

/* Tear down what gdrhook made in pd (windows must be unbound already). */
void gh_mw_drop_pd(struct ibv_pd *pd);
/* ... in every PD of ctx (ibv_close_device), bound windows included. */
void gh_mw_drop_context(struct ibv_context *ctx);

struct gh_mw_counters {
	uint64_t binds, invalidations, fallbacks;
};
void gh_mw_counters(struct gh_mw_counters *c_p);

#endif
