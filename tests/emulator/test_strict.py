"""Strict mode (ZLUDA_EMULATOR_STRICT=1, zluda_py/emulator/strict.py): a memory operation completes
only at the s_waitcnt that covers it. Hand-assembled sequences (encodings from llvm-mc 19,
`-mcpu=gfx1100` / `-mcpu=gfx942`, the gfx9 encoding gfx950 shares) read a loaded register
without and with the wait: the poison value, then the memory's value."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tinygrad", reason="the emulator decodes with tinygrad (pip install '.[test]')")

from zluda_py.emulator.execute import Program, Wave, step  # noqa: E402
from zluda_py.emulator.launch import Workgroup  # noqa: E402
from zluda_py.emulator.memory import Memory  # noqa: E402
from zluda_py.emulator.strict import POISON  # noqa: E402

# per target: (ISA family, lanes, {assembly: encoding})
TARGETS = {
    "gfx1100": ("rdna3", 32, {
        "global_load_b32 v1, v0, s[2:3]": "000052dc 00000201",
        "s_load_b32 s4, s[2:3], 0x0": "010100f4 000000f8",
        "s_waitcnt vmcnt(0)": "f70389bf",
        "s_waitcnt lgkmcnt(0)": "07fc89bf",
        "global_store_b32 v0, v5, s[2:3] offset:256": "00016adc 00050200",
        "s_waitcnt_vscnt null, 0x0": "00007cbc",
        "global_load_d16_b16 v1, v0, s[2:3]": "000082dc 00000201",
        "global_load_d16_hi_b16 v1, v0, s[2:3] offset:2": "02008edc 00000201",
        "ds_load_b32 v1, v0": "0000d8d8 00000001",
        "ds_store_b32 v0, v5 offset:256": "000134d8 00050000",
        "ds_load_b32 v2, v0 offset:128": "8000d8d8 00000002",
        "s_waitcnt lgkmcnt(2)": "27fc89bf",
        "ds_load_2addr_b32 v[0:1], v0 offset0:1 offset1:2": "0102dcd8 00000000",
        "s_endpgm": "0000b0bf"}),
    "gfx950": ("cdna", 64, {
        "global_load_dword v1, v0, s[2:3]": "008050dc 00000201",
        "s_load_dword s4, s[2:3], 0x0": "010102c0 00000000",
        "s_waitcnt vmcnt(0)": "700f8cbf",
        "s_waitcnt lgkmcnt(0)": "7fc08cbf",
        "global_store_dword v0, v5, s[2:3] offset:256": "008170dc 00050200",
        "global_load_short_d16 v1, v0, s[2:3]": "008090dc 00000201",
        "global_load_short_d16_hi v1, v0, s[2:3] offset:2": "028094dc 00000201",
        "ds_read_b32 v1, v0": "00006cd8 00000001",
        "ds_write_b32 v0, v5 offset:256": "00011ad8 00050000",
        "ds_read_b32 v2, v0 offset:128": "80006cd8 00000002",
        "s_waitcnt lgkmcnt(2)": "7fc28cbf",
        "ds_read2_b32 v[0:1], v0 offset0:1 offset1:2": "01026ed8 00000000",
        "s_endpgm": "000081bf"}),
}
MOVES = "010304 7e 040206 7e"  # v_mov_b32_e32 v2, v1; v_mov_b32_e32 v3, s4 (the same on both)


def _wave(arch: str, lines: list[str], strict: bool) -> tuple[Wave, Memory, int, np.ndarray]:
    """A wave at the start of `lines` (assembly of TARGETS, or "moves"), s[2:3] pointing at 128
    words of data and v0 holding each lane's byte offset."""
    family, lanes, enc = TARGETS[arch]
    code = bytes.fromhex("".join(MOVES if line == "moves" else enc[line] for line in lines).replace(" ", ""))
    memory = Memory()
    data = np.random.default_rng(1).integers(0, 1 << 31, 128, dtype=np.uint32)
    base = memory.upload(data.tobytes())
    w = Wave(Program(code, 0x1000, family), lanes, Workgroup(memory, data.nbytes), 0, 0)
    w.wg.lds[:] = data.view(np.uint8)[::-1]  # LDS holds other words than global memory
    w.pc = 0x1000
    w.sgpr[2], w.sgpr[3] = base & 0xFFFFFFFF, base >> 32
    w.vgpr[0] = np.arange(lanes, dtype=np.uint32) * 4
    w.vgpr[5] = np.arange(lanes, dtype=np.uint32) + 1000
    w.set_mask(126, (1 << lanes) - 1)
    w.pending = [] if strict else None
    return w, memory, base, data


def _run(w: Wave, steps: int) -> None:
    for _ in range(steps):
        step(w)


