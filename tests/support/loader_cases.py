"""Real parts for the loader-model tests: gcc-built libraries linked with DT_RPATH, DT_RUNPATH or neither, a
small C program that dlopens the top object and prints its /proc/self/maps (the truth), and the model's
prediction for the same process. Rows go to $CUDAMATRIX_LOADER_TABLE (JSON lines) when it is set, for
scripts/loader_table.py."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from cudamatrix.detect import libraries
from cudamatrix.ldso.linkmap import LinkMap, system_search

LEAF_C = "int which(void) { return VARIANT; }\n"
MID_C = "extern int which(void);\nint mid(void) { return which(); }\n"
TOP_C = "extern int mid(void);\nint top(void) { return mid(); }\n"
# a library that dlopens libleaf.so.1 itself (as torch's lazy NVRTC or TensorFlow's DSO loader do)
OPENER_C = "#include <dlfcn.h>\nvoid *open_leaf(void) { return dlopen(\"libleaf.so.1\", RTLD_NOW); }\n"
# the truth: dlopen the object named in argv[1] and print what the process maps
DRIVER_C = r"""
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); }
    if (h && argc > 2) { void *(*fn)(void) = (void *(*)(void))dlsym(h, argv[2]); if (fn) fn(); }
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    while (fgets(line, sizeof line, f)) fputs(line, stdout);
    return h ? 0 : 3;
}
"""


def kept_root(*sources: str | Path) -> Path:
    """A folder for gcc-built test objects that outlives the test session, named by a hash of the files that build
    them (an edit builds afresh). A mutation run starts one session per mutant; without it, gcc would spend seconds
    building the same objects every time."""
    digest = hashlib.sha256(b"".join(Path(s).read_bytes() for s in sources)).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"cudamatrix-test-objects-{os.getuid()}" / digest


def kept(folder: Path, build: Callable[[Path], dict[str, Path]]) -> dict[str, Path]:
    """``build(folder)``'s objects (name -> path), built once under :func:`kept_root` and read back afterwards;
    a session that finds a half-built folder (no record of the build) builds it again, one session at a time."""
    import fcntl

    folder.parent.mkdir(parents=True, exist_ok=True)
    done = folder / ".built.json"
    with open(folder.parent / f".{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            built = build(folder)
            (folder / ".built.tmp").write_text(json.dumps({k: str(v) for k, v in built.items()}))
            os.replace(folder / ".built.tmp", done)
    return {k: Path(v) for k, v in json.loads(done.read_text()).items()}


def gcc(args: list[str], cwd: Path) -> None:
    subprocess.run(["gcc", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def leaf(folder: Path, variant: int) -> Path:
    """``folder/libleaf.so.1`` (DT_SONAME libleaf.so.1); each variant is a different file."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "leaf.c").write_text(LEAF_C)
    gcc(["-shared", "-fPIC", f"-DVARIANT={variant}", "-Wl,-soname,libleaf.so.1", "-o", "libleaf.so.1", "leaf.c"],
        folder)
    return folder / "libleaf.so.1"


def linked(folder: Path, name: str, source: str, needed_dir: Path, needed: str, path_flags: list[str]) -> Path:
    """``folder/<name>`` needing ``needed`` (found at link time in ``needed_dir``), with the given -Wl flags."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.c").write_text(source)
    gcc(["-shared", "-fPIC", f"-Wl,-soname,{name}", "-o", name, f"{name}.c", f"-L{needed_dir}", f"-l:{needed}",
         *path_flags], folder)
    return folder / name


def rpath(value: str) -> list[str]:
    return [f"-Wl,--disable-new-dtags,-rpath,{value}"]


def runpath(value: str) -> list[str]:
    return [f"-Wl,--enable-new-dtags,-rpath,{value}"]


def driver(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "driver.c").write_text(DRIVER_C)
    gcc(["-o", "driver", "driver.c", "-ldl"], folder)
    return folder / "driver"


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    env.update(extra)
    return env


def opener(folder: Path, name: str, path_flags: list[str]) -> Path:
    """``folder/<name>``: needs nothing of ours, dlopens libleaf.so.1 when ``open_leaf`` is called."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.c").write_text(OPENER_C)
    gcc(["-shared", "-fPIC", f"-Wl,-soname,{name}", "-o", name, f"{name}.c", "-ldl", *path_flags], folder)
    return folder / name


def truth(program: Path, top: Path | str, env: dict[str, str], cwd: Path, call: str | None = None) -> list[str]:
    """Real paths of the files the child maps after dlopen(top) (and calling ``call`` in it)."""
    out = subprocess.run([str(program), str(top), *([call] if call else [])], env=env, cwd=cwd, capture_output=True, text=True, timeout=30)
    paths = []
    for line in out.stdout.splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/") and parts[5] not in paths:
            paths.append(parts[5])
    return paths


