"""The loader model on the real torch CUDA wheel (torch 2.14.1 with its nvidia-* wheels): ``import torch`` maps
its CUDA libraries without a GPU, so /proc/self/maps after the import is the truth. A stand-in
``libcudnn.so.9`` (gcc-built, cuDNN 9.1.0 by its own cudnnGetVersion) goes on LD_LIBRARY_PATH — torch still maps
the wheel's copy, because libtorch_cuda.so carries DT_RPATH, searched before LD_LIBRARY_PATH — and into
LD_PRELOAD — the stand-in is mapped and the import fails. doctor, env and verify must say the same.

The torch environment is made once per CI run by .ci/run and named by $CUDAMATRIX_TORCH_CUDA_PYTHON.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.fakes import CUDNN_C, build_lib, child_env, spawn_cli
from support.loader_cases import env_said, record, said

from cudamatrix.ldso import libpaths
from cudamatrix.ldso.paths import read_text
from cudamatrix.models import Environment, Framework, Library, LibraryLoad, Note

TORCH_PY = os.environ.get("CUDAMATRIX_TORCH_CUDA_PYTHON")

if not TORCH_PY and os.environ.get("CI") == "true":
    pytest.fail("CI=true but CUDAMATRIX_TORCH_CUDA_PYTHON is not set: .ci/run makes the torch CUDA venv",
                pytrace=False)
_TORCH_MARKS = [pytest.mark.installs,
                pytest.mark.skipif(not TORCH_PY, reason="CUDAMATRIX_TORCH_CUDA_PYTHON is not set (outside CI): "
                                                        "run .ci/run, or point it at a venv with torch==2.14.1")]


def needs_torch(test):
    """The tests that import the real torch CUDA wheel in a child (the in-process tests at the end need none)."""
    for mark in _TORCH_MARKS:
        test = mark(test)
    return test

# what the child prints: every mapped file after `import torch` (or after it failed)
PROBE = ("import sys\ntry:\n    import torch\n    ok = 'imported'\nexcept BaseException as e:\n    ok = repr(e)\n"
         "print('RESULT', ok)\n"
         "for l in open('/proc/self/maps'):\n    p = l.split(None, 5)\n"
         "    if len(p) == 6 and p[5].startswith('/'): print('MAP', p[5].strip())\n")


@pytest.fixture(scope="module")
def standin(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("standin")
    return build_lib(folder, "libcudnn.so.9", CUDNN_C, VERSION=90100)


def site_packages() -> str:
    out = subprocess.run([TORCH_PY, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, timeout=60)
    return out.stdout.strip()


def import_torch(env: dict[str, str]) -> tuple[str, list[str]]:
    out = subprocess.run([TORCH_PY, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300, cwd="/")
    result = next((line[7:] for line in out.stdout.splitlines() if line.startswith("RESULT ")), out.stderr[-500:])
    maps = []
    for line in out.stdout.splitlines():
        if line.startswith("MAP ") and line[4:] not in maps:
            maps.append(line[4:])
    return result, maps


def cudnn_mapped(maps: list[str]) -> list[str]:
    return [p for p in maps if re.search(r"/libcudnn\.so\.9$", p)]


def doctor(env: dict[str, str]) -> dict:
    out = spawn_cli(["doctor", "--python", TORCH_PY, "--json"], env=env, timeout=300)
    assert out.returncode in (0, 1), out.stderr.decode()[-2000:]
    return json.loads(out.stdout)["data"]


def cli_env(env: dict[str, str]) -> tuple[dict, str]:
    out = spawn_cli(["env", "--python", TORCH_PY, "--json"], env=env, timeout=300)
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    human = spawn_cli(["env", "--python", TORCH_PY], env=env, timeout=300)
    return json.loads(out.stdout)["data"], human.stdout.decode() + human.stderr.decode()


def verify(env: dict[str, str]) -> dict:
    out = spawn_cli(["verify", "--python", TORCH_PY, "--framework", "torch", "--json"], env=env, timeout=600)
    # no GPU: 6 when the CPU path ran (5 when the stand-in breaks the import); on a GPU machine 0 (or 5)
    assert out.returncode in ((0, 5) if shutil.which("nvidia-smi") else (5, 6)), out.stderr.decode()[-2000:]
    return json.loads(out.stdout)["data"]["frameworks"][0]


def predicted(data: dict, soname: str) -> dict:
    return next(x for x in data["environment"]["library_loads"] if x["soname"] == soname and x["framework"] == "torch")


def base_env(**extra: str) -> dict[str, str]:
    return child_env(extra=extra, drop=("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH",
                                        "LD_PRELOAD"))


@needs_torch
def test_plain_torch_maps_the_wheel_copies():
    wheel = os.path.realpath(os.path.join(site_packages(), "nvidia", "cudnn", "lib", "libcudnn.so.9"))
    result, maps = import_torch(base_env())
    assert result == "imported"
    data = doctor(base_env())
    load = predicted(data, "libcudnn.so.9")
    changes, _human = cli_env(base_env())
    record("torch 2.14.1, nothing set", load["path"], load["rule"], cudnn_mapped(maps), said(data, "torch"),
           env_said(changes))
    assert cudnn_mapped(maps) == [wheel] == [load["path"]] and changes["env"] == {}
    # every CUDA library the model says import maps is mapped: the model and /proc/self/maps agree
    for x in data["environment"]["library_loads"]:
        if x["when"] == "import":
            assert x["path"] in maps, x


@needs_torch
def test_standin_on_ld_library_path_loses_to_the_rpath(standin):
    env = base_env(LD_LIBRARY_PATH=str(standin.parent))
    wheel = os.path.realpath(os.path.join(site_packages(), "nvidia", "cudnn", "lib", "libcudnn.so.9"))
    result, maps = import_torch(env)
    assert result == "imported" and cudnn_mapped(maps) == [wheel]  # the truth: DT_RPATH won
    data = doctor(env)
    load = predicted(data, "libcudnn.so.9")
    assert load["path"] == wheel and load["expected"] is None
    assert load["rule"].startswith("already loaded") or load["rule"].startswith("DT_RPATH")
    codes = {f["code"] for f in data["findings"]}
    assert not codes & {"LIBRARY_SHADOWED", "LIBRARY_PRELOADED", "CUDNN_MISMATCH"}, data["findings"]
    changes, human = cli_env(env)
    record("torch 2.14.1, stand-in libcudnn.so.9 on LD_LIBRARY_PATH", load["path"], load["rule"], cudnn_mapped(maps),
           said(data, "torch"), env_said(changes))
    assert changes["env"] == {} and "nothing to change" in human
    report = verify(env)
    assert report["model_errors"] == []
    row = next(r for r in report["loads_compared"] if r["soname"] == "libcudnn.so.9")
    assert row["agree"] is True and row["mapped"] == wheel


@needs_torch
def test_standin_in_ld_preload_is_mapped_and_breaks_the_import(standin):
    env = base_env(LD_PRELOAD=str(standin))
    result, maps = import_torch(env)
    assert result != "imported" and ("undefined symbol" in result or "version" in result), result
    assert str(standin) in cudnn_mapped(maps)  # the truth: the stand-in is mapped
    data = doctor(env)
    load = predicted(data, "libcudnn.so.9")
    assert load["path"] == str(standin) and load["rule"] == "already loaded (LD_PRELOAD)"
    found = [f for f in data["findings"] if f["code"] == "LIBRARY_PRELOADED"]
    assert found and found[0]["severity"] == "error" and str(standin) in found[0]["title"]
    assert not [f for f in data["findings"] if f["code"] == "LIBRARY_SHADOWED"]
    changes, human = cli_env(env)
    record("torch 2.14.1, stand-in libcudnn.so.9 in LD_PRELOAD", load["path"], load["rule"], cudnn_mapped(maps),
           said(data, "torch"), env_said(changes))
    assert changes["env"] == {"LD_PRELOAD": ""} and "unset LD_PRELOAD" in human
    report = verify(env)
    assert report["status"] == "failed" and report["model_errors"] == []
    row = next(r for r in report["loads_compared"] if r["soname"] == "libcudnn.so.9")
    assert row["agree"] is True and row["mapped"] == str(standin)


NOTEBOOK = """
import ctypes, json, sys
from cudamatrix.detect import detect
from cudamatrix.fix import _notebook
env = detect(python=sys.argv[1])
if len(sys.argv) > 2:  # an earlier import in this kernel mapped another libcudnn.so.9
    ctypes.CDLL(sys.argv[2], mode=ctypes.RTLD_GLOBAL)
