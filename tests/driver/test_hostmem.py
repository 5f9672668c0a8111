"""zluda_py.hostmem.valid on real mappings, through each way it has of looking: madvise's
MADV_POPULATE_* (Linux 5.14), and before that process_vm_readv/writev probes of a range's ends
with /proc/self/maps for longer ranges or where seccomp forbids those calls."""

from __future__ import annotations

import ctypes
import mmap

import pytest

from zluda_py import hostmem

PAGE = mmap.PAGESIZE
PROT_NONE, PROT_READ, PROT_RW = 0, 1, 3

libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


@pytest.fixture(params=["populate", "vm", "proc"])
def method(request, monkeypatch):
    if request.param == "populate":
        if not hostmem._can_populate():
            pytest.skip("this kernel has no MADV_POPULATE_READ/WRITE (Linux 5.14)")
    else:
        monkeypatch.setattr(hostmem, "_populate", False)
        monkeypatch.setattr(hostmem, "_method", request.param)
    return request.param


@pytest.fixture
def pages():
    """A function mapping n read-write pages, page `hole` of which gets protection `prot`
    (None: unmapped); all unmapped at the end."""
    made = []

    def make(n: int, hole: int, prot: int | None) -> int:
        p = libc.mmap(None, n * PAGE, PROT_RW, 0x22, -1, 0)  # MAP_PRIVATE | MAP_ANONYMOUS
        assert p not in (None, ctypes.c_void_p(-1).value)
        made.append((p, n))
        if prot is None:
            assert libc.munmap(p + hole * PAGE, PAGE) == 0
        else:
            assert libc.mprotect(p + hole * PAGE, PAGE, prot) == 0
        return p

    yield make
    for p, n in made:
        libc.munmap(p, n * PAGE)


@pytest.mark.parametrize("n", [3, 5, 1100])
@pytest.mark.parametrize("prot", [PROT_NONE, None])
def test_a_page_inside_a_range_that_cannot_be_read_makes_it_invalid(method, pages, n, prot):
    hole = n - 2  # strictly inside
    p = pages(n, hole, prot)
    assert not hostmem.valid(p, n * PAGE)
    assert not hostmem.valid(p + 100, n * PAGE - 200, writable=True)
    # the pages on either side of the hole are whole ranges of their own
    assert hostmem.valid(p, hole * PAGE, writable=True)
    assert hostmem.valid(p + (hole + 1) * PAGE, PAGE, writable=True)


@pytest.mark.parametrize("n", [3, 1100])
def test_a_read_only_page_inside_a_range_is_a_source_not_a_destination(method, pages, n):
    p = pages(n, n // 2, PROT_READ)
    assert hostmem.valid(p + 1, n * PAGE - 2)
    assert not hostmem.valid(p + 1, n * PAGE - 2, writable=True)


def test_probing_a_destination_leaves_its_bytes_as_they_were(method, pages):
    p = pages(4, 3, PROT_RW)
    ctypes.memset(p, 0xA5, 4 * PAGE)
    assert hostmem.valid(p, 4 * PAGE, writable=True)
    assert ctypes.string_at(p, 4 * PAGE) == b"\xa5" * (4 * PAGE)


@pytest.mark.parametrize("n", [3, 1100])  # 1100: past the pages MADV_POPULATE_* is used for alone
def test_a_file_page_past_the_end_of_its_file_inside_a_range_is_invalid(tmp_path, pages, n):
    # touching it would be SIGBUS; only MADV_POPULATE_* sees it without touching it
    if not hostmem._can_populate():
        pytest.skip("this kernel has no MADV_POPULATE_READ/WRITE (Linux 5.14)")
    f = tmp_path / "one_page"
    f.write_bytes(b"x" * PAGE)
    p = pages(n, n - 1, PROT_RW)
    with open(f, "r+b") as fd:  # the one-page file over all pages of the range but its last
        q = libc.mmap(p, (n - 1) * PAGE, PROT_RW, 0x11, fd.fileno(), 0)  # MAP_SHARED | MAP_FIXED
    assert q == p
    assert hostmem.valid(p, PAGE, writable=True)
    assert hostmem.valid(p + (n - 1) * PAGE, PAGE, writable=True)
    assert not hostmem.valid(p, n * PAGE)
    assert not hostmem.valid(p, n * PAGE, writable=True)


def test_all_valid_sees_a_bad_page_under_any_piece(method, pages):
    p = pages(5, 3, PROT_NONE)  # pages 0-2 and 4 read-write, page 3 PROT_NONE
    assert hostmem.all_valid([(p, 8), (p + PAGE - 4, 8), (p + 2 * PAGE, 16), (p + 4 * PAGE, 8)])
    assert not hostmem.all_valid([(p, 8), (p + 3 * PAGE + 100, 4)])  # far apart
    assert not hostmem.all_valid([(p + 3 * PAGE - 4, 8)])  # one piece straddling into it
    assert not hostmem.all_valid([(p + 2 * PAGE, 8), (p + 3 * PAGE, 4)])  # neighbours
    assert not hostmem.all_valid([(p, 8), (0, 4)])
