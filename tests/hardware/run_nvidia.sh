#!/bin/bash
# Ground truth from an NVIDIA GPU, for CPU-only CI: run from the repository root on a machine
# with NVIDIA's driver, nvcc, python3 with numpy, llvmlite and pytest(-xdist). Writes into
# $OUT (default /tmp/nvidia-out): machine.txt, launch_probe.txt, texture_probe.txt, fuzz.txt,
# conformance.txt, conformance.xml, programs.txt, and recheck.txt with records/
# (tests/hardware/recheck.txt), packed at the end into all.tar.xz.NN parts.
# Each step has a time limit so that the whole run ends in about eight minutes; README.md says
# what becomes golden data and where.
# STEPS picks steps (default all: probes approx fuzz conformance recheck programs ptx); FUZZ_SEEDS the fuzz
# range (default 0-20299); PROGRAM_MATCH a regex on program names; RECHECK_FAILED=1 records the
# tests that failed in the conformance step as well as those in recheck.txt.
set -u
OUT=${OUT:-/tmp/nvidia-out}
STEPS=" ${STEPS:-probes approx fuzz conformance recheck programs ptx} "
want() { [[ "$STEPS" == *" $1 "* ]]; }
B=/tmp/nvidia-build
mkdir -p "$OUT" "$B"
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start)) s] $*"; }

{ nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv
  nvcc --version | tail -2
  python3 -c "import sys, numpy, llvmlite; print(sys.version.split()[0], 'numpy', numpy.__version__, 'llvmlite', llvmlite.__version__)"
  uname -r
  lscpu | grep -E '^(Model name|Flags|CPU\(s\))'; } > "$OUT/machine.txt" 2>&1
stamp "machine: $(head -2 "$OUT/machine.txt" | tail -1)"

if want probes; then
# texture_probe.cu builds while the launch probe runs
nvcc -o $B/texture_probe tests/hardware/texture_probe.cu > $B/build_texture_probe.log 2>&1 &
texture_build=$!

# 1. what each caller gets for an invalid launch configuration, and what cudart got from the driver
gcc -shared -fPIC -o $B/interpose.so tests/hardware/interpose.c -ldl &&
  nvcc -o $B/launch_probe tests/hardware/launch_probe.cu &&
  LD_PRELOAD=$B/interpose.so timeout 60 $B/launch_probe > "$OUT/launch_probe.txt" 2>&1
stamp "launch probe: rc $?"

# 1b. texture and surface fetches in each geometry and mode, as the bits of each result
if wait $texture_build; then
  timeout 30 $B/texture_probe > "$OUT/texture_probe.txt" 2> "$OUT/texture_probe.err"
  stamp "texture probe: rc $? $(wc -l < "$OUT/texture_probe.txt") lines"
else
  cp $B/build_texture_probe.log "$OUT/texture_probe.err"; stamp "texture probe: build failed"
fi

# 1b'. the mipmap level each LOD and gradient selects (mipmap_probe.cu: level k holds k)
nvcc -o $B/mipmap_probe tests/hardware/mipmap_probe.cu > $B/build_mipmap_probe.log 2>&1 &&
  timeout 60 $B/mipmap_probe > "$OUT/mipmap_probe.txt" 2> "$OUT/mipmap_probe.err"
stamp "mipmap probe: rc $? $(wc -l < "$OUT/mipmap_probe.txt") lines"
nvcc -o $B/mipmap_implicit_probe tests/hardware/mipmap_implicit_probe.cu > $B/build_mipmap_implicit.log 2>&1 &&
  timeout 60 $B/mipmap_implicit_probe > "$OUT/mipmap_implicit_probe.txt" 2> "$OUT/mipmap_implicit_probe.err"
stamp "mipmap implicit probe: rc $? $(wc -l < "$OUT/mipmap_implicit_probe.txt") lines"
nvcc -o $B/mipmap_clamp_probe tests/hardware/mipmap_clamp_probe.cu > $B/build_mipmap_clamp.log 2>&1 &&
  timeout 60 $B/mipmap_clamp_probe > "$OUT/mipmap_clamp_probe.txt" 2> "$OUT/mipmap_clamp_probe.err"
