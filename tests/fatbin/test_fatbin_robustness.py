"""Bad input never crashes, hangs or allocates without bound: every failure is a FatbinError
(CUDA_ERROR_INVALID_IMAGE unless no code fits) naming the offset of the problem."""

from __future__ import annotations

import random
import struct
import time
import tracemalloc

import lz4.block
import pytest
import zstandard
from elftools.elf.elffile import ELFFile
from fatbin_synth import LZ4, PTX_TEXT, ZSTD, entry, fatbin

from zluda_py.fatbin import FatbinError, ptx_from_bytes, ptx_from_file, ptx_images_from_bytes
from zluda_py.fatbin.container import iter_fatbins, parse_fatbin

CAP = 1 << 20


@pytest.fixture(autouse=True)
def small_cap(monkeypatch):
    monkeypatch.setenv("ZLUDA_FATBIN_MAX_DECOMPRESSED", str(CAP))
    monkeypatch.delenv("ZLUDA_PTX_SELECT", raising=False)


def _error(data: bytes, sm: int = 80) -> FatbinError:
    with pytest.raises(FatbinError) as info:
        ptx_from_bytes(data, sm)
    return info.value


@pytest.mark.parametrize("compression", [0, LZ4, ZSTD])
def test_synthetic_fatbins_decode(compression):
    [module] = ptx_from_bytes(fatbin(entry(compression=compression)), 80)
    assert module.text == PTX_TEXT.rstrip(b"\0").decode() and module.sm == 75


def test_entry_name_is_read():
    fb = fatbin(entry(name=b"kernels.cu\0\0"))
    assert parse_fatbin(fb).entries[0].name == "kernels.cu"


def test_bad_magic():
    err = _error(b"\x51\xed\x55\xba" + fatbin(entry())[4:])
    assert err.offset == 0 and err.cu_result == 200 and "not a fatbin, ELF or PTX" in str(err)
    err = _error(fatbin(entry(), magic=0xBA55ED50)[:4] + b"\x02\x00" + fatbin(entry())[6:])
    assert err.offset == 4 and "version 2" in str(err)


def test_fatbin_size_past_the_end():
    """A cut-off fatbin still gives the entries that are whole, as NVIDIA's driver does (an H100
    loaded the hostile suite's truncated fatbins whose PTX entry survived: seeds 219 and 282 of
    tests/hardware/golden/hostile_nvidia.txt); the cut is damage, an error only without them."""
    data = fatbin(entry(), size=4096)
    [module] = ptx_from_bytes(data, 80)
    assert module.text == PTX_TEXT.decode().rstrip("\0")
    [cut] = parse_fatbin(data).skipped
    assert cut.offset == 8 and "declares 4112 bytes" in str(cut)
    err = _error(data[:len(data) - 10])  # the cut falls inside the only entry
    assert "declares 4112 bytes" in str(err)


def test_damage_in_an_unused_entry_is_left_out():
    """NVIDIA's driver loads a fatbin whose SASS entry is damaged (hostile seeds 33, 84, 120, 181):
    it needs only the PTX. A damaged entry is skipped and said why; the next entry is still found."""
    sass = bytearray(entry(kind=2))
    struct.pack_into("<I", sass, 16, 12345)  # a compressed size without a compression flag
    data = fatbin(bytes(sass) + entry())
    [module] = ptx_from_bytes(data, 80)
    assert module.text == PTX_TEXT.decode().rstrip("\0")
    [why] = parse_fatbin(data).skipped
    assert why.offset == 16 + 16 and "compressed size 12345 without a compression flag" in str(why)
    # damage to the only PTX entry is the load's error, not "no PTX" (209)
    ptx = bytearray(entry())
    struct.pack_into("<I", ptx, 16, 12345)
    err = _error(fatbin(entry(kind=2) + bytes(ptx)))
    assert err.cu_result == 200 and "compressed size 12345" in str(err)


def test_entry_payload_past_the_end():
    e = bytearray(entry())
    struct.pack_into("<Q", e, 8, 1 << 62)
    err = _error(fatbin(bytes(e)))
    assert err.offset == 16 + 8 and "runs past the end" in str(err)