decision = _notebook(env, None)
print(json.dumps(decision.to_dict() if decision else None))
"""


def notebook(env: dict[str, str], *extra: str):
    out = subprocess.run([sys.executable, "-c", NOTEBOOK, TORCH_PY, *extra], env=env, capture_output=True, text=True,
                         timeout=300, cwd="/")
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@needs_torch
def test_notebook_kernel_advice(standin):
    # nothing mapped yet, nothing on the path: nothing to do
    assert notebook(base_env()) is None
    # a copy an earlier import mapped wins by SONAME: restart, and import torch first
    earlier = notebook(base_env(), str(standin))
    assert earlier["action"] == "restart" and "earlier import" in earlier["reason"]
    assert "import torch" in earlier["reason"] and str(standin) in earlier["reason"]
    # LD_PRELOAD was applied when the kernel started: restart without it
    pre = notebook(base_env(LD_PRELOAD=str(standin)))
    assert pre["action"] == "restart" and "LD_PRELOAD" in pre["reason"]
    assert pre["mapped_wrong"][0]["mapped"] == str(standin)


# --- torch 2.11.0 (cuDNN 9.19.0.56, whose shim has DT_RUNPATH) and a system cuDNN 9.14 on LD_LIBRARY_PATH ----
#
# The machine without its GPU: the torch 2.11.0 CUDA venv .ci/run makes ($CUDAMATRIX_TORCH211_PYTHON),
# and the shim and graph library of the real cuDNN 9.14.0 laid out as a distribution package installs them.
# torch's own cuDNN check (torch.backends.cudnn.version(), what its first convolution runs) needs no GPU.

CUDNN_PROBE = PROBE.replace("    ok = 'imported'\n", "    ok = 'cudnn %s' % torch.backends.cudnn.version()\n")


def soname_of(path: str) -> str:
    name = os.path.basename(path)
    return name[:name.index(".so.") + 4] + name[name.index(".so.") + 4:].split(".")[0]


def torch211(env: dict[str, str]) -> tuple[str, list[str]]:
    from support.realwheels import TORCH211_PY

    out = subprocess.run([TORCH211_PY, "-c", CUDNN_PROBE], env=env, capture_output=True, text=True, timeout=300,
                         cwd="/")
    result = next((line[7:] for line in out.stdout.splitlines() if line.startswith("RESULT ")), out.stderr[-500:])
    return result, list(dict.fromkeys(line[4:] for line in out.stdout.splitlines()
                                      if line.startswith("MAP ") and "libcudnn" in line))


@pytest.fixture(scope="module")
def system914(tmp_path_factory) -> Path:
    from support.realwheels import fetch, system_layout

    src = fetch("nvidia-cudnn-cu13", "9.14.0.64", ["nvidia/cudnn/lib/libcudnn.so.9",
                                                   "nvidia/cudnn/lib/libcudnn_graph.so.9"])
    return system_layout(src, "9.14.0", tmp_path_factory.mktemp("lib") / "x86_64-linux-gnu",
                         ["libcudnn.so.9", "libcudnn_graph.so.9"])


def cli(args: list[str], env: dict[str, str], python: str) -> tuple[int, dict]:
    out = spawn_cli([*args, "--python", python, "--json"], env=env, timeout=600)
    return out.returncode, json.loads(out.stdout)["data"]


@needs_torch
def test_torch211_with_a_system_cudnn_first_on_the_path(system914):
    from support.realwheels import TORCH211_PY, site_packages

    wheel = site_packages(TORCH211_PY, "CUDAMATRIX_TORCH211_PYTHON") / "nvidia" / "cudnn" / "lib"
    graph = str(system914 / "libcudnn_graph.so.9.14.0")
    env = base_env(LD_LIBRARY_PATH=f"{system914}:/usr/local/cuda/lib64")
    result, maps = torch211(env)
    # the truth: torch's own words, and a mixed cuDNN (the wheel's shim, the system's graph library)
    assert "cuDNN version incompatibility" in result and "(9, 14, 0)" in result, result
    assert sorted(maps) == sorted([str(wheel / "libcudnn.so.9"), graph])
    code, data = cli(["doctor"], env, TORCH211_PY)
    assert code == 1
    load = next(x for x in data["environment"]["library_loads"] if x["soname"] == "libcudnn_graph.so.9")
    assert (load["path"], load["rule"], load["version"]) == (graph, "LD_LIBRARY_PATH", "9.14.0")
    assert load["expected"] == str(wheel / "libcudnn_graph.so.9") and load["expected_version"] == "9.19.0.56"
    found = {f["code"]: f for f in data["findings"]}
    mismatch, shadowed = found["CUDNN_MISMATCH"], found["LIBRARY_SHADOWED"]
    assert "9.14.0" in mismatch["title"] and graph in mismatch["title"] and "reinstall" not in mismatch["fix"]
    assert mismatch["fix"].startswith(f"remove {system914} from LD_LIBRARY_PATH") and shadowed["fix"] == mismatch["fix"]
    assert graph in shadowed["title"] and any("a mixed load" in e for e in shadowed["evidence"])
    # env prints exactly that change, and the model says it is enough
    code, changes = cli(["env"], env, TORCH211_PY)
    for soname in ("libcudnn.so.9", "libcudnn_graph.so.9"):
        row = next(x for x in data["environment"]["library_loads"] if x["soname"] == soname)
        record(f"torch 2.11.0, system cuDNN 9.14 first on LD_LIBRARY_PATH: {soname}", row["path"], row["rule"],
               [m for m in maps if soname_of(m) == soname], said(data, "torch"), env_said(changes))
    assert code == 0 and changes["env"] == {"LD_LIBRARY_PATH": "/usr/local/cuda/lib64"}
    assert str(system914) in changes["advice"][0] and "resolves to their own copies" in changes["advice"][-1]
    # verify: torch's check fails on the CPU path too; the child's maps after it agree with the model
    code, report = cli(["verify", "--framework", "torch"], env, TORCH211_PY)
    fw = report["frameworks"][0]
    assert code == 5 and (fw["status"], fw["finding_code"]) == ("failed", "CUDNN_MISMATCH") and fw["model_errors"] == []
    row = next(r for r in fw["loads_compared"] if r["soname"] == "libcudnn_graph.so.9")
    assert row["agree"] is True and row["mapped"] == graph
    assert [c["folder"] for c in fw["mixed_loads"][0]["copies"]] == [str(wheel), str(system914)]
    # the change applied: torch gets its own cuDNN, and nothing is left to change
    fixed = base_env(LD_LIBRARY_PATH=changes["env"]["LD_LIBRARY_PATH"])
    result, maps = torch211(fixed)
    assert result == "cudnn 91900" and all(m.startswith(str(wheel)) for m in maps)
    code, data = cli(["doctor"], fixed, TORCH211_PY)
    assert not {f["code"] for f in data["findings"]} & {"CUDNN_MISMATCH", "LIBRARY_SHADOWED"}
    code, again = cli(["env"], fixed, TORCH211_PY)
    row = next(x for x in data["environment"]["library_loads"] if x["soname"] == "libcudnn_graph.so.9")
    record("torch 2.11.0, env's change applied: libcudnn_graph.so.9", row["path"], row["rule"],
           [m for m in maps if "graph" in m], said(data, "torch"), env_said(again))
    assert again["env"] == {} and again["advice"][0].startswith("nothing to change")


@needs_torch
def test_torch2141_keeps_its_graph_but_not_its_engines_with_another_cudnn_on_the_path():
    from support.realwheels import TORCH211_PY, site_packages

    other = site_packages(TORCH211_PY, "CUDAMATRIX_TORCH211_PYTHON") / "nvidia" / "cudnn" / "lib"  # cuDNN 9.19
    env = base_env(LD_LIBRARY_PATH=str(other))
    out = subprocess.run([TORCH_PY, "-c", CUDNN_PROBE], env=env, capture_output=True, text=True, timeout=300, cwd="/")
    assert "RESULT cudnn 92400" in out.stdout  # DT_RPATH $ORIGIN of the 9.24 shim: its own graph answers
    code, data = cli(["doctor"], env, TORCH_PY)
    loads = {x["soname"]: x for x in data["environment"]["library_loads"] if x["framework"] == "torch"}
    assert loads["libcudnn_graph.so.9"]["rule"] == "DT_RPATH of libcudnn.so.9" and not loads["libcudnn_graph.so.9"]["expected"]
    # the engine libraries, opened by the graph library at the first convolution (its DT_RUNPATH comes after
    # LD_LIBRARY_PATH; tests/ldso/test_openers.py shows it with ctypes), come from the other copy
    engines = loads["libcudnn_engines_precompiled.so.9"]
    assert engines["path"] == os.path.realpath(other / "libcudnn_engines_precompiled.so.9") and engines["when"] == "first use"
    assert (engines["version"], engines["expected_version"]) == ("9.19.0", "9.24.0.43")
    shadowed = [f for f in data["findings"] if f["code"] == "LIBRARY_SHADOWED"]
    assert len(shadowed) == 1 and shadowed[0]["severity"] == "error" and str(other) in shadowed[0]["title"]
    assert not [f for f in data["findings"] if f["code"] == "CUDNN_MISMATCH"]  # the graph library answers 9.24
    code, changes = cli(["env"], env, TORCH_PY)
    for soname in ("libcudnn_graph.so.9", "libcudnn_engines_precompiled.so.9"):
        record(f"torch 2.14.1, cuDNN 9.19 folder on LD_LIBRARY_PATH: {soname}", loads[soname]["path"],
               loads[soname]["rule"], list(dict.fromkeys(m[4:] for m in out.stdout.splitlines()
                                                         if m.startswith("MAP ") and soname in m)),
               said(data, "torch"), env_said(changes), loads[soname]["when"])
    assert changes["env"] == {"LD_LIBRARY_PATH": ""}


# --- in this process: the library-path questions on Environments, and the prediction on a gcc-built layout ------
# (fast; what the loader model itself decides is judged against /proc/self/maps in tests/detect/test_loader.py)

WHEEL_DIR = "/v/site-packages/nvidia/cudnn/lib"
WHEEL_SO = f"{WHEEL_DIR}/libcudnn.so.9"


def _env(loads=(), libs=(), env_vars=None, origin="file") -> Environment:
    env = Environment(origin=origin)
    env.library_loads, env.libraries = list(loads), list(libs)
    env.context.env = dict(env_vars or {})
    return env


def _load(path, rule="LD_LIBRARY_PATH", expected=WHEEL_SO, framework="torch", soname="libcudnn.so.9", **kw):
    return LibraryLoad(framework, soname, path, rule, expected=expected, **kw)


@pytest.mark.parametrize("a,b,same", [
    ("9.19.0", "9.19.0.56", True), ("9.19.0.56", "9.19.0", True), ("9.19", "9.19.0", True), ("9", "9.1.0", True),
    ("9.19.0", "9.19.1", False), ("9.1.0", "9.10.0", False), (None, "9.1.0", False), ("9.1.0", None, False),
    ("unknown", "9.1.0", False), ("9.1.0", "", False),
])
def test_same_release(a, b, same):
    assert libpaths.same_release(a, b) is same


def test_cause_of_each_rule():
    assert [libpaths.cause_of(r) for r in ("already loaded (LD_PRELOAD)", "LD_PRELOAD", "LD_LIBRARY_PATH",
                                           "already loaded (an earlier import)", "DT_RPATH of libx.so",
                                           "LD_LIBRARY_PATH of the caller", "ld.so cache")] == [
        "LD_PRELOAD", "LD_PRELOAD", "LD_LIBRARY_PATH", "loaded earlier", "other", "other", "other"]


def test_version_of_matches_the_path_or_its_real_path(tmp_path):
    (tmp_path / "libcudnn.so.9.1.0").write_bytes(b"x")
    (tmp_path / "libcudnn.so.9").symlink_to("libcudnn.so.9.1.0")
    real = str(tmp_path / "libcudnn.so.9.1.0")
    env = _env(libs=[Library(name="cudnn", soname="libcudnn.so.9", path=str(tmp_path / "libcudnn.so.9"),
                             origin="LD_LIBRARY_PATH", version="9.1.0"),
                     Library(name="cudnn", soname="libcudnn.so.9", path=WHEEL_SO, origin="wheel", version="9.24.0")])
    assert libpaths.version_of(env, real) == "9.1.0"
    assert libpaths.version_of(env, WHEEL_SO) == "9.24.0"
    assert libpaths.version_of(env, "/elsewhere/libcudnn.so.9") is None
    assert libpaths.version_of(env, None) is None and libpaths.version_of(env, "") is None


def test_load_version_prefers_the_prediction_then_the_library_list():
    env = _env(libs=[Library(name="cudnn", soname="libcudnn.so.9", path="/x/libcudnn.so.9", origin="LD_LIBRARY_PATH",
                             version="9.1.0"),
                     Library(name="cudnn", soname="libcudnn.so.9", path=WHEEL_SO, origin="wheel", version="9.24.0")])
    load = _load("/x/libcudnn.so.9")
    assert (libpaths.load_version(env, load), libpaths.load_version(env, load, expected=True)) == ("9.1.0", "9.24.0")
    load.version, load.expected_version = "9.2.0", "9.3.0"
    assert (libpaths.load_version(env, load), libpaths.load_version(env, load, expected=True)) == ("9.2.0", "9.3.0")


def test_fill_versions_from_the_list_and_from_the_shim_of_the_folder():
    """A cuDNN sub-library takes the version of its folder's shim (detect read it); a known version is kept."""
    libs = [Library(name="cudnn", soname="libcudnn.so.9", path=WHEEL_SO, origin="wheel", version="9.24.0"),
            Library(name="cudnn", soname="libcudnn.so.9", path="/x/libcudnn.so.9", origin="LD_LIBRARY_PATH",
                    version="9.1.0"),
            Library(name="cudart", soname="libcudart.so.13", path="/c/libcudart.so.13", origin="ldconfig",
                    version="13.0")]
    loads = [_load("/x/libcudnn_graph.so.9", soname="libcudnn_graph.so.9", expected=f"{WHEEL_DIR}/libcudnn_graph.so.9"),
             _load("/x/libcudnn.so.9"),
             _load("/c/libcudart.so.13", soname="libcudart.so.13", expected=None),
             _load("/y/libcudnn_graph.so.9", soname="libcudnn_graph.so.9", expected=None),  # no shim read there
             _load("/c/libcublas.so.13", soname="libcublas.so.13", expected=None),  # not an opener's family
             _load("/x/libcudnn_graph.so.9", soname="libcudnn_graph.so.9", expected=None, version="9.9.9"),
             _load(None, soname="libcudnn_graph.so.9", expected=None),  # not found: no file, no version
             _load(None, soname="libcublas.so.13", expected=None)]
    env = _env(loads, libs)
    libpaths.fill_versions(env)
    assert [(x.version, x.expected_version) for x in env.library_loads] == [
        ("9.1.0", "9.24.0"), ("9.1.0", "9.24.0"), ("13.0", None), (None, None), (None, None), ("9.9.9", None),
        (None, None), (None, None)]


