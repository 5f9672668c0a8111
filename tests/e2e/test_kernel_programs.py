"""nvcc-built kernel programs (tests/cuda/e2e_*.cu) under `zluda run`. Each program checks its
results against host-computed references, prints `<name>: PASSED` and exits 0, or names
the failed check on stderr and exits 1. Programs with sections run one section per test, so
that a compiler gap marks only what it breaks (xfail strict: the test fails the moment the
gap is closed, so the mark is then removed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

# id: (sources, nvcc arguments, program arguments, marks)
PROGRAMS = {
    "blocks": (["e2e_blocks.cu"], [], [], ()),
    "atomics": (["e2e_atomics.cu"], [], [], ()),
    "warp-shuffles-votes": (["e2e_warp.cu"], ["-arch=sm_80"], ["shuffles"], ()),
    "warp-cooperative-groups": (["e2e_warp.cu"], ["-arch=sm_80"], ["groups"], ()),
    "grid-sync": (["e2e_grid_sync.cu"], [], [], ()),
    "streams-events-callbacks": (["e2e_streams_threads.cu"], [], ["streams"], ()),
    "managed-memory": (["e2e_streams_threads.cu"], [], ["managed"], ()),
    "managed-variables": (["e2e_managed_vars.cu"], [], [], ()),
    "host-threads": (["e2e_streams_threads.cu"], [], ["threads"], ()),
    "host-threads-per-thread-stream": (["e2e_streams_threads.cu"], ["--default-stream", "per-thread"], ["threads"], ()),
    "error-paths": (["e2e_streams_threads.cu"], [], ["errors"], ()),
    "invalid-configuration-code": (["e2e_streams_threads.cu"], [], ["bad-launch"], ()),
    "textures": (["e2e_textures.cu"], [], ["textures"], ()),
    "textures-image-filtering": (["e2e_textures.cu"], [], ["image"], ()),
    "surfaces": (["e2e_textures.cu"], [], ["surfaces"], ()),
    "texture-ptx-forms": (["e2e_textures.cu"], [], ["forms"], ()),
    "mipmaps": (["e2e_mipmaps.cu"], [], [], ()),
    "graphs-captured": (["e2e_graphs.cu"], [], ["capture"], ()),
    "graphs-hand-built": (["e2e_graphs.cu"], [], ["manual"], ()),
    "graphs-capture-errors": (["e2e_graphs.cu"], [], ["errors"], ()),
    "graphs-memory-freed-outside": (["e2e_graphs.cu"], [], ["memory"], ()),
    "memory-pools": (["e2e_memory_api.cu"], [], ["pool"], ()),
    "vmm-growing-buffer": (["e2e_memory_api.cu"], [], ["vmm"], ()),
    "ipc-two-processes": (["e2e_memory_api.cu"], [], ["ipc"], ()),
    "async-barrier-cuda-barrier": (["e2e_async_barrier.cu"], ["-arch=sm_90"], ["barrier"], ()),
    "async-barrier-memcpy-async-pipelines": (["e2e_async_barrier.cu"], ["-arch=sm_90"], ["pipeline"], ()),
    "async-barrier-bulk-copies-tx-count": (["e2e_async_barrier.cu"], ["-arch=sm_90"], ["bulk"], ()),
    "async-barrier-mbarrier-probe": (["e2e_async_barrier.cu"], ["-arch=sm_90"], ["probe"], ()),
    "tensor-cores-wmma": (["e2e_tensor_cores.cu"], ["-arch=sm_80"], [], ()),
    "rdc-two-files": (["e2e_rdc_main.cu", "e2e_rdc_lib.cu"], ["-rdc=true"], [], ()),
    "rdc-two-files-ptx-only": (["e2e_rdc_main.cu", "e2e_rdc_lib.cu"],
                               ["-rdc=true", "-gencode", "arch=compute_75,code=compute_75"], [], ()),
    "device-launch": (["e2e_device_launch.cu"], ["-arch=sm_80", "-rdc=true", "-lcudadevrt"], [], ()),
    "graph-conditionals": (["e2e_graph_conditionals.cu"], ["-arch=sm_80"], [], ()),
}


# The same programs run natively on an NVIDIA H200 (tests/hardware/golden/programs.txt, one
# section per run_nvidia.sh program): every line we print must be one the H200 printed, so the
# digests some sections print are checked against the hardware too. A run the golden file
# does not hold yet is checked by its own PASSED alone until run_nvidia.sh records it. Runs
# recorded later on an H100 (texture_forms, tensor_cores, mipmaps ...) sit in the same file.
GOLDEN = Path(__file__).parents[1] / "hardware" / "golden" / "programs.txt"
GOLDEN_RUN = {"blocks": "blocks", "atomics": "atomics", "warp-shuffles-votes": "warp", "warp-cooperative-groups": "warp",
              "grid-sync": "grid_sync", "textures": "textures", "textures-image-filtering": "textures_image",
              "surfaces": "surfaces", "texture-ptx-forms": "texture_forms", "graphs-captured": "graphs_captured", "graphs-hand-built": "graphs_manual",
              "graphs-capture-errors": "graphs_errors", "graphs-memory-freed-outside": "graphs_memory", "memory-pools": "memory_pools", "vmm-growing-buffer": "vmm",
              "ipc-two-processes": "ipc", "rdc-two-files": "rdc", "async-barrier-cuda-barrier": "async_barrier",
              "async-barrier-memcpy-async-pipelines": "async_barrier",
              "async-barrier-bulk-copies-tx-count": "async_barrier", "async-barrier-mbarrier-probe": "async_barrier",
              "tensor-cores-wmma": "tensor_cores", "mipmaps": "mipmaps", "managed-variables": "managed_vars",
              "device-launch": "device_launch", "graph-conditionals": "graph_conditionals"}


def _h200_stdout(run_name: str) -> list[str] | None:
    """The stdout lines of a program's H200 run that exited 0 (None: not recorded, or it failed there)."""
    sections = re.split(r"^=== ", GOLDEN.read_text(), flags=re.M)
    for sec in sections:
        head, _, body = sec.partition("\n")
        if head.split(" ")[0] == run_name:
            return body.split("--- stderr")[0].splitlines() if head.endswith(": rc 0") else None
    return None


