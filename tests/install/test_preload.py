"""The notebook path: real shared libraries compiled here, loaded into a real child interpreter."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cudamatrix.install.preload import decide, load_order, notebook_context, parse_maps, soname_of

ROOT = Path(__file__).parent.resolve().parents[1]
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build a stand-in libcudnn")


def _libcudnn(folder: Path, version: int) -> Path:
    """A tiny libcudnn.so.8 exporting cudnnGetVersion() -> version."""
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / "cudnn.c"
    src.write_text(f"unsigned long cudnnGetVersion(void) {{ return {version}UL; }}\n")
    out = folder / "libcudnn.so.8"
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcudnn.so.8", "-o", str(out), str(src)], check=True)
    return out


def _child(code: str, env: dict) -> dict:
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60,
                       cwd=ROOT, env={**os.environ, **env})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@needs_gcc
def test_not_mapped_yet_preloads_and_wins_over_ld_library_path(tmp_path):
    wrong = _libcudnn(tmp_path / "system", 8200)
    right = _libcudnn(tmp_path / "wheel", 8902)
    out = _child(f"""
        import ctypes, json
        from cudamatrix.install.preload import decide, preload
        d = preload(decide([{str(right)!r}]))
        maps = open("/proc/self/maps").read()
        lib = ctypes.CDLL("libcudnn.so.8")  # what a framework does: by soname, LD_LIBRARY_PATH says 'system'
        lib.cudnnGetVersion.restype = ctypes.c_ulong
        print(json.dumps({{"action": d.action, "loaded": d.loaded, "in_maps": {str(right)!r} in maps,
                          "wrong_in_maps": {str(wrong)!r} in maps, "version": lib.cudnnGetVersion()}}))
    """, {"LD_LIBRARY_PATH": str(wrong.parent)})
    assert out["action"] == "preload" and out["loaded"] == [str(right)]
    assert out["in_maps"] and not out["wrong_in_maps"]
    assert out["version"] == 8902  # the soname lookup found the preloaded copy


@pytest.mark.slow
@needs_gcc
def test_wrong_copy_already_mapped_needs_a_restart_naming_the_file(tmp_path):
    wrong = _libcudnn(tmp_path / "system", 8200)
    right = _libcudnn(tmp_path / "wheel", 8902)
    out = _child(f"""
        import ctypes, json, sys, types
        ctypes.CDLL({str(wrong)!r}, mode=ctypes.RTLD_GLOBAL)
        sys.modules["ipykernel"] = types.ModuleType("ipykernel")  # as in a Jupyter kernel
        from cudamatrix.install.preload import decide
        d = decide([{str(right)!r}])
        print(json.dumps(d.to_dict()))
    """, {})
    assert out["action"] == "restart"
    assert out["mapped_wrong"] == [{"soname": "libcudnn.so.8", "mapped": str(wrong), "wanted": str(right)}]
    assert str(wrong) in out["reason"]
    assert out["context"] == "jupyter" and out["restart_line"] == "get_ipython().kernel.do_shutdown(True)"


def test_right_copy_mapped_is_nothing_to_do():
    maps = "7f00-7f01 r-xp 00000000 08:01 1 /w/nvidia/cudnn/lib/libcudnn.so.9\n"
    d = decide(["/w/nvidia/cudnn/lib/libcudnn.so.9"], maps_text=maps, modules={"torch": object()}, context="colab")
    assert d.action == "nothing" and d.imported == ["torch"]


def test_load_order_puts_dependencies_first():
    paths = ["/l/libcudnn.so.9", "/l/libcudnn_cnn.so.9", "/l/libcublas.so.12", "/l/libcudart.so.12",
             "/l/libcublasLt.so.12", "/l/libcudnn_graph.so.9", "/l/libcudnn_ops.so.9"]
    assert [os.path.basename(p) for p in load_order(paths)] == [
        "libcudart.so.12", "libcublasLt.so.12", "libcublas.so.12", "libcudnn_graph.so.9", "libcudnn_ops.so.9",
        "libcudnn_cnn.so.9", "libcudnn.so.9"]


def test_parsers_and_context():
    assert soname_of("/usr/lib/libcudnn.so.8.9.2") == "libcudnn.so.8"
    assert parse_maps("a b c d e /x/libfoo.so.1\na b c d e [heap]\na b c d e /x/libfoo.so.1\n") == ["/x/libfoo.so.1"]
    assert notebook_context({"COLAB_RELEASE_TAG": "x"}, {}) == "colab"
    assert notebook_context({"KAGGLE_KERNEL_RUN_TYPE": "Interactive"}, {}) == "kaggle"
    assert notebook_context({}, {}) == "python"
