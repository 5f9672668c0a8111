"""Entry points: the context usage count of CUDA < 4.0 (cuCtxAttach, cuCtxDetach).

A context made by cuCtxCreate starts with a usage count of 1; cuCtxAttach adds one to the
calling thread's current context and hands it back, cuCtxDetach (of the current context) takes
one away and destroys the context, as cuCtxDestroy does, when none is left. A primary context
belongs to cuDevicePrimaryCtxRetain/Release: detaching it below its attachments is
CUDA_ERROR_INVALID_CONTEXT, as destroying it is."""

from __future__ import annotations

from . import context as ctxs
from .api import entry
from ..cdata import addr, store_ptr
from ..curesult import CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_VALUE, CudaError
from .context_api import cuCtxDestroy
from .init_device import require


@entry("cuCtxAttach")
def cuCtxAttach(pctx, flags):
    require(pctx)
    if flags:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"attach flags {flags:#x} (must be 0)")
    c = ctxs.current()
    c.attachments += 1
    store_ptr(pctx, c.handle)


@entry("cuCtxDetach")
def cuCtxDetach(ctx):
    c = ctxs.contexts.get(addr(ctx))
    if ctxs.tls.current() != c.handle:
        raise CudaError(CUDA_ERROR_INVALID_CONTEXT, "cuCtxDetach of a context not current to the thread")
    if c.attachments:
        c.attachments -= 1
        return
    cuCtxDestroy(ctx)  # the count of cuCtxCreate is gone: the context goes (a primary one cannot)
