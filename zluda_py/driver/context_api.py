"""Entry points: primary and explicit contexts, the current context, limits and configs."""

from __future__ import annotations

from . import capture, context as ctxs, device as devices
from .api import entry
from ..cdata import addr, store, store_ptr
from ..curesult import (CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_VALUE, CudaError)
from .init_device import require

CU_CTX_FLAGS_MASK = 0x3F | 0x80  # sched flags, map host, lmem resize, coredump, sync memops


@entry("cuDevicePrimaryCtxRetain")
def cuDevicePrimaryCtxRetain(pctx, dev):
    require(pctx)
    store_ptr(pctx, ctxs.primary_retain(dev).handle)


@entry("zluda_primary_ctx")
def zluda_primary_ctx(pctx, dev):
    """CUDART_INTERFACE slot 2: the primary context of dev, retained."""
    return cuDevicePrimaryCtxRetain(pctx, dev)


@entry("cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease")  # the pre-CUDA-11 ABI name: same arguments
def cuDevicePrimaryCtxRelease(dev):
    ctxs.primary_release(dev)


@entry("cuDevicePrimaryCtxReset_v2", "cuDevicePrimaryCtxReset")  # the pre-CUDA-11 ABI name: same arguments
def cuDevicePrimaryCtxReset(dev):
    ctxs.primary_reset(dev)


@entry("cuDevicePrimaryCtxSetFlags_v2", "cuDevicePrimaryCtxSetFlags")  # the pre-CUDA-11 ABI name: same arguments
def cuDevicePrimaryCtxSetFlags(dev, flags):
    ctxs.primary_set_flags(dev, flags)


@entry("cuDevicePrimaryCtxGetState")
def cuDevicePrimaryCtxGetState(dev, flags, active):
    require(flags, active)
    f, a = ctxs.primary_state(dev)
    store(flags, f)
    store(active, int(a))


def _create(pctx, flags, dev) -> None:
    require(pctx)
    if flags & ~CU_CTX_FLAGS_MASK:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"context flags {flags:#x}")
    ctx = ctxs.Context(devices.get(dev), flags, primary=False)
    ctxs.contexts.add(ctx)
    ctxs.tls.push(ctx.handle)
    store_ptr(pctx, ctx.handle)


@entry("cuCtxCreate_v2")
def cuCtxCreate_v2(pctx, flags, dev):
    _create(pctx, flags, dev)


@entry("cuCtxCreate_v4")
def cuCtxCreate_v4(pctx, params, flags, dev):
    # execution affinity and CIG parameters do not apply to the CPU device
    _create(pctx, flags, dev)


@entry("cuCtxDestroy_v2")
def cuCtxDestroy(ctx):
    c = ctxs.contexts.get(addr(ctx))
    if c.primary:
        raise CudaError(CUDA_ERROR_INVALID_CONTEXT, "the primary context is released, not destroyed")
    ctxs.destroy(c)
    if ctxs.tls.current() == c.handle:
        ctxs.tls.pop()


@entry("cuCtxPushCurrent_v2")
def cuCtxPushCurrent(ctx):
    c = ctxs.contexts.get(addr(ctx))
    if not ctxs.tls.push(c.handle):
        raise CudaError(CUDA_ERROR_INVALID_VALUE, "context stack is full")


@entry("cuCtxPopCurrent_v2")
def cuCtxPopCurrent(pctx):
    if not ctxs.tls.current():
        raise CudaError(CUDA_ERROR_INVALID_CONTEXT, "the context stack is empty")
    h = ctxs.tls.pop()
    if pctx:
        store_ptr(pctx, h)


@entry("cuCtxSetCurrent")
def cuCtxSetCurrent(ctx):
    h = addr(ctx)
    if h:
        ctxs.contexts.get(h)
    ctxs.tls.set_current(h)


@entry("cuCtxGetCurrent")
def cuCtxGetCurrent(pctx):
    require(pctx)
    c = ctxs.current(required=False)
    store_ptr(pctx, c.handle if c else 0)


