"""Builds libcuda.so.1 with cffi's embedding API.

Every symbol declared in driver_api.h becomes an exported C function that calls the Python
function of the same name in zluda_py.driver (attached by zluda_py.driver.shim_bridge);
entry_points.txt drives cuGetProcAddress and the NOT_SUPPORTED stubs; shim.c holds the parts
that stay in C. `python libcuda_shim/build_shim.py OUT_DIR` builds by hand; setup.py calls
`build(out_dir)` during `pip install`.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import site
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import cffi

import nvidia_exports  # next to this file: its directory is on sys.path wherever we are imported

HERE = Path(__file__).resolve().parent
MODULE_NAME = "_zluda_shim"
LIB_NAME = "libcuda.so.1"
PRELOAD_NAME = "libzluda_preload.so"  # the dlopen interposer `zluda run` preloads (preload.c)

# C helpers in shim.c that the Python side calls through `lib`
C_HELPERS = """
void *zluda_tls_current(void);
void zluda_tls_set_current(void *ctx);
int zluda_tls_push(void *ctx);
void *zluda_tls_pop(void);
void zluda_cls_drop_context(void *ctx);
const char *zluda_shim_path(void);
"""


def declarations() -> tuple[str, dict[str, str]]:
    """(typedef text, {symbol: its prototype}) from driver_api.h."""
    text = re.sub(r"/\*.*?\*/", "", (HERE / "driver_api.h").read_text(), flags=re.S)
    typedefs, protos = [], {}
    for stmt in (s.strip() for s in text.split(";")):
        if not stmt:
            continue
        m = re.match(r"CUresult (\w+)\(", stmt)
        if m:
            protos[m.group(1)] = stmt + ";"
        else:
            typedefs.append(stmt + ";")
    return "\n".join(typedefs), protos


def per_thread_symbol(symbol: str, proto: str) -> str:
    """NVIDIA's name for the per-thread-default-stream variant: calls that take a stream (and
    the launches) end in _ptsz, the synchronous copies and sets in _ptds."""
    stream_taking = "CUstream" in proto or symbol.startswith("cuLaunch")
    return symbol + ("_ptsz" if stream_taking else "_ptds")


def entry_points() -> list[tuple[str, int, str | None, bool]]:
    """(name, first cudaVersion, symbol or None when not implemented, has per-thread variant)."""
    rows = []
    for line in (HERE / "entry_points.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, version, symbol, *rest = line.split()
        if symbol == "(C)":
            continue
        rows.append((name, int(version), None if symbol == "-" else symbol, rest == ["pt"]))
    return rows


def exported_protos() -> dict[str, str]:
    """Every Python-implemented symbol the library exports, per-thread variants included."""
    _, protos = declarations()
    out = dict(protos)
    for _, _, symbol, per_thread in entry_points():
        if symbol and per_thread:
            pt = per_thread_symbol(symbol, protos[symbol])
            out[pt] = protos[symbol].replace(f" {symbol}(", f" {pt}(", 1)
    return out


def generated_c(protos: dict[str, str]) -> str:
    """Stubs for unimplemented names and the zl_procs[] lookup table."""
    rows = entry_points()
    lines = ["typedef struct { const char *name; int version; void *fn; void *per_thread; } zl_proc;",
             "static CUresult zl_unsupported(const char *what, int *logged);"]
    stubbed = sorted({name for name, _, sym, _ in rows if sym is None})
    for name in stubbed:
        # exported under the name too (C programs linked with -lcuda), unless we implement it
        lines.append(f"static CUresult zl_stub_{name}(void) {{ static int logged; "
                     f'return zl_unsupported("{name}", &logged); }}')
        if name not in protos:
            lines.append(f'CUresult {name}(void) __attribute__((alias("zl_stub_{name}")));')
    # every other symbol NVIDIA's library exports, so that -lcuda links and dlsym resolves
    in_c = set(re.findall(r"^CUresult (cu\w+)\(", (HERE / "shim.c").read_text(), flags=re.M))
    for name in sorted(set(nvidia_exports.listed_exports()) - protos.keys() - set(stubbed) - in_c):
        lines.append(f'CUresult {name}(void) {{ static int logged; return zl_unsupported("{name}", &logged); }}')
    lines.append("static const zl_proc zl_procs[] = {")
    for name, version, sym, per_thread in rows:
        fn = f"(void *){sym}" if sym else f"(void *)zl_stub_{name}"
        pt = f"(void *){per_thread_symbol(sym, protos[sym])}" if sym and per_thread else "NULL"
        lines.append(f'    {{"{name}", {version}, {fn}, {pt}}},')
    lines.append("};")
    return "\n".join(lines)


def init_code() -> str:
    """Python run once inside the host process at the first driver call. It makes the
    interpreter that built the library (and its site-packages) importable even when the host is
    a C program, then attaches the driver's functions to the exported symbols."""
    site_dirs = [p for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}]
    if site.ENABLE_USER_SITE and os.path.isdir(site.getusersitepackages()):
        site_dirs.append(site.getusersitepackages())
    return f"""
import os, site, sys
from {MODULE_NAME} import ffi, lib
for d in {site_dirs!r}:
    if d not in sys.path:
        site.addsitedir(d)
# the package that holds this library: <root>/zluda_py/_shim/libcuda.so.1
_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(
    ffi.string(lib.zluda_shim_path()).decode()))))
if os.path.isdir(os.path.join(_root, "zluda_py")) and _root not in sys.path:
    sys.path.insert(0, _root)
if not sys.executable:
    sys.executable = {sys.executable!r}
from zluda_py.driver import shim_bridge
shim_bridge.install(ffi, lib)
"""


