"""The opened half of the loader model against real cuDNN and NVRTC copies: what a shim dlopens by name is
predicted from data/loaders.json (the names) and the shim's own dynamic section (where ld.so looks), and a
ctypes child's /proc/self/maps is the truth.

Real parts: cuDNN 9.24.0.43 (torch 2.14.1's wheel: its shim carries DT_RPATH $ORIGIN) and 9.19.0.56 (torch
2.11.0's: DT_RUNPATH $ORIGIN), both whole in the torch CUDA venvs .ci/run makes; the shim and graph library of
cuDNN 9.14.0.64 (the release of the system cuDNN in the issue) and the shim and ops_infer library of cuDNN
8.9.7.29, read from their wheels (tests/support/realwheels.py); NVRTC 13.0.88 from torch 2.14.1's venv.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from support.loader_cases import clean_env, opened_prediction, opened_truth, record, resolution
from support.realwheels import TORCH211_PY, TORCH_PY, fetch, site_packages, system_layout

from cudamatrix.ldso import elf, openers

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc (Linux)")

DATA = Path(__file__).parent.resolve().parent.parent / "data" / "loaders.json"


@pytest.fixture(scope="module")
def cudnn924() -> Path:
    return site_packages(TORCH_PY, "CUDAMATRIX_TORCH_CUDA_PYTHON") / "nvidia" / "cudnn" / "lib"


@pytest.fixture(scope="module")
def cudnn919() -> Path:
    return site_packages(TORCH211_PY, "CUDAMATRIX_TORCH211_PYTHON") / "nvidia" / "cudnn" / "lib"


@pytest.fixture(scope="module")
def cudnn914(tmp_path_factory) -> Path:
    """cuDNN 9.14.0 laid out as a distribution package installs it (libcudnn_graph.so.9.14.0 and its link)."""
    src = fetch("nvidia-cudnn-cu13", "9.14.0.64", ["nvidia/cudnn/lib/libcudnn.so.9", "nvidia/cudnn/lib/libcudnn_graph.so.9"])
    return system_layout(src, "9.14.0", tmp_path_factory.mktemp("lib914"), ["libcudnn.so.9", "libcudnn_graph.so.9"])


@pytest.fixture(scope="module")
def versions(cudnn919, cudnn924) -> dict[str, str]:
    """What production reads: the nvidia-* wheels' RECORDs of both venvs (real path -> wheel version)."""
    from cudamatrix.ldso.libpaths import wheel_versions

    return wheel_versions([str(cudnn919.parents[2]), str(cudnn924.parents[2])])


def case(shim: Path, what: str, env: dict[str, str], versions: dict[str, str]):
    """(the truth, the model's link map, its graph library resolution, its unknown openers) for ``shim``."""
    truth = opened_truth(shim, what, env)
    lm, unknown = opened_prediction(shim, env, versions)
    return truth, lm, resolution(lm, "libcudnn_graph.so.9"), unknown


def names(truth: dict, folder: Path) -> list[str]:
    """The files of ``folder`` (by real path) that the child mapped, by base name."""
    real = os.path.realpath(folder)
    return sorted(os.path.basename(p) for p in truth["maps"] if os.path.dirname(os.path.realpath(p)) == real)