def test_wrong_loads_keep_only_another_release_of_another_file():
    loads = [_load(None), _load(WHEEL_SO), _load("/x/libcudnn.so.9", expected=None),
             _load("/same/libcudnn.so.9", version="9.24.0.43", expected_version="9.24.0"),
             _load("/old/libcudnn.so.9", version="9.1.0", expected_version="9.24.0"),
             _load("/pre/libcudnn.so.9", rule="already loaded (LD_PRELOAD)"),
             _load("/earlier/libcudnn.so.9", rule="already loaded (an earlier import)", version="9.1.0")]
    env = _env(loads)
    wrong = libpaths.wrong_loads(env)
    assert [(w.load.path, w.cause, w.version, w.expected_version, w.known_different) for w in wrong] == [
        ("/old/libcudnn.so.9", "LD_LIBRARY_PATH", "9.1.0", "9.24.0", True),
        ("/pre/libcudnn.so.9", "LD_PRELOAD", None, None, False),
        ("/earlier/libcudnn.so.9", "loaded earlier", "9.1.0", None, False)]
    assert libpaths.wrong_loads(env, loads[4:5]) == wrong[:1]
    assert libpaths.wrong_loads(env, []) == []


def test_winner_folder_is_where_the_search_found_the_file():
    assert libpaths.winner_folder(_load("/real/libcudnn.so.9.1.0", found_as="/link/libcudnn.so.9")) == "/link"
    assert libpaths.winner_folder(_load("/real/libcudnn.so.9.1.0")) == "/real"
    assert libpaths.winner_folder(_load(None)) == ""


