"""doctor, env and fix read the loader model's predictions (ldso.libpaths), not the search order alone:
findings only where a framework is predicted to map a wrong file. No I/O here: Environments as saved."""
from __future__ import annotations

import pytest

from cudamatrix.cli.env_cmd import env_advice
from cudamatrix.diagnose.findings import diagnose
from cudamatrix.ldso.libpaths import library_path_fix, wrong_loads
from cudamatrix.matrix.load import load_matrix
from cudamatrix.models import Environment, FileConflict, Framework, Library, LibraryLoad
from cudamatrix.schema import validate

SP = "/v/lib/python3.11/site-packages"
WHEEL = f"{SP}/nvidia/cudnn/lib/libcudnn.so.9"


def torch_env(loads: list[LibraryLoad], libs: list[Library], env_vars: dict[str, str] | None = None) -> Environment:
    env = Environment(origin="file")
    env.python.version, env.python.platform, env.python.site_packages = "3.11.7", "linux_x86_64", [SP]
    env.packages = {"torch": "2.14.1", "nvidia-cudnn-cu13": "9.24.0.43"}
    env.frameworks = [Framework(name="torch", version="2.14.1", cuda="13.0")]
    env.library_loads, env.libraries = loads, libs
    env.context.env = env_vars or {}
    return env


def wheel_lib(version: str = "9.24.0.43") -> Library:
    return Library(name="cudnn", soname="libcudnn.so.9", path=WHEEL, origin="wheel:nvidia-cudnn-cu13", version=version)


def codes(env: Environment) -> list[str]:
    return [f.code for f in diagnose(env, load_matrix())]


def test_a_copy_on_ld_library_path_that_loses_is_no_finding():
    # the first case: LD_LIBRARY_PATH holds a cuDNN, but DT_RPATH (or torch's preload) wins
    standin = Library(name="cudnn", soname="libcudnn.so.9", path="/opt/x/libcudnn.so.9", origin="LD_LIBRARY_PATH",
                      version="9.1.0", loaded_first=True)
    env = torch_env([LibraryLoad("torch", "libcudnn.so.9", WHEEL, "DT_RPATH of libtorch_cuda.so")],
                    [standin, wheel_lib()], {"LD_LIBRARY_PATH": "/opt/x"})
    assert not {"LIBRARY_SHADOWED", "CUDNN_MISMATCH"} & set(codes(env))
    assert library_path_fix(env) == {}
    assert env_advice(env, {})[0].startswith("nothing to change")


def test_a_copy_that_wins_by_ld_library_path_names_the_file_and_the_rule():
    standin = Library(name="cudnn", soname="libcudnn.so.9", path="/opt/x/libcudnn.so.9", origin="LD_LIBRARY_PATH",
                      version="9.1.0")
    load = LibraryLoad("torch", "libcudnn.so.9", "/opt/x/libcudnn.so.9", "LD_LIBRARY_PATH",
                       found_as="/opt/x/libcudnn.so.9", expected=WHEEL, expected_rule="DT_RUNPATH of y.so")
    env = torch_env([load], [standin, wheel_lib()], {"LD_LIBRARY_PATH": "/opt/x:/keep"})
    found = [f for f in diagnose(env, load_matrix()) if f.code == "LIBRARY_SHADOWED"]
    assert len(found) == 1 and found[0].severity == "error"
    assert "/opt/x/libcudnn.so.9" in found[0].title and "LD_LIBRARY_PATH" in found[0].evidence[0]
    assert library_path_fix(env) == {"LD_LIBRARY_PATH": "/keep"}
    # the copy is cuDNN 9.1 where torch 2.14.1 was built with 9.24: torch's own check refuses it
    assert "CUDNN_MISMATCH" in codes(env)


def test_same_version_elsewhere_is_not_a_wrong_load():
    other = Library(name="cudnn", soname="libcudnn.so.9", path="/opt/x/libcudnn.so.9", origin="LD_LIBRARY_PATH",
                    version="9.24.0.43")
    load = LibraryLoad("torch", "libcudnn.so.9", "/opt/x/libcudnn.so.9", "LD_LIBRARY_PATH", expected=WHEEL,
                       expected_rule="DT_RPATH of libtorch_cuda.so")
    env = torch_env([load], [other, wheel_lib()], {"LD_LIBRARY_PATH": "/opt/x"})
    assert wrong_loads(env) == [] and library_path_fix(env) == {}


