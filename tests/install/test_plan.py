"""Requirements files as pip reads them, and install plans, as tables.

Expectations from pip's documentation, "Requirements File Format": one requirement per line; ``-i``/
``--index-url``, ``--extra-index-url``, ``-f``/``--find-links`` and ``--no-index`` are global options (the short
forms may be glued to their value, long options may use ``=``); a line ending in a backslash continues on the
next; `` #`` starts a comment; ``--hash`` is a per-requirement option. From uv's documentation ("Compatibility
with pip"): uv reads the index variables ``UV_INDEX_URL``/``UV_EXTRA_INDEX_URL``/``UV_FIND_LINKS``, not ``PIP_*``.
"""
from __future__ import annotations

import os

import pytest
from support import tomlread

from cudamatrix.errors import UsageError
from cudamatrix.install import plan as plan_mod
from cudamatrix.install.plan import check_url, choose_installer, index_args, installer_argv, make_plan, uv_env_from_pip
from cudamatrix.models import Driver, Environment, GpuInfo, Pin, Solution
from cudamatrix.solve.requirements import parse_requirements

PT = "https://download.pytorch.org/whl"

PARSE = [
    ("torch==2.5.1\n", ["torch==2.5.1"], None, [], [], False),
    (f"-i {PT}/cu121\ntorch\n", ["torch"], f"{PT}/cu121", [], [], False),
    (f"-i{PT}/cu121\ntorch\n", ["torch"], f"{PT}/cu121", [], [], False),
    (f"--index-url={PT}/cu121\ntorch\n", ["torch"], f"{PT}/cu121", [], [], False),
    (f"--index-url {PT}/cu121\n", [], f"{PT}/cu121", [], [], False),
    (f"--extra-index-url {PT}/cu121\n--extra-index-url {PT}/cu124\n", [], None, [f"{PT}/cu121", f"{PT}/cu124"],
     [], False),
    ("-f /wheels\n--find-links=/more\n", [], None, [], ["/wheels", "/more"], False),
    ("-f/wheels\n", [], None, [], ["/wheels"], False),
    ("--no-index\n-f /wheels\ntorch\n", ["torch"], None, [], ["/wheels"], True),
    ("# a comment\n\ntorch==2.5.1  # pinned\n", ["torch==2.5.1"], None, [], [], False),
    ("torch==2.5.1 \\\n  --hash=sha256:ab\n", ["torch==2.5.1"], None, [], [], False),
    ("torch\\\n==2.5.1\n", ["torch==2.5.1"], None, [], [], False),
    ("numpy>=1.26 ; python_version >= '3.9'\n", ["numpy>=1.26; python_version >= \"3.9\""], None, [], [], False),
    # a URL may hold "=" itself: only the option's own "=" separates it from its value
    ("--index-url=https://i.example/simple?token=abc\n", [], "https://i.example/simple?token=abc", [], [], False),
    ("-i https://i.example/simple?token=abc\n", [], "https://i.example/simple?token=abc", [], [], False),
    ("--extra-index-url=https://e.example/s?a=b\n", [], None, ["https://e.example/s?a=b"], [], False),
    ("torch==2.5.1 # pinned # twice\n", ["torch==2.5.1"], None, [], [], False),
    ("torch==2.5.1 \\\n  ; python_version >= '3.9'\n", ["torch==2.5.1; python_version >= \"3.9\""], None, [], [], False),
]


@pytest.mark.parametrize("text, reqs, index, extra, links, no_index", PARSE)
def test_requirements_file_as_pip_reads_it(text, reqs, index, extra, links, no_index):
    parsed = parse_requirements(text, "r.txt")
    assert [str(r) for r in parsed.requirements] == reqs
    assert (parsed.index_url, parsed.extra_index_urls, parsed.find_links, parsed.no_index) == \
        (index, extra, links, no_index)


def test_hashes_are_per_requirement():
    parsed = parse_requirements("torch==2.5.1 --hash=sha256:ab\nnumpy==1.26.4\n", "r.txt")
    assert parsed.hashed == ["torch"]