def test_grouped_by_framework_cause_and_winner_in_first_seen_order():
    w = [libpaths.WrongLoad(_load("/a/libcudnn.so.9"), "LD_LIBRARY_PATH", None, None),
         libpaths.WrongLoad(_load("/p/libcudnn.so.9", found_as="/a/libcudnn.so.9"), "LD_PRELOAD", None, None),
         libpaths.WrongLoad(_load("/a/libcublas.so.13", soname="libcublas.so.13"), "LD_LIBRARY_PATH", None, None),
         libpaths.WrongLoad(_load("/a/libcudnn.so.9", framework="jax"), "LD_LIBRARY_PATH", None, None),
         libpaths.WrongLoad(_load("/b/x/../libcudnn.so.9"), "LD_LIBRARY_PATH", None, None),
         libpaths.WrongLoad(_load("/q/libcudnn.so.9", found_as="/p/libcudnn.so.9"), "LD_PRELOAD", None, None),
         libpaths.WrongLoad(_load(None, found_as=None), "LD_PRELOAD", None, None),
         libpaths.WrongLoad(_load("/p/libcublas.so.13", soname="libcublas.so.13"), "LD_PRELOAD", None, None),
         libpaths.WrongLoad(_load(None, found_as=None, soname="libcublas.so.13"), "LD_PRELOAD", None, None)]
    assert [[x.load.path for x in g] for g in libpaths.grouped(w)] == [
        ["/a/libcudnn.so.9", "/a/libcublas.so.13"], ["/p/libcudnn.so.9"], ["/a/libcudnn.so.9"],
        ["/b/x/../libcudnn.so.9"], ["/q/libcudnn.so.9"], [None, None], ["/p/libcublas.so.13"]]


def test_cudnn_mapped_is_the_framework_s_shim_with_a_path():
    loads = [_load(None, framework="torch"), _load("/g/libcudnn_graph.so.9", soname="libcudnn_graph.so.9"),
             _load("/t/libcudnn.so.90", soname="libcudnn.so.9x"), _load("/j/libcudnn.so.9", framework="jax"),
             _load("/t/libcudnn.so.9")]
    env = _env(loads)
    assert libpaths.cudnn_mapped(env, "torch") is loads[4]
    assert libpaths.cudnn_mapped(env, "jax") is loads[3]
    assert libpaths.cudnn_mapped(env, "tensorflow") is None


@pytest.mark.parametrize("current,bad,kept", [
    ("/opt/x:/keep", {"/opt/x"}, "/keep"),
    ("/keep:/opt/x", {"/opt/x"}, "/keep"),
    ("/keep;/opt/x/:/also", {"/opt/x"}, "/keep;/also"),
    ("/a;/b:/opt/x", {"/opt/x"}, "/a;/b"),
    ("/opt/x:/a;/b", {"/opt/x"}, "/a;/b"),
    ("/a:/opt/x:/b;/c", {"/opt/x"}, "/a:/b;/c"),
    ("/a;;/opt/x;/b", {"/opt/x"}, "/a;/b"),
    ("/opt/x", {"/opt/x"}, ""),
    ("::/opt/x::/keep:", {"/opt/x"}, "/keep"),
    ("/keep:/other", {"/opt/x"}, None),
    ("", {"/opt/x"}, None), (None, {"/opt/x"}, None), ("/opt/x", set(), None),
])
def test_without_folders(current, bad, kept):
    assert libpaths._without_folders(current, bad) == kept


def test_without_files(tmp_path):
    (tmp_path / "real.so").write_bytes(b"x")
    (tmp_path / "link.so").symlink_to("real.so")
    real, link = str(tmp_path / "real.so"), str(tmp_path / "link.so")
    assert libpaths._without_files(f"{link} /keep.so", {real}) == "/keep.so"  # resolved
    assert libpaths._without_files("/bad.so:/keep.so  /k2.so", {"/bad.so"}) == "/keep.so /k2.so"
    assert libpaths._without_files("/bad.so", {"/bad.so"}) == ""
    assert libpaths._without_files("/keep.so", {"/bad.so"}) is None
    assert libpaths._without_files("", {"/bad.so"}) is None and libpaths._without_files("/bad.so", set()) is None