def test_ld_preload_gets_its_own_code_and_change():
    load = LibraryLoad("torch", "libcudnn.so.9", "/tmp/s/libcudnn.so.9", "already loaded (LD_PRELOAD)",
                       expected=WHEEL, expected_rule="DT_RPATH of libtorch_cuda.so")
    env = torch_env([load], [wheel_lib()], {"LD_PRELOAD": "/tmp/s/libcudnn.so.9 /usr/lib/libkeep.so"})
    found = [f for f in diagnose(env, load_matrix()) if f.code == "LIBRARY_PRELOADED"]
    assert found and found[0].severity == "error" and "LD_PRELOAD" in found[0].fix
    assert library_path_fix(env) == {"LD_PRELOAD": "/usr/lib/libkeep.so"}
    assert "restarted" in env_advice(env, library_path_fix(env))[0]


def test_clobbered_wheel_copy_is_a_cudnn_mismatch_naming_that_file():
    # the third case: a cu12 cuDNN wheel overwrote the file torch maps (its RPATH still picks it)
    env = torch_env([LibraryLoad("torch", "libcudnn.so.9", WHEEL, "DT_RPATH of libtorch_cuda.so")],
                    [wheel_lib("9.1.0")])
    env.libraries.append(Library(name="cudnn", soname="libcudnn.so.8", path="/opt/old/libcudnn.so.8",
                                 origin="LD_LIBRARY_PATH", version="8.9.2", loaded_first=True))
    env.context.env = {"LD_LIBRARY_PATH": "/opt/old"}
    found = [f for f in diagnose(env, load_matrix()) if f.code == "CUDNN_MISMATCH"]
    assert len(found) == 1 and WHEEL in found[0].title and "9.24" in found[0].title
    assert "LD_LIBRARY_PATH" not in found[0].fix  # torch never loads the libcudnn.so.8 on the path
    assert library_path_fix(env) == {}  # and env agrees: no variable to change


def test_file_clobber_is_one_finding_per_pair():
    env = torch_env([], [])
    env.file_conflicts = [FileConflict(path=f"nvidia/cudnn/lib/libcudnn_{i}.so.9",
                                       distributions=["nvidia-cudnn-cu13", "nvidia-cudnn-cu12"]) for i in range(22)]
    env.file_conflicts.append(FileConflict(path="nvidia/x.so", distributions=["a", "b"]))
    found = [f for f in diagnose(env, load_matrix()) if f.code == "FILE_CLOBBER"]
    assert len(found) == 2
    big = next(f for f in found if "cudnn" in f.title)
    assert "22 files" in big.title and len(big.evidence) == 21 and big.evidence[-1] == "... and 2 more"


def test_saved_environment_round_trips_the_predictions():
    load = LibraryLoad("torch", "libcudnn.so.9", WHEEL, "DT_RPATH of libtorch_cuda.so", how="DT_NEEDED")
    env = torch_env([load], [wheel_lib()])
    back = validate(Environment, env.to_dict(), "saved")
    assert back.library_loads == [load]


def test_verify_reports_a_model_error_with_both_paths():
    from cudamatrix.models import FrameworkReport, Report
    from cudamatrix.render import human_report
    from cudamatrix.verify.run import compare_maps

    report = FrameworkReport(framework="torch", status="not_possible", cpu_checked=True, max_abs_error=0.0)
    report._maps, report._imported = ["/opt/other/libcudnn.so.9", f"{SP}/nvidia/cu13/lib/libcudart.so.13"], True
    loads = [LibraryLoad("torch", "libcudnn.so.9", WHEEL, "DT_RPATH of libtorch_cuda.so"),
             LibraryLoad("torch", "libcudart.so.13", f"{SP}/nvidia/cu13/lib/libcudart.so.13", "DT_RPATH of x.so"),
             LibraryLoad("torch", "libnvrtc.so.13", "/x/libnvrtc.so.13", "DT_RPATH of y.so", when="first use")]
    compare_maps(report, loads)
    assert report.model_errors == [{"soname": "libcudnn.so.9", "predicted": WHEEL,
                                    "mapped": "/opt/other/libcudnn.so.9", "rule": "DT_RPATH of libtorch_cuda.so"}]
    assert [r["agree"] for r in report.loads_compared] == [False, True, None]  # a first-use load not reached yet
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        human_report(Report(status="not_possible", frameworks=[report]))
    assert f"loader model error: libcudnn.so.9: predicted {WHEEL}" in out.getvalue()
    assert "mapped /opt/other/libcudnn.so.9" in out.getvalue()