BAD = [
    ("torch>>2\n", "r.txt:1: cannot parse requirement 'torch>>2'"),
    ("numpy\n-r other.txt\n", "r.txt:2: -r is not supported by check; flatten the file first"),
    ("-c constraints.txt\n", "r.txt:1: -c is not supported by check; flatten the file first"),
    ("-e .\n", "r.txt:1: -e is not supported by check; flatten the file first"),
    ("--requirement other.txt\n", "r.txt:1: --requirement is not supported by check; flatten the file first"),
    ("--constraint c.txt\n", "r.txt:1: --constraint is not supported by check; flatten the file first"),
    ("--editable .\n", "r.txt:1: --editable is not supported by check; flatten the file first"),
    ("--index-url 'unterminated\n", "r.txt:1: cannot parse"),
]


@pytest.mark.parametrize("text, message", BAD)
def test_requirements_file_errors_name_the_line(text, message):
    with pytest.raises(UsageError) as err:
        parse_requirements(text, "r.txt")
    assert str(err.value).startswith(message)


INSTALLER = [
    ("uv", "py", "install", ["uv", "pip", "install", "--python", "py"]),
    ("pip", "py", "install", ["py", "-m", "pip", "install"]),
    ("uv", "py", "uninstall", ["uv", "pip", "uninstall", "--python", "py"]),
    ("pip", "py", "uninstall", ["py", "-m", "pip", "uninstall"]),
]


@pytest.mark.parametrize("tool, python, verb, argv", INSTALLER)
def test_installer_argv(tool, python, verb, argv):
    assert installer_argv(tool, python, verb) == argv


def test_choose_installer():
    assert choose_installer("uv") == "uv" and choose_installer("pip") == "pip"
    with pytest.raises(UsageError) as err:
        choose_installer("conda")
    assert err.value.hint == "choose uv or pip"


UV_ENV = [
    ({"PIP_INDEX_URL": "https://i/simple"}, {"UV_INDEX_URL": "https://i/simple"}),
    ({"PIP_INDEX_URL": "https://i/simple", "UV_INDEX_URL": "https://u/simple"}, {}),
    ({"PIP_EXTRA_INDEX_URL": "https://e", "PIP_FIND_LINKS": "/w"}, {"UV_EXTRA_INDEX_URL": "https://e",
                                                                    "UV_FIND_LINKS": "/w"}),
    ({"PIP_INDEX_URL": ""}, {}),
    ({}, {}),
]


@pytest.mark.parametrize("environ, uv", UV_ENV)
def test_uv_reads_the_users_pip_index_variables(environ, uv):
    assert uv_env_from_pip(environ) == uv


URLS = [
    ("https://i/simple", False, True),
    ("file:///wheels", False, True),
    ("/wheels", False, True),
    ("http://i/simple", False, False),
    ("http://i/simple", True, True),
    ("ftp://i/simple", True, False),
]


@pytest.mark.parametrize("url, allow_http, ok", URLS)
def test_only_https_indexes_unless_allowed(url, allow_http, ok):
    if ok:
        check_url(url, allow_http)
    else:
        with pytest.raises(UsageError):
            check_url(url, allow_http)


def _solution(**kw) -> Solution:
    pins = [Pin(name="torch", version="2.5.1+cu121", index_url=f"{PT}/cu121"),
            Pin(name="nvidia-cudnn-cu12", version="9.1.0.70")]
    base = dict(request=["torch"], targets=["t"], packages=pins, to_install=pins,
                pip_args=["--extra-index-url", f"{PT}/cu121", "torch==2.5.1+cu121", "nvidia-cudnn-cu12==9.1.0.70"])
    base.update(kw)
    return Solution(**base)


INDEX_ARGS = [
    (dict(), None, ["--extra-index-url", f"{PT}/cu121"]),
    (dict(), "https://m.example/pt", ["--extra-index-url", "https://m.example/pt/cu121"]),
    (dict(pip_args=[f"--index-url={PT}/cu121", "torch==2.5.1+cu121"]), None, [f"--index-url={PT}/cu121"]),
    (dict(pip_args=["torch==2.5.1+cu121"], index_url=f"{PT}/cu121"), None, ["--extra-index-url", f"{PT}/cu121"]),
    (dict(pip_args=[], index_url=None), None, ["--extra-index-url", f"{PT}/cu121"]),  # from the pins
]


@pytest.mark.parametrize("changes, mirror, args", INDEX_ARGS)
def test_plan_index_arguments(changes, mirror, args):
    assert index_args(_solution(**changes), mirror=mirror) == args


