"""Run a table of hostile and careless inputs against every command, each in its own subprocess with a
timeout, and count tracebacks, hangs, broken JSON envelopes and side effects.

    python scripts/hostile_inputs.py [--before PATH] [--timeout 30] [--jobs 2] [--only SUBSTRING] [-v]

``--before PATH`` runs the package found at PATH (a checkout of an older version, put first on
PYTHONPATH) instead of the installed one, for before/after figures. Nothing here needs a GPU or the
network. Exit status: 0 when there were no tracebacks, hangs or side effects, else 1.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
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


@dataclass
class Outcome:
    case: Case
    code: int | None
    seconds: float
    traceback: bool = False
    hang: bool = False
    bad_envelope: str | None = None
    side_effect: str | None = None
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
    if case.device and not stat.S_ISCHR(os.lstat(case.device).st_mode):
        out.side_effect = f"the device node {case.device} was replaced by a regular file"
        os.unlink(case.device)
        os.mknod(case.device, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    shutil.rmtree(cwd, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", help="run the package at this path (first on PYTHONPATH)")
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", help="run the cases whose name contains this")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="hostile-"))
    try:
        files = build_files(work)
        table = cases(files, work)
        if args.only:
            table = [c for c in table if args.only in c.name]
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
        for label, rows in (("TRACEBACK", tracebacks), ("HANG", hangs), ("ENVELOPE", envelopes), ("SIDE EFFECT", effects)):
            for r in rows:
                print(f"{label}: {r.case.name} (exit {r.code}, {r.seconds:.1f}s) {r.bad_envelope or r.side_effect or ''}")
                if args.verbose and r.tail:
                    print("    " + r.tail.replace("\n", "\n    ")[-400:])
        print(json.dumps({"inputs": len(results), "tracebacks": len(tracebacks), "hangs": len(hangs),
                          "bad_envelopes": len(envelopes), "side_effects": len(effects),
                          "seconds": round(time.monotonic() - start, 1)}))
        return 1 if (tracebacks or hangs or effects or envelopes) else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
