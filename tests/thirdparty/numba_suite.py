"""numba-cuda's own test suite (`numba.cuda.tests`, shipped in its wheel) under `zluda run`,
checked against a list of expected failures (numba_expected_failures.txt).

    python -m tests.thirdparty.numba_suite            # the CI subset (SUBSET)
    python -m tests.thirdparty.numba_suite --all      # every module (hours on 2 cores)
    python -m tests.thirdparty.numba_suite cudapy/test_math.py ...

The suite runs in one pytest process under `zluda run`, as numba-cuda's CI runs it (its
conftest's fixture comes from numba_plugin.py). A test fails the run when it fails and is not
listed, or when it is listed and passes (the list may only shrink: remove it). Skips are
numba-cuda's own decisions (simulator-only tests, missing optional packages, ...).
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from tests.thirdparty.clients import zluda_run

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = Path(__file__).with_name("numba_expected_failures.txt")
PACKAGE = "numba.cuda.tests"

# What CI runs: atomics, warp functions, cooperative groups, fp16 (and other intrinsics), math,
# shared and local memory, recursion, exceptions; in two shards of about equal time, which
# tests/thirdparty/test_numba_cuda_suite.py runs on two workers
SHARDS = (
    ("cudapy/test_atomics.py", "cudapy/test_cooperative_groups.py", "cudapy/test_localmem.py",
     "cudapy/test_recursion.py"),
    ("cudapy/test_intrinsics.py", "cudapy/test_warp_ops.py", "cudapy/test_math.py", "cudapy/test_sm.py",
     "cudapy/test_sm_creation.py", "cudapy/test_exception.py", "cudapy/test_userexc.py"),
)
SUBSET = tuple(m for shard in SHARDS for m in shard)


def tests_dir() -> Path:
    """numba/cuda/tests of the installed numba-cuda: pytest's rootdir, so that test ids read
    `cudapy/test_math.py::...` (without importing numba.cuda here)."""
    spec = importlib.util.find_spec("numba_cuda")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("numba-cuda is not installed (pip install -e '.[test]')")
    return Path(spec.submodule_search_locations[0]) / "numba" / "cuda" / "tests"


def load_expected(path: Path = EXPECTED) -> dict[str, str]:
    """{test id: reason}; lines are `ID  # reason`, the reason is required."""
    out = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        test, sep, reason = line.partition("#")
        if not sep or not reason.strip():
            raise ValueError(f"{path.name}:{n}: an expected failure needs its reason after '#'")
        out[test.strip()] = reason.strip()
    return out


@dataclass
class Outcome:
    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # id -> first line of the failure
    skipped: list[str] = field(default_factory=list)

    def against(self, expected: dict[str, str]) -> tuple[dict[str, str], list[str]]:
        """(unexpected failures, listed tests that passed)."""
        return ({t: m for t, m in self.failed.items() if t not in expected},
                [t for t in self.passed if t in expected])


def _test_id(case: ET.Element) -> str:
    """`cudapy/test_math.py::TestCudaMath::test_math_fabs` from junit's classname and name."""
    parts = case.get("classname", "").removeprefix(PACKAGE + ".").split(".")
    module, cls = parts[:-1], parts[-1:]
    if parts and parts[-1].startswith("test_"):  # a module-level test function: no class
        module, cls = parts, []
    return "::".join(["/".join(module) + ".py", *cls, case.get("name", "")])


def parse_junit(path: Path) -> Outcome:
    out = Outcome()
    for case in ET.parse(path).getroot().iter("testcase"):
        tid = _test_id(case)
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        if bad is not None:
            out.failed[tid] = (bad.get("message") or "").splitlines()[0][:200] if bad.get("message") else bad.tag
        elif case.find("skipped") is not None:
            out.skipped.append(tid)
        else:
            out.passed.append(tid)
    return out


def run(modules: list[str] | None, workdir: Path, timeout: float, log=subprocess.PIPE) -> Outcome:
    """Run these modules (paths under numba/cuda/tests; None: all of them) under `zluda run`;
    its output goes to log (a file; default: captured)."""
    targets = [PACKAGE] if modules is None else [f"{PACKAGE}.{m.removesuffix('.py').replace('/', '.')}" for m in modules]
    junit = workdir / "junit.xml"
    args = ["-m", "pytest", "-v", "-p", "no:cacheprovider", "-p", "tests.thirdparty.numba_plugin",
            "-o", "consider_namespace_packages=true", "--rootdir", str(tests_dir()), f"--junitxml={junit}",
            "--benchmark-disable", "--pyargs", *targets]
    # numba's cache stays where numba puts it: test_caching checks the __pycache__ beside its modules
    r = zluda_run(args, workdir, timeout, extra_path=ROOT, stdout=log, numba_cache=False)
    if not junit.exists():
        raise RuntimeError(f"numba-cuda's suite did not report (exit {r.returncode}):\n{(r.stdout or '')[-4000:]}")
    return parse_junit(junit)


def report(outcome: Outcome, expected: dict[str, str]) -> tuple[str, bool]:
    """A summary, and whether the run matches the list."""
    unexpected, fixed = outcome.against(expected)
    ran = len(outcome.passed) + len(outcome.failed)
    lines = [f"numba-cuda suite: {len(outcome.passed)} passed, {len(outcome.failed)} failed "
             f"({len(outcome.failed) - len(unexpected)} expected), {len(outcome.skipped)} skipped or xfailed by numba-cuda; "
             f"{100 * len(outcome.passed) / max(ran, 1):.1f} % of the tests that ran passed"]
    lines += [f"UNEXPECTED FAILURE {t}: {m}" for t, m in sorted(unexpected.items())]
    lines += [f"UNEXPECTED PASS {t} (remove it from {EXPECTED.name})" for t in fixed]
    return "\n".join(lines), not unexpected and not fixed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("modules", nargs="*", help="modules under numba/cuda/tests (default: the CI subset)")
    parser.add_argument("--all", action="store_true", help="the whole suite")
    parser.add_argument("--timeout", type=float, default=6 * 3600)
    args = parser.parse_args(argv)
    modules = None if args.all else (args.modules or list(SUBSET))
    with tempfile.TemporaryDirectory(prefix="numba-suite-") as tmp:
        outcome = run(modules, Path(tmp), args.timeout, log=sys.stdout)
    text, ok = report(outcome, load_expected())
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
