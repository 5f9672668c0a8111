"""Seeded hostile inputs for the driver's module loaders: `case(seed, corpus)` is the same case
for the same seed and corpus, on any machine.

Every seed makes one case of one category, `seed % len(CYCLE)` picking it (mutations get most
seeds: their space is the largest):
* `ptx`: token and byte mutations of real nvcc PTX and the differential fuzzer's kernels;
* `fatbin`: header fields, sizes, offsets, compression flags, truncations and byte flips of
  real nvcc fatbins (zstd, LZ4, uncompressed, with SASS);
* `bomb`: compressed PTX payloads that declare (or really hold) far more than they store;
* `nesting`: blocks, parentheses, initializer braces, guards and vectors nested deep;
* `declaration`: huge `.reg` ranges, giant arrays in every state space, huge names, literals
  and launch bounds.
A case says what it expects where the input's validity is known (`expect`), and which entry
point loads it: the driver sees what a program would hand it."""

from __future__ import annotations

import random
import re
import struct
from dataclasses import dataclass
from pathlib import Path

import lz4.block
import zstandard

from zluda_py.fatbin.limits import DEFAULT_MAX_SIZE, MAX_RATIO, RATIO_FLOOR
from zluda_py.fuzz.generate import generate, module_ptx
from zluda_py.ptx.parser import MAX_NESTING

CYCLE = ("ptx", "fatbin", "ptx", "fatbin", "bomb", "ptx", "fatbin", "nesting", "declaration")
CATEGORIES = tuple(dict.fromkeys(CYCLE))
# how a case's image reaches the driver (runner.py): the module entry points taking an image
# pointer, a file (cuModuleLoad), and a fatbin wrapper as cudart registers it ("wrapper")
TEXT_ENTRIES = ("cuModuleLoadDataEx", "cuModuleLoadDataEx", "cuModuleLoadData", "cuLibraryLoadData", "cuModuleLoad")
FATBIN_ENTRIES = TEXT_ENTRIES + ("cuModuleLoadFatBinary", "wrapper")
GENERATED_KERNELS = 6  # differential-fuzzer kernels added to the PTX corpus
HEADER = ".version 8.0\n.target sm_80\n.address_size 64\n"


@dataclass
class Case:
    seed: int
    category: str
    what: str  # how the input was made, one line
    image: bytes  # what the program hands the driver; text images carry their NUL
    entry: str = "cuModuleLoadDataEx"
    expect: str = "any"  # "ok" or "error" where the input's validity is known
    launch: str = ""  # a parameterless kernel launched <<<1, 1>>> after a successful load


@dataclass
class Corpus:
    ptx: list[tuple[str, str]]  # (name, text)
    fatbins: list[tuple[str, bytes]]  # (name, a bare fatbin as `nvcc -fatbin` writes it)

    @classmethod
    def load(cls, dirs: list[Path]) -> "Corpus":
        """The *.ptx and *.fatbin files of `dirs`, plus generated kernels."""
        files = [p for d in dirs for p in sorted(Path(d).iterdir())]
        ptx = [(p.name, p.read_text()) for p in files if p.suffix == ".ptx"]
        ptx += [(f"generate({s})", module_ptx([generate(s)])) for s in range(GENERATED_KERNELS)]
        fatbins = [(p.name, p.read_bytes()) for p in files if p.suffix == ".fatbin"]
        if not fatbins:
            raise ValueError(f"no .fatbin file in {', '.join(map(str, dirs))}")
        for name, data in fatbins:
            if not any(_field(data, at, "kind") == KIND_PTX for at in entries(data)):
                raise ValueError(f"{name}: the corpus's fatbins must hold PTX")
        return cls(ptx, fatbins)


def case(seed: int, corpus: Corpus) -> Case:
    rng = random.Random(seed)
    category = CYCLE[seed % len(CYCLE)]
    return _MAKERS[category](seed, rng, corpus)


# ---- mutated PTX ----
_TOKENS = re.compile(r"\s+|[\w.%$:]+|.", re.S)