# --- the opened half: what a framework's libraries open themselves (data/loaders.json) -------------------------

GRAPH = f"{SP}/nvidia/cudnn/lib/libcudnn_graph.so.9"
SYSTEM = "/lib/x86_64-linux-gnu"


def mixed_env(*sonames: str) -> Environment:
    """torch 2.11.0 (cuDNN 9.19.0.56) whose shim opens ``sonames`` from a system cuDNN 9.14 first on
    LD_LIBRARY_PATH, as the model predicts it (tests/ldso/test_libpaths.py shows it against the maps)."""
    shim = LibraryLoad("torch", "libcudnn.so.9", f"{SP}/nvidia/cudnn/lib/libcudnn.so.9", "DT_RPATH of libtorch_python.so",
                       version="9.19.0.56")
    loads = [shim] + [LibraryLoad("torch", s, f"{SYSTEM}/{s}.14.0", "LD_LIBRARY_PATH", requested_by=shim.path,
                                  how="dlopen", found_as=f"{SYSTEM}/{s}", when="first use", version="9.14.0",
                                  expected=f"{SP}/nvidia/cudnn/lib/{s}", expected_rule="DT_RUNPATH of libcudnn.so.9",
                                  expected_version="9.19.0.56") for s in sonames]
    env = torch_env(loads, [wheel_lib("9.19.0.56")], {"LD_LIBRARY_PATH": f"{SYSTEM}:/usr/local/nvidia/lib64"})
    env.packages = {"torch": "2.11.0", "nvidia-cudnn-cu13": "9.19.0.56"}
    env.frameworks = [Framework(name="torch", version="2.11.0", cuda="13.0")]
    return env


def test_the_loads_of_one_folder_are_one_finding_with_the_folder_and_the_fix():
    env = mixed_env("libcudnn_graph.so.9", "libcudnn_ops.so.9", "libcudnn_cnn.so.9", "libcudnn_adv.so.9")
    found = diagnose(env, load_matrix())
    shadowed = [f for f in found if f.code == "LIBRARY_SHADOWED"]
    assert len(shadowed) == 1 and shadowed[0].severity == "error"
    assert "from /lib/x86_64-linux-gnu (LD_LIBRARY_PATH)" in shadowed[0].title and "and 1 more" in shadowed[0].title
    assert len([e for e in shadowed[0].evidence if e.startswith("torch maps")]) == 4
    assert any(e.startswith(f"a mixed load: {SP}/nvidia/cudnn/lib/libcudnn.so.9") for e in shadowed[0].evidence)
    assert shadowed[0].fix.startswith("remove /lib/x86_64-linux-gnu from LD_LIBRARY_PATH")
    # cuDNN's version is the graph library's: the one from the system folder
    mismatch = next(f for f in found if f.code == "CUDNN_MISMATCH")
    assert f"cuDNN 9.14.0 from {SYSTEM}/libcudnn_graph.so.9.14.0" in mismatch.title
    assert mismatch.fix == shadowed[0].fix and "reinstall" not in mismatch.fix
    assert library_path_fix(env) == {"LD_LIBRARY_PATH": "/usr/local/nvidia/lib64"}
    advice = env_advice(env, library_path_fix(env), left=[])
    assert advice[0].startswith("# torch maps libcudnn_graph.so.9, libcudnn_ops.so.9") and SYSTEM in advice[0]
    assert advice[-1].startswith("# after this change every library")


def _shadowed_evidence(env) -> list[str]:
    return next(f for f in diagnose(env, load_matrix()) if f.code == "LIBRARY_SHADOWED").evidence


def test_the_evidence_names_each_load_its_rule_its_opener_and_its_own_copy():
    env = mixed_env("libcudnn_graph.so.9", "libcudnn_ops.so.9")
    lib = f"{SP}/nvidia/cudnn/lib"
    assert _shadowed_evidence(env) == [
        f"torch maps {SYSTEM}/{s}.14.0 for {s} (LD_LIBRARY_PATH; dlopen from {lib}/libcudnn.so.9 at first use), "
        f"9.14.0; its own copy: {lib}/{s} (DT_RUNPATH of libcudnn.so.9), 9.19.0.56"
        for s in ("libcudnn_graph.so.9", "libcudnn_ops.so.9")] + [
        f"a mixed load: {lib}/libcudnn.so.9 is the framework's own copy, but the libraries it opens come from {SYSTEM}"]


