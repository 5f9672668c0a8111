"""`zluda ptx check FILE...`: parse and check PTX files, print `FILE: ok` or the errors.
`zluda ptx coverage [--json] [--unsupported]`: every instruction form of ptx_grammar/ and
whether the compiler translates it."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Callable


def register(subparsers) -> None:
    p = subparsers.add_parser("ptx", help="PTX tools")
    sub = p.add_subparsers(dest="ptx_command", metavar="ACTION")
    check = sub.add_parser("check", help="parse and check PTX files")
    check.add_argument("files", nargs="+", metavar="FILE")
    check.set_defaults(func=_check)
    cov = sub.add_parser("coverage", help="which instruction forms the compiler translates")
    cov.add_argument("--json", action="store_true", help="one JSON object: forms and totals")
    cov.add_argument("--unsupported", action="store_true",
                     help="list only the forms not fully supported")
    cov.set_defaults(func=_coverage)


def _check(args: argparse.Namespace) -> int:
    from zluda_py.ptx import PtxError, PtxErrors, parse

    failed = 0
    for path in args.files:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError as e:
            print(f"{path}: error: {e.strerror}", file=sys.stderr)
            failed += 1
            continue
        try:
            parse(text, path)
        except PtxErrors as e:
            print(e, file=sys.stderr)
            print(f"{path}: {len(e.errors)} errors", file=sys.stderr)
            failed += 1
        except PtxError as e:
            print(e, file=sys.stderr)
            failed += 1
        else:
            print(f"{path}: ok")
    return 1 if failed else 0


def coverage_rows(support: Callable[[str, tuple[str, ...]], str | None]) -> list[dict]:
    """One row per grammar form: its modifier combinations asked of `support` (None: not
    translated, else how). status is "yes" (all), "partial" or "no"; sampled is True when
    the form has too many combinations and a sample covering every modifier value was asked."""
    from zluda_py.ptx import grammar

    rows = []
    for name in sorted(grammar.opcodes()):
        for form in grammar.opcodes()[name].forms:
            combos, complete = grammar.expand(form)
            answers = [support(name, mods) for mods in combos]
            hits = [a for a in answers if a is not None]
            rows.append({
                "opcode": name, "form": form.syntax, "ptx": "%d.%d" % form.ptx, "sm": form.sm,
                "status": "yes" if len(hits) == len(answers) else "partial" if hits else "no",
                "supported": len(hits), "combinations": len(answers), "sampled": not complete,
                "how": sorted(set(hits)),
            })
    return rows


def _coverage(args: argparse.Namespace) -> int:
    from zluda_py.compiler.coverage import cpu_support

    rows = coverage_rows(cpu_support)
    totals = {s: sum(r["status"] == s for r in rows) for s in ("yes", "partial", "no")}
    totals["forms"] = len(rows)
    shown = [r for r in rows if r["status"] != "yes"] if args.unsupported else rows
    if args.json:
        print(json.dumps({"target": "cpu", "totals": totals, "forms": shown}, indent=1))
        return 0
    width = max((len(r["opcode"]) for r in shown), default=6)
    print(f"{'opcode':{width}}  status   combos  how        form")
    for r in shown:
        combos = f"{r['supported']}/{r['combinations']}" + ("~" if r["sampled"] else "")
        how = ",".join(r["how"]) or "-"
        print(f"{r['opcode']:{width}}  {r['status']:7}  {combos:>6}  {how:9}  {r['form']}")
    print(f"\n{totals['forms']} forms on the cpu target: {totals['yes']} supported, "
          f"{totals['partial']} partly, {totals['no']} not "
          "(~: a sample covering every modifier value; target: per opcode)")
    return 0