def test_plan_steps_exact(monkeypatch):
    env = Environment(packages={"torch": "2.5.1+cpu", "nvidia-cudnn-cu12": "9.1.0.70"})
    sol = _solution(env={"LD_LIBRARY_PATH": "/x"})
    plan = make_plan(env, sol, python="/v/bin/python", installer="pip")
    install, environ, verify = plan.steps
    # only what differs is installed: the cuDNN wheel is already the wanted version
    assert install.argv == ["/v/bin/python", "-m", "pip", "install", "--extra-index-url", f"{PT}/cu121",
                            "torch==2.5.1+cu121"]
    assert install.reason == "install the solved set with pip: torch 2.5.1+cpu -> 2.5.1+cu121"
    assert (environ.kind, environ.env) == ("env", {"LD_LIBRARY_PATH": "/x"})
    assert verify.argv == ["/v/bin/python", "-m", "cudamatrix", "verify", "--python", "/v/bin/python"]
    assert plan.nothing_to_do is False
    for k in list(os.environ):
        if k.startswith(("PIP_", "UV_")):
            monkeypatch.delenv(k)
    monkeypatch.setenv("PIP_INDEX_URL", "https://corp/simple")
    uv = make_plan(Environment(), _solution(), python="/v/bin/python", installer="uv", verify=False)
    (step,) = uv.steps
    assert step.argv[:5] == ["uv", "pip", "install", "--python", "/v/bin/python"]
    assert step.env == {"UV_INDEX_URL": "https://corp/simple"}
    assert step.reason.endswith("torch 2.5.1+cu121 (new), nvidia-cudnn-cu12 9.1.0.70 (new)")


def test_plan_nothing_to_do():
    env = Environment(packages={"torch": "2.5.1+cu121", "nvidia-cudnn-cu12": "9.1.0.70"})
    plan = make_plan(env, _solution(), python="/v/bin/python", installer="pip", verify=False)
    assert plan.nothing_to_do is True and plan.steps == []
    assert make_plan(env, _solution(unchanged=True), python="p", installer="pip").nothing_to_do is True


# pip's documentation, "Configuration": PIP_CONFIG_FILE names the one file (os.devnull turns them all off);
# otherwise the global files (each XDG_CONFIG_DIRS entry's pip/pip.conf, /etc/pip.conf), the user's
# ($XDG_CONFIG_HOME/pip/pip.conf, else ~/.config/pip/pip.conf; the legacy ~/.pip/pip.conf) and the site's
# ($VIRTUAL_ENV/pip.conf)
CONFIGS = [
    ({"XDG_CONFIG_HOME": "cfg"}, ["cfg/pip/pip.conf"], ["cfg/pip/pip.conf"]),
    ({}, ["home/.config/pip/pip.conf"], ["home/.config/pip/pip.conf"]),
    ({}, ["home/.pip/pip.conf"], ["home/.pip/pip.conf"]),
    ({"XDG_CONFIG_DIRS": "a{sep}b"}, ["b/pip/pip.conf", "a/pip/pip.conf"], ["a/pip/pip.conf", "b/pip/pip.conf"]),
    ({"VIRTUAL_ENV": "venv"}, ["venv/pip.conf"], ["venv/pip.conf"]),
    ({}, ["venv/pip.conf"], []),     # a site file counts only for the active virtual environment
    ({"XDG_CONFIG_HOME": "cfg"}, ["home/.config/pip/pip.conf"], []),
]