@entry("cuCtxGetDevice")
def cuCtxGetDevice(pdev):
    require(pdev)
    store(pdev, ctxs.current().device.ordinal)


@entry("cuCtxGetDevice_v2")
def cuCtxGetDevice_v2(pdev, ctx):
    require(pdev)
    store(pdev, ctxs.lookup(addr(ctx)).device.ordinal)


@entry("cuCtxGetFlags")
def cuCtxGetFlags(flags):
    require(flags)
    store(flags, ctxs.current().flags)


@entry("cuCtxSetFlags")
def cuCtxSetFlags(flags):
    if flags & ~CU_CTX_FLAGS_MASK:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"context flags {flags:#x}")
    ctxs.current().flags = flags


@entry("cuCtxGetId")
def cuCtxGetId(ctx, pid):
    require(pid)
    store(pid, ctxs.lookup(addr(ctx)).id)


@entry("cuCtxGetApiVersion")
def cuCtxGetApiVersion(ctx, version):
    require(version)
    ctxs.lookup(addr(ctx))
    store(version, 3020)


@entry("cuCtxSynchronize")
def cuCtxSynchronize():
    capture.check_unsafe("cuCtxSynchronize")
    ctxs.current().synchronize()


@entry("cuCtxSynchronize_v2")
def cuCtxSynchronize_v2(ctx):
    capture.check_unsafe("cuCtxSynchronize")
    ctxs.lookup(addr(ctx)).synchronize()


@entry("cuCtxGetLimit")
def cuCtxGetLimit(pvalue, limit):
    require(pvalue)
    store(pvalue, ctxs.get_limit(ctxs.current(), limit))


@entry("cuCtxSetLimit")
def cuCtxSetLimit(limit, value):
    ctxs.set_limit(ctxs.current(), limit, value)


@entry("cuCtxGetCacheConfig")
def cuCtxGetCacheConfig(pconfig):
    require(pconfig)
    store(pconfig, ctxs.current().cache_config)


@entry("cuCtxSetCacheConfig")
def cuCtxSetCacheConfig(config):
    if not 0 <= config <= 3:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"cache config {config}")
    ctxs.current().cache_config = config


@entry("cuCtxGetSharedMemConfig")
def cuCtxGetSharedMemConfig(pconfig):
    require(pconfig)
    store(pconfig, ctxs.current().shared_mem_config)


@entry("cuCtxSetSharedMemConfig")
def cuCtxSetSharedMemConfig(config):
    if not 0 <= config <= 2:
        raise CudaError(CUDA_ERROR_INVALID_VALUE, f"shared memory config {config}")
    ctxs.current().shared_mem_config = config


@entry("cuCtxGetStreamPriorityRange")
def cuCtxGetStreamPriorityRange(least, greatest):
    ctxs.current()
    if least:
        store(least, 0)
    if greatest:
        store(greatest, -5)


@entry("cuCtxResetPersistingL2Cache")
def cuCtxResetPersistingL2Cache():
    ctxs.current()


@entry("cuCtxEnablePeerAccess")
def cuCtxEnablePeerAccess(peer, flags):
    ctxs.current()
    ctxs.contexts.get(addr(peer))
    raise CudaError(217, "peer access needs a second device")  # CUDA_ERROR_PEER_ACCESS_UNSUPPORTED


@entry("cuCtxDisablePeerAccess")
def cuCtxDisablePeerAccess(peer):
    ctxs.current()
    ctxs.contexts.get(addr(peer))
    raise CudaError(705, "peer access was never enabled")  # CUDA_ERROR_PEER_ACCESS_NOT_ENABLED


# With no profiler attached NVIDIA's driver accepts profiler start/stop in any current context
# (cuda-samples matrixMul and asyncAPI check the answer). cuProfilerInitialize stays a
# NOT_SUPPORTED stub: CUDA 12 made it always answer that.
@entry("cuProfilerStart")
def cuProfilerStart():
    ctxs.current()


@entry("cuProfilerStop")
def cuProfilerStop():
    ctxs.current()
