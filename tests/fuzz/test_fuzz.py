"""The differential fuzzer (zluda_py/fuzz): generated PTX is valid, the CPU target agrees with
the reference executor on a fixed seed range, and the comparator and minimiser do their job."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from zluda_py.fuzz import campaign
from zluda_py.fuzz.generate import Collective, generate, module_ptx, under_dead
from zluda_py.fuzz.minimize import minimize_kernel

PTXAS = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"


def _ptxas(tmp_path: Path, ptx: str) -> None:
    if not Path(PTXAS).exists():
        pytest.skip("ptxas not found")
    f = tmp_path / "fuzz.ptx"
    f.write_text(ptx)
    res = subprocess.run([PTXAS, "-arch=sm_80", str(f), "-o", "/dev/null"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[:3000]


def test_generated_ptx_is_valid_for_ptxas(tmp_path: Path) -> None:
    _ptxas(tmp_path, module_ptx([generate(s) for s in range(200)]))


def test_generation_is_deterministic() -> None:
    for s in (0, 7, 12345):
        a, b = generate(s), generate(s)
        assert a.ptx() == b.ptx()
        assert (a.inputs == b.inputs).all() and (a.block, a.grid) == (b.block, b.grid)


def test_shapes_are_covered() -> None:
    shapes: set[str] = set()
    for s in range(200):
        shapes |= set(generate(s).shapes)
    for want in ("loop_lane_latch", "loop_lane_bottom", "loop_lane_top", "loop_uniform_latch", "loop_two_exits",
                 "break_outer", "continue", "exit_top", "exit_nested", "goto_into_if", "switch", "call_recursive",
                 "bar_call", "sync", "shared", "atomic", "coll_idx", "coll_up", "coll_down", "coll_bfly", "coll_vote",
                 "coll_ballot", "coll_match", "coll_redux", "coll_activemask"):
        assert want in shapes, want
    assert {generate(s).block % 32 for s in range(50)} - {0}, "block sizes that are not multiples of 32"


def test_rows_launch_is_the_same_kernel_in_2d_blocks() -> None:
    """`generate(seed, rows=True)`: the same body launched as rows of a width dividing the block
    (`.maxntid` says the shape), %tx flattened from %tid.x/%tid.y; the reference's outcome is
    the 1-D launch's, and the lowering now takes the rows paths (a row group's fork and its
    tests) where the 1-D kernel has none."""
    import re

    from zluda_py.compiler.cpu.target import CPU
    from zluda_py.compiler.linker import link
    from zluda_py.ptx import parse

    pytest.importorskip("zluda_py.reference")
    widths = set()
    for s in range(20):
        flat, rows = generate(s), generate(s, rows=True)
        w, h, _ = rows.block_dims
        widths.add(w)
        assert w * h == flat.block and h > 1 and flat.block_dims == (flat.block, 1, 1)
        assert f".maxntid {w}, {h}, 1" in rows.ptx() and "%tid.y" not in flat.ptx()
        a, b = campaign.run_reference(flat), campaign.run_reference(rows)
        assert campaign.digest(a.fault is not None, a.out, a.acc) == campaign.digest(b.fault is not None, b.out, b.acc), s
        if s < 4:
            for k, n in ((flat, 0), (rows, 1)):
                ir = CPU.lower_part(link([parse(k.ptx())]), k.name).text
                assert len(re.findall(r"^rows\.group:", ir, re.M)) == n, (s, k.block_dims)
                assert bool(re.findall(r"^mem\.rows[.\d]*:", ir, re.M)) == bool(n), (s, k.block_dims)
    assert 16 in widths and widths - {16, 32}, widths  # 16-wide rows and other widths


@pytest.mark.xdist_group("fuzz_rows")
def test_cpu_target_matches_reference_in_rows(tmp_path: Path) -> None:
    """Seeds 300-339 launched as 2-D blocks (`--rows`), at O0."""
    pytest.importorskip("zluda_py.reference")
    res = campaign.campaign(300, 339, jobs=1, keep=tmp_path, opt=0, report=lambda line: None, rows=True)
    assert res.kernels == 40
    assert not res.failures, "\n".join(f"seed {f.seed}: {f.message}" for f in res.failures)


@pytest.mark.xdist_group("fuzz")
def test_cpu_target_matches_reference(tmp_path: Path) -> None:
    """Seeds 0-299 at O0 (what is compared is the translation; O3 takes ~4x longer)."""
    pytest.importorskip("zluda_py.reference")
    res = campaign.campaign(0, 299, jobs=1, keep=tmp_path, opt=0, report=lambda line: None)
    assert res.kernels == 300
    assert not res.failures, "\n".join(f"seed {f.seed}: {f.message}" for f in res.failures)


def test_activemask_follows_a_warp_barrier_over_its_set() -> None:
    """Seed 19396: `activemask` in a function called after a branch whose lanes ran a loop apart.
    The reference read the lanes still split (0xf007ffff / 0x0f380000), the CPU target the whole
    warp; PTX leaves it open, so the generator now puts `bar.warp.sync` over the known set first,
    and both executors then agree."""
    pytest.importorskip("zluda_py.reference")
    k = generate(19396)
    assert "bar.warp.sync" in k.ptx() and "coll_activemask" in k.shapes
    res = campaign.run_batch([19396], 0, None)
    assert res.kernels == 1 and not res.failures, res.failures


@pytest.mark.xdist_group("fuzz-amd")
def test_emulated_amdgpu_targets_match_reference(tmp_path: Path, lld) -> None:
    """Seeds 0-29 on our AMDGPU code for gfx1100 (wave32) and gfx950 (wave64: two CUDA warps per
    hardware wave, where warp collectives could go wrong), run on the ISA emulator."""
    pytest.importorskip("zluda_py.reference")
    pytest.importorskip("tinygrad", reason="the emulator decodes with tinygrad (pip install '.[test]')")
    res = campaign.campaign(0, 29, jobs=1, keep=tmp_path, report=lambda line: None, targets=("gfx1100", "gfx950"))
    assert res.kernels == 30
    assert not res.failures, "\n".join(f"seed {f.seed} ({f.target}): {f.message}" for f in res.failures)


def _wrong_reference(k):
    """The CPU target itself, with one output word flipped: the comparator must notice."""
    o = campaign.run_module(campaign.compile_cpu(k.ptx(), 0), k)
    o.out[3 * 8 + 2] ^= 1
    return o


def _faulting_reference(k):
    o = campaign.run_module(campaign.compile_cpu(k.ptx(), 0), k)
    o.fault = "fault 700: pretend"
    return o


def test_a_wrong_result_is_a_divergence(tmp_path: Path) -> None:
    res = campaign.run_batch([1, 2], 0, tmp_path, reference=_wrong_reference)
    assert [f.seed for f in res.failures] == [1, 2]
    assert "thread 3" in res.failures[0].message and "slot 2" in res.failures[0].message
    case = json.loads((tmp_path / "seed1" / "case.json").read_text())
    assert case["seed"] == 1 and case["opt"] == 0
    assert (tmp_path / "seed1" / "kernel.ptx").read_text().startswith(".version")
    assert (tmp_path / "seed1" / "arrays.npz").exists()


def test_a_fault_on_one_side_is_a_divergence() -> None:
    res = campaign.run_batch([3], 0, None, reference=_faulting_reference)
    assert len(res.failures) == 1 and "fault differs" in res.failures[0].message


def test_minimizer_keeps_what_the_predicate_needs(tmp_path: Path) -> None:
    """Delta debugging down to the nodes a (synthetic) failure depends on; the result stays valid."""
    seed = next(s for s in range(100) if any(isinstance(n, Collective) for n in generate(s).nodes()))
    k = generate(seed)
    coll = next(n for n in k.nodes() if isinstance(n, Collective))

    def still_bad(kk) -> bool:
        return not coll.dead and not under_dead(kk, coll)

    minimize_kernel(k, still_bad, report=lambda line: None)
    rendered = [n for n in k.nodes() if not n.dead and not under_dead(k, n)]
    assert coll in rendered and len(rendered) <= 6, [n.shape for n in rendered]
    assert k.grid == 1
    _ptxas(tmp_path, k.ptx())
