"""`zluda ptx check FILE...`: parse and check PTX files, print `FILE: ok` or the errors."""

from __future__ import annotations

import argparse
import sys


def register(subparsers) -> None:
    p = subparsers.add_parser("ptx", help="PTX tools")
    sub = p.add_subparsers(dest="ptx_command", metavar="ACTION")
    check = sub.add_parser("check", help="parse and check PTX files")
    check.add_argument("files", nargs="+", metavar="FILE")
    check.set_defaults(func=_check)


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