def test_entry_header_past_the_end_and_truncated_entry():
    e = bytearray(entry())
    struct.pack_into("<I", e, 4, 1 << 31)
    assert _error(fatbin(bytes(e))).offset == 16 + 4
    err = _error(fatbin(entry()[:40]))
    assert err.offset == 16 and "truncated header: 40 of 64" in str(err)


def test_zero_length_entries():
    e = bytearray(entry())
    struct.pack_into("<I", e, 4, 0)  # header size 0 would loop forever
    assert "header size 0" in str(_error(fatbin(bytes(e))))
    err = _error(fatbin(entry(content=b"")))
    assert "empty PTX payload" in str(err) and err.offset == 16 + 8
    err = _error(fatbin())
    assert err.cu_result == 209 and "no PTX (0 entries)" in str(err)


def test_name_outside_the_entry():
    e = bytearray(entry())
    struct.pack_into("<II", e, 32, 60, 1 << 20)
    assert "name at +60" in str(_error(fatbin(bytes(e))))


@pytest.mark.parametrize("compression", [LZ4, ZSTD])
def test_corrupt_compressed_data(compression):
    good = entry(compression=compression)
    for pos in (64, 70, 80):
        e = bytearray(good)
        e[pos] ^= 0xFF
        e[pos + 1] ^= 0x5A
        try:
            [module] = ptx_from_bytes(fatbin(bytes(e)), 80)
        except FatbinError as err:
            assert err.cu_result == 200 and 16 <= err.offset < 16 + len(e)
        else:  # a flip inside a literal run only changes text: the size must still match
            assert len(module.text) == len(PTX_TEXT) - 1


def test_compressed_size_inconsistent_with_flags():
    assert "compressed size 0" in str(_error(fatbin(entry(compression=ZSTD, compressed_size=0))))
    assert "without a compression flag" in str(_error(fatbin(entry(compressed_size=8))))
    e = bytearray(entry(compression=ZSTD))
    struct.pack_into("<Q", e, 40, 0x11 | LZ4 | ZSTD)
    assert "both LZ4 and zstd" in str(_error(fatbin(bytes(e))))


def _zeros_frame(total: int, with_size: bool) -> bytes:
    """A zstd frame of `total` zero bytes, compressed from 1 MiB chunks (never all in memory)."""
    cobj = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    chunk = bytes(1 << 20)
    out = b"".join(cobj.compress(chunk) for _ in range(total >> 20)) + cobj.flush()
    if with_size:
        out = zstandard.ZstdCompressor().compress(bytes(total))
    return out


def test_zstd_bomb_with_honest_frame_size_is_rejected():
    bomb = _zeros_frame(64 << 20, with_size=True)
    err = _error(fatbin(entry(compression=ZSTD, payload=bomb, uncompressed_size=1000, content=b"x")))
    assert "frame declares 67108864 bytes" in str(err)