def test_library_path_fix_changes_only_what_makes_a_wrong_load():
    loads = [_load("/opt/x/libcudnn.so.9.1.0", found_as="/opt/x/libcudnn.so.9", version="9.1.0",
                   expected_version="9.24.0"),
             _load("/pre/libcudnn_graph.so.9", soname="libcudnn_graph.so.9", rule="already loaded (LD_PRELOAD)",
                   version="9.1.0", expected_version="9.24.0")]
    env = _env(loads, env_vars={"LD_LIBRARY_PATH": "/opt/x/:/keep", "LD_PRELOAD": "/pre/libcudnn_graph.so.9 /k.so"})
    assert libpaths.library_path_fix(env) == {"LD_LIBRARY_PATH": "/keep", "LD_PRELOAD": "/k.so"}
    env.context.env = {"LD_LIBRARY_PATH": "/keep"}
    assert libpaths.library_path_fix(env) == {}
    loads[0].expected_version = loads[1].expected_version = "9.1.0"  # the same release: nothing to change
    env.context.env = {"LD_LIBRARY_PATH": "/opt/x", "LD_PRELOAD": "/pre/libcudnn_graph.so.9"}
    assert libpaths.library_path_fix(env) == {}


def test_file_version_from_the_name_then_the_wheel_record():
    versions = {"/w/libcublas.so.13": "13.1.0.3"}
    assert libpaths.file_version("/x/libcudnn.so.9.1.0", versions) == "9.1.0"
    assert libpaths.file_version("/x/libcudnn_graph.so.9.24.0.1", {}) == "9.24.0.1"
    assert libpaths.file_version("/w/libcublas.so.13", versions) == "13.1.0.3"
    assert libpaths.file_version("/x/libcudnn.so.9", versions) is None
    assert libpaths.file_version("/x/libcudnn.so.9.1.0.txt", {}) is None
    assert libpaths.file_version(None, versions) is None and libpaths.file_version("", versions) is None


def test_read_text(tmp_path):
    (tmp_path / "t").write_bytes(b"abc\xffdef")
    assert read_text(str(tmp_path / "t")) == "abc\ufffddef"
    assert read_text(str(tmp_path / "t"), 2) == "ab"
    assert read_text(str(tmp_path / "missing")) == ""
    assert read_text(str(tmp_path)) == ""  # a folder


def _record_wheel(sp: Path, dist: str, lines: list[str]) -> None:
    info = sp / f"{dist}.dist-info"
    info.mkdir(parents=True)
    (info / "RECORD").write_text("".join(f"{line},sha256=x,1\n" for line in lines))


def test_wheel_versions_reads_the_records_of_nvidia_wheels(tmp_path, monkeypatch):
    from cudamatrix.ldso import recipes

    real = tmp_path / "real-site"
    _record_wheel(real, "nvidia_cudnn_cu12-9.3.0.75", ["nvidia/cudnn/lib/libcudnn.so.9", "nvidia/cudnn/__init__.py",
                                                       "../../bin/libx.so", "nvidia/cudnn/include/cudnn.h"])
    _record_wheel(real, "nvidia_cudnn_cu13-9.24.0.43", ["nvidia/cudnn/lib/libcudnn.so.9",
                                                        "nvidia/cudnn/lib/libcudnn_graph.so.9"])
    _record_wheel(real, "torch-2.14.1", ["torch/lib/libtorch.so"])  # not an nvidia wheel
    (real / "nvidia_nccl_cu12-2.21.5.dist-info").mkdir()  # no RECORD
    (tmp_path / "site").symlink_to(real)
    recipes.forget_listings()
    assert libpaths.wheel_versions([str(tmp_path / "site"), str(tmp_path / "none")]) == {
        f"{real}/nvidia/cudnn/lib/libcudnn.so.9": "9.3.0.75",  # the first RECORD by name wins
        f"{real}/nvidia/cudnn/lib/libcudnn_graph.so.9": "9.24.0.43"}


@pytest.mark.slow
def test_wheel_versions_reads_a_record_up_to_4_mib(tmp_path):
    from cudamatrix.ldso import recipes

    filler = [f"nvidia/cublas/include/header_{i:07d}.h" for i in range(60000)]  # about 2.7 MB of lines
    _record_wheel(tmp_path, "nvidia_cublas_cu12-12.8.4.1", filler + ["nvidia/cublas/lib/libcublas.so.12"])
    _record_wheel(tmp_path, "nvidia_cufft_cu12-11.3.3.83", filler * 2 + ["nvidia/cufft/lib/libcufft.so.11"])
    recipes.forget_listings()
    assert libpaths.wheel_versions([str(tmp_path)]) == {f"{tmp_path}/nvidia/cublas/lib/libcublas.so.12": "12.8.4.1"}


def test_reconcile_notes_replace_the_search_order_notes_of_predicted_sonames():
    loads = [_load("/w/libcudnn.so.9", rule="DT_RUNPATH of libx.so", framework="tensorflow"),
             _load(None, rule="not found", framework="jax"),
             _load("/w/libcudart.so.12", soname="libcudart.so.12", rule="LD_LIBRARY_PATH")]
    notes = [Note("loader", "libcudnn.so.9: /a/libcudnn.so.9 is loaded first and shadows /b/libcudnn.so.9", "warning"),
             Note("loader", "libcudnn.so.9: another note on it", "warning"),
             Note("loader", "libnccl.so.2: /a/libnccl.so.2 is loaded first", "warning"),
             Note("ldconfig", "libcudart.so.12: something else", "info"),
             Note("loader", "libcudart.so.12: /x shadows /y", "warning"),
             Note("loader", "libnccl.so.2: /c:d/libnccl.so.2 is loaded first", "warning"),
             Note("loader", "libcudart.so.12: /p:q/libcudart.so.12 is loaded first", "warning")]  # said already
    assert libpaths.reconcile_notes(notes, loads) == [
        Note("loader", "libcudnn.so.9: tensorflow maps /w/libcudnn.so.9 (DT_RUNPATH of libx.so)", "info"),
        Note("loader", "libcudnn.so.9: jax maps nothing (not found) (not found)", "info"),
        notes[2], notes[3],
        Note("loader", "libcudart.so.12: torch maps /w/libcudart.so.12 (LD_LIBRARY_PATH)", "info"), notes[5]]


# --- predict_loads on a TensorFlow layout built with gcc (the recipe: _pywrap_tensorflow_internal.so, then
# libtensorflow_framework.so.2 dlopens libcudart.so.<major> and libcudnn.so.<major> under its DT_RUNPATH)

def _so(folder: Path, name: str, soname: str, *flags: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "x.c").write_text("int f(void) { return 0; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", name, "x.c", *flags], cwd=folder,
                   check=True, capture_output=True, timeout=60)
    return folder / name


