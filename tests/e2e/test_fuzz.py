"""Property-based fuzzing (Hypothesis) of every reader of untrusted text, and a table of hostile files and
environment variables run against the real CLI (in this process; in a process of its own for a variable read at
process start).

The properties: any text gives an Environment (or a UsageError with a message), never another exception,
in bounded time; any outcome of a command with ``--json`` is one envelope with the pinned keys. The whole
module stays well under two minutes (max_examples and deadlines below)."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.fakes import run_cli, spawn_cli

from cudamatrix.errors import CudamatrixError, UsageError

FUZZ = settings(max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.too_slow],
                derandomize=True)
ENVELOPE = {"schema_version", "command", "status", "exit_code", "data", "errors"}

# text that looks like the tools' outputs, mutated: real fragments glued with random text
FRAGMENTS = [
    "NVIDIA-SMI 535.104.05", "Driver Version: 535.104.05", "CUDA Version: 12.2", "| 0  Tesla T4  Off |",
    "GPU 0: Tesla T4 (UUID: GPU-1)", "GPU 0: [/] (UUID: [/])", "PyTorch version: 2.1.0+cu121",
    "CUDA used to build PyTorch: 12.1", "cuDNN version: Could not collect", "Nvidia driver version: 535.104.05",
    "\tlibcudart.so.12 (libc6,x86-64) => /usr/lib/libcudart.so.12", "Cuda compilation tools, release 12.4, V12.4.131",
    "torch==2.1.0", "nvidia-cudnn-cu12==8.9.2.26", "NVRM: API mismatch", "compute capability: 7.5",
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05", "Product Name : Tesla T4", "> ", "```",
    "==============NVSMI LOG==============", "index, name, driver_version", "0, Tesla T4, 535.104.05",
    "9" * 5000, "\x00", "\r\n", "☃", "[bold]", "%%%", "Failed to initialize NVML: Driver/library version mismatch",
]
report_text = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=80)), max_size=25).map("\n".join)


@pytest.mark.slow
@FUZZ
@given(report_text)
def test_report_readers_give_an_environment_for_any_text(text):
    from cudamatrix.models import Environment
    from cudamatrix.pastes.reports import from_reports

    start = time.process_time()  # CPU time: load from other processes does not move it, a hang does
    env = from_reports([("paste", text)])
    assert isinstance(env, Environment)
    json.dumps(env.to_dict())
    assert time.process_time() - start < 2


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20)
env_keys = st.sampled_from(["schema_version", "driver", "gpus", "python", "packages", "frameworks", "libraries",
                            "toolkits", "context", "notes", "origin", "file_conflicts", "requirements", "x"])
env_like = st.dictionaries(env_keys, json_values, max_size=6)


@pytest.mark.slow
@FUZZ
@given(st.one_of(env_like, json_values, st.binary(max_size=200).map(lambda b: b.decode("latin-1"))))
def test_the_env_loader_returns_an_environment_or_a_usage_error(tmp_path_factory, value):
    from cudamatrix.detect import load_environment

    path = tmp_path_factory.mktemp("env") / "env.json"
    path.write_text(value if isinstance(value, str) else json.dumps(value))
    try:
        env = load_environment(str(path))
    except UsageError as exc:
        assert exc.message
        return
    json.dumps(env.to_dict())


@pytest.mark.slow
@FUZZ
@given(env_like)
def test_a_loaded_environment_can_be_diagnosed_and_solved_for(tmp_path_factory, value):
    """What the loader accepts, the later stages can read (a value of the right type but a shape they
    cannot parse must be refused by the loader, not crash the solver)."""
    from cudamatrix.detect import load_environment
    from cudamatrix.diagnose.findings import diagnose
    from cudamatrix.matrix.load import load_matrix
    from cudamatrix.solve.target import from_environment

    path = tmp_path_factory.mktemp("env") / "env.json"
    value.setdefault("schema_version", 1)
    path.write_text(json.dumps(value))
    try:
        env = load_environment(str(path))
    except UsageError:
        return
    matrix = load_matrix()
    try:
        from_environment(env, matrix)
        diagnose(env, matrix)
    except CudamatrixError:
        pass


requirement_text = st.one_of(
    st.text(max_size=60),
    st.builds(lambda n, op, v: f"{n}{op}{v}", st.sampled_from(["torch", "jax", "tensorflow", "torchvision", "x[/]"]),
              st.sampled_from(["==", ">=", "<", "~=", "===", "!=", ""]),
              st.one_of(st.from_regex(r"[0-9][0-9.]{0,8}(\+[a-z0-9]{1,6})?", fullmatch=True), st.text(max_size=10))))


@pytest.mark.slow
@FUZZ
@given(st.lists(requirement_text, min_size=1, max_size=4))
def test_requirement_parsing_gives_a_request_or_a_usage_error(texts):
    from cudamatrix.solve.solver import parse_request

    try:
        parse_request(texts)
    except UsageError as exc:
        assert exc.message


@pytest.mark.slow
@FUZZ
@given(st.lists(st.one_of(requirement_text, st.sampled_from([
    "--index-url https://download.pytorch.org/whl/cu121#x", "-i", "--extra-index-url '", "-r x.txt", "# c",
    "--index-url=https://download.pytorch.org/whl/?q", "-e .", "--hash=sha256:[/]"])), max_size=8).map("\n".join))
def test_requirements_files_parse_or_raise_a_usage_error(text):
    from cudamatrix.solve.requirements import parse_requirements

    try:
        parse_requirements(text, "req.txt")
    except UsageError as exc:
        assert exc.message


@pytest.mark.slow
@FUZZ
@given(st.text(max_size=40), st.integers(min_value=-10, max_value=300), json_values,
       st.lists(st.dictionaries(st.text(max_size=8), st.text(max_size=20), max_size=3), max_size=3))
def test_any_outcome_is_one_envelope_with_the_pinned_keys(command, code, data, errors):
    from cudamatrix import render

    doc = render.envelope(command, code, data, errors)
    assert set(doc) == ENVELOPE
    assert json.loads(json.dumps(doc)) == doc
    assert doc["status"] == render.STATUS_BY_EXIT.get(code, "error")


@pytest.mark.slow
@FUZZ
@given(st.text(max_size=60), st.text(max_size=60))
def test_an_error_from_any_command_body_is_one_envelope(message, hint):
    import contextlib
    import io

    from cudamatrix.cli.common import Done, guarded

    @guarded("fuzz")
    def body(as_json: bool = False):
        raise UsageError(message, hint=hint or None)

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(Done) as done:
        body(as_json=True)
    doc = json.loads(out.getvalue())
    assert set(doc) == ENVELOPE and doc["exit_code"] == done.value.code == 2
    assert doc["errors"][0]["message"] == message
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(Done):
        body(as_json=False)  # rich must not read the message as markup


@pytest.mark.slow
@FUZZ
@given(st.sampled_from(["bash", "sh", "zsh", "fish", "powershell"]), st.text(max_size=40))
def test_quoting_is_one_word_without_expansion(shell, value):
    """Structural check of the quoting (sourcing in real shells: test_hardening)."""
    from cudamatrix.safe.shells import quote
    from cudamatrix.safe.text import CONTROLS

    q = quote(shell, value)
    assert not CONTROLS.search(q)  # printed, the word does nothing to a terminal
    if CONTROLS.search(value):
        return  # each shell's escapes for control characters: sourced back in test_hardening
    if shell == "fish":
        assert q == value or (q.startswith("'") and q.endswith("'"))
    elif shell == "powershell":
        assert q.startswith("'") and q.endswith("'")
        inner = q[1:-1]
        assert all(inner.count(c) % 2 == 0 for c in "'\u2018\u2019\u201a\u201b")


# --- hostile files and variables against the real CLI ---------------------------------------------------

def _cli(argv, env=None, cwd=None, timeout=60, process=False):
    """The CLI in this process, or in a process of its own (``process``: a variable read at process start),
    ``env`` over this process's environment."""
    full = {**os.environ, **(env or {})}
    run = spawn_cli if process else run_cli
    return run(argv, env=full, input="", timeout=timeout, text=True, cwd=cwd)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    sys.path.insert(0, str(Path(__file__).parent.resolve().parent.parent / "scripts"))
    import hostile_inputs

    root = tmp_path_factory.mktemp("hostile")
    return hostile_inputs.build_files(root)


