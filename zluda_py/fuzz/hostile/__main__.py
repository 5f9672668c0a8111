"""`python -m zluda_py.fuzz.hostile --seeds A-B [--jobs N] [--corpus DIR]... [--json FILE]`:
hostile inputs through the driver, a summary table per category (docs/hostile.md). Exit
status 1 when a case crashed, hung or was answered wrongly."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

DEFAULT_CORPUS = [Path("tests/hostile/corpus"), Path("tests/ptx_corpus")]


def main(argv: list[str] | None = None) -> int:
    from zluda_py.fuzz.hostile import cases, runner

    ap = argparse.ArgumentParser(prog="python -m zluda_py.fuzz.hostile", description=__doc__)
    ap.add_argument("--seeds", required=True, help="seed range A-B (inclusive)")
    ap.add_argument("--jobs", type=int, default=1, help="cases running at once")
    ap.add_argument("--corpus", type=Path, action="append",
                    help="directory of real .ptx and .fatbin files to mutate (repeatable; default: "
                         + ", ".join(map(str, DEFAULT_CORPUS)) + ")")
    ap.add_argument("--memory", type=int, default=runner.Limits.memory >> 20, help="MiB of address space per case")
    ap.add_argument("--cpu", type=int, default=runner.Limits.cpu, help="seconds of CPU per case")
    ap.add_argument("--wall", type=float, default=runner.Limits.wall, help="seconds of wall time per case")
    ap.add_argument("--json", type=Path, help="write the summary and every failure here")
    ap.add_argument("-v", "--verbose", action="store_true", help="a line per case")
    args = ap.parse_args(argv)
    first, _, last = args.seeds.partition("-")
    seeds = range(int(first), int(last or first) + 1)
    corpus = cases.Corpus.load(args.corpus or DEFAULT_CORPUS)
    limits = runner.Limits(args.memory << 20, args.cpu, args.wall)

    runner.prepare()
    start = time.monotonic()
    results = []
    for r in runner.run((cases.case(s, corpus) for s in seeds), args.jobs, limits):
        results.append(r)
        if args.verbose or r.outcome in ("crash", "hang", "wrong"):
            print(f"seed {r.case.seed} {r.case.category} ({r.case.what[:120]}; {r.case.entry}): {r.outcome}"
                  f" {r.detail[:300]} [{r.cpu:.2f} s, {r.rss >> 20} MiB]", flush=True)
    table = runner.summary(results)
    columns = ["cases", *runner.OUTCOMES, "max_cpu_s", "max_rss_mib"]
    total = {c: sum(row[c] for row in table.values()) for c in columns[:-2]}
    total |= {c: max(row[c] for row in table.values()) for c in columns[-2:]}
    print(f"\n{'category':<12}" + "".join(f"{c:>12}" for c in columns))
    for name, row in [*sorted(table.items(), key=lambda kv: cases.CATEGORIES.index(kv[0])), ("total", total)]:
        print(f"{name:<12}" + "".join(f"{row[c]:>12}" for c in columns))
    print(f"\n{len(results)} cases, seeds {seeds.start}-{seeds.stop - 1}, {time.monotonic() - start:.0f} s "
          f"with {args.jobs} job(s)")
    failures = [r for r in results if r.outcome in ("crash", "hang", "wrong")]
    if args.json:
        args.json.write_text(json.dumps({
            "summary": table, "total": total,
            "failures": [{"seed": r.case.seed, "category": r.case.category, "what": r.case.what,
                          "entry": r.case.entry, "outcome": r.outcome, "detail": r.detail} for r in failures],
        }, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