def predict(program: Path, top: Path | str, env: dict[str, str], cwd: Path, soname: str, dlopened: bool = False):
    """The model's Resolution for ``soname`` in the same process (the program dlopens ``top``; with
    ``dlopened``, ``top`` then dlopens ``soname`` itself, under its own search rules)."""
    entries, _ = libraries.run_ldconfig(10)
    lm = LinkMap(system_search(env, entries, str(program), cwd=str(cwd)))
    obj = lm.load(str(top), None)
    if dlopened:
        lm.load(soname, obj, how="dlopen", when="first use")
    return next((r for r in lm.resolutions if r.name == soname), None)


def mapped_with_soname(paths: list[str], basename: str) -> list[str]:
    return [p for p in paths if os.path.basename(p) == basename]


def record(case: str, predicted: str | None, rule: str | None, mapped: list[str], doctor: str | None = None,
           env: str | None = None, when: str = "import") -> None:
    """One row of the closing table (predicted vs mapped, and what doctor and env said where they ran), when a
    table is being collected."""
    target = os.environ.get("CUDAMATRIX_LOADER_TABLE")
    if not target:
        return
    with open(target, "a") as fh:
        fh.write(json.dumps({"case": case, "predicted": predicted, "rule": rule, "mapped": mapped, "doctor": doctor,
                             "env": env, "when": when}) + "\n")


def said(data: dict, framework: str, codes=("LIBRARY_SHADOWED", "LIBRARY_PRELOADED", "CUDNN_MISMATCH")) -> str:
    """doctor's library findings for ``framework`` in a few words, for the closing table."""
    found = [f"{f['code']} ({f['fix']})" for f in data["findings"] if f["code"] in codes and framework in f["title"]]
    return "; ".join(found) or "no library finding"


def env_said(changes: dict) -> str:
    """env's change (or its first advice line) in a few words, for the closing table."""
    return ", ".join(f"{k}={v!r}" for k, v in changes["env"].items()) or changes["advice"][0]


# the truth for the opened half: a Python child opens a real cuDNN shim (or NVRTC) by path with ctypes, makes
# the calls that open its sub-libraries, and prints what it maps. ``engines``: also run the graph library's
# cudnn::graph::LibraryLoader::loadLibraries_(), the loader a convolution runs (no GPU needed).
OPENED_PROBE = r"""
import ctypes, json, sys
path, what = sys.argv[1], sys.argv[2]
out = {"error": None}
try:
    lib = ctypes.CDLL(path)
    if what.startswith("cudnn"):
        lib.cudnnGetVersion.restype = ctypes.c_size_t
        out["version"] = int(lib.cudnnGetVersion())
    if what == "cudnn+engines":
        graph = next(l.split(None, 5)[5].strip() for l in open("/proc/self/maps") if "libcudnn_graph" in l)
        g = ctypes.CDLL(graph)
        inst = g._ZN5cudnn5graph13LibraryLoader11getInstanceEv
        inst.restype = ctypes.c_void_p
        load = g._ZN5cudnn5graph13LibraryLoader14loadLibraries_Ev
        load.restype, load.argtypes = ctypes.c_int, [ctypes.c_void_p]
        out["engines_status"] = load(inst())
    if what == "nvrtc":
        prog = ctypes.c_void_p()
        lib.nvrtcCreateProgram(ctypes.byref(prog), b'extern "C" __global__ void k(float *x) { x[0] = sinf(x[0]); }',
                               b"k.cu", 0, None, None)
        opts = (ctypes.c_char_p * 1)(b"--gpu-architecture=compute_80")
        out["compile_status"] = lib.nvrtcCompileProgram(prog, 1, opts)
except Exception as exc:
    out["error"] = "%s: %s" % (type(exc).__name__, exc)
maps = []
for line in open("/proc/self/maps"):
    parts = line.split(None, 5)
    if len(parts) == 6 and ("libcudnn" in parts[5] or "libnvrtc" in parts[5]) and parts[5].strip() not in maps:
        maps.append(parts[5].strip())
out["maps"] = maps
print(json.dumps(out))
"""


def opened_truth(path: Path | str, what: str, env: dict[str, str], cwd: Path | str = "/") -> dict:
    """What a process maps after opening ``path`` and calling it (``what``: "cudnn", "cudnn+engines", "nvrtc")."""
    import sys

    out = subprocess.run([sys.executable, "-c", OPENED_PROBE, str(path), what], env=env, cwd=cwd,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def opened_prediction(path: Path | str, env: dict[str, str], versions: dict[str, str], cwd: Path | str = "/"):
    """The model's link map for the same process: ``path`` opened, then what the openers of the data open."""
    import sys

    from cudamatrix.ldso.libpaths import open_libraries

    entries, _ = libraries.run_ldconfig(10)
    lm = LinkMap(system_search(env, entries, sys.executable, cwd=str(cwd)))
    assert lm.load(str(path), None) is not None
    unknown: dict[str, None] = {}
    open_libraries(lm, {os.path.realpath(k): v for k, v in versions.items()}, unknown)
    return lm, list(unknown)


def resolution(lm, soname: str):
    """The resolution that decided ``soname`` in the model's link map (None: never requested)."""
    return next((r for r in lm.resolutions if (r.soname or r.name) == soname), None)
