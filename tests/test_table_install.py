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

from cudamatrix.errors import UsageError
from cudamatrix.install import plan as plan_mod
from cudamatrix.install.plan import (check_url, choose_installer, index_args, installer_argv, make_plan,
                                     uv_env_from_pip)
from cudamatrix.models import Environment, Pin, Solution
from cudamatrix.solve.lockfile import parse_requirements

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
