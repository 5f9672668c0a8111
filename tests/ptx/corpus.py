"""The PTX corpus of the front-end tests: project CUDA sources built by nvcc at test time
(every sm nvcc 13 supports from sm_75, plus -G and -lineinfo builds) and hand-written PTX
in the older forms (tests/ptx_corpus/)."""

from __future__ import annotations

from pathlib import Path

ARCHS = ["75", "80", "86", "89", "90", "90a", "100", "120"]
SOURCES = ["vector_add.cu", "corpus_sync_atomics.cu", "corpus_types_cg.cu"]
BUILDS: list[tuple[str, list[str]]] = [
    (src, ["-ptx", f"-arch=sm_{arch}"]) for arch in ARCHS for src in SOURCES
] + [
    ("corpus_sync_atomics.cu", ["-ptx", "-arch=sm_80", "-G"]),
    ("corpus_types_cg.cu", ["-ptx", "-arch=sm_86", "-lineinfo"]),
    ("corpus_thrust.cu", ["-ptx", "-arch=sm_80"]),
    ("corpus_thrust.cu", ["-ptx", "-arch=sm_90a", "-lineinfo"]),
]
HAND_WRITTEN = sorted((Path(__file__).parent.parent / "ptx_corpus").glob("*.ptx"))


def build_id(build: tuple[str, list[str]]) -> str:
    src, args = build
    return Path(src).stem + "".join(a for a in args if a != "-ptx")


def arch_of(args: list[str]) -> str:
    return next(a.split("=", 1)[1] for a in args if a.startswith("-arch="))