@pytest.fixture(scope="module")
def tf_layout(tmp_path_factory) -> dict[str, Path]:
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    t = tmp_path_factory.mktemp("tf")
    sp = t / "site-packages"
    p = {"sp": sp, "other": t / "other"}
    p["cudnn"] = _so(sp / "nvidia/cudnn/lib", "libcudnn.so.9", "libcudnn.so.9")
    p["cudart"] = _so(sp / "nvidia/cuda_runtime/lib", "libcudart.so.12", "libcudart.so.12")
    _record_wheel(sp, "nvidia_cudnn_cu12-9.3.0.75", ["nvidia/cudnn/lib/libcudnn.so.9"])
    _record_wheel(sp, "nvidia_cuda_runtime_cu12-12.5.82", ["nvidia/cuda_runtime/lib/libcudart.so.12"])
    p["framework"] = _so(sp / "tensorflow", "libtensorflow_framework.so.2", "libtensorflow_framework.so.2",
                         "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../nvidia/cudnn/lib:$ORIGIN/../nvidia/cuda_runtime/lib")
    _so(sp / "tensorflow/python", "_pywrap_tensorflow_internal.so", "_pywrap_tensorflow_internal.so",
        f"-L{sp / 'tensorflow'}", "-Wl,--no-as-needed", "-l:libtensorflow_framework.so.2",
        "-Wl,--enable-new-dtags,-rpath,$ORIGIN/..")
    p["standin"] = _so(t / "other", "libcudnn.so.9.1.0", "libcudnn.so.9")
    (t / "other" / "libcudnn.so.9").symlink_to("libcudnn.so.9.1.0")
    return p


TF = Framework(name="tensorflow", version="2.18.0", cuda="12.5", cudnn="9.3.0")


def _by_soname(loads: list[LibraryLoad]) -> dict[str, LibraryLoad]:
    return {x.soname: x for x in loads if x.framework == "tensorflow"}


def test_predict_loads_of_an_undisturbed_layout(tf_layout):
    notes: list = []
    loads = libpaths.predict_loads([Framework(name="mxnet", version="1.9.1"), TF], [str(tf_layout["sp"])],
                                   sys.executable, {"PATH": "/usr/bin"}, [], notes=notes)
    got = _by_soname(loads)
    cudnn, cudart = got["libcudnn.so.9"], got["libcudart.so.12"]
    assert (cudnn.path, cudnn.version, cudnn.expected, cudnn.when, cudnn.how) == (
        str(tf_layout["cudnn"]), "9.3.0.75", None, "first use", "dlopen")
    assert cudnn.rule == "DT_RUNPATH of libtensorflow_framework.so.2"
    assert cudnn.requested_by == str(tf_layout["framework"])
    assert (cudart.path, cudart.version, cudart.expected) == (str(tf_layout["cudart"]), "12.5.82", None)
    assert {x.framework for x in loads} == {"tensorflow"}  # mxnet is not modelled
    assert not any(x.soname.startswith("libtensorflow") for x in loads)  # not the CUDA stack


def test_predict_loads_names_the_framework_s_own_copy_when_ld_library_path_wins(tf_layout):
    other = tf_layout["other"]
    loads = libpaths.predict_loads([TF], [str(tf_layout["sp"])], sys.executable,
                                   {"LD_LIBRARY_PATH": str(other)}, [])
    cudnn = _by_soname(loads)["libcudnn.so.9"]
    assert (cudnn.path, cudnn.rule, cudnn.version, cudnn.found_as) == (
        str(other / "libcudnn.so.9.1.0"), "LD_LIBRARY_PATH", "9.1.0", str(other / "libcudnn.so.9"))
    assert (cudnn.expected, cudnn.expected_rule, cudnn.expected_version) == (
        str(tf_layout["cudnn"]), "DT_RUNPATH of libtensorflow_framework.so.2", "9.3.0.75")
    cudart = _by_soname(loads)["libcudart.so.12"]
    assert (cudart.path, cudart.expected) == (str(tf_layout["cudart"]), None)  # the same file either way
    env = _env(loads, env_vars={"LD_LIBRARY_PATH": str(other)})
    assert libpaths.library_path_fix(env) == {"LD_LIBRARY_PATH": ""}


def test_predict_loads_with_a_library_already_mapped(tf_layout):
    standin = str(tf_layout["standin"])
    loads = libpaths.predict_loads([TF], [str(tf_layout["sp"])], sys.executable, {}, [], mapped=[standin])
    cudnn = _by_soname(loads)["libcudnn.so.9"]
    assert cudnn.path == standin and cudnn.rule.startswith("already loaded")
    assert cudnn.expected == str(tf_layout["cudnn"])
    # no program known: the mapped shim is the link map's first object, and it still opens its sub-libraries
    loads = _by_soname(libpaths.predict_loads([TF], [str(tf_layout["sp"])], None, {}, [], mapped=[standin]))
    assert (loads["libcudnn_graph.so.9"].requested_by, loads["libcudnn.so.9"].path) == (standin, standin)
    maps = f"7f00-7f01 r-xp 00000000 08:01 42 {standin}\n7f02-7f03 r--p 00000000 00:00 0 [heap]\n"
    env = _env(origin="live")
    env.frameworks, env.python.site_packages, env.python.executable = [TF], [str(tf_layout["sp"])], sys.executable
    again = _by_soname(libpaths.in_process_loads(env, maps_text=maps))["libcudnn.so.9"]
    assert (again.path, again.expected) == (standin, str(tf_layout["cudnn"]))


def test_after_change_predicts_again_only_for_a_live_environment(tf_layout, monkeypatch):
    other = str(tf_layout["other"])
    env = _env(origin="live")
    env.frameworks, env.python.site_packages, env.python.executable = [TF], [str(tf_layout["sp"])], sys.executable
    monkeypatch.setenv("LD_LIBRARY_PATH", other)
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    left = libpaths.after_change(env, {})
    assert [(w.load.soname, w.cause) for w in left] == [("libcudnn.so.9", "LD_LIBRARY_PATH")]
    assert libpaths.after_change(env, {"LD_LIBRARY_PATH": ""}) == []
    monkeypatch.delenv("LD_LIBRARY_PATH")
    assert [w.load.path for w in libpaths.after_change(env, {"LD_LIBRARY_PATH": other})] == [
        str(tf_layout["other"] / "libcudnn.so.9.1.0")]
    env.origin = "file"
    assert libpaths.after_change(env, {}) is None
    env.origin, env.python.site_packages = "live", []
    assert libpaths.after_change(env, {}) is None


def test_soname_of_a_file(tf_layout, tmp_path):
    assert libpaths._soname(str(tf_layout["other"] / "libcudnn.so.9.1.0")) == "libcudnn.so.9"
    (tmp_path / "libplain.so.3").write_text("not ELF")
    assert libpaths._soname(str(tmp_path / "libplain.so.3")) == "libplain.so.3"
    assert libpaths._soname(None) is None


# --- the same on a torch layout: libtorch_global_deps.so cannot load alone (it needs libcudart.so.12, which no
# search finds), so the recipe preloads the nvidia/* libraries by path, as torch/__init__.py's list names them

TORCH_INIT = '''def _load_global_deps():
    _preload_cuda_deps(required=False)


def _preload_cuda_deps(required):
    cuda_libs = {
        "cuda_runtime": "libcudart.so.*[0-9]",
        "cudnn": "libcudnn.so.*[0-9]",
        "cublas": "libcublas.so.*[0-9]",
    }


def _other():
    pass
'''


