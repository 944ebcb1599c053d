/* SPDX-License-Identifier: MIT */
/*
 * Fake CUDA driver: events and their IPC handles.
 *
 * The double's work is synchronous, so every event is complete: query
 * and synchronize succeed whether or not it was recorded (cuda.h: before
 * the first record an event is an empty set of work, and cuEventQuery
 * succeeds).  An event belongs to the context current at its creation;
 * like streams, its record is never freed, so a destroyed or stale
 * handle is refused (INVALID_HANDLE) rather than reused.
 */
#include "fakecuda_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FC_EVENT_FLAGS (CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | \
			CU_EVENT_INTERPROCESS)

/* A live event, or NULL.  Needs the lock. */
static struct CUevent_st *event_of(CUevent e)
{
	return e && e->magic == FC_EVENT_MAGIC && e->alive ? e : NULL;
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* A new event of @ctx. */
static CUresult event_new(CUcontext ctx, unsigned int flags, CUevent *out)
{
	struct CUevent_st *e = calloc(1, sizeof(*e));

	if (!e)
		return CUDA_ERROR_OUT_OF_MEMORY;
	e->magic = FC_EVENT_MAGIC;
	e->alive = 1;
	e->ctx = ctx;
	e->flags = flags;
	*out = e;
	return CUDA_SUCCESS;
}

/*
 * cuda.h: INTERPROCESS must come with DISABLE_TIMING; the event belongs
 * to the current context (201 without one).
 */
FC_API CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
	CUcontext c;
	CUresult rc;

	FC_ENTER_INIT();
	if (!phEvent || (Flags & ~FC_EVENT_FLAGS) ||
	    ((Flags & CU_EVENT_INTERPROCESS) &&
	     !(Flags & CU_EVENT_DISABLE_TIMING)))
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	rc = fc_current_ctx(&c);
	fc_unlock();
	if (rc)
		return rc;
	return event_new(c, Flags, phEvent);
}

static CUresult event_destroy(CUevent ev)
{
	CUresult rc = CUDA_SUCCESS;
	struct CUevent_st *e;

	fc_lock();
	e = event_of(ev);
	if (e)
		e->alive = 0;	/* never freed: stale handles stay detectable */
	else
		rc = CUDA_ERROR_INVALID_HANDLE;
	fc_unlock();
	return rc;
}

FC_FORWARD(FC_ENTER_INIT, cuEventDestroy_v2, (CUevent hEvent),
	   event_destroy(hEvent))
FC_FORWARD(FC_ENTER_INIT, cuEventDestroy, (CUevent hEvent),
	   event_destroy(hEvent))

/*
 * cuda.h: the event and the stream must be of one context, else
 * INVALID_HANDLE; the default streams are the current context's.
 */
static CUresult event_record(CUevent ev, CUstream s)
{
	CUresult rc = CUDA_SUCCESS;
	struct CUevent_st *e;
	CUcontext c;

	fc_lock();
	e = event_of(ev);
	if (!e || !fc_stream_ok(s)) {
		rc = CUDA_ERROR_INVALID_HANDLE;
		goto out;
	}
	if (s && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD) {
		c = s->ctx;
	} else {
		rc = fc_current_ctx(&c);
		if (rc)
			goto out;
	}
	if (c != e->ctx) {
		rc = CUDA_ERROR_INVALID_HANDLE;
		goto out;
	}
	if (!fc_alive(c)) {
		rc = CUDA_ERROR_CONTEXT_IS_DESTROYED;
		goto out;
	}
	e->recorded = 1;
	e->recorded_ns = now_ns();
out:
	fc_unlock();
	return rc;
}

FC_FORWARD(FC_ENTER_INIT, cuEventRecord, (CUevent hEvent, CUstream hStream),
	   event_record(hEvent, hStream))
FC_FORWARD(FC_ENTER_INIT, cuEventRecord_ptsz,
	   (CUevent hEvent, CUstream hStream),
	   event_record(hEvent, hStream))

