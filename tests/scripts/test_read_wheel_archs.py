"""The GPU architectures of the JAX CUDA plugin builds (data/jax.json): read from the wheels (known) or inferred
from a read neighbour by the documented rule, and the solver's answers that rest on them.

Sources:
- the wheels themselves: ``cuobjdump --list-elf`` / ``--list-ptx`` of ``xla_cuda_plugin.so`` in
  ``jax-cuda12-pjrt`` / ``jax-cuda13-pjrt`` and the kernels of ``jax-cuda12-plugin`` (scripts/read_wheel_archs.py);
- jax-ml/jax ``.bazelrc`` at the release tags, ``HERMETIC_CUDA_COMPUTE_CAPABILITIES``: cuda12
  ``sm_50,sm_60,sm_70,sm_80,compute_90`` up to 0.5.3, ``...,sm_90,sm_100,compute_120`` from 0.6.0 (commit
  "Add sm_100 and sm_120 ..."), ``...,sm_100,sm_101,compute_120`` from 0.10.2 ("Add Thor SM arch"); cuda13
  ``sm_75,sm_80,sm_90,sm_100,compute_120`` from 0.7.2, ``...,sm_110,compute_120`` from 0.10.2;
- jax-ml/jax docs/installation.md (0.11.0): "On CUDA 13, JAX supports NVIDIA GPUs that have SM version 7.5 or
  newer"; on CUDA 12, 5.2 (Maxwell) or newer.
"""
from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from cudamatrix.errors import NoSolution
from cudamatrix.matrix.load import load_matrix
from cudamatrix.schema import cc_key
from cudamatrix.solve import rules
from cudamatrix.solve.solver import parse_request, solve
from cudamatrix.solve.target import Target, from_flags

REPO = Path(__file__).parent.resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
import read_wheel_archs  # noqa: E402


@pytest.fixture(scope="module")
def matrix():
    return load_matrix()


def gpu_variants(m):
    for rel in m.frameworks("jax"):
        for var in rel.variants:
            if var.cuda is not None:
                yield rel, var


def target(m, gpu, driver="580.65.06", python="3.12"):
    t = from_flags(m, driver=driver, gpus=[gpu], python=python, platform="linux_x86_64", cuda_toolkit=None,
                   base=Target(name="t"))
    return dataclasses.replace(t, name="t")


def test_every_jax_cuda_build_has_archs_known_or_inferred(matrix):
    rows = list(gpu_variants(matrix))
    assert len(rows) > 40
    known = 0
    for rel, var in rows:
        assert var.archs and var.ptx, f"jax {rel.version} {var.name}: no arch list"
        if "archs" in var.inferred:
            assert "ptx" in var.inferred
        else:
            # a known list names the wheel it was read from: this release, this CUDA major
            major = var.name.removeprefix("cuda")
            assert f"jax_cuda{major}_pjrt-{rel.version}-" in var.source, var.source
            assert "cuobjdump" in var.source
            known += 1
    assert known >= 20


def test_inferred_rows_copy_a_known_row_with_the_same_lists(matrix):
    rows = {(str(rel.version), var.name): var for rel, var in gpu_variants(matrix)}
    for (version, name), var in rows.items():
        if "archs" not in var.inferred:
            continue
        basis = var.inferred["archs"]
        m = re.match(r"copied from jax (\S+) (cuda\d+)", basis)
        assert m and m.group(2) == name, basis
        neighbour = rows[(m.group(1), name)]
        assert "archs" not in neighbour.inferred, f"{version} copies {m.group(1)}, itself inferred"
        assert (neighbour.archs, neighbour.ptx) == (var.archs, var.ptx)
        # the basis cites the build setting or the two read neighbours
        assert "HERMETIC_CUDA_COMPUTE_CAPABILITIES" in basis or "before and after it" in basis


@pytest.mark.parametrize("version,name,archs,ptx", [
    # read from the wheels; each equals the .bazelrc setting at the release's tag
    ("0.4.33", "cuda12", ["5.0", "6.0", "7.0", "8.0", "9.0"], ["9.0"]),
    ("0.6.0", "cuda12", ["5.0", "6.0", "7.0", "8.0", "9.0", "10.0", "12.0"], ["12.0"]),
    ("0.10.2", "cuda12", ["5.0", "6.0", "7.0", "8.0", "9.0", "10.0", "10.1", "12.0"], ["12.0"]),
    ("0.7.2", "cuda13", ["7.5", "8.0", "9.0", "10.0", "12.0"], ["12.0"]),
    ("0.10.2", "cuda13", ["7.5", "8.0", "9.0", "10.0", "11.0", "12.0"], ["12.0"]),
])
def test_lists_at_the_points_where_the_build_setting_changed(matrix, version, name, archs, ptx):
    rel = next(r for r in matrix.frameworks("jax") if str(r.version) == version)
    var = next(v for v in rel.variants if v.name == name)
    assert (var.archs, var.ptx) == (archs, ptx)


