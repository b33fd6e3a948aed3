"""The loader model on the real torch CUDA wheel (torch 2.14.1 with its nvidia-* wheels): ``import torch`` maps
its CUDA libraries without a GPU, so /proc/self/maps after the import is the truth. A stand-in
``libcudnn.so.9`` (gcc-built, cuDNN 9.1.0 by its own cudnnGetVersion) goes on LD_LIBRARY_PATH — torch still maps
the wheel's copy, because libtorch_cuda.so carries DT_RPATH, searched before LD_LIBRARY_PATH — and into
LD_PRELOAD — the stand-in is mapped and the import fails. doctor, env and verify must say the same.

The torch environment is made once per CI run by .ci/run and named by $CUDAMATRIX_TORCH_CUDA_PYTHON.
"""
from __future__ import annotations

import json
import shutil
import os
import re
import subprocess
from pathlib import Path

import pytest

from fakes import CUDNN_C, build_lib, child_env, run_cli
from loader_cases import record

TORCH_PY = os.environ.get("CUDAMATRIX_TORCH_CUDA_PYTHON")

if not TORCH_PY and os.environ.get("CI") == "true":
    pytest.fail("CI=true but CUDAMATRIX_TORCH_CUDA_PYTHON is not set: .ci/run makes the torch CUDA venv",
                pytrace=False)
pytestmark = [pytest.mark.slow,
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
    record("torch 2.14.1, nothing set", load["path"], load["rule"], cudnn_mapped(maps))
    assert cudnn_mapped(maps) == [wheel] == [load["path"]]
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
    record("torch 2.14.1, stand-in libcudnn.so.9 on LD_LIBRARY_PATH", load["path"], load["rule"], cudnn_mapped(maps))
    assert load["path"] == wheel and load["expected"] is None
    assert load["rule"].startswith("already loaded") or load["rule"].startswith("DT_RPATH")
    codes = {f["code"] for f in data["findings"]}
    assert not codes & {"LIBRARY_SHADOWED", "LIBRARY_PRELOADED", "CUDNN_MISMATCH"}, data["findings"]
    changes, human = cli_env(env)
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
    record("torch 2.14.1, stand-in libcudnn.so.9 in LD_PRELOAD", load["path"], load["rule"], cudnn_mapped(maps))
    assert load["path"] == str(standin) and load["rule"] == "already loaded (LD_PRELOAD)"
    found = [f for f in data["findings"] if f["code"] == "LIBRARY_PRELOADED"]
    assert found and found[0]["severity"] == "error" and str(standin) in found[0]["title"]
    assert not [f for f in data["findings"] if f["code"] == "LIBRARY_SHADOWED"]
    changes, human = cli_env(env)
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
