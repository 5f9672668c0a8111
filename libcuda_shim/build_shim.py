"""Builds libcuda.so.1 with cffi's embedding API.

Every symbol declared in driver_api.h becomes an exported C function (a generated wrapper that
checks the driver started and has not shut down, shim.c's zl_enter) that calls the cffi extern
`zlpy_<symbol>`, which runs the Python function of the same name in zluda_py.driver (attached
by zluda_py.driver.shim_bridge); entry_points.txt drives cuGetProcAddress and the
NOT_SUPPORTED stubs; shim.c holds the parts that stay in C. `python libcuda_shim/build_shim.py OUT_DIR` builds by hand; setup.py calls
`build(out_dir)` during `pip install`.
"""

from __future__ import annotations

import importlib.util
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
import pycparser

import nvidia_exports  # next to this file: its directory is on sys.path wherever we are imported

HERE = Path(__file__).resolve().parent
MODULE_NAME = "_zluda_shim"
LIB_NAME = "libcuda.so.1"
PRELOAD_NAME = "libzluda_preload.so"  # the interposer `zluda run` preloads (preload.c, toolchain.c)
PTXAS_NAME = "ptxas"  # the ptxas stand-in `zluda run` hands Triton (ptxas.c)
# the cffi extern behind each exported entry point; the exported name is its C wrapper
EXTERN_PREFIX = "zlpy_"

# C helpers in shim.c that the Python side calls through `lib`
C_HELPERS = """
void *zluda_tls_current(void);
void zluda_tls_set_current(void *ctx);
int zluda_tls_push(void *ctx);
void *zluda_tls_pop(void);
void zluda_cls_drop_context(void *ctx);
const char *zluda_shim_path(void);
void zluda_start_failed(const char *why);
void zluda_shutdown(void);
void zluda_interrupted(void);
void zluda_native_setup(const int64_t *abi, const uint32_t *max_block, const uint32_t *max_grid, void *fault,
                        void *refresh_ranges, void *worker_started);
void *zluda_native_context(void);
void zluda_native_context_state(void *ctx, int sticky, int blocked);
void *zluda_native_stream(void *ctx, int legacy);
void zluda_native_stream_name(void *stream, void *handle);
void zluda_native_stream_forget(void *handle);
void zluda_native_pause(int paused);
uint64_t zluda_native_py_submit(void *stream);
void zluda_native_py_finish(void *stream);
uint64_t zluda_native_last(void *stream);
int zluda_native_wait(void *stream, uint64_t seq, int timeout_ms);
int zluda_native_register(void *fn, void *ctx_handle, void *ctx, void *runner, const char *name, uint32_t nparams,
                          const uint32_t *offsets, const uint32_t *sizes, uint32_t param_size, uint32_t max_threads,
                          const uint32_t *reqntid, uint32_t max_dynamic_shared, int64_t static_shared,
                          int64_t frame_bytes, int64_t stack_size, int64_t reserved_smem, int64_t workers);
void zluda_native_forget_all(void);
void zluda_native_ranges_changed(uint64_t version);
void zluda_native_set_ranges(const uint64_t *pairs, int64_t n, uint64_t version);
void zluda_native_output(int64_t *record, const char *text, size_t len);
uint64_t zluda_native_launch_count(void);
"""
# entry points that try native_launch.c's fast path first (its last argument: a _ptsz variant), then Python
NATIVE_FIRST = {"cuLaunchKernel": "zl_native_launch({args}, 0)", "cuLaunchKernel_ptsz": "zl_native_launch({args}, 1)",
                "cuLaunchKernelEx": "zl_native_launch_ex({args}, 0)", "cuLaunchKernelEx_ptsz": "zl_native_launch_ex({args}, 1)"}


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
    lines.extend(export_table_stubs())
    lines.append("static const zl_proc zl_procs[] = {")
    for name, version, sym, per_thread in rows:
        fn = f"(void *){sym}" if sym else f"(void *)zl_stub_{name}"
        pt = f"(void *){per_thread_symbol(sym, protos[sym])}" if sym and per_thread else "NULL"
        lines.append(f'    {{"{name}", {version}, {fn}, {pt}}},')
    lines.append("};")
    return "\n".join(lines)