def test_a_payload_declaring_more_than_any_ptx_compresses_to_is_refused_before_decompressing(monkeypatch):
    """A 2 KB frame of 64 MiB: the 32 KB fatbin that inflated to 1 GiB of PTX took minutes."""
    monkeypatch.setenv("ZLUDA_FATBIN_MAX_DECOMPRESSED", "1G")
    bomb = _zeros_frame(64 << 20, with_size=True)
    data = fatbin(entry(compression=ZSTD, payload=bomb, uncompressed_size=64 << 20, content=b"x"))
    tracemalloc.start()
    try:
        err = _error(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "a decompression bomb" in str(err) and err.cu_result == 200
    assert peak < 1 << 20  # nothing was decompressed


def test_zstd_bomb_without_frame_size_stops_at_the_declared_size():
    bomb = _zeros_frame(1 << 30, with_size=False)
    assert len(bomb) < 64 << 10
    data = fatbin(entry(compression=ZSTD, payload=bomb, uncompressed_size=1000, content=b"x"))
    tracemalloc.start()
    try:
        err = _error(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "decompressed to 1001 bytes, the header says 1000" in str(err)
    assert peak < 4 << 20


def test_lz4_bomb_is_bounded_by_the_declared_size():
    bomb = lz4.block.compress(bytes(16 << 20), store_size=False)
    err = _error(fatbin(entry(compression=LZ4, payload=bomb, uncompressed_size=1000, content=b"x")))
    assert "corrupt LZ4 block" in str(err)


@pytest.mark.parametrize("declared", [CAP + 1, 1 << 63])
def test_declared_size_above_the_cap(declared):
    err = _error(fatbin(entry(compression=LZ4, uncompressed_size=declared)))
    assert "ZLUDA_FATBIN_MAX_DECOMPRESSED" in str(err) and err.offset == 16 + 56


def test_cap_accepts_units(monkeypatch):
    monkeypatch.setenv("ZLUDA_FATBIN_MAX_DECOMPRESSED", "64")
    assert "above the 64-byte limit" in str(_error(fatbin(entry(compression=ZSTD))))
    monkeypatch.setenv("ZLUDA_FATBIN_MAX_DECOMPRESSED", "2K")
    assert ptx_from_bytes(fatbin(entry(compression=ZSTD)), 80)
    monkeypatch.setenv("ZLUDA_FATBIN_MAX_DECOMPRESSED", "lots")
    with pytest.raises(ValueError, match="ZLUDA_FATBIN_MAX_DECOMPRESSED"):
        ptx_from_bytes(fatbin(entry(compression=ZSTD)), 80)


def test_non_elf_and_non_ptx_files(tmp_path):
    for data in (b"", b"\0" * 100, bytes(range(256)), b"hello world\n", b"\xff\xfe.version 9.0"):
        err = _error(data)
        assert err.cu_result == 200 and "not a fatbin, ELF or PTX" in str(err)
    (tmp_path / "big").write_bytes(b"x" * (CAP + 1))
    with pytest.raises(FatbinError, match="the file is 1048577 bytes"):
        ptx_from_file(tmp_path / "big", 80)
    with pytest.raises(FatbinError, match="cannot read"):
        ptx_from_file(tmp_path / "missing", 80)


def test_ptx_text_with_a_broken_header_or_a_stray_byte_is_ptx():
    """NVIDIA's driver answers such text as PTX (218, its JIT's error), not as an unknown image
    (200): an H100 did so for the hostile suite's cases (tests/hardware/golden/hostile_nvidia.txt)."""
    from zluda_py import ptx
    for text, line_col in ((b".version 8.0\n.targe: sm_80\n.address_size 64\n", "<ptx>:2:1:"),
                           (b".version 8.0\n.target\n.address_size 64\n", "<ptx>:3:1:"),
                           (b".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\nmov.u32 %r1, \xa2;\n}\n",
                            "<ptx>:6:14:")):
        (module,) = ptx_images_from_bytes(text + b"\0", 80)[0:1][0]
        with pytest.raises(ptx.PtxError, match=line_col) as err:
            ptx.parse(module.text)
        assert err.value.cu_result == 218
    # a stray byte in a comment is harmless, as it is to NVIDIA's JIT
    (module,) = ptx_images_from_bytes(b"// caf\xe9\n.version 8.0\n.target sm_80\n.address_size 64\n", 80)[0]
    assert module.sm == 80 and ptx.parse(module.text).target == ("sm_80",)


def test_truncated_elf_and_garbage_section_table(build):
    data = build("lz4").read_bytes()
    for cut in (4, 30, 64, 1000, len(data) // 2):
        with pytest.raises(FatbinError):
            ptx_from_bytes(data[:cut], 80)
    garbage = bytearray(data)
    struct.pack_into("<Q", garbage, 0x28, len(data) - 8)  # e_shoff near the end
    with pytest.raises(FatbinError):
        ptx_from_bytes(bytes(garbage), 80)


def _real_fatbins(build) -> list[bytes]:
    out = []
    for name in ("zstd_multi", "lz4", "uncompressed", "compress_all"):
        with open(build(name), "rb") as f:
            data = ELFFile(f).get_section_by_name(".nv_fatbin").data()
        pos = 0
        while pos < len(data):  # split the section at each fatbin header, by its declared size
            size = 16 + struct.unpack_from("<Q", data, pos + 8)[0]
            out.append(data[pos:pos + size])
            pos = (pos + size + 7) & ~7
    return out


_INTERESTING = [0, 1, 7, 8, 63, 64, 80, 0xFF, 0xFFFF, 0xFFFFFFFF, 0x7FFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFFFFF]


def _mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(5)
        if op == 0 and b:
            pos = rng.randrange(len(b))
            b[pos] ^= 1 << rng.randrange(8)
        elif op == 1 and len(b) >= 8:
            width = rng.choice((2, 4, 8))
            pos = rng.randrange(0, len(b) - width + 1) & ~(width - 1)
            value = rng.choice(_INTERESTING + [len(b), rng.getrandbits(64)]) & ((1 << 8 * width) - 1)
            b[pos:pos + width] = value.to_bytes(width, "little")
        elif op == 2:
            del b[rng.randrange(len(b) + 1):]
        elif op == 3 and b:
            pos = rng.randrange(len(b))
            del b[pos:pos + rng.randint(1, 64)]
        elif b:
            pos = rng.randrange(len(b))
            b[pos:pos] = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 16)))
    return bytes(b)