/* Recorded or not, an event is complete. */
static CUresult event_check(CUevent ev)
{
	CUresult rc;

	fc_lock();
	rc = event_of(ev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
	fc_unlock();
	return rc;
}

FC_FORWARD(FC_ENTER_INIT, cuEventQuery, (CUevent hEvent), event_check(hEvent))
FC_FORWARD(FC_ENTER_INIT, cuEventSynchronize, (CUevent hEvent),
	   event_check(hEvent))

/*
 * cuda.h: INVALID_HANDLE if either event was never recorded or was made
 * with DISABLE_TIMING.
 */
static CUresult elapsed(float *ms, CUevent start, CUevent end)
{
	struct CUevent_st *a, *b;
	CUresult rc = CUDA_SUCCESS;

	if (!ms)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	a = event_of(start);
	b = event_of(end);
	if (!a || !b || !a->recorded || !b->recorded ||
	    ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING))
		rc = CUDA_ERROR_INVALID_HANDLE;
	else
		*ms = (float)((double)(int64_t)(b->recorded_ns - a->recorded_ns) /
			      1e6);
	fc_unlock();
	return rc;
}

FC_FORWARD(FC_ENTER_INIT, cuEventElapsedTime_v2,
	   (float *pMilliseconds, CUevent hStart, CUevent hEnd),
	   elapsed(pMilliseconds, hStart, hEnd))
FC_FORWARD(FC_ENTER_INIT, cuEventElapsedTime,
	   (float *pMilliseconds, CUevent hStart, CUevent hEnd),
	   elapsed(pMilliseconds, hStart, hEnd))

/* ------------------------------------------------------------------ IPC */

#define FC_IPC_EVENT_MAGIC 0x46434945u	/* "FCIE" */

/*
 * The handle names the exporter and its event.  Nothing travels between
 * the processes afterwards: the event is complete in both.
 */
struct fc_ipc_event {
	uint32_t magic;
	int32_t pid;
	int32_t dev;
	uint32_t flags;
	uint64_t event;
};

_Static_assert(sizeof(struct fc_ipc_event) <= CU_IPC_HANDLE_SIZE,
	       "ipc event handle");

/*
 * cuda.h: only an event made with INTERPROCESS (and so DISABLE_TIMING);
 * another is refused as an invalid handle (H200, driver 580: probe.c).
 */
FC_API CUresult CUDAAPI cuIpcGetEventHandle(CUipcEventHandle *pHandle,
					    CUevent event)
{
	struct fc_ipc_event h;
	struct CUevent_st *e;
	CUresult rc = CUDA_SUCCESS;

	FC_ENTER_INIT();
	if (!pHandle)
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	e = event_of(event);
	if (!e) {
		rc = CUDA_ERROR_INVALID_HANDLE;
		goto out;
	}
	if (!(e->flags & CU_EVENT_INTERPROCESS)) {
		rc = CUDA_ERROR_INVALID_HANDLE;
		goto out;
	}
	memset(&h, 0, sizeof(h));
	h.magic = FC_IPC_EVENT_MAGIC;
	h.pid = (int32_t)getpid();
	h.dev = e->ctx->dev;
	h.flags = e->flags;
	h.event = (uintptr_t)e;
	memset(pHandle, 0, sizeof(*pHandle));
	memcpy(pHandle->reserved, &h, sizeof(h));
out:
	fc_unlock();
	return rc;
}

/*
 * cuda.h: the opened event behaves like a local DISABLE_TIMING event of
 * the current context.  Opened in the exporting process it is refused
 * with 201 like a memory handle (HIP's IPC event test, run on the CUDA
 * platform, saw 201 there), unless FAKECUDA_IPC_SAME_PROCESS=1.
 */
FC_API CUresult CUDAAPI cuIpcOpenEventHandle(CUevent *phEvent,
					     CUipcEventHandle handle)
{
	struct fc_ipc_event h;
	CUcontext c;
	CUresult rc;

	FC_ENTER_INIT();
	memcpy(&h, handle.reserved, sizeof(h));
	fc_lock();
	rc = fc_current_ctx(&c);
	if (!rc && (!phEvent || h.magic != FC_IPC_EVENT_MAGIC ||
		    !(h.flags & CU_EVENT_INTERPROCESS)))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (!rc && h.pid == getpid() && !fc.ipc_same_process)
		rc = CUDA_ERROR_INVALID_CONTEXT;
	fc_unlock();
	if (rc)
		return rc;
	return event_new(c, CU_EVENT_DISABLE_TIMING, phEvent);
}