@pytest.mark.parametrize("arch", TARGETS)
def test_a_load_read_before_its_wait_is_poison(arch: str) -> None:
    vload, sload = list(TARGETS[arch][2])[:2]
    w, _, _, data = _wave(arch, [vload, sload, "moves", "s_endpgm"], strict=True)
    _run(w, 4)
    lanes = w.lanes
    np.testing.assert_array_equal(w.vgpr[2], np.full(lanes, POISON, np.uint32))
    np.testing.assert_array_equal(w.vgpr[3], np.full(lanes, POISON, np.uint32))
    step(w)  # s_endpgm: what was outstanding has arrived by the time the wave is gone
    assert w.done
    np.testing.assert_array_equal(w.vgpr[1], data[:lanes])
    assert w.sgpr[4] == data[0]


@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("strict", [True, False], ids=["strict", "default"])
def test_a_load_read_after_its_wait_is_the_value(arch: str, strict: bool) -> None:
    vload, sload = list(TARGETS[arch][2])[:2]
    w, _, _, data = _wave(arch, [vload, sload, "s_waitcnt vmcnt(0)", "s_waitcnt lgkmcnt(0)", "moves", "s_endpgm"], strict)
    _run(w, 6)
    np.testing.assert_array_equal(w.vgpr[2], data[: w.lanes])
    np.testing.assert_array_equal(w.vgpr[3], np.full(w.lanes, data[0], np.uint32))


@pytest.mark.parametrize("arch", TARGETS)
def test_each_counter_waits_for_its_own_operations(arch: str) -> None:
    """vmcnt(0) completes the vector load, not the scalar one (lgkmcnt)."""
    vload, sload = list(TARGETS[arch][2])[:2]
    w, _, _, data = _wave(arch, [vload, sload, "s_waitcnt vmcnt(0)", "moves", "s_endpgm"], strict=True)
    _run(w, 5)
    np.testing.assert_array_equal(w.vgpr[2], data[: w.lanes])
    np.testing.assert_array_equal(w.vgpr[3], np.full(w.lanes, POISON, np.uint32))


@pytest.mark.parametrize("arch", TARGETS)
def test_a_store_is_visible_after_its_wait(arch: str) -> None:
    """gfx11 counts stores in vscnt, gfx9 in vmcnt."""
    store = next(line for line in TARGETS[arch][2] if line.startswith("global_store"))
    wait = "s_waitcnt_vscnt null, 0x0" if arch == "gfx1100" else "s_waitcnt vmcnt(0)"
    w, memory, base, data = _wave(arch, [store, wait, "s_endpgm"], strict=True)
    lanes = w.lanes
    step(w)
    np.testing.assert_array_equal(memory.read(base + 256, 4 * lanes).view(np.uint32), data[64:64 + lanes])
    step(w)
    np.testing.assert_array_equal(memory.read(base + 256, 4 * lanes).view(np.uint32), np.arange(lanes) + 1000)


@pytest.mark.parametrize("arch", TARGETS)
def test_two_d16_loads_into_one_register(arch: str) -> None:
    """The low and the high half of v1 loaded with no wait between: each half is merged into the
    register as it is when its data arrives (the emulator once kept the other load's poison)."""
    low, high = (line for line in TARGETS[arch][2] if "d16" in line)
    w, _, _, data = _wave(arch, [low, high, "s_waitcnt vmcnt(0)", "s_endpgm"], strict=True)
    _run(w, 2)
    np.testing.assert_array_equal(w.vgpr[1], np.full(w.lanes, POISON, np.uint32))
    step(w)
    np.testing.assert_array_equal(w.vgpr[1], data[: w.lanes])


@pytest.mark.parametrize("arch", TARGETS)
def test_a_store_seen_by_its_own_wave_still_counts(arch: str) -> None:
    """LDS read, write, read, then lgkmcnt(2): three operations outstanding, so the first read has
    arrived. The write, applied early for the second read (a wave sees its own stores), once
    left the count, and the wait let the first read stay poison (gfx950's bulk copy loop)."""
    lines = [line for line in TARGETS[arch][2] if line.startswith(("ds_", "s_waitcnt lgkmcnt(2)"))]
    w, _, _, _ = _wave(arch, lines, strict=True)
    _run(w, 4)
    lds = w.wg.lds.view(np.uint32)
    np.testing.assert_array_equal(w.vgpr[1], lds[: w.lanes])
    np.testing.assert_array_equal(w.vgpr[2], np.full(w.lanes, POISON, np.uint32))
    np.testing.assert_array_equal(lds[64:64 + w.lanes], np.arange(w.lanes) + 1000)


@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("strict", [True, False], ids=["strict", "default"])
def test_a_two_address_load_over_its_address(arch: str, strict: bool) -> None:
    """Both words of a 2-address LDS load come from the address the instruction started with,
    although the first overwrites it (vdst = addr; LLVM emits this for wmma.load on gfx950:
    the emulator once took the second address from the loaded word)."""
    load = next(line for line in TARGETS[arch][2] if "2addr" in line or "read2" in line)
    w, _, _, data = _wave(arch, [load, "s_waitcnt lgkmcnt(0)", "s_endpgm"], strict)
    lds = w.wg.lds.view(np.uint32)
    _run(w, 2)
    lanes = np.arange(w.lanes)
    np.testing.assert_array_equal(w.vgpr[0], lds[lanes + 1])
    np.testing.assert_array_equal(w.vgpr[1], lds[lanes + 2])