stamp "mipmap clamp probe: rc $? $(wc -l < "$OUT/mipmap_clamp_probe.txt") lines"

# 1c. driver behaviours the documentation leaves open (memory pool limits, IPC in one process)
nvcc -o $B/api_probe tests/hardware/api_probe.cu && timeout 30 $B/api_probe > "$OUT/api_probe.txt" 2>&1
stamp "api probe: rc $?"
fi

# 2. the project's CUDA programs, built in the background meanwhile (name|sources|nvcc args|argv)
PROGRAMS="vector_add|vector_add.cu||
blocks|e2e_blocks.cu||
atomics|e2e_atomics.cu||
warp|e2e_warp.cu|-arch=sm_80|shuffles groups
grid_sync|e2e_grid_sync.cu||
streams|e2e_streams_threads.cu||streams managed threads errors
bad_launch|e2e_streams_threads.cu||bad-launch
ptds|e2e_streams_threads.cu|--default-stream per-thread|threads
symbols_printf|e2e_symbols_printf.cu||
rdc|e2e_rdc_main.cu e2e_rdc_lib.cu|-rdc=true|
func_barrier|e2e_func_barrier.cu||
static_free|e2e_static_free.cu||
lazy_kernels|e2e_lazy_kernels.cu||
runtime_api|e2e_runtime_api.cu||
textures|e2e_textures.cu||textures
textures_image|e2e_textures.cu||image
surfaces|e2e_textures.cu||surfaces
texture_forms|e2e_textures.cu||forms
mipmaps|e2e_mipmaps.cu||
graphs_captured|e2e_graphs.cu||capture
graphs_manual|e2e_graphs.cu||manual
graphs_errors|e2e_graphs.cu||errors
graphs_memory|e2e_graphs.cu||memory
memory_pools|e2e_memory_api.cu||pool
vmm|e2e_memory_api.cu||vmm
ipc|e2e_memory_api.cu||ipc
thrust|e2e_thrust.cu|-std=c++17|
async_barrier|e2e_async_barrier.cu|-arch=sm_90|
texture_slice|e2e_texture_slice.cu||
grid_sync_largest|e2e_grid_sync_limits.cu||largest
grid_sync_launch_ex|e2e_grid_sync_limits.cu||launch-ex
grid_sync_too_large|e2e_grid_sync_limits.cu||too-large
grid_sync_not_cooperative|e2e_grid_sync_limits.cu||not-cooperative
grid_sync_trap|e2e_grid_sync_limits.cu||trap
tensor_cores|e2e_tensor_cores.cu|-arch=sm_80|
managed_vars|e2e_managed_vars.cu||
device_launch|e2e_device_launch.cu|-arch=sm_80 -rdc=true -lcudadevrt|
graph_conditionals|e2e_graph_conditionals.cu|-arch=sm_80|"
build() {
  IFS='|' read -r name srcs args argv <<< "$1"
  [ -n "$name" ] || return 0
  (cd tests/cuda && nice nvcc $args $srcs -o $B/prog_$name > $B/build_$name.log 2>&1)
}
export -f build; export B
PROGRAMS=$(echo "$PROGRAMS" | grep -E "^(${PROGRAM_MATCH:-.*})\|")
want programs && { echo "$PROGRAMS" | xargs -P 6 -I{} bash -c 'build "$@"' _ {} & }
builds=${!:-}

# 2b. the .approx functions' largest errors over whole input ranges
if want approx; then
  timeout 120 python3 -m tests.hardware.approx_probe > "$OUT/approx_bounds.txt" 2>&1
  stamp "approx: rc $? $(wc -l < "$OUT/approx_bounds.txt") ranges"
fi

