"""What an NVIDIA driver reports, and when, for PTX modules with an error in a function the
program never uses: at cuModuleLoadData, at cuModuleGetFunction or at the launch, under
CUDA_MODULE_LOADING=LAZY and EAGER. This settles what a lazy loader may defer (issue 14):

    python3 -m tests.hardware.lazy_load_probe          # both modes, one child process each

One line per case and mode: `case mode: load R; get ok R; launch ok R; get bad R` with each
CUresult as `code NAME` (`-` where a step did not run), then the JIT log's first line.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys

from tests.hardware.cudadrv import CudaError, Driver

HEADER = ".version 8.0\n.target sm_80\n.address_size 64\n"
OK = """.visible .entry ok(.param .u64 out)
{
  .reg .b64 %rd<2>;
  .reg .b32 %r<2>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, 7;
  st.global.u32 [%rd1], %r1;
  ret;
}
"""


def bad_entry(body: str) -> str:
    return f""".visible .entry bad(.param .u64 out)
{{
  .reg .b64 %rd<2>;
  .reg .b32 %r<3>;
  .reg .f32 %f<2>;
  ld.param.u64 %rd1, [out];
{body}
  ret;
}}
"""


CASES = {
    "valid": OK + bad_entry("  st.global.u32 [%rd1], 1;"),
    "unknown_instruction": OK + bad_entry("  frobnicate.u32 %r1, %r2;"),
    "undeclared_register": OK + bad_entry("  add.u32 %r1, %r9, 1;"),
    "operand_type": OK + bad_entry("  add.f32 %f1, %rd1, %r1;"),
    "syntax": OK + bad_entry("  add.u32 %r1, %r2 1;"),
    "undeclared_callee": OK + bad_entry("  call.uni missing, ();"),
    "unknown_label": OK + bad_entry("  bra NOWHERE;"),
    "bad_func_unused": OK + ".func helper()\n{\n  frobnicate.u32 %r1;\n  ret;\n}\n",
    "bad_used_kernel": bad_entry("  frobnicate.u32 %r1, %r2;").replace("bad(", "ok("),
    "arch_too_new": OK + bad_entry("  redux.sync.min.f32 %f1, %f1, 0xffffffff;"),
    "target_sm_100": HEADER.replace("sm_80", "sm_100") + OK,
    "version_9_9": HEADER.replace("8.0", "9.9") + OK,
}


def _code(d: Driver, code: int) -> str:
    return f"{code} {d.error_name(code)}"


def probe(mode: str) -> None:
    d = Driver()
    for name, body in CASES.items():
        steps = []
        try:
            m = d.load(body if body.startswith(".version") else HEADER + body)
            steps.append("load 0")
        except CudaError as e:
            log = [line for line in str(e).splitlines() if "error" in line.lower()]
            print(f"{name} {mode}: load {_code(d, e.code)}; get ok -; launch ok -; get bad - | "
                  f"{log[0][:200] if log else ''}", flush=True)
            continue
        out = d.alloc(4)
        f = ctypes.c_void_p()
        code = d.lib.cuModuleGetFunction(ctypes.byref(f), m.handle, b"ok")
        steps.append(f"get ok {_code(d, code)}")
        steps.append(f"launch ok {_code(d, m.launch_status('ok', (1, 1, 1), (1, 1, 1), [ctypes.c_uint64(out)]))}"
                     if code == 0 else "launch ok -")
        g = ctypes.c_void_p()
        steps.append(f"get bad {_code(d, d.lib.cuModuleGetFunction(ctypes.byref(g), m.handle, b'bad'))}")
        print(f"{name} {mode}: " + "; ".join(steps), flush=True)
        d.free(out)
        d.lib.cuModuleUnload(m.handle)


def main() -> int:
    if len(sys.argv) > 1:
        probe(sys.argv[1])
        return 0
    for mode in ("LAZY", "EAGER"):
        env = {**os.environ, "CUDA_MODULE_LOADING": mode}
        p = subprocess.run([sys.executable, "-m", "tests.hardware.lazy_load_probe", mode], env=env,
                           capture_output=True, text=True, timeout=120)
        sys.stdout.write(p.stdout)
        if p.returncode:
            sys.stdout.write(f"# {mode}: rc {p.returncode}: {p.stderr[-500:]}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