@pytest.mark.slow
def test_shim_with_runpath_opens_the_sub_libraries_ld_library_path_names(cudnn919, cudnn924, versions):
    # the reproduction: 9.19's shim, 9.24's folder on LD_LIBRARY_PATH
    env = clean_env(LD_LIBRARY_PATH=str(cudnn924))
    truth = opened_truth(cudnn919 / "libcudnn.so.9", "cudnn+engines", env)
    assert truth["version"] == 92400  # the other copy answers
    lm, unknown = opened_prediction(cudnn919 / "libcudnn.so.9", env, versions)
    graph = resolution(lm, "libcudnn_graph.so.9")
    record("cuDNN 9.19 shim (DT_RUNPATH), 9.24 folder on LD_LIBRARY_PATH: graph", graph.path, graph.rule,
           [p for p in truth["maps"] if "libcudnn_graph" in p])
    assert graph.path == os.path.realpath(cudnn924 / "libcudnn_graph.so.9") and graph.rule == "LD_LIBRARY_PATH"
    assert names(truth, cudnn924) == sorted({"libcudnn_graph.so.9", "libcudnn_heuristic.so.9",
                                             "libcudnn_engines_precompiled.so.9",
                                             "libcudnn_engines_runtime_compiled.so.9",
                                             "libcudnn_engines_tensor_ir.so.9"}) and unknown == []
    # the engine libraries: opened by the 9.24 graph library (its own names), found on LD_LIBRARY_PATH
    for soname in ("libcudnn_heuristic.so.9", "libcudnn_engines_precompiled.so.9", "libcudnn_engines_tensor_ir.so.9"):
        res = resolution(lm, soname)
        assert res.path == os.path.realpath(cudnn924 / soname) and res.requested_by == graph.path, res


@pytest.mark.slow
def test_shim_with_rpath_keeps_its_graph_but_not_its_engines(cudnn919, cudnn924, versions):
    # 9.24's shim searches its DT_RPATH first, so the graph library is its own; the graph library has
    # DT_RUNPATH only, so the engine libraries it opens come from LD_LIBRARY_PATH: torch 2.14.1 is not safe
    # with another cuDNN on LD_LIBRARY_PATH either, from its first convolution on
    env = clean_env(LD_LIBRARY_PATH=str(cudnn919))
    truth, lm, graph, _ = case(cudnn924 / "libcudnn.so.9", "cudnn+engines", env, versions)
    assert truth["version"] == 92400
    assert graph.path == os.path.realpath(cudnn924 / "libcudnn_graph.so.9") and graph.rule == "DT_RPATH of libcudnn.so.9"
    assert "libcudnn_graph.so.9" in names(truth, cudnn924)
    engines = resolution(lm, "libcudnn_engines_precompiled.so.9")
    record("cuDNN 9.24 shim (DT_RPATH), 9.19 folder on LD_LIBRARY_PATH: engines_precompiled", engines.path,
           engines.rule, [p for p in truth["maps"] if "engines_precompiled" in p])
    assert engines.path == os.path.realpath(cudnn919 / "libcudnn_engines_precompiled.so.9")
    assert engines.rule == "LD_LIBRARY_PATH" and "libcudnn_engines_precompiled.so.9" in names(truth, cudnn919)
    # 9.19's runtime-compiled engines do not load into 9.24's graph library: the truth says which file failed
    assert truth["engines_status"] != 0


@pytest.mark.slow
def test_nothing_on_the_path_keeps_every_library_in_its_folder(cudnn919, versions):
    env = clean_env()
    truth = opened_truth(cudnn919 / "libcudnn.so.9", "cudnn+engines", env)
    assert truth["version"] == 91900 and truth["engines_status"] == 0
    lm, _ = opened_prediction(cudnn919 / "libcudnn.so.9", env, versions)
    mapped = {os.path.realpath(p) for p in truth["maps"]}
    predicted = {r.path for r in lm.resolutions if r.path and "libcudnn" in r.path}
    # every mapped file was predicted; the others (ops, cnn, adv) wait for calls these two did not make
    assert mapped < predicted and {os.path.dirname(p) for p in predicted} == {os.path.realpath(cudnn919)}