def make_ffi() -> cffi.FFI:
    typedefs, _ = declarations()
    protos = exported_protos()
    ffi = cffi.FFI()
    ffi.cdef(typedefs)
    ffi.cdef(C_HELPERS)
    ffi.embedding_api("\n".join(protos.values()))
    source = "\n".join([typedefs, "\n".join(protos.values()), generated_c(protos), (HERE / "shim.c").read_text()])
    # the shim must find libpython when a C program loads it
    libdir = sysconfig.get_config_var("LIBDIR")
    ffi.set_source(MODULE_NAME, source, extra_compile_args=["-O2", "-Wno-unused-function"],
                   extra_link_args=[f"-Wl,-soname,{LIB_NAME}", f"-Wl,-rpath,{libdir}", "-lpthread", "-ldl"])
    ffi.embedding_init_code(init_code())
    return ffi


def _install(built: Path, target: Path) -> None:
    """Copy into place atomically: a running process keeps its mapping of the old file."""
    tmp_target = target.with_name(target.name + ".tmp")
    shutil.copy2(built, tmp_target)
    os.replace(tmp_target, target)


def build_preload(out_dir: Path) -> Path:
    """The dlopen interposer: a plain C library (no Python), built with the C compiler
    Python was built with."""
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    with tempfile.TemporaryDirectory() as tmp:
        built = Path(tmp) / PRELOAD_NAME
        cmd = [*cc, "-shared", "-fPIC", "-O2", "-Wall", "-o", str(built), str(HERE / "preload.c"), "-ldl", "-lpthread"]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError(f"building {PRELOAD_NAME} failed: {' '.join(cmd)}\n{res.stderr}")
        _install(built, out_dir / PRELOAD_NAME)
    return out_dir / PRELOAD_NAME


def build(out_dir: str | os.PathLike) -> Path:
    """Build libcuda.so.1 (and the libcuda.so link) and the dlopen interposer into out_dir;
    returns libcuda.so.1's path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        built = Path(make_ffi().compile(tmpdir=tmp, target=LIB_NAME, verbose=False))
        target = out_dir / LIB_NAME
        _install(built, target)
    build_preload(out_dir)
    (out_dir / "exports.txt").write_text("\n".join(exported_protos()) + "\n")
    link = out_dir / "libcuda.so"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(LIB_NAME)
    return target


if __name__ == "__main__":
    print(build(sys.argv[1] if len(sys.argv) > 1 else HERE.parent / "zluda_py" / "_shim"))