def export_table_stubs() -> list[str]:
    """For each ZL_EXPORT_TABLE(name, slots) of shim.c, a stub per slot and their array
    zl_stubs_<name>[]: shim.c fills the slots it does not implement with them. A stub passes
    on the six argument registers, which tracing prints."""
    regs = ", ".join(f"unsigned long a{i}" for i in range(6))
    args = ", ".join(f"a{i}" for i in range(6))
    lines = [f"static CUresult zl_slot_unused(const char *table, int slot, int *logged, {regs});"]
    for name, slots in re.findall(r"^ZL_EXPORT_TABLE\((\w+), (\d+)\)", (HERE / "shim.c").read_text(), flags=re.M):
        for slot in range(1, int(slots)):
            lines.append(f"static CUresult zl_slot_{name}_{slot}({regs}) {{ static int logged; "
                         f'return zl_slot_unused("{name}", {slot}, &logged, {args}); }}')
        stubs = ", ".join(f"(void *)zl_slot_{name}_{slot}" for slot in range(1, int(slots)))
        lines.append(f"static void *const zl_stubs_{name}[{slots}] = {{NULL, {stubs}}};")
    return lines


def _param_names(typedefs: str, protos: dict[str, str]) -> dict[str, list[str]]:
    """{symbol: its parameter names}, which its C wrapper passes on."""
    unit = pycparser.CParser().parse("\n".join(["typedef unsigned long size_t;", typedefs, *protos.values()]))
    out = {}
    for decl in unit.ext:
        if decl.name not in protos:
            continue
        params = decl.type.args.params if decl.type.args else []
        names = [p.name for p in params if not (p.name is None and getattr(p.type.type, "names", None) == ["void"])]
        if None in names:
            raise ValueError(f"driver_api.h: name every parameter of {decl.name}")
        out[decl.name] = names
    return out


def wrappers_c(typedefs: str, protos: dict[str, str]) -> str:
    """The exported entry points: each asks zl_enter (shim.c) whether the driver runs, then
    calls its cffi extern (zl_leave: a Ctrl-C it caught goes back to a Python host). cuInit is told apart because it alone reports a failed start-up as
    CUDA_ERROR_UNKNOWN (the others: CUDA_ERROR_NOT_INITIALIZED)."""
    names = _param_names(typedefs, protos)
    if RELEASED_AT_EXIT - protos.keys():
        raise ValueError(f"RELEASED_AT_EXIT names no entry point: {sorted(RELEASED_AT_EXIT - protos.keys())}")

    def not_running(symbol: str) -> str:
        if symbol in ERROR_TEXT_ENTRIES:
            code, pstr = names[symbol]
            return f"zl_error_answer({code}, {pstr}, {ERROR_TEXT_ENTRIES[symbol]})"
        return "zl_rc"

    def answer(symbol: str) -> str:
        if symbol in RELEASED_AT_EXIT:
            return f"(zl_python_host_exiting() ? 0 : {not_running(symbol)})"
        return not_running(symbol)

    def native_first(symbol: str) -> str:
        fast = NATIVE_FIRST.get(symbol)
        return f"if (!zl_rc && {fast.format(args=', '.join(names[symbol]))}) return 0; " if fast else ""
    return "\n".join(f"{proto[:-1]} {{ CUresult zl_rc = zl_enter({int(symbol == 'cuInit')}); {native_first(symbol)}"
                     f"return zl_rc ? {answer(symbol)} : zl_leave({EXTERN_PREFIX}{symbol}({', '.join(names[symbol])})); }}"
                     for symbol, proto in protos.items())


# Answered in C when the driver does not run (a Python host's interpreter finalising, a failed
# start, a forked child): CuPy frees its modules while Python exits, gets
# CUDA_ERROR_DEINITIALIZED and asks cuGetErrorName for its name; a pointer left unset there
# crashed it.
ERROR_TEXT_ENTRIES = {"cuGetErrorName": 1, "cuGetErrorString": 0}

# Releases made while a Python host's interpreter finalises (its objects' destructors: CuPy's
# modules and memory pools): the driver's Python cannot run then and the process is ending, so
# they succeed without it, as NVIDIA's driver, still running, answers them. A failure there
# became an exception no excepthook could print ("Error in sys.excepthook"). Every other call
# gets CUDA_ERROR_DEINITIALIZED, and a C host's calls after exit() still do.
RELEASED_AT_EXIT = frozenset({
    "cuModuleUnload", "cuLibraryUnload", "cuLinkDestroy", "cuMemFree_v2", "cuMemFreeHost", "cuMemFreeAsync",
    "cuMemHostUnregister", "cuMemRelease", "cuMemUnmap", "cuMemAddressFree", "cuMemPoolDestroy", "cuIpcCloseMemHandle",
    "cuStreamDestroy_v2", "cuEventDestroy_v2", "cuCtxDestroy_v2", "cuDevicePrimaryCtxRelease",
    "cuDevicePrimaryCtxRelease_v2", "cuGraphDestroy", "cuGraphExecDestroy", "cuTexObjectDestroy", "cuSurfObjectDestroy",
    "cuArrayDestroy", "cuMipmappedArrayDestroy", "cuDestroyExternalMemory", "cuUserObjectRelease",
})