def mutate_ptx(rng: random.Random, text: str) -> str:
    """One mutation of non-empty PTX text: a truncation, byte flips, or deleted or duplicated tokens."""
    kind = rng.randrange(4)
    if kind == 0:
        return text[: rng.randrange(len(text))]
    if kind == 1:
        chars = list(text)
        for _ in range(rng.randint(1, 4)):
            chars[rng.randrange(len(chars))] = chr(rng.choice([rng.randrange(32, 127), rng.randrange(0, 256)]))
        return "".join(chars)
    tokens = _TOKENS.findall(text)
    k = rng.randrange(len(tokens))
    if kind == 2:
        del tokens[k : k + rng.randint(1, 3)]
    else:
        tokens[k:k] = tokens[k : k + rng.randint(1, 3)]
    return "".join(tokens)


def _flip_bytes(rng: random.Random, data: bytes, start: int = 0) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if len(out) > start:
            out[rng.randrange(start, len(out))] = rng.randrange(256)
    return bytes(out)


def _ptx_case(seed: int, rng: random.Random, corpus: Corpus) -> Case:
    name, text = rng.choice(corpus.ptx)
    rounds = rng.choice((1, 1, 1, 2, 3))
    for _ in range(rounds):
        if text:
            text = mutate_ptx(rng, text)
    data, what = text.encode(), f"{rounds} mutation(s) of {name}"
    if rng.random() < 0.15:  # what text mutations cannot make: invalid UTF-8
        data, what = _flip_bytes(rng, data), what + ", then raw byte flips"
    if rng.random() < 0.05:  # the NUL missing: the driver must stop at the end of readable memory
        return Case(seed, "ptx", what + ", no NUL", data, rng.choice(TEXT_ENTRIES[:4]))
    return Case(seed, "ptx", what, data + b"\0", rng.choice(TEXT_ENTRIES))


# ---- fatbins (layout: docs/fatbin.md) ----
KIND_PTX = 1
FLAG_LZ4, FLAG_ZSTD = 0x2000, 0x8000
_FATBIN_HEADER = struct.Struct("<IHHQ")  # magic, version, header size, size of the entries
FATBIN_FIELDS = {"magic": (0, 4), "version": (4, 2), "header size": (6, 2), "entries size": (8, 8)}
# (offset in the entry, bytes)
ENTRY_FIELDS = {"kind": (0, 2), "header size": (4, 4), "payload size": (8, 8), "compressed size": (16, 4),
                "ptx minor": (24, 2), "ptx major": (26, 2), "arch": (28, 4), "name offset": (32, 4),
                "name length": (36, 4), "flags": (40, 8), "uncompressed size": (56, 8)}


def entries(fatbin: bytes) -> list[int]:
    """The offsets of the entries of a well-formed fatbin (the corpus's)."""
    _, _, head, size = _FATBIN_HEADER.unpack_from(fatbin)
    out, at = [], head
    while at < head + size:
        out.append(at)
        header_size, payload_size = struct.unpack_from("<IQ", fatbin, at + 4)
        at += header_size + payload_size
    return out


def _field(data: bytes, entry: int, name: str) -> int:
    at, width = ENTRY_FIELDS[name]
    return int.from_bytes(data[entry + at : entry + at + width], "little")


def _set(data: bytearray, at: int, width: int, value: int) -> None:
    if at + width <= len(data):
        data[at : at + width] = (value % (1 << 8 * width)).to_bytes(width, "little")


def _interesting(rng: random.Random, value: int, width: int) -> int:
    top = (1 << 8 * width) - 1
    return rng.choice([0, 1, value - 1, value + 1, value - 8, value + 8, value * 2, value // 2, top, top >> 1,
                       (top >> 1) + 1, 1 << 30, 1 << 16, rng.randrange(top + 1)])


