"""PTX extracted from nvcc-built binaries equals `nvcc -ptx` for the same source and target."""

from __future__ import annotations

import subprocess
import sys

import pytest
from elftools.elf.elffile import ELFFile
from fatbin_compare import normalize_ptx

from zluda_py import fatbin
from zluda_py.fatbin.listing import rows


def _same_ptx(got: str, want: str) -> None:
    assert normalize_ptx(got) == normalize_ptx(want)


@pytest.mark.parametrize("name, compression", [
    ("zstd_multi", "zstd"), ("lz4", "lz4"), ("uncompressed", "none"), ("compress_all", "zstd"),
    ("cudart_shared", "zstd"), ("shared_lib", "zstd"),
])
def test_every_compression_mode_yields_nvcc_ptx(build, reference_ptx, name, compression):
    path = build(name)
    [module] = fatbin.ptx_from_file(path, 75)
    assert module.sm == 75
    assert not module.text.endswith("\0")
    _same_ptx(module.text, reference_ptx("fatbin_kernels.cu", 75))
    ptx_rows = [r for r in rows(path) if r.entry.kind_name == "ptx"]
    assert {r.entry.compression for r in ptx_rows} == {compression}


def test_compress_all_compresses_cubins_too(build):
    cubins = [r.entry for r in rows(build("compress_all")) if r.entry.kind_name == "elf"]
    assert cubins and all(e.compression == "zstd" for e in cubins)
    plain = [r.entry for r in rows(build("uncompressed")) if r.entry.kind_name == "elf"]
    assert plain and all(e.compression == "none" for e in plain)


@pytest.mark.parametrize("device_sm, chosen", [(75, 75), (80, 75), (86, 86), (89, 86), (120, 86)])
def test_highest_ptx_not_above_the_device(build, reference_ptx, device_sm, chosen):
    [module] = fatbin.ptx_from_file(build("zstd_multi"), device_sm)
    assert module.sm == chosen
    _same_ptx(module.text, reference_ptx("fatbin_kernels.cu", chosen))


@pytest.mark.parametrize("name, device_sm, chosen", [("ptx_120", 86, 120), ("ptx_90_120", 86, 90),
                                                    ("ptx_90_120", 90, 90), ("ptx_90_120", 100, 90),
                                                    ("zstd_multi", 70, 75)])
def test_without_fitting_ptx_the_closest_newer_target_is_translated(build, reference_ptx, monkeypatch, name,
                                                                     device_sm, chosen):
    monkeypatch.delenv("ZLUDA_PTX_SELECT", raising=False)
    [module] = fatbin.ptx_from_file(build(name), device_sm)
    assert module.sm == chosen
    _same_ptx(module.text, reference_ptx("fatbin_kernels.cu", chosen))


def test_compatible_policy_is_nvidias_rule(build, monkeypatch):
    monkeypatch.setenv("ZLUDA_PTX_SELECT", "compatible")
    with pytest.raises(fatbin.FatbinError) as info:
        fatbin.ptx_from_file(build("ptx_90_120"), 86)
    assert info.value.cu_result == 209
    assert "compute_90, compute_120" in str(info.value) and "ZLUDA_PTX_SELECT" in str(info.value)


@pytest.mark.parametrize("policy, device_sm, chosen", [("any", 70, 75), ("any", 80, 75), ("newest", 75, 86),
                                                       ("compatible", 80, 75)])
def test_selection_policy_override(build, monkeypatch, policy, device_sm, chosen):
    monkeypatch.setenv("ZLUDA_PTX_SELECT", policy)
    [module] = fatbin.ptx_from_file(build("zstd_multi"), device_sm)
    assert module.sm == chosen


def test_sass_only_binary_asks_for_a_rebuild_with_ptx(build, monkeypatch):
    monkeypatch.delenv("ZLUDA_PTX_SELECT", raising=False)
    with pytest.raises(fatbin.FatbinError) as info:
        fatbin.ptx_from_file(build("sass_only"), 80)
    err = info.value
    assert err.cu_result == 209
    assert "only SASS (sm_80)" in str(err)
    assert "-gencode arch=compute_80,code=compute_80" in str(err)