# 3. fuzz kernels (zluda_py.fuzz.generate) compiled by ptxas, their outcomes as digests
# (with $EXPECT, a file of the reference's digests: the buffers of launches that differ are kept)
if want fuzz; then
timeout 230 python3 -m tests.hardware.record_fuzz --seeds ${FUZZ_SEEDS:-0-20299} --out "$OUT/fuzz.txt" --ptxas --budget 110 --jobs 14 \
  ${EXPECT:+--expect "$EXPECT"} > "$OUT/fuzz_log.txt" 2>&1
stamp "fuzz: rc $? $(tail -1 "$OUT/fuzz_log.txt")"
fi

# 4. the conformance suite's kernels on this GPU, against the suite's independent references (the AMDGPU
# emulator's tests and the target sweep, which runs on the CPU or emulated targets only, are left out:
# they need tinygrad and pyelftools, which a GPU machine may lack)
if want conformance; then
timeout 200 python3 -m pytest -q -n 16 tests/conformance --target cuda -p no:cacheprovider \
  --ignore=tests/conformance/test_emulated.py --ignore=tests/conformance/test_target_sweep.py -o junit_family=xunit1 --junitxml="$OUT/conformance.xml" \
  > "$OUT/conformance.txt" 2>&1
stamp "conformance: rc $? $(tail -1 "$OUT/conformance.txt")"
fi

# 4b. the tests in recheck.txt again, each launch's PTX, inputs and outputs saved in $OUT/records
if want recheck && [ -s tests/hardware/recheck.txt ]; then
  mapfile -t ids < <({ grep -v '^#' tests/hardware/recheck.txt
    [ -n "${RECHECK_FAILED:-}" ] && grep -o '^FAILED [^ ]*' "$OUT/conformance.txt" | cut -d' ' -f2; } | grep . | sort -u)
  ZLUDA_HW_RECORD="$OUT/records" timeout 120 python3 -m pytest -q -n 16 --target cuda -p no:cacheprovider \
    "${ids[@]}" > "$OUT/recheck.txt" 2>&1
  stamp "recheck: rc $? $(tail -1 "$OUT/recheck.txt"), $(ls "$OUT/records" 2>/dev/null | wc -l) records"
fi

# 5. run the programs
if want programs; then
wait $builds
: > "$OUT/programs.txt"
echo "$PROGRAMS" | while IFS='|' read -r name srcs args argv; do
  [ -n "$name" ] || continue
  if [ ! -x $B/prog_$name ]; then
    { echo "=== $name: build failed"; tail -5 $B/build_$name.log; } >> "$OUT/programs.txt"; continue
  fi
  timeout 60 $B/prog_$name $argv > $B/run.out 2> $B/run.err
  rc=$?
  mkdir -p "$OUT/programs" && cp $B/run.out "$OUT/programs/$name.out" && cp $B/run.err "$OUT/programs/$name.err"
  { echo "=== $name ($srcs $args; argv: $argv): rc $rc"; tail -c 3000 $B/run.out; echo "--- stderr"; tail -c 2000 $B/run.err; } >> "$OUT/programs.txt"
done
stamp "programs: $(grep -c '^===' "$OUT/programs.txt") run, $(grep -c ': rc 0$' "$OUT/programs.txt") exit 0"
fi

# 5b. hand-written kernels that show a compiler's behaviour, compiled by ptxas and by the driver's JIT
if want ptx; then
  for mode in --ptxas ""; do
    timeout 30 python3 -m tests.hardware.run_ptx tests/hardware/ptxas_recursion_uniform_loop.ptx --words 288 $mode
  done > "$OUT/ptx_uniform_loop.txt" 2>&1
  stamp "ptx: rc $?"
fi

# 6. pack: the device tool brings back at most 8 files of 16 MiB, so everything travels as one
# xz-compressed tar, split into 15 MiB parts (cat all.tar.xz.* | tar -xJ)
mkdir -p $B/pack && mv "$OUT"/* $B/pack/ && tar -C $B/pack -cf - . | xz -T0 -6 | split -b 15m -d - "$OUT/all.tar.xz."
stamp "packed: $(ls "$OUT" | wc -l) parts, $(du -sh "$OUT" | cut -f1)"