def test_a_system_cudnn_on_ld_library_path_answers_for_the_wheel(cudnn919, cudnn914, versions):
    # the GPU machine's case: a distribution cuDNN 9.14 (libcudnn_graph.so.9.14.0 and its .so.9 link)
    env = clean_env(LD_LIBRARY_PATH=str(cudnn914))
    truth, lm, graph, _ = case(cudnn919 / "libcudnn.so.9", "cudnn", env, versions)
    assert truth["version"] == 91400
    record("cuDNN 9.19 shim, system-style 9.14 on LD_LIBRARY_PATH: graph", graph.path, graph.rule,
           [p for p in truth["maps"] if "libcudnn_graph" in p])
    assert graph.path == str(cudnn914 / "libcudnn_graph.so.9.14.0") == os.path.realpath(
        next(p for p in truth["maps"] if "libcudnn_graph" in p))
    assert graph.found_as == str(cudnn914 / "libcudnn_graph.so.9")  # found under the third name it tried


@pytest.mark.slow
def test_the_exact_release_name_is_tried_first_even_past_a_dt_rpath(cudnn924, tmp_path, versions):
    # the shim asks for libcudnn_graph.so.9.24.0 before libcudnn_graph.so.9: a file of that exact name on
    # LD_LIBRARY_PATH wins over the DT_RPATH folder, which holds only the .so.9 name
    other = tmp_path / "exact"
    other.mkdir()
    shutil.copy2(cudnn924 / "libcudnn_graph.so.9", other / "libcudnn_graph.so.9.24.0")
    env = clean_env(LD_LIBRARY_PATH=str(other))
    truth = opened_truth(cudnn924 / "libcudnn.so.9", "cudnn", env)
    lm, _ = opened_prediction(cudnn924 / "libcudnn.so.9", env, versions)
    graph = resolution(lm, "libcudnn_graph.so.9")
    record("cuDNN 9.24 shim, libcudnn_graph.so.9.24.0 on LD_LIBRARY_PATH", graph.path, graph.rule,
           [p for p in truth["maps"] if "libcudnn_graph" in p])
    assert [p for p in truth["maps"] if "libcudnn_graph" in p] == [str(other / "libcudnn_graph.so.9.24.0")]
    assert graph.path == str(other / "libcudnn_graph.so.9.24.0") and graph.rule == "LD_LIBRARY_PATH"


@pytest.mark.slow
def test_cudnn8_shim_opens_its_split_libraries_by_name(tmp_path):
    src = fetch("nvidia-cudnn-cu12", "8.9.7.29", ["nvidia/cudnn/lib/libcudnn.so.8",
                                                  "nvidia/cudnn/lib/libcudnn_ops_infer.so.8"])
    shim_dir, other = tmp_path / "wheel", tmp_path / "other"
    for d in (shim_dir, other):
        d.mkdir()
        shutil.copy2(src / "libcudnn_ops_infer.so.8", d / "libcudnn_ops_infer.so.8")
    shutil.copy2(src / "libcudnn.so.8", shim_dir / "libcudnn.so.8")
    versions = {str(shim_dir / "libcudnn.so.8"): "8.9.7.29"}
    for env, want, rule in ((clean_env(LD_LIBRARY_PATH=str(other)), other, "LD_LIBRARY_PATH"),
                            (clean_env(), shim_dir, "DT_RUNPATH of libcudnn.so.8")):
        truth = opened_truth(shim_dir / "libcudnn.so.8", "cudnn", env)
        assert truth["version"] == 8907
        lm, _ = opened_prediction(shim_dir / "libcudnn.so.8", env, versions)
        ops = resolution(lm, "libcudnn_ops_infer.so.8")
        record(f"cuDNN 8.9.7 shim, {'a copy on LD_LIBRARY_PATH' if want == other else 'nothing set'}: ops_infer",
               ops.path, ops.rule, [p for p in truth["maps"] if "ops_infer" in p])
        assert [p for p in truth["maps"] if "ops_infer" in p] == [str(want / "libcudnn_ops_infer.so.8")]
        assert ops.path == str(want / "libcudnn_ops_infer.so.8") and ops.rule == rule


