"""doctor, env and fix read the loader model's predictions (detect.libpaths), not the search order alone:
findings only where a framework is predicted to map a wrong file. No I/O here: Environments as saved."""
from __future__ import annotations

from cudamatrix.cli.solve_cmd import env_advice
from cudamatrix.detect.libpaths import library_path_fix, wrong_loads
from cudamatrix.diagnose.findings import diagnose
from cudamatrix.matrix.data import load_matrix
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
    from cudamatrix.models import FrameworkReport
    from cudamatrix.render import human_report
    from cudamatrix.models import Report
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