FILE_TABLE = ["fifo", "dev_zero", "symlink_loop", "directory", "binary", "huge", "nested_json", "nested_obj",
              "bigint_json", "not_utf8", "sv_999", "cc_abc", "markup_gpu_env", "smi_markup", "freeze_hostile",
              "collect_env_hostile", "nvcc_hostile", "smi_bigint", "missing", "empty"]


@pytest.mark.slow
@pytest.mark.parametrize("name", FILE_TABLE)
def test_hostile_files_are_read_or_refused_cleanly(hostile, name):
    path = hostile[name]
    for argv in (["doctor", "--from", path, "--json"], ["detect", "--env", path, "--json"]):
        out = _cli(argv)
        assert "Traceback" not in out.stderr, (argv, out.stderr[-600:])
        doc = json.loads(out.stdout)
        assert set(doc) == ENVELOPE and doc["exit_code"] == out.returncode in (0, 1, 2)


AT_START = ("LD_LIBRARY_PATH", "LC_ALL")  # read by the loader and the interpreter when a process starts


@pytest.mark.slow
@pytest.mark.parametrize("var,value", [
    ("LD_LIBRARY_PATH", "::[/]:./x:a\\'\"; touch PWNED; #"), ("LD_LIBRARY_PATH", "x" * 10000),
    ("CUDA_HOME", "rel/[/]"), ("CUDA_VISIBLE_DEVICES", "[/]"), ("LC_ALL", "C"), ("COLUMNS", "abc"),
    ("XDG_CACHE_HOME", "/dev/null"), ("HOME", "/nonexistent"),
])
def test_hostile_environment_variables(tmp_path, var, value):
    env = {var: value}
    if var == "HOME":
        env["XDG_CACHE_HOME"] = ""
    for argv in (["doctor", "--json"], ["env", "--shell", "fish"]):
        out = _cli(argv, env=env, cwd=tmp_path, process=var in AT_START)
        assert "Traceback" not in out.stderr, (argv, out.stderr[-600:])
        assert out.returncode in (0, 1), (argv, out.returncode, out.stderr[-300:])
    assert not list(tmp_path.rglob("PWNED"))