def errors_c() -> str:
    """zl_error_text(code, name): zluda_py/curesult.py's names and descriptions in C, and
    zl_error_answer, cuGetErrorName/String's answer from them."""
    spec = importlib.util.spec_from_file_location("zl_errors", HERE.parent / "zluda_py" / "curesult.py")
    errors = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(errors)
    cases = "\n".join(f"    case {c}: return name ? {_c_string(errors.error_name(c))} : {_c_string(errors.error_string(c))};"
                      for c in errors.all_codes())
    return f"""static const char *zl_error_text(CUresult code, int name) {{
    switch ((int)code) {{
{cases}
    }}
    return NULL;
}}
static CUresult zl_error_answer(CUresult code, const char **pstr, int name) {{
    if (!pstr) return {errors.CUDA_ERROR_INVALID_VALUE};
    *pstr = zl_error_text(code, name);
    return *pstr ? {errors.CUDA_SUCCESS} : {errors.CUDA_ERROR_INVALID_VALUE};
}}"""


def extern_protos(protos: dict[str, str]) -> dict[str, str]:
    """The prototypes of the cffi externs behind the exported names."""
    return {s: p.replace(f" {s}(", f" {EXTERN_PREFIX}{s}(", 1) for s, p in protos.items()}


def _c_string(text: str) -> str:
    """A C string literal holding text (UTF-8; paths may hold any byte)."""
    body = "".join(chr(b) if 32 <= b < 127 and chr(b) not in '"\\?' else f"\\{b:03o}"
                   for b in text.encode("utf-8", "surrogateescape"))
    return f'"{body}"'


def site_dirs() -> list[str]:
    """Where the building interpreter installs packages: the embedded interpreter of any host
    appends them to sys.path, so that zluda_py's dependencies are found."""
    dirs = list(dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]))
    if site.ENABLE_USER_SITE and os.path.isdir(site.getusersitepackages()):
        dirs.append(site.getusersitepackages())
    return dirs


def bootstrap_code() -> str:
    """Python that shim.c runs in the host's interpreter before cffi starts (cffi's first act
    is importing _cffi_backend, which a foreign Python host may lack); `shim` is this library's
    path. Failures are reported by shim.c in one line."""
    return f"""
import importlib.util, os, site, sys
_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(shim))))  # <root>/zluda_py/_shim/
_dirs = {site_dirs()!r}
if os.path.basename(_root) in ("site-packages", "dist-packages"):
    _dirs.append(_root)  # an installed copy: its dependencies were installed beside it
for _d in _dirs:
    if os.path.isdir(_d) and _d not in sys.path:
        site.addsitedir(_d)  # appended (and its .pth files run): a Python host's own packages come first
_init = os.path.join(_root, "zluda_py", "__init__.py")
if "zluda_py" not in sys.modules and os.path.isfile(_init):
    # the package this library belongs to, whatever another zluda_py sys.path may hold
    _spec = importlib.util.spec_from_file_location("zluda_py", _init, submodule_search_locations=[os.path.dirname(_init)])
    _mod = importlib.util.module_from_spec(_spec)
    sys.modules["zluda_py"] = _mod
    _spec.loader.exec_module(_mod)
if "_cffi_backend" not in sys.modules:
    # cffi's Python package insists on its own backend's version: both from where this library
    # was built, even when the host has a _cffi_backend of its own (Debian's python3-cffi-backend)
    _path = sys.path
    sys.path = [_d for _d in _dirs if os.path.isdir(_d)] + _path
    try:
        import _cffi_backend, cffi
    finally:
        sys.path = _path
"""


def startup_c() -> str:
    """What shim.c's start-up needs from the build: the interpreter zluda-py is installed in
    (a C host's embedded Python is started as it) and the bootstrap code."""
    return "\n".join([f"static const char zl_build_python[] = {_c_string(sys.executable)};",
                      "static const char zl_bootstrap_code[] =",
                      *(f"    {_c_string(line + chr(10))}" for line in bootstrap_code().splitlines()),
                      "    ;"])


