"""Listings of CUDA library files people paste: ``ldd`` of a framework's library, ``ls -l`` and ``ls`` of a library
folder, and ``ldconfig -v`` (its "soname -> file" lines).

``ldd``: "libcudart.so.9.0 => not found" is a library the loader cannot find (a :class:`ToolMessage`, as the
loader's own error would be); "libcudnn.so.7 => /usr/lib/x86_64-linux-gnu/libcudnn.so.7 (0x...)" the copy it
picks. ``ls -l``: a symlink "libcudart.so.12 -> libcudart.so.12.4.127" is a tracked library's SONAME and the file
it names (its version). ``ls``: the files of a folder; a cuDNN sub-library's full version ("libcudnn_adv_infer.so.
8.1.1") is cuDNN's. ``ldconfig -v``: "\\tlibcuda.so.1 -> libcuda.so.515.57" under its folder's "/usr/lib:" line.
Only tracked libraries (:func:`~cudamatrix.detect.libraries.library_name`) become libraries; every line of a
listing is claimed. Lines are cut with str methods.
"""
from __future__ import annotations

from cudamatrix.detect.libraries import library_name, version_from_filename
from cudamatrix.detect.text import Paste, read_anchored
from cudamatrix.models import Environment, Library, Note, ToolMessage

_NOT_FOUND = " => not found"
_PERMS = frozenset("-rwxsStTl")


def read(paste: Paste, env: Environment) -> bool:
    """Every listing above; each reads only lines no other reader took."""
    return read_anchored(paste, env, _READERS)


def read_ldd(paste: Paste, env: Environment) -> bool:
    """``ldd``'s lines: "name => not found", "name => /path (0xADDRESS)", "linux-vdso.so.1 (0x...)"."""
    rows = [(i, row) for i in paste.having("=>") if paste.free(i) and (row := _ldd_row(paste.lines[i])) is not None]
    if not any(path is None or "libcu" in soname for _, (soname, path) in rows):
        return False  # no CUDA library among them: not what is read here
    said: set[str | None] = {lib.path for lib in env.libraries}  # ldd of several objects repeats its lines
    for i, (soname, path) in rows:
        if (path or soname) not in said:
            _ldd_fact(env, soname, path, paste.lines[i].strip()[:300])
        said.add(path or soname)
        paste.claim(i, "ldd")
    for i in paste.having(" (0x"):  # linux-vdso.so.1 (0x...), /lib64/ld-linux-x86-64.so.2 (0x...)
        words = [w for w in paste.lines[i].split() if w != "=>"]  # "linux-vdso.so.1 =>  (0x...)" in older ldd
        if paste.free(i) and len(words) == 2 and ".so" in words[0] and words[1].startswith("(0x"):
            paste.claim(i, "ldd")
    return True


def _ldd_fact(env: Environment, soname: str, path: str | None, text: str) -> None:
    """A library ldd cannot find (a CUDA one: said as the loader would) or the copy it picks (a tracked one)."""
    name = library_name(soname)
    if path is None and (name or _cuda_name(soname)):
        env.messages.append(ToolMessage(tool="ldd", kind="library_missing", soname=soname,
                                        library=name or _cuda_name(soname), text=text))
    elif path and name:
        env.libraries.append(Library(name=name, soname=soname, path=path, origin="report:ldd",
                                     version=version_from_filename(path.rpartition("/")[2]), loaded_first=True))


def _ldd_row(line: str) -> tuple[str, str | None] | None:
    """("libcudart.so.9.0", None) for "libcudart.so.9.0 => not found"; (soname, path) for "soname => /path (0x..)"."""
    name, arrow, rest = line.strip().partition(" => ")
    if not arrow or " " in name or ".so" not in name:
        return None
    rest = rest.strip()
    if rest == "not found":
        return name, None
    words = rest.split()
    if len(words) == 2 and words[0].startswith("/") and words[1].startswith("(0x"):
        return name, words[0]
    return None


def _cuda_name(soname: str) -> str | None:
    """A CUDA library the tracked ones leave out ("libcufft.so.9.0" -> "cufft"): worth saying it is missing."""
    base = soname[3:].partition(".so")[0] if soname.startswith("lib") else ""
    return base if base.startswith(("cu", "nvrtc", "nvjitlink", "nvToolsExt")) else None