def _mutate_fatbin(rng: random.Random, data: bytearray, offsets: list[int]) -> str:
    op = rng.choice(("field", "field", "field", "flags", "truncate", "flip", "payload", "splice"))
    if op == "field":
        if rng.random() < 0.25:
            name = rng.choice(list(FATBIN_FIELDS))
            at, width = FATBIN_FIELDS[name]
        else:
            entry = rng.choice(offsets)
            name = rng.choice(list(ENTRY_FIELDS))
            at, width = ENTRY_FIELDS[name]
            at += entry
        value = _interesting(rng, int.from_bytes(data[at : at + width], "little"), width)
        _set(data, at, width, value)
        return f"{name}={value % (1 << 8 * width):#x}"
    if op == "flags":  # payloads read as the wrong compression, or compressed ones as raw
        entry = rng.choice(offsets)
        bits = rng.choice((FLAG_LZ4, FLAG_ZSTD, FLAG_LZ4 | FLAG_ZSTD))
        _set(data, entry + 40, 8, _field(data, entry, "flags") ^ bits)
        return f"flags^={bits:#x}"
    if op == "truncate":
        cut = rng.randrange(len(data))
        del data[cut:]
        return f"cut at {cut}"
    if op == "flip":
        data[:] = _flip_bytes(rng, data)
        return "byte flips"
    if op == "payload":  # corrupt compressed streams
        entry = rng.choice(offsets)
        start = entry + _field(data, entry, "header size")
        data[:] = _flip_bytes(rng, data, min(start, len(data)))
        return "payload byte flips"
    at, n = rng.randrange(len(data)), rng.randint(1, 64)
    if rng.random() < 0.5:
        data[at:at] = data[at : at + n]
        return f"{n} bytes duplicated at {at}"
    del data[at : at + n]
    return f"{n} bytes deleted at {at}"


def _fatbin_case(seed: int, rng: random.Random, corpus: Corpus) -> Case:
    name, fatbin = rng.choice(corpus.fatbins)
    offsets, data = entries(fatbin), bytearray(fatbin)
    ops = [_mutate_fatbin(rng, data, offsets) for _ in range(rng.choice((1, 1, 2, 3)))]
    return Case(seed, "fatbin", f"{name}: {'; '.join(ops)}", bytes(data), rng.choice(FATBIN_ENTRIES))