def init_code() -> str:
    """cffi's init code, run once after the bootstrap: attaches the driver's functions to the
    externs. It never raises: a failure is handed to shim.c, which reports it once and makes
    every entry point fail (cffi would print a traceback and let them all return 0, success)."""
    return f"""
import os, traceback
from {MODULE_NAME} import ffi, lib
try:
    from zluda_py.driver import shim_bridge
    shim_bridge.install(ffi, lib, {EXTERN_PREFIX!r})
except BaseException as e:
    if os.environ.get("ZLUDA_TRACE"):
        traceback.print_exc()
    lib.zluda_start_failed(f"{{type(e).__name__}}: {{e}}".encode(errors="replace"))
"""


def make_ffi() -> cffi.FFI:
    typedefs, _ = declarations()
    protos = exported_protos()
    ffi = cffi.FFI()
    ffi.cdef(typedefs)
    ffi.cdef(C_HELPERS)
    externs = extern_protos(protos)
    ffi.embedding_api("\n".join(externs.values()))
    source = "\n".join([typedefs, "\n".join(protos.values()), "\n".join(externs.values()), generated_c(protos),
                        startup_c(), (HERE / "shim.c").read_text(), (HERE / "native_launch.c").read_text(), errors_c(), wrappers_c(typedefs, protos)])
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


def _cuda_release() -> str:
    """The CUDA release of the newest PTX ISA the front end accepts ("13.5"), what the ptxas
    stand-in reports; read from zluda_py/ptx/versions.py without importing the package."""
    spec = importlib.util.spec_from_file_location("_zluda_versions", HERE.parent / "zluda_py" / "ptx" / "versions.py")
    versions = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(versions)
    version = versions.cuda_version(versions.NEWEST_ISA)
    return f"{version // 1000}.{version % 1000 // 10}"


def _build_c(name: str, sources: list[str], args: list[str], out_dir: Path) -> Path:
    """A plain C program or library (no Python), built with the C compiler Python was built with."""
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    with tempfile.TemporaryDirectory() as tmp:
        built = Path(tmp) / name
        cmd = [*cc, "-O2", "-Wall", *args, "-o", str(built), *(str(HERE / s) for s in sources), "-ldl", "-lpthread"]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError(f"building {name} failed: {' '.join(cmd)}\n{res.stderr}")
        _install(built, out_dir / name)
    return out_dir / name


def build_preload(out_dir: Path) -> Path:
    """The interposer `zluda run` preloads: dlopen of the driver, NVRTC and nvJitLink."""
    return _build_c(PRELOAD_NAME, ["preload.c", "toolchain.c", "ptx_cubin.c"], ["-shared", "-fPIC"], out_dir)


def build_ptxas(out_dir: Path) -> Path:
    return _build_c(PTXAS_NAME, ["ptxas.c", "ptx_cubin.c"], [f'-DZL_CUDA_RELEASE="{_cuda_release()}"'], out_dir)


def api_names() -> str:
    """`name implemented|stub` for every entry point cudart looks up (entry_points.txt: the
    newest row decides) and every symbol cuda.h makes programs link against; read by
    `zluda api coverage`."""
    protos = exported_protos()
    in_c = set(re.findall(r"^CUresult (cu\w+)\(", (HERE / "shim.c").read_text(), flags=re.M))
    status = {name: symbol is not None for name, _, symbol, _ in entry_points()}
    status.update({name: True for name in _c_entry_points()})
    for name in nvidia_exports.listed_exports():
        status.setdefault(name, name in protos or name in in_c)
    return "".join(f"{name} {'implemented' if ok else 'stub'}\n" for name, ok in sorted(status.items()))


def _c_entry_points() -> list[str]:
    """The names entry_points.txt marks `(C)`: implemented in shim.c."""
    return [line.split()[0] for line in (HERE / "entry_points.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#") and line.split()[2] == "(C)"]


def build(out_dir: str | os.PathLike) -> Path:
    """Build libcuda.so.1 (and the libcuda.so link), the interposer and the ptxas stand-in into out_dir;
    returns libcuda.so.1's path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        built = Path(make_ffi().compile(tmpdir=tmp, target=LIB_NAME, verbose=False))
        target = out_dir / LIB_NAME
        _install(built, target)
    build_preload(out_dir)
    build_ptxas(out_dir)
    (out_dir / "exports.txt").write_text("\n".join(exported_protos()) + "\n")
    (out_dir / "api_names.txt").write_text(api_names())
    link = out_dir / "libcuda.so"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(LIB_NAME)
    return target


if __name__ == "__main__":
    print(build(sys.argv[1] if len(sys.argv) > 1 else HERE.parent / "zluda_py" / "_shim"))