def read_links(paste: Paste, env: Environment) -> bool:
    """``ls -l``'s symlinks ("lrwxrwxrwx 1 root root 21 May 14 17:49 libcudart.so.12 -> libcudart.so.12.4.127") and
    its plain files, and ``ldconfig -v``'s "\\tlibcuda.so.1 -> libcuda.so.515.57" lines (a folder's "/usr/lib:" line
    before them names where)."""
    found = False
    folder = ""
    seen = {(lib.soname, lib.path) for lib in env.libraries}
    for i in paste.having(" -> ", ":"):
        body = paste.lines[i].strip().lstrip("`").strip()  # "```\\tlibcudart.so.11.0 -> ...": a fence typed on the row
        if body.endswith(":") and body.startswith("/") and " " not in body:
            folder = body[:-1] + "/"
            continue
        link = _link(body) if " -> " in body and paste.free(i) else None
        if link is None:
            continue
        soname, target, listing = link
        if (soname, folder + target) not in seen:
            seen.add((soname, folder + target))
            _link_library(env, soname, target, "report:ls" if listing else "report:ldconfig", folder)
        paste.claim(i, "ls -l" if listing else "ldconfig -v")
        found = True
    if found:
        for i in paste.having(".so"):
            words = paste.lines[i].split()
            if paste.free(i) and len(words) >= 8 and _is_mode(words[0]) and words[-1].startswith("lib"):
                paste.claim(i, "ls -l")
    return found


def _link(body: str) -> tuple[str, str, bool] | None:
    """(soname, target, whether it is an ls -l row) of "lrwxrwxrwx ... libX.so.12 -> libX.so.12.4.127" or
    ldconfig -v's "libX.so.12 -> libX.so.12.4.127"; None for any other line."""
    head, _, target = body.rpartition(" -> ")
    words = head.split()
    listing = len(words) >= 8 and _is_mode(words[0])
    target = target.strip()
    if not words or not (listing or len(words) == 1) or " " in target:
        return None
    soname, target = words[-1], target.lstrip("./")
    if not soname.startswith("lib") or ".so" not in soname or not target.startswith("lib"):
        return None
    return soname, target, listing


def _is_mode(word: str) -> bool:
    """"lrwxrwxrwx", "-rw-r--r--", "-rwxrwxr-x.": ls -l's mode column."""
    return len(word) in (10, 11) and word[0] in "-l" and set(word[1:10]) <= _PERMS


def _link_library(env: Environment, soname: str, target: str, origin: str, folder: str) -> None:
    name = library_name(soname)
    version = version_from_filename(target)
    if name is None or version_from_filename(soname) == version and version is not None:
        return  # not tracked, or the full-version file itself (a link "libX.so -> libX.so.12.4.127" is no SONAME)
    if soname.endswith(".so"):
        return
    env.libraries.append(Library(name=name, soname=soname, path=folder + target, origin=origin, version=version))


def read_ls(paste: Paste, env: Environment) -> bool:
    """``ls`` of a CUDA library folder (one or several columns): lines whose every word is a library file. A
    cuDNN library's full version ("libcudnn_adv_infer.so.8.1.1") is cuDNN's."""
    found = False
    cudnn: list[str] = []
    for i in paste.having("libcu"):
        words = paste.lines[i].split()
        if not paste.free(i) or not words or not all(_library_file(w) for w in words):
            continue
        for word in words:
            if word.startswith("libcudnn") and ".so." in word:
                version = word.partition(".so.")[2]
                if version.count(".") == 2 and version.replace(".", "").isdigit() and version not in cudnn:
                    cudnn.append(version)
        paste.claim(i, "ls")
        found = True
    for version in cudnn:
        env.notes.append(Note("report", f"cuDNN {version} named in the paste (the files an ls lists), of no "
                                        "framework it could be tied to"))
    return found


def _library_file(word: str) -> bool:
    """"libcudart.so.11.0", "libcublas_static.a", "stubs": what a CUDA library folder holds."""
    return word == "stubs" or word.startswith("lib") and (".so" in word or word.endswith(".a"))


# (anchors, reader): a reader runs only when the paste holds one of its anchors
_READERS = ((("=>",), read_ldd), ((" -> ",), read_links), (("libcu",), read_ls))