@pytest.fixture(scope="module")
def torch_layout(tmp_path_factory) -> dict[str, Path]:
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    sp = tmp_path_factory.mktemp("torch") / "site-packages"
    p = {"sp": sp}
    p["cudart"] = _so(sp / "nvidia/cuda_runtime/lib", "libcudart.so.12", "libcudart.so.12")
    p["cudnn"] = _so(sp / "nvidia/cudnn/lib", "libcudnn.so.9", "libcudnn.so.9")
    # named by its release, as the pattern "libcublas.so.*[0-9]" also finds: the SONAME names the load
    p["cublas"] = _so(sp / "nvidia/cublas/lib", "libcublas.so.12.8.4.1", "libcublas.so.12")
    _record_wheel(sp, "nvidia_cublas_cu12-12.8.4.1", ["nvidia/cublas/lib/libcublas.so.12.8.4.1"])
    lib = sp / "torch/lib"
    p["deps"] = _so(lib, "libtorch_global_deps.so", "libtorch_global_deps.so", f"-L{p['cudart'].parent}",
                    f"-L{p['cudnn'].parent}", "-Wl,--no-as-needed", "-l:libcudart.so.12", "-l:libcudnn.so.9")
    p["torch_cuda"] = _so(lib, "libtorch_cuda.so", "libtorch_cuda.so", f"-L{p['cudnn'].parent}", "-Wl,--no-as-needed",
                          "-l:libcudnn.so.9", "-Wl,--disable-new-dtags,-rpath,$ORIGIN/../../nvidia/cudnn/lib")
    _so(sp / "torch", "_C.cpython-311-x86_64-linux-gnu.so", "_C.so", f"-L{lib}", "-Wl,--no-as-needed",
        "-l:libtorch_cuda.so", "-Wl,--disable-new-dtags,-rpath,$ORIGIN/lib")
    (sp / "torch/__init__.py").write_text(TORCH_INIT)
    return p


def test_predict_loads_keeps_by_path_loads_only_where_no_request_by_name_decides(torch_layout):
    torch = Framework(name="torch", version="2.14.1", cuda="12.8")
    loads = {x.soname: x for x in libpaths.predict_loads([torch], [str(torch_layout["sp"])], sys.executable, {}, [])}
    assert set(loads) == {"libcudart.so.12", "libcudnn.so.9", "libcublas.so.12"}
    cublas = loads["libcublas.so.12"]  # loaded by path only: that load decides
    assert (cublas.path, cublas.how, cublas.version, cublas.requested_by) == (
        str(torch_layout["cublas"]), "preload", "12.8.4.1", None)
    # preloaded by path, then asked for by name by libtorch_global_deps.so and libtorch_cuda.so: the first request
    # by name decides
    cudnn = loads["libcudnn.so.9"]
    assert (cudnn.path, cudnn.how, cudnn.requested_by) == (
        str(torch_layout["cudnn"]), "DT_NEEDED", str(torch_layout["deps"]))
    assert cudnn.rule.startswith("already loaded")
    cudart = loads["libcudart.so.12"]
    assert (cudart.path, cudart.how, cudart.requested_by) == (
        str(torch_layout["cudart"]), "DT_NEEDED", str(torch_layout["deps"]))


@pytest.mark.slow
def test_in_process_loads_reads_this_process_s_maps(tmp_path):
    """A library this process has mapped (dlopened here, from a folder whose name holds a space) answers first
    for its SONAME. The SONAME is new at each call (a process that runs the suite twice, as mutation testing
    does, keeps the first call's library mapped), so no other test and no later run is affected."""
    import ctypes
    import uuid

    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    sp = tmp_path / "site-packages"
    name = f"libcufile_{uuid.uuid4().hex[:12]}.so.1"
    wheel = _so(sp / "nvidia/cufile/lib", name, name)
    _so(sp / "tensorflow", "libtensorflow_framework.so.2", "libtensorflow_framework.so.2", f"-L{wheel.parent}",
        "-Wl,--no-as-needed", f"-l:{name}", "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../nvidia/cufile/lib")
    _so(sp / "tensorflow/python", "_pywrap_tensorflow_internal.so", "_pywrap_tensorflow_internal.so",
        f"-L{sp / 'tensorflow'}", "-Wl,--no-as-needed", "-l:libtensorflow_framework.so.2",
        "-Wl,--enable-new-dtags,-rpath,$ORIGIN/..")
    mapped = _so(tmp_path / "a folder", name, name)
    env = _env(origin="live")
    env.frameworks, env.python.site_packages, env.python.executable = [TF], [str(sp)], sys.executable
    before = _by_soname(libpaths.in_process_loads(env))[name]
    assert (before.path, before.rule) == (str(wheel), "DT_RUNPATH of libtensorflow_framework.so.2")
    ctypes.CDLL(str(mapped))
    maps = open("/proc/self/maps").read()
    assert str(mapped) in maps and any(len(line.split()) == 5 for line in maps.splitlines())  # anonymous ones
    after = _by_soname(libpaths.in_process_loads(env))[name]
    assert (after.path, after.expected) == (str(mapped), str(wheel)) and after.rule.startswith("already loaded")


def test_in_process_loads_of_a_given_maps_text(tf_layout, tmp_path):
    """The mapped cuDNN shim (9.1.0 by its file name) is the link map's first object, and as an opener it opens
    its sub-libraries (none beside it here: not found); a mapped file that is not ELF is no object."""
    standin = str(tf_layout["standin"])
    (tmp_path / "libnotelf.so").write_text("not ELF\n")
    env = _env(origin="live")
    env.frameworks, env.python.site_packages, env.python.executable = [TF], [str(tf_layout["sp"])], sys.executable
    maps = (f"7f00-7f01 r-xp 00000000 08:01 42 {standin}\n"
            "7f02-7f03 rw-p 00000000 00:00 0\n"  # an anonymous mapping: five fields
            f"7f04-7f05 r--p 00000000 08:01 43 {tmp_path / 'libnotelf.so'}\n"
            "7f06-7f07 r--p 00000000 08:01 44 /usr/lib/locale/locale-archive\n")
    loads = _by_soname(libpaths.in_process_loads(env, maps_text=maps))
    got = loads["libcudnn.so.9"]
    assert (got.path, got.expected) == (standin, str(tf_layout["cudnn"]))
    graph = loads["libcudnn_graph.so.9"]
    assert (graph.path, graph.requested_by, graph.how) == (None, standin, "dlopen")
    assert _by_soname(libpaths.in_process_loads(env, maps_text=""))["libcudnn.so.9"].path == str(tf_layout["cudnn"])


@pytest.mark.slow
def test_the_interpreter_s_own_dt_rpath_is_part_of_the_search(tf_layout, tmp_path, monkeypatch):
    """A Python whose binary carries DT_RPATH (conda's names its lib folder) serves a library that a framework
    object without a path of its own opens, ahead of LD_LIBRARY_PATH; a plain interpreter does not."""
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    sp = tmp_path / "site-packages"
    wheel = _so(sp / "nvidia/cudnn/lib", "libcudnn.so.9", "libcudnn.so.9")
    _record_wheel(sp, "nvidia_cudnn_cu12-9.3.0.75", ["nvidia/cudnn/lib/libcudnn.so.9"])
    _so(sp / "tensorflow", "libtensorflow_framework.so.2", "libtensorflow_framework.so.2")  # no path of its own
    _so(sp / "tensorflow/python", "_pywrap_tensorflow_internal.so", "_pywrap_tensorflow_internal.so",
        f"-L{sp / 'tensorflow'}", "-Wl,--no-as-needed", "-l:libtensorflow_framework.so.2",
        "-Wl,--enable-new-dtags,-rpath,$ORIGIN/..")
    standin = _so(tmp_path / "other", "libcudnn.so.9", "libcudnn.so.9")  # no version in its name
    (tmp_path / "python.c").write_text("int main(void) { return 0; }\n")
    subprocess.run(["gcc", "-o", "python", "python.c", f"-Wl,--disable-new-dtags,-rpath,{wheel.parent}"],
                   cwd=tmp_path, check=True, capture_output=True, timeout=60)
    monkeypatch.setenv("LD_LIBRARY_PATH", str(standin.parent))
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    env = _env(origin="live")
    env.frameworks, env.python.site_packages = [TF], [str(sp)]
    env.python.executable = str(tmp_path / "python")
    assert libpaths.after_change(env, {}) == []
    got = _by_soname(libpaths.in_process_loads(env, maps_text=""))
    assert (got["libcudnn.so.9"].path, got["libcudnn.so.9"].expected, got["libcudnn.so.9"].version) == (
        str(wheel), None, "9.3.0.75")
    assert (got["libcudart.so.12"].path, got["libcudart.so.12"].rule) == (None, "not found")  # a failed load is one
    # where the framework's own DT_RUNPATH names the wheel, the stand-in (no version known) wins by LD_LIBRARY_PATH
    env.python.site_packages = [str(tf_layout["sp"])]
    [wrong] = libpaths.after_change(env, {})
    assert (wrong.load.path, wrong.cause, wrong.version, wrong.expected_version) == (
        str(standin), "LD_LIBRARY_PATH", None, "9.3.0.75")