@pytest.mark.parametrize("name", [pytest.param(k, marks=v[3]) for k, v in PROGRAMS.items()])
def test_kernel_program(nvcc, run, name):
    sources, nvcc_args, argv, _ = PROGRAMS[name]
    r = run(nvcc(sources, nvcc_args, ""), *argv)
    assert r.returncode == 0 and r.stdout.rstrip().endswith(": PASSED"), r.stdout[-2000:] + r.stderr[-4000:]
    h200 = _h200_stdout(GOLDEN_RUN.get(name, ""))
    if h200 is not None:
        assert [line for line in r.stdout.splitlines() if line not in h200] == [], "lines the NVIDIA GPU did not print"


def test_golden_programs_cover_the_async_barrier_digests():
    """The comparison above has something to compare: the H200's run printed the digests."""
    h200 = _h200_stdout("async_barrier")
    assert h200 is not None and sum(" digest " in line for line in h200) == 3


def _printf_line(launch: int, t: int) -> str:
    """What `say` prints for thread t, formatted here by Python's own printf rules."""
    return "launch %d thread %d: %s %5.2f %x %d %c" % (launch, t, "gpu", t * 1.25, 255 + t, -1234567890123 * (t + 1),
                                                       chr(ord("a") + t))


def test_symbols_printf_recursion(nvcc, run):
    r = run(nvcc(["e2e_symbols_printf.cu"], [], ""))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    lines = r.stdout.splitlines()
    assert lines[-1] == "symbols printf recursion: PASSED"
    first = lines.index("host before")
    between = lines.index("host between")
    # launch 1: every thread's line, then thread 0's second line after its first one
    launch1 = lines[first + 1:between]
    assert sorted(launch1[:3]) == [_printf_line(1, t) for t in range(3)]
    assert launch1[3:] == ["launch 1 second line of thread 0"]
    # launch 2 comes after the host line printed between the two synchronized launches
    assert lines[between + 1:-1] == [_printf_line(2, 0), "launch 2 second line of thread 0"]


@pytest.mark.xdist_group("thrust")  # its own group: it builds nothing the others use
def test_thrust_sort_reduce_scan(nvcc, run):
    # translating the module (23 kernels, 21k PTX lines) takes 4-7 minutes cold on 2 cores
    r = run(nvcc(["e2e_thrust.cu"], ["-std=c++17"], ""), timeout=1800)  # a hang guard: cold, its kernels compile one by one
    assert r.returncode == 0 and r.stdout.rstrip().endswith("thrust: PASSED"), r.stdout[-2000:] + r.stderr[-4000:]