# ---- decompression bombs ----
_KERNEL = HEADER + ".visible .entry k()\n{\nret;\n}\n"
_FILLERS = {  # what a bomb decompresses to, and whether that is a valid module
    "zeros": (lambda n: bytes(n), "error"),
    "newlines": (lambda n: b"\n" * n, "error"),
    "comments": (lambda n: (b"// " + b"x" * 60 + b"\n") * (n // 64) + b"\n" * (n % 64), "error"),
    "spaces, then a kernel": (lambda n: b" " * (n - len(_KERNEL) - 1) + _KERNEL.encode() + b"\0", "ok"),
}


def replace_payload(fatbin: bytes, entry: int, payload: bytes, flags: int, uncompressed: int) -> bytes:
    """`fatbin` with the payload of the entry at `entry` replaced (its sizes and flags set)."""
    header_size, old_size = _field(fatbin, entry, "header size"), _field(fatbin, entry, "payload size")
    padded = payload + bytes(-len(payload) % 8)
    head = bytearray(fatbin[entry : entry + header_size])
    _set(head, 8, 8, len(padded))
    _set(head, 16, 4, len(payload) if flags & (FLAG_LZ4 | FLAG_ZSTD) else 0)
    _set(head, 40, 8, (_field(fatbin, entry, "flags") & ~(FLAG_LZ4 | FLAG_ZSTD)) | flags)
    _set(head, 56, 8, uncompressed)
    out = bytearray(fatbin[:entry] + head + padded + fatbin[entry + header_size + old_size :])
    _set(out, 8, 8, _FATBIN_HEADER.unpack_from(fatbin)[3] + len(padded) - old_size)
    return bytes(out)


def _bomb_case(seed: int, rng: random.Random, corpus: Corpus) -> Case:
    name, fatbin = rng.choice(corpus.fatbins)
    entry = next(at for at in entries(fatbin) if _field(fatbin, at, "kind") == KIND_PTX)
    filler = rng.choice(list(_FILLERS))
    make, valid = _FILLERS[filler]
    size = rng.choice((1 << 20, RATIO_FLOOR, 64 << 20))
    content = make(size)
    compression = rng.choice(("zstd", "zstd without a frame size", "lz4"))
    if compression == "lz4":
        payload, flags = lz4.block.compress(content, store_size=False), FLAG_LZ4
    else:
        payload = zstandard.ZstdCompressor(write_content_size=compression == "zstd").compress(content)
        flags = FLAG_ZSTD
    declared = rng.choice((size, size, size - 1, size + 1, 1 << 30, 1 << 32, 1 << 40, (1 << 63) + 5, (1 << 64) - 1))
    # docs/fatbin.md: a payload must decompress to exactly its declared size, within the cap,
    # and a ratio above MAX_RATIO (past RATIO_FLOOR) is refused before decompressing
    honest = declared == size <= min(DEFAULT_MAX_SIZE, max(RATIO_FLOOR, MAX_RATIO * len(payload)))
    what = f"{name}: {size >> 20} MiB of {filler}, {compression} ({len(payload)} bytes), declares {declared:#x}"
    return Case(seed, "bomb", what, replace_payload(fatbin, entry, payload, flags, declared),
                rng.choice(FATBIN_ENTRIES), valid if honest else "error")


# ---- deep nesting ----
def _depth(rng: random.Random) -> int:
    return rng.choice((rng.randint(1, MAX_NESTING), MAX_NESTING, MAX_NESTING + 1, 1000, 100_000, 1_000_000))


def _kernel(body: str, decls: str = "") -> str:
    return HEADER + decls + ".visible .entry k()\n{\n" + body + "\nret;\n}\n"


def _nesting_case(seed: int, rng: random.Random, corpus: Corpus) -> Case:
    d = _depth(rng)
    form = rng.choice(("blocks", "blocks", "unbalanced blocks", "parentheses", "initializer parentheses",
                       "initializer braces", "guards", "negations", "vector braces"))
    expect, launch = "any", ""
    if form == "blocks":
        text = _kernel("{" * d + "ret;" + "}" * d)
        expect, launch = ("ok", "k") if d <= MAX_NESTING else ("error", "")
    elif form == "unbalanced blocks":
        text, expect = _kernel("{" * d + "ret;" + "}" * rng.randrange(d)), "error"
    elif form == "parentheses":
        text = _kernel(".reg .b32 %r;\nmov.u32 %r, " + "(" * d + "1" + ")" * d + ";")
    elif form == "initializer parentheses":
        text = _kernel("", ".global .u32 g = " + "(" * d + "1" + ")" * d + ";\n")
    elif form == "initializer braces":
        d = min(d, 100_000)  # each level is a dimension of the declaration too
        text = _kernel("", ".global .u32 g" + "[1]" * d + " = " + "{" * d + "1" + "}" * d + ";\n")
    elif form == "guards":
        text = _kernel(".reg .pred %p;\n.reg .b32 %r;\nsetp.eq.u32 %p, 1, 1;\n" + "@%p " * d + "mov.u32 %r, 1;")
    elif form == "negations":
        text = _kernel(".reg .pred %p;\n.reg .b32 %r;\nsetp.eq.u32 %p, 1, 1;\n@" + "!" * d + "%p mov.u32 %r, 1;")
    else:
        text = _kernel(".reg .b64 %rd;\n.reg .b32 %r;\nmov.b64 %rd, " + "{" * d + "%r, %r" + "}" * d + ";")
    return Case(seed, "nesting", f"{form}, depth {d}", text.encode() + b"\0", rng.choice(TEXT_ENTRIES), expect, launch)


# ---- huge declarations ----
_SIZES = (1 << 16, 1 << 24, 1 << 30, 1 << 31, 1 << 32, 1 << 40, 1 << 62, 1 << 64, 10**30)
# (state space, where it is declared, how the kernel touches its last byte)
_ARRAYS = {
    "global": ("module", ".reg .b16 %h;\nmov.u16 %h, 1;\nst.global.u8 [a+{last}], %h;"),
    "const": ("module", ".reg .b16 %h;\nld.const.u8 %h, [a+{last}];"),
    "shared": ("kernel", ".reg .b16 %h;\nmov.u16 %h, 1;\nst.shared.u8 [a+{last}], %h;"),
    "local": ("kernel", ".reg .b16 %h;\nmov.u16 %h, 1;\nst.local.u8 [a+{last}], %h;"),
}


def _declaration_case(seed: int, rng: random.Random, corpus: Corpus) -> Case:
    form = rng.choice(("registers", "registers", "array", "array", "array", "dimensions", "parameter", "names",
                       "long name", "long literal", "launch bounds", "alignment"))
    n = rng.choice(_SIZES)
    expect, launch = "any", ""
    if form == "registers":
        n = rng.choice((2_000_000_000, (1 << 31) - 1, 1 << 31, 1 << 32, 1 << 63, 10**30))
        text = _kernel(f".reg .b32 %r<{n}>;\nmov.u32 %r{n - 1}, 7;\nadd.u32 %r0, %r{n - 1}, 1;")
        what = f".reg .b32 %r<{n}>"
        if n < 1 << 31:
            expect, launch = "ok", "k"
    elif form == "array":
        space = rng.choice(list(_ARRAYS))
        where, use = _ARRAYS[space]
        decl = f".{space} .align 4 .b8 a[{n}];\n"
        body = use.format(last=n - 1)
        text = _kernel(body, decl) if where == "module" else _kernel(decl + body)
        what, launch = f".{space} .b8 a[{n}]", "k"
        if n >= 1 << 40:  # no device has that much memory of any kind
            expect = "error"
    elif form == "dimensions":
        dims = rng.randint(2, 8)
        text = _kernel("", f".global .b8 a" + f"[{n}]" * dims + ";\n")
        what = f".global .b8 a[{n}]^{dims}"
        if n >= 1 << 24:  # at least 2^48 bytes
            expect = "error"
    elif form == "parameter":
        text = HEADER + f".visible .entry k(.param .align 8 .b8 p[{n}])\n{{\nret;\n}}\n"
        what = f".param .b8 p[{n}]"
        if n >= 1 << 40:
            expect = "error"
    elif form == "names":
        n = rng.choice((1000, 100_000, 300_000))
        names = ", ".join(f"%a{i}" for i in range(n))
        text, what, expect, launch = _kernel(f".reg .b32 {names};\nmov.u32 %a{n - 1}, 1;"), f"{n} .reg names", "ok", "k"
    elif form == "long name":
        n = rng.choice((1 << 10, 1 << 20, 1 << 24))
        name = "%" + "r" * n
        text, what, expect, launch = _kernel(f".reg .b32 {name};\nmov.u32 {name}, 1;"), f"a {n}-character name", "ok", "k"
    elif form == "long literal":
        digits = rng.choice((30, 1000, 1 << 20))
        text, what = _kernel(".reg .b32 %r;\nmov.u32 %r, " + "9" * digits + ";"), f"a {digits}-digit literal"
        expect = "error"  # out of range for every type
    elif form == "launch bounds":
        text = HEADER + f".visible .entry k() .maxntid {n}, {n}, {n}\n{{\nret;\n}}\n"
        what, launch = f".maxntid {n}, {n}, {n}", "k"
    else:
        text = _kernel("", f".global .align {n} .b8 a[4];\n")
        what = f".align {n}"
    return Case(seed, "declaration", what, text.encode() + b"\0", rng.choice(TEXT_ENTRIES), expect, launch)


_MAKERS = {"ptx": _ptx_case, "fatbin": _fatbin_case, "bomb": _bomb_case, "nesting": _nesting_case,
           "declaration": _declaration_case}