@pytest.mark.parametrize("change", ["mapped at start", "opened by another copy", "opened by another framework's copy",
                                    "linked, not opened"])
def test_a_load_not_opened_at_run_time_by_the_frameworks_own_copy_is_not_a_mixed_one(change):
    env = mixed_env("libcudnn_graph.so.9")
    load = env.library_loads[1]
    if change == "mapped at start":
        load.when = "start"
    elif change == "opened by another copy":
        load.requested_by = f"{SYSTEM}/libcudnn.so.9"
    elif change == "opened by another framework's copy":  # jax's own cuDNN shim, not torch's
        jax_shim = LibraryLoad("jax", "libcudnn.so.9", f"{SP}/jax_plugins/libcudnn.so.9", "DT_RPATH of xla.so")
        env.library_loads.append(jax_shim)
        load.requested_by = jax_shim.path
    else:
        load.how = "needed"
    evidence = _shadowed_evidence(env)
    mixed = any(e.startswith("a mixed load") for e in evidence)
    assert mixed is (change == "mapped at start")  # still opened by the framework's own copy, only earlier
    assert (" at first use)" in evidence[0]) is (change != "mapped at start")


def test_env_says_what_its_change_does_not_stop():
    env = mixed_env("libcudnn_graph.so.9")
    left = wrong_loads(env)  # as if the change left them (a copy mapped earlier in a running kernel)
    assert env_advice(env, library_path_fix(env), left=left)[-1].startswith("# still wrong after this change: "
                                                                          "libcudnn_graph.so.9")


def test_a_sub_library_of_the_same_release_elsewhere_is_no_finding():
    env = mixed_env("libcudnn_graph.so.9")
    env.library_loads[1].version = "9.19.0"  # the wheel says 9.19.0.56: the same release
    assert not {"LIBRARY_SHADOWED", "CUDNN_MISMATCH"} & set(codes(env))
    assert library_path_fix(env) == {} and env_advice(env, {})[0].startswith("nothing to change")


def test_verify_calls_a_family_from_two_copies_a_failure():
    from cudamatrix.models import FrameworkReport
    from cudamatrix.verify.run import check_mixed

    system = "/srv/cudnn-9.14/lib"  # not a real folder here: no symlink in it to resolve
    report = FrameworkReport(framework="jax", status="verified", cpu_checked=True, max_abs_error=0.0)
    report._maps = [f"{SP}/nvidia/cudnn/lib/libcudnn.so.9", f"{system}/libcudnn_graph.so.9.14.0",
                    f"{system}/libcudnn_engines_precompiled.so.9.14.0", f"{SP}/nvidia/cu13/lib/libcublasLt.so.13"]
    report.mapped_libraries = [{"path": report._maps[0], "file": "libcudnn.so.9", "version": "9.19.0.56"}]
    check_mixed(report)
    assert (report.status, report.finding_code) == ("failed", "LIBRARY_MIXED") and "by luck" in report.cause
    copies = report.mixed_loads[0]["copies"]
    assert [(c["folder"], c["version"]) for c in copies] == [(f"{SP}/nvidia/cudnn/lib", "9.19.0.56"),
                                                             (system, "9.14.0")]
    assert copies[1]["files"] == ["libcudnn_graph.so.9.14.0", "libcudnn_engines_precompiled.so.9.14.0"]
    one = FrameworkReport(framework="torch", status="verified")
    one._maps = [f"{SP}/nvidia/cudnn/lib/libcudnn.so.9", f"{SP}/nvidia/cudnn/lib/libcudnn_graph.so.9"]
    check_mixed(one)
    assert one.status == "verified" and one.mixed_loads == []


def test_env_does_not_say_nothing_to_change_over_an_unknown_opener():
    from cudamatrix.models import Note

    env = torch_env([LibraryLoad("torch", "libcudnn.so.9", WHEEL, "DT_RPATH of libtorch_cuda.so")], [wheel_lib()])
    env.notes.append(Note("loader", "libcudnn.so.9 9.99.0: how this release opens its libraries is not in "
                                    "data/loaders.json; the libraries it opens are not predicted", "warning"))
    advice = env_advice(env, {})
    assert advice[0].startswith("nothing to change for the loads the model predicts; not predicted: libcudnn.so.9 9.99.0")
