"""cuMemAdvise, cuMemPrefetchAsync (CUdevice and CUmemLocation forms, and the batch) and what
cuMemRangeGetAttribute(s) report afterwards, through libcuda.so.1. Expected values are the ones
cuda.h documents: advice and prefetch ranges widen to whole CPU pages; READ_MOSTLY is 1 only
when every page has it; a location is reported only when every page has the same one, else
CU_DEVICE_INVALID (-2) or CU_MEM_LOCATION_TYPE_INVALID (0); ACCESSED_BY lists the processors
advised for the whole range and fills the rest with -2; dataSize is 4 (ACCESSED_BY: a non-zero
multiple of 4)."""

from __future__ import annotations

import ctypes
import mmap
from ctypes import byref, c_int, c_size_t, c_uint, c_ulonglong, c_void_p

import pytest

PAGE = mmap.PAGESIZE  # cuda.h: ranges are aligned to the CPU page size
INVALID_VALUE, INVALID_DEVICE = 1, 101
CU_DEVICE_CPU, CU_DEVICE_INVALID = -1, -2
(SET_READ_MOSTLY, UNSET_READ_MOSTLY, SET_PREFERRED_LOCATION, UNSET_PREFERRED_LOCATION,
 SET_ACCESSED_BY, UNSET_ACCESSED_BY) = range(1, 7)
(READ_MOSTLY, PREFERRED_LOCATION, ACCESSED_BY, LAST_PREFETCH_LOCATION, PREFERRED_LOCATION_TYPE,
 PREFERRED_LOCATION_ID, LAST_PREFETCH_LOCATION_TYPE, LAST_PREFETCH_LOCATION_ID) = range(1, 9)
TYPE_INVALID, TYPE_DEVICE, TYPE_HOST, TYPE_HOST_NUMA = 0, 1, 2, 3


class Location(ctypes.Structure):
    _fields_ = [("type", c_int), ("id", c_int)]


@pytest.fixture
def api(cu):
    cu.cuMemAdvise.argtypes = [c_ulonglong, c_size_t, c_int, c_int]
    cu.cuMemAdvise_v2.argtypes = [c_ulonglong, c_size_t, c_int, Location]
    cu.cuMemPrefetchAsync.argtypes = [c_ulonglong, c_size_t, c_int, c_void_p]
    cu.cuMemPrefetchAsync_v2.argtypes = [c_ulonglong, c_size_t, Location, c_uint, c_void_p]
    cu.cuMemRangeGetAttribute.argtypes = [c_void_p, c_size_t, c_int, c_ulonglong, c_size_t]
    cu.cuMemRangeGetAttributes.argtypes = [c_void_p, c_void_p, c_void_p, c_size_t, c_ulonglong, c_size_t]
    return cu