def test_cuda13_builds_start_at_turing(matrix):
    # installation.md: on CUDA 13, SM 7.5 or newer
    for rel, var in gpu_variants(matrix):
        lowest = min(var.archs, key=cc_key)
        assert lowest == ("7.5" if var.name == "cuda13" else "5.0"), (rel.version, var.name)


def test_h100_on_r580_gets_jax_cuda13(matrix):
    # before: every jax GPU candidate was rejected as "unknown" (exit 3)
    sol = solve([target(matrix, "NVIDIA H100 80GB HBM3")], parse_request(["jax"]), matrix)
    jax = sol.frameworks[0]
    assert (jax.name, jax.variant) == ("jax", "cuda13")
    assert not sol.unverified


def test_pascal_gets_the_cuda12_build(matrix):
    # sm_60: SASS in every cuda12 build, none in cuda13 (PTX 12.0 cannot JIT down to 6.0)
    t = target(matrix, "Tesla P100-PCIE-16GB")
    sol = solve([t], parse_request(["jax"]), matrix)
    assert sol.frameworks[0].variant == "cuda12"
    rel = next(r for r in matrix.frameworks("jax") if str(r.version) == sol.frameworks[0].version)
    cuda13 = next(v for v in rel.variants if v.name == "cuda13")
    arch = [r for r in rules.check(matrix, rel, cuda13, t) if r.rule == "arch"]
    assert arch and "sm_75" in arch[0].message and "compute_120" in arch[0].message


def test_kepler_has_no_jax_gpu_build(matrix):
    # sm_37: no SASS of major 3 and PTX 9.0/12.0 does not JIT to an older GPU
    with pytest.raises(NoSolution) as exc:
        solve([target(matrix, "3.7")], parse_request(["jax"]), matrix)
    assert "arch" in {c.rule for c in exc.value.causes}
    assert "unknown" not in {c.rule for c in exc.value.causes}


def test_an_answer_on_an_inferred_row_says_so(matrix):
    # 0.11.1 is not read from its wheel: its lists are inferred and the answer lists them as unverified
    sol = solve([target(matrix, "NVIDIA H100 80GB HBM3")], parse_request(["jax==0.11.1"]), matrix)
    facts = {u.fact if hasattr(u, "fact") else u["fact"] for u in sol.unverified}
    assert any("archs" in f for f in facts), sol.unverified


# --- the reader: a real fatbin built with nvcc, listed with the real cuobjdump ----------------------------

@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None or read_wheel_archs.find_cuobjdump() is None,
                    reason="needs nvcc (CUDA toolkit) and cuobjdump (nvidia-cuda-cuobjdump, a test dependency)")
def test_reader_lists_sass_and_ptx_of_a_built_library(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }\n"
                   "extern \"C\" void launch(float *x) { k<<<1, 32>>>(x); }\n")
    so = tmp_path / "libk.so"
    subprocess.run(["nvcc", "-shared", "-Xcompiler", "-fPIC", "-o", str(so), str(src),
                    "-gencode", "arch=compute_75,code=sm_75", "-gencode", "arch=compute_90,code=sm_90",
                    "-gencode", "arch=compute_90,code=compute_90"], check=True, capture_output=True)
    wheel = tmp_path / "demo-1.0-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.write(so, "demo/libk.so")
        zf.writestr("demo/__init__.py", "")
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "read_wheel_archs.py"), str(wheel)],
                         capture_output=True, text=True, check=True).stdout
    got = json.loads(out)
    assert got["archs"] == ["7.5", "9.0"] and got["ptx"] == ["9.0"]
    assert list(got["libraries"]) == ["demo/libk.so"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None or read_wheel_archs.find_cuobjdump() is None,
                    reason="needs nvcc (CUDA toolkit) and cuobjdump (nvidia-cuda-cuobjdump, a test dependency)")
def test_fatbin_headers_give_what_cuobjdump_lists(tmp_path):
    # the fallback for libraries cuobjdump refuses ("Invalid ELF": jax-cuda12-pjrt 0.4.23): the .nv_fatbin
    # headers of a library nvcc builds here name the same SASS and PTX as cuobjdump's own listing of it
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }\n"
                   "extern \"C\" void launch(float *x) { k<<<1, 32>>>(x); }\n")
    so = tmp_path / "libk.so"
    subprocess.run(["nvcc", "-shared", "-Xcompiler", "-fPIC", "-o", str(so), str(src),
                    "-gencode", "arch=compute_75,code=sm_75", "-gencode", "arch=compute_80,code=sm_80",
                    "-gencode", "arch=compute_80,code=compute_80"], check=True, capture_output=True)
    tool = read_wheel_archs.find_cuobjdump()
    listed = (read_wheel_archs._list(tool, so, "--list-elf")[0], read_wheel_archs._list(tool, so, "--list-ptx")[0])
    assert listed == ({"7.5", "8.0"}, {"8.0"})
    assert read_wheel_archs.fatbin_archs(so) == listed
    assert read_wheel_archs.fatbin_archs(src) == (set(), set())  # no ELF, no device code