def test_fuzz_mutated_real_fatbins(build):
    """Seeded mutations of nvcc's own fatbins: each parse ends in PTX or a FatbinError whose
    offset lies inside the input, within a time budget that keeps CI fast."""
    seeds = _real_fatbins(build)
    assert len(seeds) >= 8
    rng = random.Random(20261122)
    deadline = time.monotonic() + 20
    outcomes = {"ok": 0, "error": 0}
    for i in range(100000):
        if time.monotonic() > deadline:
            break
        data = _mutate(rng, rng.choice(seeds))
        try:
            modules = ptx_images_from_bytes(data, rng.choice((70, 75, 80, 86, 90)))
        except FatbinError as e:
            assert e.cu_result in (200, 209), (i, e)
            assert 0 <= e.offset <= len(data), (i, e)
            outcomes["error"] += 1
        else:
            assert all("\0" not in m.text for image in modules for m in image)
            outcomes["ok"] += 1
    assert i >= 2000 and outcomes["ok"] and outcomes["error"], outcomes


def test_fuzz_mutated_host_elf(build):
    """Mutations aimed at an executable's section table and fatbin section go through pyelftools."""
    data = build("uncompressed").read_bytes()
    with open(build("uncompressed"), "rb") as f:
        elf = ELFFile(f)
        sec = elf.get_section_by_name(".nv_fatbin")
        regions = [(elf["e_shoff"], elf["e_shnum"] * elf["e_shentsize"]), (sec["sh_offset"], sec["sh_size"])]
    rng = random.Random(7)
    deadline = time.monotonic() + 10
    for i in range(1500):
        if time.monotonic() > deadline:
            break
        start, size = rng.choice(regions)
        b = bytearray(data)
        pos = start + rng.randrange(size - 8)
        b[pos:pos + 8] = (rng.choice(_INTERESTING + [rng.getrandbits(64)])).to_bytes(8, "little")
        try:
            ptx_images_from_bytes(bytes(b), 80)
        except FatbinError as e:
            assert e.cu_result in (200, 209) and 0 <= e.offset <= len(b), (i, e)


def test_concatenated_fatbins_with_alignment_padding():
    odd = fatbin(entry(content=PTX_TEXT[:-3] + b"\0", pad=False))  # ends off 8-byte alignment
    assert len(odd) % 8
    section = odd + b"\0" * (-len(odd) % 8) + bytes(16) + fatbin(entry(sm=80))
    assert [fb.entries[0].sm for fb in iter_fatbins(section)] == [75, 80]


def test_reading_a_file_costs_its_size_not_the_cap(tmp_path):
    """cuModuleLoad's file read: under an address-space limit 256 MiB above what the process
    uses, a small file loads (one read of the 1 GiB cap would reserve the cap first)."""
    import subprocess
    import sys

    f = tmp_path / "k.ptx"
    f.write_text(".version 8.0\n.target sm_80\n.address_size 64\n")
    code = ("import resource, sys\nfrom zluda_py.fatbin import loader\n"
            "pages = int(open('/proc/self/statm').read().split()[0])\n"
            "limit = pages * resource.getpagesize() + (256 << 20)\n"
            "resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n"
            "print(len(loader._read_file(sys.argv[1])))\n")
    r = subprocess.run([sys.executable, "-c", code, str(f)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == str(len(f.read_bytes()))