@pytest.fixture
def pages(api):
    """Three whole CPU pages of a managed allocation (its start need not be page-aligned)."""
    base = c_ulonglong()
    api.ok(api.cuMemAllocManaged(byref(base), c_size_t(5 * PAGE), 1))
    yield -(-base.value // PAGE) * PAGE
    api.ok(api.cuMemFree_v2(base))


def _get(cu, attribute: int, ptr: int, count: int, slots: int = 1) -> list[int]:
    data = (c_int * slots)(*[12345] * slots)
    cu.ok(cu.cuMemRangeGetAttribute(data, 4 * slots, attribute, ptr, count))
    return list(data)


def _one(cu, attribute: int, ptr: int, count: int) -> int:
    return _get(cu, attribute, ptr, count)[0]


def test_nothing_advised(api, pages):
    whole = (pages, 3 * PAGE)
    assert _one(api, READ_MOSTLY, *whole) == 0
    for attribute in (PREFERRED_LOCATION, LAST_PREFETCH_LOCATION):
        assert _one(api, attribute, *whole) == CU_DEVICE_INVALID
    assert _get(api, ACCESSED_BY, *whole, slots=3) == [CU_DEVICE_INVALID] * 3
    for attribute in (PREFERRED_LOCATION_TYPE, LAST_PREFETCH_LOCATION_TYPE):
        assert _one(api, attribute, *whole) == TYPE_INVALID


def test_read_mostly_by_page(api, pages):
    api.ok(api.cuMemAdvise(pages + PAGE + 100, 1, SET_READ_MOSTLY, 0))  # widens to the second page
    assert _one(api, READ_MOSTLY, pages + PAGE, PAGE) == 1
    assert _one(api, READ_MOSTLY, pages + 2 * PAGE - 8, 8) == 1
    assert _one(api, READ_MOSTLY, pages, 3 * PAGE) == 0  # not every page
    assert _one(api, READ_MOSTLY, pages + PAGE - 1, 2) == 0  # touches the first page
    api.ok(api.cuMemAdvise(pages, 3 * PAGE, SET_READ_MOSTLY, 987))  # the device is ignored for this advice
    assert _one(api, READ_MOSTLY, pages, 3 * PAGE) == 1
    api.ok(api.cuMemAdvise_v2(pages + 2 * PAGE, PAGE, UNSET_READ_MOSTLY, Location(TYPE_INVALID, 0)))
    assert _one(api, READ_MOSTLY, pages, 3 * PAGE) == 0
    assert _one(api, READ_MOSTLY, pages, 2 * PAGE) == 1


def test_preferred_location(api, pages):
    api.ok(api.cuMemAdvise(pages, 3 * PAGE, SET_PREFERRED_LOCATION, 0))
    assert _one(api, PREFERRED_LOCATION, pages, 3 * PAGE) == 0
    assert _one(api, PREFERRED_LOCATION_TYPE, pages, 3 * PAGE) == TYPE_DEVICE
    assert _one(api, PREFERRED_LOCATION_ID, pages, 3 * PAGE) == 0
    api.ok(api.cuMemAdvise_v2(pages + 2 * PAGE, PAGE, SET_PREFERRED_LOCATION, Location(TYPE_HOST, 0)))
    assert _one(api, PREFERRED_LOCATION, pages, 3 * PAGE) == CU_DEVICE_INVALID  # not the same everywhere
    assert _one(api, PREFERRED_LOCATION_TYPE, pages, 3 * PAGE) == TYPE_INVALID
    assert _one(api, PREFERRED_LOCATION, pages + 2 * PAGE, PAGE) == CU_DEVICE_CPU
    assert _one(api, PREFERRED_LOCATION_TYPE, pages + 2 * PAGE, PAGE) == TYPE_HOST
    api.ok(api.cuMemAdvise(pages + 2 * PAGE, PAGE, SET_PREFERRED_LOCATION, CU_DEVICE_CPU))
    assert _one(api, PREFERRED_LOCATION, pages + 2 * PAGE, 1) == CU_DEVICE_CPU
    api.ok(api.cuMemAdvise(pages, 1, UNSET_PREFERRED_LOCATION, 0))
    assert _one(api, PREFERRED_LOCATION, pages, 2 * PAGE) == CU_DEVICE_INVALID  # the first page has none
    assert _one(api, PREFERRED_LOCATION, pages + PAGE, PAGE) == 0


def test_accessed_by(api, pages):
    whole = (pages, 3 * PAGE)
    api.ok(api.cuMemAdvise(*whole, SET_ACCESSED_BY, 0))
    api.ok(api.cuMemAdvise_v2(pages, PAGE, SET_ACCESSED_BY, Location(TYPE_HOST, 0)))
    assert _get(api, ACCESSED_BY, *whole, slots=3) == [0, CU_DEVICE_INVALID, CU_DEVICE_INVALID]
    assert sorted(_get(api, ACCESSED_BY, pages, PAGE, slots=3)) == [CU_DEVICE_INVALID, CU_DEVICE_CPU, 0]
    assert _get(api, ACCESSED_BY, pages, PAGE, slots=1)[0] in (0, CU_DEVICE_CPU)  # as many as fit
    api.ok(api.cuMemAdvise_v2(pages + PAGE, PAGE, UNSET_ACCESSED_BY, Location(TYPE_DEVICE, 0)))
    assert _get(api, ACCESSED_BY, *whole, slots=2) == [CU_DEVICE_INVALID] * 2
    assert _get(api, ACCESSED_BY, pages + 2 * PAGE, PAGE, slots=2) == [0, CU_DEVICE_INVALID]


def test_last_prefetch_location(api, pages):
    whole = (pages, 3 * PAGE)
    api.ok(api.cuMemPrefetchAsync(*whole, 0, None))
    assert _one(api, LAST_PREFETCH_LOCATION, *whole) == 0
    assert _one(api, LAST_PREFETCH_LOCATION_TYPE, *whole) == TYPE_DEVICE
    assert _one(api, LAST_PREFETCH_LOCATION_ID, *whole) == 0
    api.ok(api.cuMemPrefetchAsync_v2(pages + 2 * PAGE + 5, 1, Location(TYPE_HOST, 77), 0, None))
    assert _one(api, LAST_PREFETCH_LOCATION, *whole) == CU_DEVICE_INVALID  # not all to one place
    assert _one(api, LAST_PREFETCH_LOCATION_TYPE, *whole) == TYPE_INVALID
    assert _one(api, LAST_PREFETCH_LOCATION, pages + 2 * PAGE, PAGE) == CU_DEVICE_CPU
    assert _one(api, LAST_PREFETCH_LOCATION_TYPE, pages + 2 * PAGE, PAGE) == TYPE_HOST
    api.ok(api.cuMemPrefetchAsync_v2(pages, PAGE, Location(TYPE_HOST_NUMA, 0), 0, None))  # node 0: any Linux
    assert _one(api, LAST_PREFETCH_LOCATION_TYPE, pages, PAGE) == TYPE_HOST_NUMA
    assert _one(api, LAST_PREFETCH_LOCATION_ID, pages, PAGE) == 0
    api.ok(api.cuMemPrefetchAsync(pages, PAGE, CU_DEVICE_CPU, None))
    assert _one(api, LAST_PREFETCH_LOCATION, pages, PAGE) == CU_DEVICE_CPU
    # the batch form records each range's location
    api.cuMemPrefetchBatchAsync.argtypes = [c_void_p, c_void_p, c_size_t, c_void_p, c_void_p, c_size_t,
                                            c_ulonglong, c_void_p]
    stream = c_void_p()
    api.ok(api.cuStreamCreate(byref(stream), 0))
    ptrs, sizes = (c_ulonglong * 2)(pages, pages + PAGE), (c_size_t * 2)(PAGE, 2 * PAGE)
    locations, starts = (Location * 2)(Location(TYPE_HOST, 0), Location(TYPE_DEVICE, 0)), (c_size_t * 2)(0, 1)
    api.ok(api.cuMemPrefetchBatchAsync(ptrs, sizes, 2, locations, starts, 2, 0, stream))
    assert _one(api, LAST_PREFETCH_LOCATION, pages, PAGE) == CU_DEVICE_CPU
    assert _one(api, LAST_PREFETCH_LOCATION, pages + PAGE, 2 * PAGE) == 0
    api.ok(api.cuStreamDestroy_v2(stream))


def test_plural_answers_as_the_singular(api, pages):
    api.ok(api.cuMemAdvise(pages, 2 * PAGE, SET_READ_MOSTLY, 0))
    api.ok(api.cuMemAdvise(pages, 2 * PAGE, SET_PREFERRED_LOCATION, 0))
    api.ok(api.cuMemAdvise(pages, 2 * PAGE, SET_ACCESSED_BY, 0))
    attributes = (c_int * 3)(READ_MOSTLY, PREFERRED_LOCATION, ACCESSED_BY)
    read_mostly, preferred, accessed = c_int(7), c_int(7), (c_int * 2)(7, 7)
    data = (c_void_p * 3)(*[ctypes.cast(byref(v), c_void_p) for v in (read_mostly, preferred, accessed)])
    sizes = (c_size_t * 3)(4, 4, 8)
    api.ok(api.cuMemRangeGetAttributes(data, sizes, attributes, 3, pages, 2 * PAGE))
    assert (read_mostly.value, preferred.value, list(accessed)) == (1, 0, [0, CU_DEVICE_INVALID])
    sizes[2] = 6  # not a multiple of 4
    assert api.cuMemRangeGetAttributes(data, sizes, attributes, 3, pages, 2 * PAGE) == INVALID_VALUE


def test_invalid_arguments(api, pages):
    count = c_int()
    api.ok(api.cuDeviceGetCount(byref(count)))
    absent = count.value  # no such device ordinal
    value = (c_int * 2)()
    for attribute, size in ((READ_MOSTLY, 8), (PREFERRED_LOCATION, 2), (LAST_PREFETCH_LOCATION_ID, 0),
                            (PREFERRED_LOCATION_TYPE, 8), (ACCESSED_BY, 0), (ACCESSED_BY, 6), (9, 4), (0, 4)):
        assert api.cuMemRangeGetAttribute(value, size, attribute, pages, PAGE) == INVALID_VALUE, (attribute, size)
    assert api.cuMemRangeGetAttribute(None, 4, READ_MOSTLY, pages, PAGE) == INVALID_VALUE
    for advice in (0, 7):
        assert api.cuMemAdvise(pages, PAGE, advice, 0) == INVALID_VALUE
    for advice in (SET_PREFERRED_LOCATION, SET_ACCESSED_BY, UNSET_ACCESSED_BY):
        assert api.cuMemAdvise(pages, PAGE, advice, absent) == INVALID_DEVICE
        assert api.cuMemAdvise_v2(pages, PAGE, advice, Location(TYPE_DEVICE, absent)) == INVALID_DEVICE
    # cuda.h: ACCESSED_BY takes a device or the host, "all other location types are invalid"
    assert api.cuMemAdvise_v2(pages, PAGE, SET_ACCESSED_BY, Location(TYPE_HOST_NUMA, 0)) == INVALID_VALUE
    assert api.cuMemAdvise_v2(pages, PAGE, SET_PREFERRED_LOCATION, Location(TYPE_INVALID, 0)) == INVALID_VALUE
    assert api.cuMemPrefetchAsync(pages, PAGE, absent, None) == INVALID_DEVICE
    assert api.cuMemPrefetchAsync_v2(pages, PAGE, Location(TYPE_DEVICE, absent), 0, None) == INVALID_DEVICE
    assert api.cuMemPrefetchAsync_v2(pages, PAGE, Location(TYPE_HOST, 0), 1, None) == INVALID_VALUE  # flags: 0
    # nothing of the failed calls was recorded
    assert _one(api, PREFERRED_LOCATION, pages, PAGE) == CU_DEVICE_INVALID
    assert _get(api, ACCESSED_BY, pages, PAGE, slots=2) == [CU_DEVICE_INVALID] * 2
    assert _one(api, LAST_PREFETCH_LOCATION, pages, PAGE) == CU_DEVICE_INVALID
    # the range must be managed memory
    device = c_ulonglong()
    api.ok(api.cuMemAlloc_v2(byref(device), c_size_t(PAGE)))
    assert api.cuMemAdvise(device.value, PAGE, SET_READ_MOSTLY, 0) == INVALID_VALUE
    assert api.cuMemPrefetchAsync(device.value, PAGE, 0, None) == INVALID_VALUE
    assert api.cuMemRangeGetAttribute(value, 4, READ_MOSTLY, device.value, PAGE) == INVALID_VALUE
    api.ok(api.cuMemFree_v2(device))


def test_location_info_reports_where_pages_are(api, pages):
    """cuMemGetLocationInfo (cuda.h, CUDA 13.4): one location per summary region, its most
    common over the samples; managed and pageable memory are host memory here, so a sample is
    HOST where its page is resident and NONE (type 0) where the memory is resident nowhere."""
    api.cuMemGetLocationInfo.argtypes = [c_ulonglong, c_size_t, c_size_t, c_size_t, c_void_p]
    out = (Location * 4)()

    def where(ptr: int, size: int, summary: int, sampling: int = 0) -> list[int] | int:
        rc = api.cuMemGetLocationInfo(ptr, size, summary, sampling, out)
        return rc if rc else [out[i].type for i in range(-(-size // summary))]

    ctypes.memset(pages, 1, 3 * PAGE)  # written: resident on the host
    assert where(pages, 3 * PAGE, PAGE) == [TYPE_HOST] * 3
    # pageable memory: a fresh anonymous mapping is resident nowhere until touched
    anon = mmap.mmap(-1, 3 * PAGE)
    start = ctypes.addressof(ctypes.c_char.from_buffer(anon))
    anon[PAGE] = 1
    assert where(start, 3 * PAGE, PAGE) == [TYPE_INVALID, TYPE_HOST, TYPE_INVALID]
    assert where(start, 3 * PAGE, 3 * PAGE, PAGE) == [TYPE_INVALID]  # 1 of 3 samples resident
    assert where(start + PAGE, 2 * PAGE, 2 * PAGE, PAGE) == [TYPE_HOST]  # a tie
    # not managed nor pageable, or bad granularities: CUDA_ERROR_INVALID_VALUE
    device = c_ulonglong()
    api.ok(api.cuMemAlloc_v2(byref(device), c_size_t(PAGE)))
    assert where(device.value, PAGE, PAGE) == INVALID_VALUE
    assert where(pages, PAGE, 2 * PAGE) == INVALID_VALUE  # summary above the size
    assert where(pages, 2 * PAGE, PAGE, 2 * PAGE) == INVALID_VALUE  # sampling above the summary
    assert where(pages, 0, 0) == INVALID_VALUE
    assert api.cuMemGetLocationInfo(pages, PAGE, PAGE, 0, None) == INVALID_VALUE
    api.ok(api.cuMemFree_v2(device))
    del start
    anon.close()