@pytest.mark.slow
def test_nvrtc_13_0_finds_its_builtins_only_by_the_path_others_give(tmp_path):
    lib = site_packages(TORCH_PY, "CUDAMATRIX_TORCH_CUDA_PYTHON") / "nvidia" / "cu13" / "lib"
    nvrtc = lib / "libnvrtc.so.13"
    if elf.read_dynamic(str(nvrtc)).runpath is not None:
        pytest.skip("this NVRTC has a DT_RUNPATH: the case is NVRTC 13.0's (nvidia-cuda-nvrtc 13.0.x)")
    copy = tmp_path / "builtins"
    copy.mkdir()
    shutil.copy2(lib / "libnvrtc-builtins.so.13.0", copy / "libnvrtc-builtins.so.13.0")
    versions = {str(nvrtc): "13.0.88"}
    for env, want in ((clean_env(), None), (clean_env(LD_LIBRARY_PATH=str(copy)), copy)):
        truth = opened_truth(nvrtc, "nvrtc", env)
        lm, _ = opened_prediction(nvrtc, env, versions)
        res = resolution(lm, "libnvrtc-builtins.so.13.0")
        mapped = [p for p in truth["maps"] if "builtins" in p]
        record(f"NVRTC 13.0 (no DT_RUNPATH), {'builtins copy on LD_LIBRARY_PATH' if want else 'nothing set'}",
               res.path, res.rule, mapped)
        if want is None:  # its own folder is not searched: the compile fails
            assert mapped == [] and truth["compile_status"] != 0 and res.path is None
        else:
            assert mapped == [str(want / "libnvrtc-builtins.so.13.0")] == [res.path] and truth["compile_status"] == 0


def test_data_rows_match_the_wheels_on_disk(cudnn919, cudnn924):
    # what data/loaders.json says of the two real releases is what their files say
    for folder, version in ((cudnn919, "9.19.0"), (cudnn924, "9.24.0")):
        dyn = elf.read_dynamic(str(folder / "libcudnn.so.9"))
        todo, why = openers.openings("libcudnn.so.9", version)
        assert why is None and todo[0].soname == "libcudnn_graph.so.9"
        assert todo[0].names == (f"libcudnn_graph.so.{version}", f"libcudnn_graph.so.{version.rsplit('.', 1)[0]}",
                                 "libcudnn_graph.so.9", "libcudnn_graph.so")
        row = next(r for o in json.loads(DATA.read_text())["openers"] if o["family"] == "cudnn9" for r in o["rows"]
                   if openers._in_range(r["versions"], openers.version_tuple(version)))
        kind, value = ("DT_RPATH", dyn.rpath) if dyn.runpath is None else ("DT_RUNPATH", dyn.runpath)
        assert row["search"] == f"{kind} {value}"
        assert all((folder / t.soname).exists() for t in todo)


def test_an_unknown_release_is_not_predicted():
    todo, why = openers.openings("libcudnn.so.9", "9.99.0")
    assert todo == [] and "not in data/loaders.json" in why
    todo, why = openers.openings("libcudnn.so.9", None)
    assert todo == [] and "version is unknown" in why
    assert openers.openings("libfoo.so.1", "1.0") == ([], None)


def test_every_row_names_its_evidence():
    doc = json.loads(DATA.read_text())
    for opener in doc["openers"]:
        lows = []
        for row in opener["rows"]:
            assert row["checked"] and row["evidence"] and row["opens"], (opener["family"], row)
            if opener["opener"].startswith("lib"):
                low, high = (openers.version_tuple(p[2:]) for p in row["versions"].split(","))
                assert low <= high and row["names"] in ("versioned", "exact")
                lows.append((row.get("opener", ""), low, high))
        for (o1, _l1, h1), (o2, l2, _h2) in zip(lows, lows[1:], strict=False):
            assert o1 != o2 or h1 < l2, opener["family"]  # no release in two rows


