"""The `zluda` command. Each subcommand lives in its own module with a `register(subparsers)`."""

from __future__ import annotations

import argparse
import importlib
import sys

# subcommand name -> module that registers it; modules are imported lazily so that
# `zluda fatbin` does not pay for importing LLVM.
SUBCOMMANDS = {
    "run": "zluda_py.cli.run_cmd",
    "ptx": "zluda_py.cli.ptx_cmd",
    "fatbin": "zluda_py.cli.fatbin_cmd",
    "cache": "zluda_py.cli.cache_cmd",
    "api": "zluda_py.cli.api_cmd",
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="zluda", description="CUDA driver for CPUs and AMD GPUs")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = argv[0] if argv and argv[0] in SUBCOMMANDS else None
    for name, modname in SUBCOMMANDS.items():
        if wanted in (None, name):
            try:
                importlib.import_module(modname).register(sub)
            except ModuleNotFoundError as e:
                if e.name != modname:
                    raise
                sub.add_parser(name, help="(not available in this build)")
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
