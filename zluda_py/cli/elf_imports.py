"""Whether an ELF program can load libraries at run time: it, or a library it needs, calls
`dlopen`. Interpreters (python, java, node) reach libcuda that way, through the frameworks
they load, so `zluda run` must not call them "not a CUDA program"."""

from __future__ import annotations

import glob
import os

from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

# where the dynamic loader looks after RUNPATH and LD_LIBRARY_PATH (ld.so.conf adds more)
DEFAULT_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib",
                "/usr/local/lib")
MAX_LIBRARIES = 64  # a program's direct needs; bounds the work on hostile input


def _config_dirs() -> list[str]:
    dirs = []
    for conf in ["/etc/ld.so.conf", *sorted(glob.glob("/etc/ld.so.conf.d/*.conf"))]:
        try:
            with open(conf) as f:
                dirs += [line.strip() for line in f if line.strip().startswith("/")]
        except OSError:
            continue
    return dirs


def _dynamic(elf: ELFFile) -> tuple[list[str], list[str], bool]:
    """(DT_NEEDED names, RUNPATH/RPATH directories, whether `dlopen` is an undefined import)."""
    needed: list[str] = []
    runpath: list[str] = []
    for section in elf.iter_sections():
        if isinstance(section, DynamicSection):
            for tag in section.iter_tags():
                if tag.entry.d_tag == "DT_NEEDED":
                    needed.append(tag.needed)
                elif tag.entry.d_tag in ("DT_RUNPATH", "DT_RPATH"):
                    runpath += (tag.runpath if tag.entry.d_tag == "DT_RUNPATH" else tag.rpath).split(":")
    dynsym = elf.get_section_by_name(".dynsym")
    calls = isinstance(dynsym, SymbolTableSection) and any(
        sym.name == "dlopen" and sym["st_shndx"] == "SHN_UNDEF" for sym in dynsym.iter_symbols())
    return needed, runpath, calls


def _read_dynamic(path: str) -> tuple[list[str], list[str], bool]:
    with open(path, "rb") as f:
        return _dynamic(ELFFile(f))


def loads_libraries(path: str) -> bool:
    """True when the program or one of the libraries it names calls `dlopen`; also when the
    file cannot be read as ELF (the benefit of the doubt)."""
    try:
        needed, runpath, calls = _read_dynamic(path)
    except Exception:  # pyelftools raises many types on malformed input
        return True
    if calls:
        return True
    origin = os.path.dirname(os.path.abspath(path))
    dirs = [d.replace("$ORIGIN", origin).replace("${ORIGIN}", origin) for d in runpath if d]
    dirs += [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    dirs += [*DEFAULT_DIRS, *_config_dirs()]
    for name in needed[:MAX_LIBRARIES]:
        found = next((os.path.join(d, name) for d in dirs if os.path.isfile(os.path.join(d, name))), None)
        if found is None:
            continue
        try:
            if _read_dynamic(found)[2]:
                return True
        except Exception:
            continue
    return False
