"""`zluda fatbin list|extract BINARY`: look inside CUDA binaries (this toolkit has no cuobjdump)."""

from __future__ import annotations

import argparse
import sys

from zluda_py.fatbin import FatbinError
from zluda_py.fatbin.listing import extract, scan, uncompressed_size

_COLUMNS = ("#", "section", "kind", "arch", "ptx", "compression", "stored", "size", "name")


def _list(args: argparse.Namespace) -> int:
    table = [_COLUMNS]
    found, damage = scan(args.binary)
    for r in found:
        e = r.entry
        table.append((f"{r.fatbin}.{e.index}", r.section, e.kind_name, r.arch, r.ptx_version,
                      e.compression, str(len(e.stored)), str(uncompressed_size(e)), e.name or "-"))
    widths = [max(len(row[i]) for row in table) for i in range(len(_COLUMNS))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    for e in damage:  # the entries above were read; these could not be
        print(f"zluda fatbin: error: {e}", file=sys.stderr)
    return 1 if damage else 0


def _extract(args: argparse.Namespace) -> int:
    written, damage = extract(args.binary, args.output)
    for path in written:
        print(path)
    for e in damage:
        print(f"zluda fatbin: error: {e}", file=sys.stderr)
    return 1 if damage else 0


def _guarded(fn):
    def run(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except (FatbinError, OSError, ValueError) as e:
            print(f"zluda fatbin: error: {e}", file=sys.stderr)
            return 1
    return run


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("fatbin", help="list or extract the PTX and cubins in a CUDA binary")
    sub = parser.add_subparsers(dest="fatbin_command", metavar="ACTION", required=True)
    p = sub.add_parser("list", help="one row per fatbin entry: kind, arch, PTX version, compression, sizes")
    p.add_argument("binary", help="host executable, shared library, object or .fatbin file")
    p.set_defaults(func=_guarded(_list))
    p = sub.add_parser("extract", help="write each entry, decompressed, to DIR "
                                       "as fatbin<F>-entry<I>-<arch>.<ptx|cubin|ltoir>")
    p.add_argument("binary", help="host executable, shared library, object or .fatbin file")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="output directory (created)")
    p.set_defaults(func=_guarded(_extract))
