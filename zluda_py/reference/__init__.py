"""An independent per-thread PTX interpreter: the oracle for the CPU target's control flow,
memory and warp collectives (docs/reference.md).

`run(ptx, kernel, grid, block, args, ...)` takes arguments as `CompiledModule.launch` does:
numpy arrays are device buffers (updated in place), numpy/Python scalars are by value.
"""

from __future__ import annotations

from zluda_py.reference.collectives import Undefined
from zluda_py.reference.decode import load
from zluda_py.reference.executor import Launch, bind_arguments
from zluda_py.reference.memory import ReferenceFault

__all__ = ["run", "ReferenceFault", "Undefined"]


def _dims(d) -> tuple[int, int, int]:
    d = (d,) if isinstance(d, int) else tuple(int(x) for x in d)
    return (d + (1, 1))[:3]  # type: ignore[return-value]


def run(ptx: str | list[str], kernel: str, grid: tuple[int, ...], block: tuple[int, ...], args: list,
        shared_mem: int = 0, stack_size: int = 1024, max_steps: int = 10_000_000) -> None:
    """Run `kernel` over the grid; raises ReferenceFault (700 illegal address, 719 trap or
    stack overflow, 702 step limit or deadlock; `Undefined`, -1, where PTX defines no result)
    and NotImplementedError for a form the reference does not model."""
    program = load(ptx if isinstance(ptx, str) else tuple(ptx))
    func, params, size = program.kernel(kernel)
    grid3, block3 = _dims(grid), _dims(block)
    launch = Launch(program, grid3, block3, shared_mem, max(stack_size, program.static_stack(kernel)), max_steps)
    bind_arguments(launch, params, size, args)
    gx, gy, gz = grid3
    for z in range(gz):
        for y in range(gy):
            for x in range(gx):
                launch.run_block((x, y, z), func)