@pytest.mark.parametrize("name", ["rdc", "rdc_lib"])
def test_rdc_program_yields_the_ptx_of_every_translation_unit(build, reference_ptx, name):
    modules = fatbin.ptx_from_file(build(name), 80)
    assert len(modules) == 2
    for module, source in zip(modules, ["fatbin_rdc_a.cu", "fatbin_rdc_b.cu"]):
        assert module.sm == 75
        _same_ptx(module.text, reference_ptx(source, 75, rdc=True))


def test_bare_fatbin_and_cubin_files(build, reference_ptx, tmp_path):
    """A fatbin file (as `nvcc -fatbin` writes) and a cubin, cut from a built binary's section."""
    [row] = [r for r in rows(build("uncompressed")) if r.entry.kind_name == "ptx"]
    path = build("uncompressed")
    assert row.entry.index == 0
    with open(path, "rb") as f:
        section = ELFFile(f).get_section_by_name(".nv_fatbin")
        start = row.entry.offset - section["sh_offset"] - 16  # the fatbin header precedes entry 0
        data = section.data()[start:]
    (tmp_path / "k.fatbin").write_bytes(data)
    [module] = fatbin.ptx_from_file(tmp_path / "k.fatbin", 80)
    _same_ptx(module.text, reference_ptx("fatbin_kernels.cu", 75))
    cubin = [r.entry for r in rows(path) if r.entry.kind_name == "elf" and r.fatbin == row.fatbin][0]
    (tmp_path / "k.cubin").write_bytes(cubin.stored)
    with pytest.raises(fatbin.FatbinError) as info:
        fatbin.ptx_from_file(tmp_path / "k.cubin", 80)
    assert info.value.cu_result == 209 and "cubin (SASS for sm_80)" in str(info.value)


def test_ptx_file_is_returned_as_is(reference_ptx, nvcc):
    path = nvcc(["fatbin_kernels.cu"], ["-ptx", "-arch=compute_86"], ".ptx")
    [module] = fatbin.ptx_from_file(path, 75)  # the program chose this PTX: no selection
    assert module.text == path.read_text() and module.sm == 86


def test_host_binary_with_two_separate_images_must_be_loaded_per_image(build, reference_ptx):
    """A non-rdc program of two translation units: two images cudart loads separately."""
    path = build("two_images")
    images = fatbin.ptx_images_from_file(path, 75)
    assert len(images) == 2
    with pytest.raises(fatbin.FatbinError, match="2 separately loaded images"):
        fatbin.ptx_from_file(path, 75)


def _zluda(*args: str) -> subprocess.CompletedProcess:
    code = "import sys; from zluda_py.cli import main; sys.exit(main())"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)


def test_cli_list_has_one_row_per_entry(build):
    res = _zluda("fatbin", "list", str(build("zstd_multi")))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split() == ["#", "section", "kind", "arch", "ptx", "compression", "stored", "size", "name"]
    table = [line.split() for line in lines[1:]]
    ptx = sorted((r[3], r[4], r[5]) for r in table if r[2] == "ptx")
    assert ptx == [("compute_75", "9.0", "zstd"), ("compute_86", "9.0", "zstd")]
    assert any(r[2] == "elf" and r[3] == "sm_80" for r in table)


def test_cli_extract_writes_ptx_without_nul_and_cubins(build, reference_ptx, tmp_path):
    res = _zluda("fatbin", "extract", str(build("rdc")), "-o", str(tmp_path / "out"))
    assert res.returncode == 0, res.stderr
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    ptx = [f for f in files if f.endswith(".ptx")]
    assert ptx == ["fatbin1-entry0-compute_75.ptx", "fatbin2-entry0-compute_75.ptx"]
    for name, source in zip(ptx, ["fatbin_rdc_a.cu", "fatbin_rdc_b.cu"]):
        data = (tmp_path / "out" / name).read_bytes()
        assert b"\0" not in data
        _same_ptx(data.decode(), reference_ptx(source, 75, rdc=True))
    cubins = [f for f in files if f.endswith(".cubin")]
    assert cubins and all((tmp_path / "out" / f).read_bytes()[:4] == b"\x7fELF" for f in cubins)


def test_cli_reports_bad_input_with_offset(tmp_path):
    (tmp_path / "junk").write_bytes(b"\x50\xed\x55\xba\x01\x00\x10\x00" + (1 << 40).to_bytes(8, "little"))
    res = _zluda("fatbin", "list", str(tmp_path / "junk"))
    assert res.returncode == 1
    assert "junk: offset 0x8: fatbin declares" in res.stderr
