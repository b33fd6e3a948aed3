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
from pathlib import Path

import pytest
from fakes import CUDNN_C, build_lib, child_env, run_cli
from loader_cases import env_said, record, said

TORCH_PY = os.environ.get("CUDAMATRIX_TORCH_CUDA_PYTHON")

if not TORCH_PY and os.environ.get("CI") == "true":
    pytest.fail("CI=true but CUDAMATRIX_TORCH_CUDA_PYTHON is not set: .ci/run makes the torch CUDA venv",
                pytrace=False)
pytestmark = [pytest.mark.installs,
              pytest.mark.skipif(not TORCH_PY, reason="CUDAMATRIX_TORCH_CUDA_PYTHON is not set (outside CI): "
                                                      "run .ci/run, or point it at a venv with torch==2.14.1")]

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
    out = run_cli(["doctor", "--python", TORCH_PY, "--json"], env=env, timeout=300)
    assert out.returncode in (0, 1), out.stderr.decode()[-2000:]
    return json.loads(out.stdout)["data"]


def cli_env(env: dict[str, str]) -> tuple[dict, str]:
    out = run_cli(["env", "--python", TORCH_PY, "--json"], env=env, timeout=300)
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    human = run_cli(["env", "--python", TORCH_PY], env=env, timeout=300)
    return json.loads(out.stdout)["data"], human.stdout.decode() + human.stderr.decode()


def verify(env: dict[str, str]) -> dict:
    out = run_cli(["verify", "--python", TORCH_PY, "--framework", "torch", "--json"], env=env, timeout=600)
    # no GPU: 6 when the CPU path ran (5 when the stand-in breaks the import); on a GPU machine 0 (or 5)
    assert out.returncode in ((0, 5) if shutil.which("nvidia-smi") else (5, 6)), out.stderr.decode()[-2000:]
    return json.loads(out.stdout)["data"]["frameworks"][0]


def predicted(data: dict, soname: str) -> dict:
    return next(x for x in data["environment"]["library_loads"] if x["soname"] == soname and x["framework"] == "torch")


def base_env(**extra: str) -> dict[str, str]:
    return child_env(extra=extra, drop=("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH",
                                        "LD_PRELOAD"))


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
    import sys

    out = subprocess.run([sys.executable, "-c", NOTEBOOK, TORCH_PY, *extra], env=env, capture_output=True, text=True,
                         timeout=300, cwd="/")
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


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
    from realwheels import TORCH211_PY

    out = subprocess.run([TORCH211_PY, "-c", CUDNN_PROBE], env=env, capture_output=True, text=True, timeout=300,
                         cwd="/")
    result = next((line[7:] for line in out.stdout.splitlines() if line.startswith("RESULT ")), out.stderr[-500:])
    return result, list(dict.fromkeys(line[4:] for line in out.stdout.splitlines()
                                      if line.startswith("MAP ") and "libcudnn" in line))


@pytest.fixture(scope="module")
def system914(tmp_path_factory) -> Path:
    from realwheels import fetch, system_layout

    src = fetch("nvidia-cudnn-cu13", "9.14.0.64", ["nvidia/cudnn/lib/libcudnn.so.9",
                                                   "nvidia/cudnn/lib/libcudnn_graph.so.9"])
    return system_layout(src, "9.14.0", tmp_path_factory.mktemp("lib") / "x86_64-linux-gnu",
                         ["libcudnn.so.9", "libcudnn_graph.so.9"])


def cli(args: list[str], env: dict[str, str], python: str) -> tuple[int, dict]:
    out = run_cli([*args, "--python", python, "--json"], env=env, timeout=600)
    return out.returncode, json.loads(out.stdout)["data"]


def test_torch211_with_a_system_cudnn_first_on_the_path(system914):
    from realwheels import TORCH211_PY, site_packages

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


def test_torch2141_keeps_its_graph_but_not_its_engines_with_another_cudnn_on_the_path():
    from realwheels import TORCH211_PY, site_packages

    other = site_packages(TORCH211_PY, "CUDAMATRIX_TORCH211_PYTHON") / "nvidia" / "cudnn" / "lib"  # cuDNN 9.19
    env = base_env(LD_LIBRARY_PATH=str(other))
    out = subprocess.run([TORCH_PY, "-c", CUDNN_PROBE], env=env, capture_output=True, text=True, timeout=300, cwd="/")
    assert "RESULT cudnn 92400" in out.stdout  # DT_RPATH $ORIGIN of the 9.24 shim: its own graph answers
    code, data = cli(["doctor"], env, TORCH_PY)
    loads = {x["soname"]: x for x in data["environment"]["library_loads"] if x["framework"] == "torch"}
    assert loads["libcudnn_graph.so.9"]["rule"] == "DT_RPATH of libcudnn.so.9" and not loads["libcudnn_graph.so.9"]["expected"]
    # the engine libraries, opened by the graph library at the first convolution (its DT_RUNPATH comes after
    # LD_LIBRARY_PATH; tests/detect/test_openers.py shows it with ctypes), come from the other copy
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