@pytest.mark.parametrize("variables, files, found", CONFIGS)
def test_pip_config_files(tmp_path, monkeypatch, variables, files, found):
    for k in ("PIP_CONFIG_FILE", "XDG_CONFIG_HOME", "XDG_CONFIG_DIRS", "VIRTUAL_ENV"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_DIRS", str(tmp_path / "none"))
    for k, v in variables.items():
        monkeypatch.setenv(k, os.pathsep.join(str(tmp_path / part) for part in v.format(sep=os.pathsep).split(
            os.pathsep)))
    for f in files:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("[global]\n")
    got = [os.path.relpath(f, tmp_path) for f in plan_mod.pip_config_files() if f.startswith(str(tmp_path))]
    assert got == found


def test_pip_config_file_variable_names_the_one_file(tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    assert plan_mod.pip_config_files() == []
    monkeypatch.setenv("PIP_CONFIG_FILE", str(tmp_path / "pip.conf"))
    assert plan_mod.pip_config_files() == [str(tmp_path / "pip.conf")]


# index options carried into the plan: every URL option is moved to the mirror and checked, in both spellings;
# other options (--trusted-host) keep their value; without index options in pip_args, the solution's index
# fields and its pins' indexes are added once each as extra indexes
ARGS = [
    (["--index-url=http://i.example/simple", "--trusted-host", "i.example", "-f", f"{PT}/torch_stable.html",
      "torch==2.5.1"], None, True,
     ["--index-url=http://i.example/simple", "--trusted-host", "i.example", "-f", f"{PT}/torch_stable.html"]),
    ([f"--extra-index-url={PT}/cu121", "--extra-index-url", f"{PT}/cu124"], "https://m.example/pt", False,
     ["--extra-index-url=https://m.example/pt/cu121", "--extra-index-url", "https://m.example/pt/cu124"]),
    (["-i", f"{PT}/cu121", "torch"], "https://m.example/pt/", False, ["-i", "https://m.example/pt/cu121"]),
    (["torch==2.5.1", "--index-url"], None, False, ["--extra-index-url", f"{PT}/cu121"]),
]


@pytest.mark.parametrize("pip_args, mirror, allow_http, args", ARGS)
def test_index_options_in_the_plan(pip_args, mirror, allow_http, args):
    assert index_args(_solution(pip_args=pip_args), mirror=mirror, allow_http=allow_http) == args


def test_http_index_in_pip_args_is_refused_without_allow_http():
    for pip_args in (["--index-url=http://i.example/simple"], ["--extra-index-url", "http://i.example/simple"]):
        with pytest.raises(UsageError) as err:
            index_args(_solution(pip_args=pip_args))
        assert str(err.value) == "index URL 'http://i.example/simple' is not https"
    with pytest.raises(UsageError):
        index_args(_solution(pip_args=[], packages=[Pin(name="x", version="1", index_url="http://i.example/s")],
                             to_install=[]))


def test_fallback_index_options_are_each_added_once():
    sol = _solution(pip_args=[], index_url=f"{PT}/cu121", extra_index_urls=[f"{PT}/cu124", f"{PT}/cu121"],
                    to_install=[Pin(name="jax", version="1", index_url="https://jax.example/simple")])
    assert index_args(sol, mirror="https://m.example/pt") == [
        "--extra-index-url", "https://m.example/pt/cu121", "--extra-index-url", "https://m.example/pt/cu124",
        "--extra-index-url", "https://jax.example/simple"]
    # nothing left to install: the packages' indexes
    sol = _solution(pip_args=[], to_install=[], packages=[Pin(name="torch", version="1", index_url=f"{PT}/cu128")])
    assert index_args(sol) == ["--extra-index-url", f"{PT}/cu128"]


def test_plan_steps_carry_their_reasons_and_timeouts():
    plan = make_plan(Environment(), _solution(env={"LD_LIBRARY_PATH": "/x"}), python="/p", installer="pip")
    install, environ, verify = plan.steps
    assert (install.kind, install.timeout_s, install.env) == ("install", 1800.0, {})
    assert environ.reason == ("library search path the solved set needs (cudamatrix env, --write-activation, or a "
                              "preload in a running kernel)")
    assert (verify.kind, verify.timeout_s) == ("verify", 300.0)
    # the machine this runs on has no usable GPU (Environment(): no driver, no GPU): the plan says what verify does
    assert verify.reason == ("prove the result: a convolution on the CPU (no usable GPU here: the GPU check is not "
                             "possible)")
    assert plan.python == "/p" and plan.solution.request == ["torch"]
    gpu = Environment(driver=Driver(version="550.54.14", status="ok"), gpus=[GpuInfo(name="Tesla T4")])
    verify = make_plan(gpu, _solution(), python="/p", installer="pip").steps[-1]
    assert verify.reason == "prove the result: a cuDNN convolution on the GPU against the CPU"


def _lock_solution() -> Solution:
    from cudamatrix.models import FrameworkChoice

    pins = [Pin(name="tensorflow", version="2.15.0", extras=["and-cuda"]),
            Pin(name="torch", version="2.5.1+cu121", index_url=f"{PT}/cu121/"),
            Pin(name="nvidia-cudnn-cu12", version="8.9.4.25")]
    return Solution(request=["torch", "tensorflow[and-cuda]"], targets=["t"], packages=pins, matrix_version="2026.1",
                    frameworks=[FrameworkChoice(name="torch", version="2.5.1", variant="cu121", cuda="12.1",
                                                cudnn="9.1.0.70"),
                                FrameworkChoice(name="tensorflow", version="2.15.0", variant="and-cuda", cuda="12.2"),
                                FrameworkChoice(name="jax", version="0.4.30", variant="cpu")])


def test_lock_files_exact():
    from cudamatrix.lock.lockfile import requirements_txt, uv_project
    from cudamatrix.solve.target import Target

    targets = [Target(name=f"m{i}") for i in range(22)]
    head = ["# written by cudamatrix lock from matrix 2026.1"] + \
        [f"# target m{i}: no GPU; driver unknown; Python any; linux_x86_64" for i in range(20)] + \
        ["# ... and 2 more targets", "# request: torch tensorflow[and-cuda]",
         "# torch 2.5.1 cu121: CUDA 12.1, cuDNN 9.1.0.70", "# tensorflow 2.15.0 and-cuda: CUDA 12.2, cuDNN unknown",
         "# jax 0.4.30 cpu: CPU build"]
    from cudamatrix.lock.lockfile import PINS_ONLY

    assert requirements_txt(_lock_solution(), targets, ["numpy==1.26.4"]).splitlines() == head + ["# " + PINS_ONLY,
        f"--extra-index-url {PT}/cu121/", "tensorflow[and-cuda]==2.15.0", "torch==2.5.1+cu121",
        "nvidia-cudnn-cu12==8.9.4.25", "numpy==1.26.4"]
    assert uv_project(_lock_solution(), targets[:1], ["numpy==1.26.4"]).splitlines() == head[:2] + head[-4:] + [
        "# merge into pyproject.toml", "[project]", "dependencies = [", '    "tensorflow[and-cuda]==2.15.0",',
        '    "torch==2.5.1",', '    "nvidia-cudnn-cu12==8.9.4.25",', '    "numpy==1.26.4",', "]", "",
        "[[tool.uv.index]]", 'name = "pytorch-cu121"', f'url = "{PT}/cu121/"', "explicit = true", "",
        "[tool.uv.sources]", 'torch = [{ index = "pytorch-cu121" }]']
    assert tomlread.loads(uv_project(_lock_solution(), targets[:1], ["numpy==1.26.4"]))["tool"]["uv"]["sources"] == {
        "torch": [{"index": "pytorch-cu121"}]}


def test_uv_is_chosen_only_when_it_is_there_and_no_pip_configuration_is_in_force(tmp_path, monkeypatch):
    from support.uvtool import UV_DIR

    if UV_DIR is None:
        pytest.skip("uv is not installed (the test extra installs it)")
    monkeypatch.setenv("PATH", UV_DIR)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    assert choose_installer() == "uv"
    monkeypatch.setenv("PIP_CONFIG_FILE", str(tmp_path / "pip.conf"))
    (tmp_path / "pip.conf").write_text("[global]\nindex-url = https://corp/simple\n")
    assert choose_installer() == "pip"   # uv would not read the user's pip.conf
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert choose_installer() == "pip"
    with pytest.raises(UsageError) as err:
        choose_installer("poetry")
    assert str(err.value) == "unknown installer 'poetry'"


def test_http_hint_and_names_compared_as_pip_does():
    with pytest.raises(UsageError) as err:
        check_url("http://i.example/simple", False)
    assert err.value.hint == "use an https mirror, or pass --allow-http if you trust this network"
    # PEP 503 names: "nvidia_cudnn.cu12" is the installed "nvidia-cudnn-cu12"
    sol = _solution(to_install=[Pin(name="Nvidia_CUDNN.cu12", version="9.1.0.70")])
    plan = make_plan(Environment(packages={"nvidia-cudnn-cu12": "9.1.0.70"}), sol, python="p", installer="pip",
                     verify=False)
    assert plan.nothing_to_do is True
