"""binutils' c++filt on mangled C++ symbol names (``_ZN3c104cuda9SetDeviceEa`` -> ``c10::cuda::SetDevice(signed
char)``): the names an installed extension needs of torch (:mod:`.extensions`) and those a pasted "undefined
symbol" error names (:mod:`cudamatrix.pastes.extensions`), one run for many names, through :func:`cudamatrix.proc.run`.
"""
from __future__ import annotations

from cudamatrix import proc
from cudamatrix.safe.text import lazy

_WORD = lazy(r"[A-Za-z0-9_$.]+")  # what c++filt reads as one symbol in its input (binutils cxxfilt.c)
_ARGV_BYTES = 64 << 10  # a batch of names as c++filt's arguments (Linux takes 128 KiB an argument, 2 MiB in all)


def demangled(names: list[str], timeout: float) -> list[str] | None:
    """c++filt's reading of each of ``names``, in order (a name it cannot read comes back as it is); None where
    c++filt is not installed or did not answer a line per name. The program is found on PATH by the kernel's exec,
    as a shell finds it (shutil.which, 3 ms of imports, would search the same folders first)."""
    if not names:
        return None
    lines = filtered("c++filt", names, timeout)
    return lines if len(lines) == len(names) else None


def filtered(tool: str, names: list[str], timeout: float) -> list[str]:
    """c++filt's output lines for ``names``: given as its arguments, in batches of at most :data:`_ARGV_BYTES`, it
    writes its answer once as it exits; read from its input it writes and flushes each line (for 40 extensions
    600 writes, each waking a reader thread here, issue #39). Its reading of a name as an argument is its reading of
    that name as a line when the name is one word of symbol characters (7,254 torch symbol names compared); a name
    that is not one word, or longer than a batch, is given on its input as before, with all the others."""
    if all(_WORD.fullmatch(n) and len(n) < _ARGV_BYTES for n in names):
        batches: list[list[str]] = [[]]
        size = 0
        for name in names:
            if batches[-1] and size + len(name) + 1 > _ARGV_BYTES:
                batches.append([])
                size = 0
            batches[-1].append(name)
            size += len(name) + 1
        lines: list[str] = []
        for batch in batches:
            result = proc.run([tool, "--", *batch], timeout=timeout)
            if not result.ok:
                return []
            lines += result.stdout.splitlines()
        return lines
    result = proc.run([tool], input="\n".join(names) + "\n", timeout=timeout)
    return result.stdout.splitlines() if result.ok else []