def test_predict_loads_without_ld_preload_for_the_framework_s_own_choice(tf_layout):
    standin = str(tf_layout["standin"])
    cudnn = _by_soname(libpaths.predict_loads([TF], [str(tf_layout["sp"])], sys.executable,
                                              {"LD_PRELOAD": standin}, []))["libcudnn.so.9"]
    assert (cudnn.path, cudnn.rule, cudnn.expected) == (standin, "already loaded (LD_PRELOAD)", str(tf_layout["cudnn"]))


def test_a_relative_ld_library_path_entry_is_taken_from_the_given_folder(tf_layout):
    root = tf_layout["other"].parent
    cudnn = _by_soname(libpaths.predict_loads([TF], [str(tf_layout["sp"])], sys.executable,
                                              {"LD_LIBRARY_PATH": "other"}, [], cwd=str(root)))["libcudnn.so.9"]
    assert (cudnn.path, cudnn.expected) == (str(tf_layout["standin"]), str(tf_layout["cudnn"]))


def test_two_frameworks_are_predicted_side_by_side(tf_layout, torch_layout):
    torch = Framework(name="torch", version="2.14.1", cuda="12.8")
    loads = libpaths.predict_loads([torch, TF], [str(torch_layout["sp"]), str(tf_layout["sp"])], sys.executable,
                                   {}, [])
    assert {(x.framework, x.soname) for x in loads} >= {("torch", "libcublas.so.12"), ("tensorflow", "libcudnn.so.9")}


@pytest.mark.slow
def test_an_opener_of_unknown_version_is_a_note(tf_layout, tmp_path):
    standin = _so(tmp_path / "plain", "libcudnn.so.9", "libcudnn.so.9")  # no version in its name or a RECORD
    notes: list = [Note("loader", "an earlier note")]
    loads = libpaths.predict_loads([TF], [str(tf_layout["sp"])], sys.executable,
                                   {"LD_LIBRARY_PATH": str(standin.parent)}, [], notes=notes)
    assert _by_soname(loads)["libcudnn.so.9"].path == str(standin)
    assert notes[0] == Note("loader", "an earlier note") and Note(
        "loader", "libcudnn.so.9: its version is unknown, so the libraries it opens are not predicted",
        "warning") in notes[1:]


@pytest.mark.slow
def test_a_preloaded_file_that_cannot_load_is_a_failed_load_under_its_name(torch_layout, tmp_path):
    """A broken wheel file (not ELF) that torch preloads by path: the load fails; it is named by its file name."""
    sp = tmp_path / "site-packages"
    shutil.copytree(torch_layout["sp"], sp, symlinks=True)
    broken = sp / "nvidia/cublas/lib/libcublas.so.12.8.4.1"
    broken.unlink()
    (sp / "nvidia/cublas/lib/libcublas.so.12").write_text("not an ELF object\n")
    torch = Framework(name="torch", version="2.14.1", cuda="12.8")
    loads = {x.soname: x for x in libpaths.predict_loads([torch], [str(sp)], sys.executable, {}, [])}
    assert (loads["libcublas.so.12"].path, loads["libcublas.so.12"].how) == (None, "preload")


def test_in_process_loads_where_proc_self_maps_cannot_be_read(tf_layout, monkeypatch):
    """Without /proc (another OS, a hardened container) nothing counts as mapped: the prediction is the plain one."""
    def no_proc(path, *args, **kwargs):
        raise FileNotFoundError(2, "No such file or directory", path)

    env = _env(origin="live")
    env.frameworks, env.python.site_packages, env.python.executable = [TF], [str(tf_layout["sp"])], sys.executable
    monkeypatch.setattr(libpaths, "open", no_proc, raising=False)
    assert _by_soname(libpaths.in_process_loads(env))["libcudnn.so.9"].path == str(tf_layout["cudnn"])


@pytest.mark.slow
def test_the_prediction_without_ld_library_path_is_simulated_only_where_it_took_part(torch_layout, tmp_path,
                                                                                  monkeypatch):
    """The same loads, with and without the second simulation (the link map without LD_PRELOAD and
    LD_LIBRARY_PATH), under each environment: LD_LIBRARY_PATH holding nothing torch loads (a container's driver
    folder), with an empty entry too; then a stand-in libcudnn.so.9 there (found by the first, failed load of
    libtorch_global_deps.so, before torch preloads its libraries), a libcudart.so.12 found there, a file there that
    ld.so refuses, LD_PRELOAD. The second simulation runs only in the last four."""
    from cudamatrix.ldso import linkmap

    torch = Framework(name="torch", version="2.14.1", cuda="12.8")
    sp = [str(torch_layout["sp"])]
    unrelated = tmp_path / "nvidia-lib64"
    _so(unrelated, "libcuda.so.1", "libcuda.so.1")
    standin = _so(tmp_path / "standin", "libcudnn.so.9", "libcudnn.so.9").parent
    cudart = _so(tmp_path / "cudart", "libcudart.so.12", "libcudart.so.12").parent
    refused = tmp_path / "refused"
    refused.mkdir()
    (refused / "libcudart.so.12").write_text("not an ELF object")
    cases = {"unrelated": ({"LD_LIBRARY_PATH": str(unrelated)}, False),
             "empty entry": ({"LD_LIBRARY_PATH": f"{unrelated}::"}, False),
             "found by a failed load": ({"LD_LIBRARY_PATH": str(standin)}, True),
             "found there": ({"LD_LIBRARY_PATH": f"{cudart}:{standin}"}, True),
             "refused there": ({"LD_LIBRARY_PATH": str(refused)}, True),
             "preload": ({"LD_PRELOAD": str(torch_layout["cudnn"])}, True)}
    took_part = linkmap.LinkMap.environment_took_part
    for name, (environ, second) in cases.items():
        runs: list[bool] = []
        monkeypatch.setattr(linkmap.LinkMap, "environment_took_part", lambda self, runs=runs: runs.append(took_part(self)) or True)
        always = libpaths.predict_loads([torch], sp, sys.executable, environ, [])
        monkeypatch.setattr(linkmap.LinkMap, "environment_took_part", took_part)
        assert libpaths.predict_loads([torch], sp, sys.executable, environ, []) == always, name
        assert runs == [second], name