# JAX's CUDA plugin dlopens libcudnn.so.9 by name from its own code, with a DT_RPATH naming the nvidia wheel
# folders (data/loaders.json, read from jax-cuda13-pjrt 0.11.2: its plugin is 411 MB, so a gcc-built stand-in
# carries the same DT_RPATH entries and makes the same call). The shim it gets is the real cuDNN 9.19 wheel's.
PLUGIN_C = r"""
#include <dlfcn.h>
#include <stddef.h>
void *open_leaf(void) {
    void *h = dlopen("libcudnn.so.9", RTLD_NOW);
    size_t (*version)(void) = h ? (size_t (*)(void))dlsym(h, "cudnnGetVersion") : NULL;
    if (version) version();
    return h;
}
"""
PLUGIN_RPATH = ("$ORIGIN/../../nvidia/cu13/lib:$ORIGIN/../nvidia/cu13/lib:$ORIGIN/../../nvidia/cudnn/lib:"
                "$ORIGIN/../nvidia/cudnn/lib:$ORIGIN/../../nvidia/nccl/lib:$ORIGIN/../nvidia/nccl/lib")


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_jax_plugin_gets_the_wheel_shim_and_ld_library_path_sub_libraries(cudnn919, cudnn914, versions, tmp_path):
    from support.loader_cases import driver, gcc, rpath, truth

    from cudamatrix.detect import libraries
    from cudamatrix.ldso.libpaths import open_libraries
    from cudamatrix.ldso.linkmap import LinkMap, system_search
    from cudamatrix.ldso.recipes import _jax
    from cudamatrix.models import Framework

    site = tmp_path / "site-packages"
    (site / "nvidia" / "cudnn").mkdir(parents=True)
    (site / "nvidia" / "cudnn" / "lib").symlink_to(cudnn919)  # the installed wheel's files
    plugin_dir = site / "jax_plugins" / "xla_cuda13"
    plugin_dir.mkdir(parents=True)
    (plugin_dir / "plugin.c").write_text(PLUGIN_C)
    gcc(["-shared", "-fPIC", "-Wl,-soname,xla_cuda_plugin.so", "-o", "xla_cuda_plugin.so", "plugin.c", "-ldl",
         *rpath(PLUGIN_RPATH)], plugin_dir)
    (site / "jaxlib").mkdir()
    (site / "jaxlib" / "x.c").write_text("int jaxlib_here(void) { return 1; }\n")
    gcc(["-shared", "-fPIC", "-o", "_jax.so", "x.c"], site / "jaxlib")
    program = driver(tmp_path / "bin")
    env = clean_env(LD_LIBRARY_PATH=str(cudnn914))
    mapped = [p for p in truth(program, plugin_dir / "xla_cuda_plugin.so", env, tmp_path, "open_leaf") if "libcudnn" in p]
    assert sorted(mapped) == sorted([str(cudnn919 / "libcudnn.so.9"), str(cudnn914 / "libcudnn_graph.so.9.14.0")])
    entries, _ = libraries.run_ldconfig(10)
    lm = LinkMap(system_search(env, entries, str(program), cwd=str(tmp_path)))
    assert _jax(lm, [str(site)], Framework(name="jax", version="0.11.2"))  # cuDNN unknown: read from its folders
    open_libraries(lm, versions, {})
    shim, graph = resolution(lm, "libcudnn.so.9"), resolution(lm, "libcudnn_graph.so.9")
    record("JAX CUDA plugin (DT_RPATH, stand-in), cuDNN 9.19 wheel, system-style 9.14 on LD_LIBRARY_PATH: shim",
           shim.path, shim.rule, [p for p in mapped if p.endswith("libcudnn.so.9")], when="first use")
    record("JAX CUDA plugin (DT_RPATH, stand-in), cuDNN 9.19 wheel, system-style 9.14 on LD_LIBRARY_PATH: graph",
           graph.path, graph.rule, [p for p in mapped if "graph" in p], when="first use")
    assert (shim.path, shim.rule) == (str(cudnn919 / "libcudnn.so.9"), "DT_RPATH of xla_cuda_plugin.so")
    assert (graph.path, graph.rule) == (str(cudnn914 / "libcudnn_graph.so.9.14.0"), "LD_LIBRARY_PATH")
