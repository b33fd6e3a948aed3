"""Environments from pasted reports: kind recognition, parsers on real pastes, bad input through the CLI."""
from __future__ import annotations

import json

import pytest
from support.fakes import DATA, fixture, run_cli

from cudamatrix.models import Note
from cudamatrix.pastes.reports import from_reports


def env_of(*rels):
    return from_reports([(r, fixture(r)) for r in rels])


def fw(env, name):
    return next(f for f in env.frameworks if f.name == name)


def test_collect_env_old_torch_with_driver_and_gpus():
    env = env_of("collect_env/rhel7_1.6.0cu102_driver418.67_2xV100_pytorch43058.txt")
    assert env.origin == "report"
    assert env.driver.version == "418.67"
    assert [g.name for g in env.gpus] == ["Tesla V100-PCIE-16GB"] * 2
    torch = fw(env, "torch")
    assert (torch.version, torch.variant, torch.cuda) == ("1.6.0", "cu102", "10.2")
    assert env.python.version == "3.7"


def test_collect_env_no_driver_warning_and_local_version():
    env = env_of("collect_env/centos7_1.7.0cu110_no-driver-warning_pytorch74733.txt")
    assert env.driver.status == "absent"
    torch = fw(env, "torch")
    assert (torch.variant, torch.cuda) == ("cu110", "11.0")
    assert env.python.version == "3.6.4" and env.python.platform == "linux_x86_64"


def test_collect_env_conda_toolkit_and_runtime():
    env = env_of("collect_env/ubuntu20.04_1.10.2cu113_conda_could-not-collect_pytorch77520.txt")
    assert {t.version for t in env.toolkits} >= {"11.3.109", "11.3.1"}
    assert env.driver.version is None  # "Could not collect"
    assert env.packages["torchvision"] == "0.11.3"


def test_collect_env_windows_quoted_cpu_and_cudnn_dll():
    win = env_of("collect_env/windows_quoted_1.5.0cu101_2xTITAN-RTX_pytorch40682.txt")
    assert win.context.os == "windows" and win.driver.version == "442.92"
    assert fw(win, "torch").variant == "cu101"
    assert [g.name for g in win.gpus] == ["TITAN RTX", "TITAN RTX"]
    assert win.libraries[0].soname == "cudnn64_7.dll"
    cpu = env_of("collect_env/windows10_1.7.1cpu_pytorch49325.txt")
    assert fw(cpu, "torch").variant == "cpu"


def test_collect_env_library_section_only():
    env = env_of("collect_env/libs-section_torch2.6.0_pip-nvidia-cu12_conda-cuda-cudart_vllm15672.txt")
    assert env.packages["nvidia-cudnn-cu12"] == "9.1.0.70"
    assert env.packages["torch"] == "2.6.0"
    torch = fw(env, "torch")
    assert (torch.cuda, torch.variant, torch.cudnn) == ("12.4", "cu124", "9.1.0")


def test_ldconfig_and_nvcc_reports():
    env = env_of("ldconfig/arch_opt-cuda9.1_libcuda_cutorch809.txt", "nvcc/10.0_linux_qixuema-envs4.txt",
                 "nvcc/13.0_V13.0.88_x86-doc-example.txt", "nvcc/11.5_partial_plus-list-gpu-code_dfdx619.txt")
    paths = [lib.path for lib in env.libraries]
    assert "/opt/cuda/lib64/libcudart.so.9.1" in paths and "/usr/lib/libcuda.so.1" in paths
    assert "/usr/lib32/libcuda.so.1" not in paths  # the 32-bit copy is not what a 64-bit process loads
    assert [t.version for t in env.toolkits] == ["10.0.130", "13.0.88", "11.5.119"]
    cudnn = env_of("ldconfig/cudnn9-only-system_truncated_stream-whisper28.txt")
    assert {lib.name for lib in cudnn.libraries} == set()  # only cudnn sub-libraries: not tracked copies
    both = env_of("ldconfig/cudart-11.0-and-10.2_truncated_gpustat164.txt")
    assert [(lib.soname, lib.path) for lib in both.libraries] == [
        ("libcudart.so.11.0", "/usr/local/cuda-11.8/targets/x86_64-linux/lib/libcudart.so.11.0")]


def test_pip_list_fragment_and_freeze():
    env = env_of("pip/pip-list-fragment_cu11-wheels_norse375.txt")
    assert env.packages["nvidia-cuda-runtime-cu11"] == "11.7.99" and env.packages["nvidia-cudnn-cu11"] == "8.5.0.96"
    freeze = from_reports([("f", "numpy==2.1.0\ntorch==2.5.1+cu121\ntorchvision==0.20.1+cu121\n"
                                  "nvidia-cudnn-cu12==9.1.0.70\n")])
    assert fw(freeze, "torch").variant == "cu121" and fw(freeze, "torchvision").cuda == "12.1"
    table = from_reports([("l", "Package    Version\n---------- -------\njax        0.4.30\njaxlib     0.4.30\n"
                                "jax-cuda12-plugin 0.4.30\n")])
    assert fw(table, "jaxlib").variant == "cuda12"


def test_several_kinds_concatenated_in_one_file():
    text = "\n".join([fixture("nvidia-smi/580.65.06_rtx5090.txt"), fixture("nvcc/13.0_V13.0.88_x86-doc-example.txt"),
                      fixture("nvidia-smi-query/compute_cap-mode-driver-name-index_2gpu_570.86.15_triton8070.txt")])
    env = from_reports([("all.txt", text)])
    kinds = next(n.message for n in env.notes if n.message.startswith("all.txt: read as"))
    assert "nvidia-smi" in kinds and "nvcc" in kinds
    assert env.driver.version == "580.65.06" and env.driver.cuda_version == "13.0"
    assert env.gpus[0].compute_capability == "7.0"


def test_mismatch_report_with_proc_version_and_dmesg():
    env = env_of("nvidia-smi/error_nvml-mismatch_plus-proc-version-520-vs-dpkg-525_illinois70.txt")
    assert env.driver.status == "mismatch" and env.driver.kernel_module_version == "520.56.06"
    nouveau = env_of("other/dmesg_nouveau-owns-device_mattshma133.txt")
    assert nouveau.driver.status == "no_device" and any("nouveau" in n.message for n in nouveau.notes)
    dq = env_of("other/deviceQuery_gtx770_driver7.0-runtime6.5_remode9.txt")
    assert (dq.gpus[0].name, dq.gpus[0].compute_capability, dq.driver.cuda_version) == ("GeForce GTX 770", "3.0", "7.0")


def test_mig_devices_table_marks_mig_gpus():
    env = env_of("nvidia-smi/mig_devices_A100_nvitop8.txt")
    assert [(g.index, g.mig_mode) for g in env.gpus] == [(1, "Enabled"), (2, "Enabled")]


def test_unrecognised_text_is_a_note_not_a_failure():
    env = from_reports([("poem.txt", "roses are red\nviolets are blue\n")])
    assert any(n.level == "warning" and "no known tool output" in n.message for n in env.notes)


# --- the command line on bad input ---------------------------------------------------------------

def _envelope(done):
    assert b"Traceback" not in done.stderr, done.stderr.decode()
    return json.loads(done.stdout)


@pytest.mark.slow
def test_cli_from_files_and_stdin(tmp_path):
    done = run_cli(["detect", "--json", "--from", str(DATA / "nvidia-smi/580.65.06_rtx5090.txt"), "--from", "-"],
                   input=fixture("nvcc/11.0_V11.0.221_pytorch51840.txt").encode())
    assert done.returncode == 0
    env = _envelope(done)["data"]["environment"]
    assert env["origin"] == "report" and env["driver"]["version"] == "580.65.06"
    assert env["toolkits"][0]["version"] == "11.0.221"


@pytest.mark.slow
@pytest.mark.parametrize("command", [["detect"], ["doctor"], ["solve", "torch"], ["lock", "torch"], ["check"],
                                     ["fix", "--dry-run"]])
def test_cli_nothing_recognised_is_exit_2_never_healthy(tmp_path, command):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    poem = tmp_path / "poem.txt"
    poem.write_text("roses are red\nviolets are blue\n")
    for path in (empty, poem):
        done = run_cli([*command, "--json", "--from", str(path)])
        assert done.returncode == 2, done.stdout
        env = _envelope(done)
        assert env["status"] == "usage_error"
        assert env["errors"][0]["message"] == f"no known tool output in {path}"
    human = run_cli(["doctor", "--from", str(empty)])
    assert human.returncode == 2 and b"healthy" not in human.stdout
    assert b"no known tool output in" in human.stderr


@pytest.mark.slow
def test_cli_binary_garbage_is_exit_2(tmp_path):
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(bytes(range(256)) * 64)
    done = run_cli(["detect", "--json", "--from", str(garbage)])
    assert done.returncode == 2
    env = _envelope(done)
    assert env["status"] == "usage_error" and "binary" in env["errors"][0]["message"]
    human = run_cli(["detect", "--from", str(garbage)])
    assert human.returncode == 2 and b"binary" in human.stderr and b"Traceback" not in human.stderr


@pytest.mark.slow
def test_cli_missing_file_is_exit_2(tmp_path):
    done = run_cli(["detect", "--json", "--from", str(tmp_path / "nope.txt")])
    assert done.returncode == 2 and "nope.txt" in _envelope(done)["errors"][0]["message"]


@pytest.mark.slow
def test_cli_50mb_file_is_read_in_part(tmp_path):
    big = tmp_path / "big.txt"
    head = fixture("nvidia-smi/550.40.07_rtx4070_frogging-family.txt").encode()
    with big.open("wb") as fh:
        fh.write(head)
        fh.write((b"x" * 1023 + b"\n") * (50 * 1024))
    done = run_cli(["detect", "--json", "--from", str(big)])
    assert done.returncode == 0
    env = _envelope(done)["data"]["environment"]
    assert env["driver"]["version"] == "550.40.07"
    assert any("read the first" in n["message"] for n in env["notes"])


@pytest.mark.parametrize("rel", sorted(p.relative_to(DATA).as_posix() for f in
                                       ("nvidia-smi", "nvidia-smi-query", "collect_env", "ldconfig", "nvcc", "other", "pip")
                                       for p in (DATA / f).glob("*.txt")))
def test_every_fixture_is_recognised(rel):
    env = from_reports([(rel, fixture(rel))])
    assert any(n.message.startswith(f"{rel}: read as") for n in env.notes), [n.message for n in env.notes]


# --- the corpus of public pastes (tests/data/pastes: first line its source, a sidecar of the fields a person reads)

PASTES = DATA / "pastes"
CORPUS = sorted(p.stem for p in PASTES.glob("*.txt"))


def paste_text(stem):
    text = (PASTES / f"{stem}.txt").read_text(encoding="utf-8")
    first, _, body = text.partition("\n")
    return first, body


# the libraries a paste lists: ldconfig's cache, ldd's answers, an ls of a library folder, the ones TensorFlow opened
LISTED = ("report:ldconfig", "report:ldd", "report:ls", "report:tensorflow")


def read_fields(env):
    """The fields a person reads in a paste, as the reader returned them."""
    torch = next((f for f in env.frameworks if f.name == "torch"), None)
    tf = next((f for f in env.frameworks if f.name.startswith("tensorflow")), None)
    note = next((n.message for n in env.notes if n.message.startswith("TensorFlow build info")), "")
    tf_cuda = tf.cuda if tf else (note.split("CUDA ")[1].split(",")[0] if note else None)
    tf_cudnn = tf.cudnn if tf else (note.split("cuDNN ")[1].split(")")[0] if note else None)
    cudnn = {lib.version for lib in env.libraries if lib.name == "cudnn" and lib.version}
    cudnn |= {n.message.split()[1] for n in env.notes if n.message.startswith("cuDNN ") and "named in the paste" in n.message}
    cudnn |= {f.cudnn for f in env.frameworks if f.cudnn and f.source and f.source.startswith("report:") and
              f.source != "report:pip"}
    return {
        "driver_version": env.driver.version, "driver_cuda": env.driver.cuda_version, "driver_status": env.driver.status,
        "gpus": [{"name": g.name, "memory_mib": g.memory_total_mib, "cc": g.compute_capability} for g in env.gpus],
        "torch": torch.version if torch else None, "torch_cuda": torch.cuda if torch else None,
        "torch_variant": torch.variant if torch else None, "cudnn": sorted(cudnn), "python": env.python.version,
        "nvcc": [t.version for t in env.toolkits if t.source == "report:nvcc"],
        "cuda_runtime": next((t.version for t in env.toolkits if t.source == "report:collect_env"), None),
        "packages": env.packages, "tensorflow": tf.version if tf else None, "tf_cuda": tf_cuda, "tf_cudnn": tf_cudnn,
        "jax": env.packages.get("jax"), "jaxlib": env.packages.get("jaxlib"),
        "kernel_module": env.driver.kernel_module_version, "driver_library": env.driver.library_version,
        "conda_cudatoolkit": next((t.version for t in env.toolkits if t.source.endswith(" cudatoolkit")), None),
        "libraries": sorted({lib.soname for lib in env.libraries if lib.origin in LISTED}),
        **said_fields(env),
    }


def said_fields(env):
    """The facts the frameworks' own words state (env.messages): the build's arch list, cuDNN built and found,
    another library's versions, the libraries that could not be opened; and whether the machine is WSL."""
    arch = next((m for m in env.messages if m.archs or m.ptx), None)
    cudnn = next((m for m in env.messages if m.kind == "library_version" and m.library == "cudnn"), None)
    other = next((m for m in env.messages if m.kind == "library_version" and m.library != "cudnn"), None)
    return {
        "torch_archs": arch.archs if arch else [], "torch_ptx": arch.ptx if arch else [],
        "cudnn_built": cudnn.built if cudnn else None, "cudnn_found": cudnn.found if cudnn else None,
        "cudnn_minimum": cudnn.minimum if cudnn else None,
        "library_built": f"{other.library} {other.built}" if other else None,
        "library_found": f"{other.library} {other.found}" if other else None,
        "missing": sorted({m.soname or m.library or "" for m in env.messages if m.kind == "library_missing"} - {""}),
        "wsl": env.context.wsl,
        "extensions": [extension_said(m) for m in env.messages if m.kind in EXTENSION_KINDS],
    }


EXTENSION_KINDS = ("extension_built_for", "undefined_symbol", "provider_load_failed", "requirement_conflict",
                   "library_not_found")


def extension_said(m):
    """What a torch extension's message states, in one line: "xformers built-for torch 2.1.2+cu121, found 2.1.0+cpu",
    "flash-attn undefined-symbol _ZN3c104cuda9SetDeviceEi", "onnxruntime-gpu cannot-load libcublasLt.so.11 (CUDA
    11)", "vllm 0.6.3 requires torch==2.4.0, found 2.2.0"."""
    if m.kind == "extension_built_for":
        return f"{m.package} built-for {m.library} {m.built}, found {m.found}"
    if m.kind == "undefined_symbol":
        return f"{m.package} undefined-symbol {m.symbol}"
    if m.kind == "provider_load_failed":
        return f"{m.package} cannot-load {m.soname} ({m.library} {m.built})"
    if m.kind == "library_not_found":
        return f"{m.package} has-no {m.soname} (CUDA {m.built}, named by {m.library})"
    return f"{m.package} {m.package_version} requires {m.library}{m.requirement}, found {m.found}"


def compare(expected, got):
    """[(field, expected, got)] for every field of the sidecar; a GPU attribute or a package is one field."""
    out = []
    for key, want in expected.items():
        if key in ("tool", "findings"):
            continue
        if key == "gpus":
            for i, gpu in enumerate(want):
                have = got["gpus"][i] if i < len(got["gpus"]) else {}
                out += [(f"gpus[{i}].{attr}", value, have.get(attr)) for attr, value in gpu.items()]
        elif key == "packages":
            out += [(f"packages.{name}", version, got["packages"].get(name)) for name, version in want.items()]
        else:
            out.append((key, want, got[key]))
    return out


def test_corpus_is_public_new_and_complete():
    assert len(CORPUS) >= 130
    for stem in CORPUS:
        first, body = paste_text(stem)
        assert first.startswith("# source: https://github.com/"), stem
        assert "/issues/" in first or "/pull/" in first or "/discussions/" in first, stem
        assert body.strip(), stem
        expected = json.loads((PASTES / f"{stem}.json").read_text())
        assert expected.get("tool") and len(expected) >= 2, stem


@pytest.mark.parametrize("stem", CORPUS)
def test_corpus_paste_fields(stem):
    _, body = paste_text(stem)
    env = from_reports([(stem, body)], strict=True)
    expected = json.loads((PASTES / f"{stem}.json").read_text())
    wrong = [(field, want, have) for field, want, have in compare(expected, read_fields(env)) if want != have]
    assert not wrong, wrong


def error_codes(env):
    """The codes of the error findings doctor gives for a pasted environment (on the frozen matrix snapshot)."""
    from support.snapshot import snapshot_matrix

    from cudamatrix.diagnose.findings import diagnose

    return sorted({f.code for f in diagnose(env, snapshot_matrix()) if f.severity == "error"})


DIAGNOSED = [stem for stem in CORPUS if "findings" in json.loads((PASTES / f"{stem}.json").read_text())]


@pytest.mark.slow
@pytest.mark.parametrize("stem", DIAGNOSED)
def test_corpus_paste_findings(stem):
    """The error findings a paste implies, exactly (the sidecar's "findings"; [] where it implies none)."""
    _, body = paste_text(stem)
    expected = json.loads((PASTES / f"{stem}.json").read_text())
    assert error_codes(from_reports([(stem, body)], strict=True)) == sorted(expected["findings"])


@pytest.mark.slow
def test_corpus_score(capsys):
    """Fields read right over fields present, and findings right over pastes with an expected finding, overall and
    per tool (printed; every one must be right)."""
    per_tool: dict[str, list[int]] = {}
    for stem in CORPUS:
        _, body = paste_text(stem)
        expected = json.loads((PASTES / f"{stem}.json").read_text())
        env = from_reports([(stem, body)])
        pairs = compare(expected, read_fields(env))
        score = per_tool.setdefault(expected["tool"], [0, 0, 0, 0])
        score[0] += sum(want == have for _, want, have in pairs)
        score[1] += len(pairs)
        if "findings" in expected:
            score[2] += error_codes(env) == sorted(expected["findings"])
            score[3] += 1
    totals = [sum(s[k] for s in per_tool.values()) for k in range(4)]
    with capsys.disabled():
        print(f"\ncorpus: {totals[0]}/{totals[1]} fields read right over {len(CORPUS)} pastes; "
              f"findings right in {totals[2]}/{totals[3]}")
        for tool, (r, p, fr, fp) in sorted(per_tool.items()):
            print(f"  {tool}: fields {r}/{p}" + (f", findings {fr}/{fp}" if fp else ""))
    assert totals[0] == totals[1] and totals[2] == totals[3]


@pytest.mark.slow
def test_every_paste_says_what_it_was_read_as():
    for stem in CORPUS:
        _, body = paste_text(stem)
        env = from_reports([(stem, body)])
        assert any(n.message.startswith(f"{stem}: read as ") for n in env.notes), stem


# --- hostile lines: every pattern on user text runs in linear time --------------------------------

HOSTILE = {
    "spaces after a bar": "|" + " " * 1_000_000,
    "a table row of words": "| 0 " + "a " * 500_000,
    "digits": "1" * 1_000_000,
    "MiB cells": "| " + "1MiB " * 200_000,
    "a GPU line": "GPU 0: " + "a " * 500_000,
    "a collect_env field": "PyTorch version: " + "1." * 500_000,
    "colons": ": " * 500_000,
    "an nvidia-smi header": "| NVIDIA-SMI " + "1" * 1_000_000,
    "a venv prompt": "(" + "a" * 1_000_000,
    "quote markers": "> " * 500_000,
    "ldconfig flags": "a (b) OS ABI:" + " " * 1_000_000,
    "arrows": "a (" + "=>" * 500_000,
    "a freeze line": "a==" + "1" * 1_000_000,
    "commas": "," * 1_000_000,
    "CSV header names": "name," * 200_000,
    "deviceQuery": 'Device 0: "' + "a" * 1_000_000,
    "HTML": "<details " + "a" * 1_000_000,
    "a print": "torch.__version__ = " + "1" * 1_000_000,
    "build info": "'cuda_version', '" + "1" * 1_000_000,
    "nvcc": "Cuda compilation tools, release " + "1" * 1_000_000,
    "-q": "    Product Name : " + "x" * 1_000_000,
    "tabs and spaces": " \t" * 500_000,
    "GPU rows": "| 0 Tesla  On | 0000:00:00.0 Off | " * 25_000,
    "process row": "|    0 " + "1 " * 500_000 + "C",
    "torch warning": "The NVIDIA driver on your system is too old (found version " + "1" * 1_000_000,
    "nested quotes and prompts": "> " * 1000 + "$ " * 200_000 + "nvidia-smi",
    "pip list row": "a " + "1" * 1_000_000 + " b",
    "arch warning": "a" * 1_000_000 + " with CUDA capability sm_120 is not compatible with the current PyTorch "
                    "installation. The current PyTorch install supports CUDA capabilities " + "sm_50 " * 100_000,
    "old GPU warning": "Found GPU0 " + "a " * 500_000 + " which is of cuda capability 2.1",
    "cannot open": "lib" + "a." * 500_000 + "so: cannot open shared object file",
    "cuDNN versions": "PyTorch was compiled  against (" + "8, " * 300_000 + ") but found runtime version",
    "loaded runtime": "Loaded runtime CuDNN library: " + "1." * 500_000 + " but source was compiled with: 8",
    "JAX component": "CUDA backend failed to initialize: Found " + "cu" * 500_000 + " version 1, but JAX",
    "dso": "Could not load dynamic library '" + "a" * 1_000_000,
    "smi banner": "NVIDIA System Management Interface -- v" + "1." * 500_000,
    "heading template": "### " + "python version " * 70_000,
    "markdown item": "- `" + "a" * 1_000_000 + "==1`",
    "driver in passing": "PyTorch version: 2.1.0 (driver " + "1." * 500_000 + ")",
    "inline code": "`" + "x" * 1_000_000 + "`",
    "wsl": "/usr/lib/wsl/lib/" + "a" * 1_000_000 + " is not a symbolic link",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_1mb_hostile_line_is_read_fast(name):
    import time

    start = time.process_time()  # this process's CPU time: a busy machine does not move it, a hang does
    from_reports([(name, HOSTILE[name] + "\n")])
    # measured 0.002-0.06 s each; a pattern quadratic in the line's length takes hours on 1 MB, so a bound ten
    # times above the slowest run under mutation testing's tracing still catches it without flaking
    assert time.process_time() - start < 10.0


# --- --from on every command that takes a target ----------------------------------------------------

RTX4090 = "collect_env_2.5.1cu121_rtx4090_cudnn8.9.0_vllm13497"
TARGET_4090 = "the pasted machine: NVIDIA GeForce RTX 4090 (sm 8.9); driver 535.183.01; Python 3.10; linux_x86_64"


@pytest.fixture
def paste_4090(tmp_path):
    path = tmp_path / "collect_env.txt"
    path.write_text(paste_text(RTX4090)[1])
    return path


@pytest.mark.slow
def test_solve_lock_check_and_fix_dry_run_read_a_paste(paste_4090):
    solve = _envelope(run_cli(["solve", "torch", "--json", "--from", str(paste_4090)]))
    assert solve["exit_code"] == 0 and [t["description"] for t in solve["data"]["targets"]] == [TARGET_4090]
    torch = next(f for f in solve["data"]["solution"]["frameworks"] if f["name"] == "torch")
    assert (torch["version"], torch["variant"]) == ("2.5.1", "cu121")  # what the paste has installed is kept
    lock = _envelope(run_cli(["lock", "torch", "--pins-only", "--json", "--from", str(paste_4090)]))
    assert lock["exit_code"] == 0 and "torch==2.5.1" in lock["data"]["text"]
    check = _envelope(run_cli(["check", "--json", "--from", str(paste_4090)]))
    assert check["exit_code"] == 0 and [t["description"] for t in check["data"]["targets"]] == [TARGET_4090]
    fix = _envelope(run_cli(["fix", "--dry-run", "--json", "--from", str(paste_4090)]))
    assert fix["exit_code"] == 0 and fix["data"]["status"] == "dry_run" and fix["data"]["applied"] is None


@pytest.mark.slow
def test_from_stdin_and_the_typer_path_agree_with_the_fast_path(paste_4090):
    from cudamatrix.matrix.data import default_data_dir

    text = paste_4090.read_bytes()
    fast = _envelope(run_cli(["solve", "torch", "--json", "--from", "-"], input=text))
    # --data is declared to typer only, so this invocation is parsed by typer, not by the fast path
    slow = _envelope(run_cli(["solve", "torch", "--json", "--from", str(paste_4090), "--data", str(default_data_dir())]))
    assert fast["exit_code"] == slow["exit_code"] == 0
    assert fast["data"]["solution"]["packages"] == slow["data"]["solution"]["packages"]


@pytest.mark.slow
def test_fix_dry_run_from_a_paste_answers_its_findings(tmp_path):
    paste = tmp_path / "warning.txt"
    paste.write_text(paste_text("torch-arch-warning_sm120_5090_chinese-prose_leggedlab26")[1])
    out = _envelope(run_cli(["fix", "--dry-run", "--json", "--from", str(paste)]))
    (remedy,) = out["data"]["plan"]["remedies"]
    assert (remedy["code"], remedy["action"]) == ("ARCH_UNSUPPORTED", "install")


@pytest.mark.slow
def test_fix_from_a_paste_only_plans(paste_4090):
    done = run_cli(["fix", "--json", "--from", str(paste_4090)])
    assert done.returncode == 2 and "--dry-run" in _envelope(done)["errors"][0]["hint"]
    both = run_cli(["solve", "--json", "--from", str(paste_4090), "--env", str(paste_4090)])
    assert both.returncode == 2


def test_the_layouts_issue_13_names():
    # lines typed after the layouts issue #13 lists (the corpus holds real pastes of each but the first)
    env = from_reports([("t", "PyTorch version 1.5.0\nCUDA used to build PyTorch: 10.1.243\n"
                              "GPU models and configuration:\nGPU 0\uff1aTITAN RTX\nGPU 1\uff1aTITAN RTX\n")])
    torch = fw(env, "torch")
    assert (torch.version, torch.cuda, torch.variant) == ("1.5.0", "10.1", "cu101")
    assert [g.name for g in env.gpus] == ["TITAN RTX", "TITAN RTX"]
    quoted = from_reports([("q", "    > PyTorch version: 2.3.0+cu121\n    > CUDA used to build PyTorch: 12.1\n"
                                 "    > Python version: 3.11.9 (main) [GCC 11.2.0] (64-bit runtime)\n")])
    assert fw(quoted, "torch").cuda == "12.1" and quoted.python.version == "3.11.9"
    crlf_html = from_reports([("h", "&gt; Cuda compilation tools, release 12.4, V12.4.131\r\n")])
    assert crlf_html.toolkits[0].version == "12.4.131"


def test_notes_say_what_each_block_was_read_as_and_what_was_skipped():
    text = ("Here is my setup:\n```\n$ nvcc --version\nnvcc: NVIDIA (R) Cuda compiler driver\n"
            "Cuda compilation tools, release 12.4, V12.4.131\n```\nthanks!\n")
    env = from_reports([("r.txt", text)])
    messages = [n.message for n in env.notes]
    assert "r.txt: read as nvcc (lines 4-5)" in messages
    assert "r.txt: skipped 2 line(s) that are no known tool's output: 1, 7" in messages


# --- the frameworks' own words (pastes/messages.py), each class on a real paste of the corpus ---------

def paste_env(stem, strict=True):
    return from_reports([(stem, paste_text(stem)[1])], strict=strict)


def test_torch_arch_warning_names_the_gpu_its_compute_capability_and_the_builds_arch_list():
    env = paste_env("torch-arch-warning_sm120_5080-laptop_windows-venv_hi3dgen5")
    (said,) = env.messages
    assert (said.tool, said.kind, said.gpu, said.compute_capability) == (
        "torch", "arch_unsupported", "NVIDIA GeForce RTX 5080 Laptop GPU", "12.0")
    assert said.archs == ["5.0", "6.0", "6.1", "7.0", "7.5", "8.0", "8.6", "9.0"] and said.ptx == []
    assert [(g.name, g.compute_capability) for g in env.gpus] == [("NVIDIA GeForce RTX 5080 Laptop GPU", "12.0")]
    # a log prefix on every line ("service  | ") and a PTX target in the list
    compose = paste_env("torch-arch-warning_sm120_5090-laptop_compose-prefix_py3.10_orpheus84")
    assert compose.gpus[0].name == "NVIDIA GeForce RTX 5090 Laptop GPU"
    ptx = paste_env("torch-arch-warning_sm86_3060_compute37_metabin15").messages[0]
    assert ptx.archs[-1] == "7.5" and ptx.ptx == ["3.7"]
    old = paste_env("torch-warning_old-gpu-2.1_820M_no-kernel-image-48_py2.7_pytorch6515")
    assert [(g.index, g.name, g.compute_capability) for g in old.gpus] == [(0, "GeForce 820M", "2.1")]
    assert {m.kind for m in old.messages} == {"arch_unsupported", "no_kernel_image"}


def test_driver_too_old_and_runtime_errors_are_messages():
    env = paste_env("collect_env_2.4.0cu121_driver-too-old-11040_undefined-symbol_vllm11623")
    assert env.driver.cuda_version == "11.4" and env.driver.version is None
    assert [(m.kind, m.found) for m in env.messages] == [("driver_too_old", "11.4")]
    bandwidth = paste_env("cuda-error_insufficient-driver_bandwidthTest-35_windows_nvidia-docker498")
    assert [(m.tool, m.kind) for m in bandwidth.messages] == [("cuda runtime", "driver_insufficient")]
    kernel = paste_env("torch-error_no-kernel-image_repl-tensor-compare_5090D-nightly-cu128_pytorch149845")
    assert [(m.tool, m.kind) for m in kernel.messages] == [("torch", "no_kernel_image")]


@pytest.mark.parametrize("stem, tool, built, found", [
    ("torch-error_cudnn-incompatibility_8.5.0-vs-8.3.3_vscode_co-gat2", "torch", "8.5.0", "8.3.3"),  # (8, 5, 0)
    ("torch-error_cudnn-mismatch-old-ints_7102-vs-7600_da-detection19", "torch", "7.1.2", "7.6.0"),  # 7102
    ("tf-log_loaded-runtime-cudnn_8.0.4-vs-8.1.0_deeplab2-66", "tensorflow", "8.1.0", "8.0.4"),
    ("jax-xla-log_loaded-runtime-cudnn_9.10.1-vs-9.13.1_conda-prompt_jaxlib-feedstock329", "xla", "9.13.1", "9.10.1"),
    ("jax-error_backend-failed_found-cudnn-8600-built-8906_gcbfplus1", "jax", "8.9.6", "8.6.0"),
])
def test_cudnn_built_and_found_in_every_wording(stem, tool, built, found):
    (said,) = paste_env(stem).messages
    assert (said.tool, said.kind, said.library, said.built, said.found) == (tool, "library_version", "cudnn",
                                                                            built, found)


def test_jax_outdated_component_reads_the_lines_after_it():
    (said,) = paste_env("jax-error_backend-cuda-failed_outdated-cudnn_pytest-E-prefix_pixi-scipystack1").messages
    assert (said.library, said.built, said.minimum, said.found) == ("cudnn", "8.9.7", "9.1.0", "8.9.7")
    # components other than cuDNN and the CUDA runtime keep JAX's integers (their encodings differ)
    (solver,) = paste_env("jax-log_unable-to-initialize-backend-cuda_cusolver-11002-vs-11401_tf-dlopen_"
                          "alphapulldown237").messages
    assert (solver.library, solver.built, solver.found) == ("cusolver", "11401", "11002")


def test_libraries_that_could_not_be_opened():
    assert [(m.tool, m.soname) for m in paste_env(
        "torch-error_libcudnn.so.8-missing_import-torch_conda-py3.10_textgen2513").messages] == [
        ("loader", "libcudnn.so.8")]
    # "Couldn't open CUDA library libcudnn.so.5" and "Unable to load cuDNN DSO" are one fact
    assert [(m.library, m.soname) for m in paste_env(
        "tf-log_couldnt-open-libcudnn.so.5_cuda8.0-libs_tf1.0.1_tensorflow15294").messages] == [
        ("cudnn", "libcudnn.so.5")]
    # the file the loader could not open is the one after "Error:", not the library that asked for it
    assert [m.soname for m in paste_env(
        "ctranslate2-error_libcudnn_ops_infer.so.8-missing_whisper_xtts-webui31").messages] == [
        "libcudnn_ops_infer.so.8"]
    assert [(m.library, m.soname) for m in paste_env(
        "tf-log_could-not-load-libcudart.so.11.0_colab-lib64-nvidia_dreamtalk32").messages] == [
        ("cudart", "libcudart.so.11.0")]


def test_fragments_that_carry_facts():
    wsl = paste_env("ldconfig-wsl_not-a-symbolic-link_wsl-template-debian_wsl11229")
    assert wsl.context.wsl and [lib.path for lib in wsl.libraries] == ["/usr/lib/wsl/lib/libcuda.so.1"]
    banner = paste_env("nvidia-smi-h-banner_inline-backticks_470.182.03_help-query-gpu_candle733")
    assert banner.driver.version == "470.182.03"
    one_column = paste_env("nvidia-smi-query_compute_cap-only-8.9_plus-table-570.133.07_inference-snaps128")
    assert [g.compute_capability for g in one_column.gpus] == ["8.9"] and one_column.driver.version == "570.133.07"
    four = paste_env("nvidia-smi-query_compute_cap-noheader-4x8.6_aitemplate330")
    assert [g.compute_capability for g in four.gpus] == ["8.6"] * 4
    escaped = paste_env("nvidia-smi-q-x_html-escaped-gt-nbsp_591.74_rtx4090_wsl-mnt_1panel11910")
    assert (escaped.driver.version, escaped.gpus[0].name) == ("591.74", "NVIDIA GeForce RTX 4090")


def test_tensorflow_devices_and_its_missing_runtime():
    tf1 = paste_env("tf-log_found-device-properties-tf1-major-minor_2xK80_faster-rcnn-tf330")
    assert [(g.index, g.name, g.compute_capability) for g in tf1.gpus] == [(0, "Tesla K80", "3.7"),
                                                                           (1, "Tesla K80", "3.7")]
    tf2 = paste_env("tf-log_found-device-computecapability_quadro-p6000_successfully-opened_tensorflow26182")
    assert [(g.name, g.compute_capability) for g in tf2.gpus] == [("Quadro P6000", "6.1")]
    # cudart_stub.cc's words name drivers, but it says them where libcudart cannot be opened
    stub = paste_env("tf-log_could-not-find-cuda-drivers_cudart-stub_gunicorn_deepface739")
    assert [(m.tool, m.kind, m.library) for m in stub.messages] == [("tensorflow", "library_missing", "cudart")]


def test_a_query_block_ends_where_the_format_does():
    # the headerless rows end at the next shell line, however many commas it has (typed after issue #24's report)
    text = ("$ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader\n"
            "NVIDIA GeForce RTX 4090, 550.54.15\nNVIDIA GeForce RTX 4090, 550.54.15\n"
            "python3 -c \"import torch; print(torch.__version__, torch.cuda.is_available())\"\n2.3.0+cu121 True\n")
    env = from_reports([("q", text)])
    assert [g.name for g in env.gpus] == ["NVIDIA GeForce RTX 4090"] * 2
    # a label line between the command and its row, inline code around the row, named fields aliased
    mega = paste_env("nvidia-smi-query_noheader-backticks_not-supported_gtx770_megaminer235")
    assert [g.name for g in mega.gpus] == ["GeForce GTX 770"]
    two = paste_env("nvidia-smi-query_driver_version-noheader-two-rows_then-prose_pytorch88364")
    assert two.driver.version == "515.57"


def test_markdown_is_cleaned_from_values():
    env = paste_env("issue-template_markdown-backticks_5090-sm120_driver-590.48.01_torch2.5.1-cu121_berkeley-humanoid49")
    assert env.driver.version == "590.48.01" and env.packages["torch"] == "2.5.1"
    assert (env.gpus[0].name, env.gpus[0].compute_capability) == ("NVIDIA GeForce RTX 5090", "12.0")
    bold = paste_env("issue-template_bold-labels_runfile-driver-470.94_rtx2080_libcudnn.so.8_tensorrt1747")
    assert (bold.driver.version, bold.python.version, fw(bold, "torch").version) == ("470.94", "3.7", "1.8.1")
    headings = paste_env("tf-template-headings_dnn-library-not-found-prose_tf2.11_A16_tensorflow65033")
    assert (headings.packages["tensorflow"], headings.python.version, headings.gpus[0].name) == (
        "2.11", "3.8.10", "NVIDIA A16")
    # the issue's own example: a torch version in inline code and the driver said in passing on the same line
    typed = from_reports([("t", "- PyTorch version: `2.7.0.dev20250310+cu124` (driver 570.124.06, CUDA 12.8)\n"
                                "- Python version: 3.12.9\n- OS: Ubuntu 24.04\n")])
    torch = fw(typed, "torch")
    assert (torch.version, torch.variant, typed.driver.version) == ("2.7.0.dev20250310+cu124", "cu124", "570.124.06")


@pytest.mark.slow
def test_cli_one_unreadable_file_among_several_is_a_note(tmp_path):
    poem = tmp_path / "poem.txt"
    poem.write_text("roses are red\n")
    warning = tmp_path / "warning.txt"
    warning.write_text(paste_text("torch-arch-warning_sm120_5080-laptop_windows-venv_hi3dgen5")[1])
    done = run_cli(["doctor", "--json", "--from", str(poem), "--from", str(warning), "--from",
                    str(tmp_path / "missing.txt")])
    out = _envelope(done)
    assert done.returncode == 1 and out["exit_code"] == 1  # the findings decide, not the unreadable files
    notes = [n["message"] for n in out["data"]["environment"]["notes"]]
    assert any(m.startswith(f"{poem}: no known tool output") for m in notes)
    assert any(m.startswith(f"{tmp_path / 'missing.txt'}: not read") for m in notes)
    assert [f["code"] for f in out["data"]["findings"]] == ["ARCH_UNSUPPORTED"]
    nothing = run_cli(["solve", "torch", "--json", "--from", str(poem), "--from", str(tmp_path / "missing.txt")])
    assert nothing.returncode == 2 and "not read" in _envelope(nothing)["errors"][0]["hint"]


def test_collect_env_without_its_cuda_used_to_build_line_is_not_a_cpu_build():
    """A collect_env-like report that never prints "CUDA used to build PyTorch" (doctr's script) says nothing
    about the build: torch 1.8.0 is read, its variant stays unknown, never "cpu". The real collect_env that
    prints the line with "None" is a CPU build; with a version, that CUDA."""
    stem = "collect_env-like_doctr_torch1.8.0_tf2.5.0_cudnn8.2.0_doctr345"
    body = (DATA / "pastes" / f"{stem}.txt").read_text(encoding="utf-8").partition("\n")[2]
    assert "CUDA used to build PyTorch" not in body
    torch = fw(from_reports([(stem, body)]), "torch")
    assert torch.version == "1.8.0" and torch.variant is None and torch.cuda is None
    mac = "collect_env_2.7.0-cpu_macos_pip3-conda_vllm18285"
    body = (DATA / "pastes" / f"{mac}.txt").read_text(encoding="utf-8").partition("\n")[2]
    assert "CUDA used to build PyTorch: None" in body
    cpu = fw(from_reports([(mac, body)]), "torch")
    assert "+" not in cpu.version and cpu.variant == "cpu" and cpu.cuda is None
    cuda = fw(env_of("collect_env/rhel7_1.6.0cu102_driver418.67_2xV100_pytorch43058.txt"), "torch")
    assert (cuda.version, cuda.cuda, cuda.variant) == ("1.6.0", "10.2", "cu102")


@pytest.mark.parametrize("rel,cuda,cudnn", [
    ("tf_build_info/windows_tf_cuda11.2_cudnn8_build_info.txt", "11.2", "8"),
    ("tf_build_info/windows_tf_cuda10.1_cudnn7_build_info.txt", "10.1", "7"),
])
def test_tensorflow_windows_build_info_names_cuda_and_cudnn_as_64_underscore(rel, cuda, cudnn):
    """TensorFlow's Windows builds write their versions as DLL suffixes: cuda_version '64_112' (CUDA 11.2),
    cudnn_version '64_8' (cuDNN 8); TensorFlow's third_party/gpus/cuda_configure.bzl makes them with
    ("64_%s%s" if is_windows else "%s.%s") % (major, minor) and ("64_%s" if is_windows else "%s") % cudnn.
    The fixtures are real build_info modules of Windows installs (what tf.sysconfig.get_build_info() returns)."""
    env = env_of(rel)
    assert f"{rel}: read as tf.sysconfig.get_build_info() (line 1)" in [n.message for n in env.notes]
    assert f"TensorFlow build info (CUDA {cuda}, cuDNN {cudnn}) without a TensorFlow version in the paste" in [
        n.message for n in env.notes]


# --- the nvidia-smi reader (pastes/nvsmi.py): what it reads, and which lines it says it read ------------

def read_as(name, text):
    """The environment read from one paste, and its note naming the lines read as each tool's output."""
    env = from_reports([(name, text)])
    return env, next((n.message for n in env.notes if n.message.startswith(f"{name}: read as ")), None)


def test_the_nvidia_smi_reader_says_whether_the_paste_held_nvidia_smi_output():
    from cudamatrix.detect.text import Paste
    from cudamatrix.models import Environment
    from cudamatrix.pastes import nvsmi

    table = Environment()
    assert nvsmi.read(Paste(fixture("nvidia-smi/580.65.06_rtx5090.txt")), table) is True
    assert table.driver.version == "580.65.06"
    error = Environment()
    assert nvsmi.read(Paste(fixture("nvidia-smi/error_nvml-unknown-error_after-daemon-reload_nvidia-docker1671.txt")),
                      error) is True
    assert error.driver.status == "error"
    banner = Environment()
    assert nvsmi.read(Paste(paste_text("nvidia-smi-h-banner_inline-backticks_470.182.03_help-query-gpu_candle733")[1]),
                      banner) is True
    assert banner.driver.version == "470.182.03"
    assert nvsmi.read(Paste("roses are red\nviolets are blue\n"), Environment()) is False


def test_a_warning_from_an_nvidia_smi_parser_is_a_warning_note_kept_with_the_notes_before_it():
    table = fixture("nvidia-smi/580.65.06_rtx5090.txt")
    wsl = fixture("nvidia-smi/wsl_545.46-546.80_cuda-ERR_rtx3060_WSL11589.txt")
    assert "CUDA Version: ERR!" in wsl
    env = from_reports([("table", table), ("wsl", wsl)])
    warning = Note("report:nvidia-smi", "the driver could not report its CUDA version (CUDA Version: ERR!)", "warning")
    assert warning in env.notes
    first = next(i for i, n in enumerate(env.notes) if n.message.startswith("table: read as nvidia-smi"))
    assert first < env.notes.index(warning)


def test_an_nvml_error_pasted_without_its_command_is_read_with_the_library_version():
    # the two lines nvidia-smi printed in zzzhouuu/truenas-nvidia-drivers#19, without the prompt line above them
    body = paste_text("nvidia-smi-error_mismatch_nvml-580.178_proc-580.173.02_truenas19")[1]
    lines = body.split("\n")
    assert lines[1:3] == ["Failed to initialize NVML: Driver/library version mismatch", "NVML library version: 580.178"]
    env, note = read_as("e", "\n".join(lines[1:3]))
    assert (env.driver.status, env.driver.library_version) == ("mismatch", "580.178")
    assert env.driver.error == "Failed to initialize NVML: Driver/library version mismatch"
    assert env.driver.source == "nvidia-smi"
    assert note == "e: read as nvidia-smi (lines 1-2)"


H200_Q = "nvidia-smi/q_580.159.04_H200_full_cudamatrix-device.txt"


def test_an_nvidia_smi_q_paste_cut_after_its_header_still_gives_the_driver():
    # the first lines of a real -q output (the H200 device capture): the banner, Timestamp, Driver and CUDA
    q = fixture(H200_Q).split("\n")
    assert q[1] == "==============NVSMI LOG==============" and "Attached GPUs" not in "\n".join(q[:7])
    env, note = read_as("head", "\n".join(q[1:7]))
    assert (env.driver.version, env.driver.cuda_version) == ("580.159.04", "13.0")
    assert note == "head: read as nvidia-smi -q (lines 1-5)"


def test_an_nvidia_smi_q_paste_elided_between_its_header_and_its_gpu_reads_both_parts():
    # the real -q output of the H200 capture with its middle cut to "..." (as a user shortens a long paste):
    # the part from "Attached GPUs" on is read too, though it holds neither "NVSMI LOG" nor "Product Name"
    q = fixture(H200_Q).split("\n")
    assert q[7].startswith("Attached GPUs") and q[110].strip() == "FB Memory Usage"
    env, note = read_as("cut", "\n".join(q[1:7] + ["..."] + q[7:9] + q[110:116]))
    assert (env.driver.version, env.driver.cuda_version) == ("580.159.04", "13.0")
    assert [(g.pci_bus_id, g.memory_total_mib) for g in env.gpus] == [("00000000:00:06.0", 143771)]
    assert note == "cut: read as nvidia-smi -q (lines 1-5, 8-15)"


@pytest.mark.parametrize("text,status", [
    # nvidia-smi's words alone, as the reports quote them: https://github.com/NVIDIA/nvidia-docker/issues/933
    ('"No devices were found"', "no_device"),
    # https://github.com/JosephKJ/OWOD/issues/81
    ("Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost. Reboot the system to recover this GPU",
     "error"),
    # https://github.com/NVIDIA/nvidia-docker/issues/1553 (no word of the others: it was not read before)
    ("Unable to determine the device handle for GPU 0000:09:00.0: Unknown Error", "error"),
    # https://github.com/NVIDIA/nvidia-docker/issues/341 (the line below its prompt)
    ("bash: nvidia-smi: command not found", "absent"),
    # https://github.com/ci-for-research/self-hosted-runners/issues/40
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA "
     "driver is installed and running.", "absent"),
])
def test_an_nvidia_smi_error_quoted_alone_is_read(text, status):
    env, note = read_as("e", text)
    assert (env.driver.status, env.driver.source) == (status, "nvidia-smi")
    assert note == "e: read as nvidia-smi (line 1)"


def test_an_nvml_library_version_line_without_a_version_is_left_unknown():
    # the truenas19 lines with the version cut off (a damaged paste): the mismatch is read, the version is not
    env, _ = read_as("e", "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: N/A")
    assert (env.driver.status, env.driver.library_version) == ("mismatch", None)


@pytest.mark.parametrize("stem,read", [
    ("nvidia-smi-query_driver_version-noheader-two-rows_then-prose_pytorch88364", "nvidia-smi --query-gpu (lines 5-6, 13)"),
    ("nvidia-smi-query_noheader-backticks_not-supported_gtx770_megaminer235", "nvidia-smi --query-gpu (line 5)"),
    ("nvidia-smi-query_compute_cap-only-8.9_plus-table-570.133.07_inference-snaps128",
     "nvidia-smi --query-gpu (lines 5-6); nvidia-smi (lines 9-11)"),
    ("nvidia-smi-query_compute_cap-noheader-4x8.6_aitemplate330", "nvidia-smi --query-gpu (lines 4-7)"),
    ("nvidia-smi-q_windows-exe_442.92_cuda10.2_gputil38", "nvidia-smi -q (lines 3-30)"),
    ("nvidia-smi-q_384.130_GTX1080Ti_nvidia-docker1004", "nvidia-smi -q (lines 2-35)"),
])
def test_the_lines_read_as_nvidia_smi_output_are_its_output_lines(stem, read):
    """Each real paste's nvidia-smi output lines, and only those, are said to be read as it (counted in the paste
    without its source line): the rows of a query up to the fence or prose after them, the -q block from its
    banner (or its first line) to its last line; never the prose, the label or the command line around them."""
    assert read_as(stem, paste_text(stem)[1])[1] == f"{stem}: read as {read}"


@pytest.mark.parametrize("text,read,gpus", [
    # the CSV nvidia-smi --query-gpu prints (a header, then one row per GPU), after a blank line, or a blank line and
    # a short label: the rows are read; the label is not
    ("$ nvidia-smi --query-gpu=name,memory.total --format=csv\n\nname, memory.total [MiB]\n"
     "NVIDIA A100-SXM4-40GB, 40960 MiB\n", "lines 3-4", [("NVIDIA A100-SXM4-40GB", 40960)]),
    ("$ nvidia-smi --query-gpu=name,memory.total --format=csv\n\nOutput:\n\nname, memory.total [MiB]\n"
     "NVIDIA A100-SXM4-40GB, 40960 MiB\n", "lines 5-6", [("NVIDIA A100-SXM4-40GB", 40960)]),
    # a blank line between two rows (a paste that double-spaced them) keeps them one output
    # (and the paste ends on the last row, without a newline)
    ("nvidia-smi --query-gpu=name,memory.total --format=csv,noheader\nNVIDIA A100-SXM4-40GB, 40960 MiB\n\n"
     "NVIDIA A100-SXM4-40GB, 40960 MiB", "lines 2-4", [("NVIDIA A100-SXM4-40GB", 40960)] * 2),
])
def test_query_rows_after_a_blank_line_or_a_label_are_read(text, read, gpus):
    env, note = read_as("q", text)
    assert note == f"q: read as nvidia-smi --query-gpu ({read})"
    assert [(g.name, g.memory_total_mib) for g in env.gpus] == gpus


def test_a_one_field_query_reads_its_rows_up_to_the_prose_after_them():
    env, note = read_as("q", "$ nvidia-smi --query-gpu=driver_version --format=csv,noheader\n550.54.15\n"
                             "and the container sees none\n")
    assert env.driver.version == "550.54.15"
    assert note == "q: read as nvidia-smi --query-gpu (line 2)"


def test_two_nvidia_smi_q_blocks_in_one_paste_are_both_read():
    # two real -q outputs (the H200 capture, then nvidia-docker#1004's), each after a line of prose
    q = fixture(H200_Q).split("\n")
    other = paste_text("nvidia-smi-q_384.130_GTX1080Ti_nvidia-docker1004")[1].split("\n")
    assert q[9].strip().startswith("Product Name") and other[8].strip().startswith("Product Name")
    env, note = read_as("two", "\n".join(["On the host:", *q[1:12], "", "and in the container:", *other[1:12]]))
    assert note == "two: read as nvidia-smi -q (lines 2-12, 15-25)"
    assert [g.name for g in env.gpus] == ["NVIDIA H200", "GeForce GTX 1080 Ti"]


def test_an_nvidia_smi_q_paste_without_its_banner_is_read_from_its_first_line():
    # the H200 -q output copied from its Timestamp line on, after a line of prose and a blank line: the lines above
    # the "Attached GPUs" line (and the blank line between them) belong to the block
    q = fixture(H200_Q).split("\n")
    env, note = read_as("nb", "\n".join(["nvidia-smi -q says:", "", *q[3:6], "", *q[7:11]]))
    assert (env.driver.version, env.driver.cuda_version, env.gpus[0].name) == ("580.159.04", "13.0", "NVIDIA H200")
    assert note == "nb: read as nvidia-smi -q (lines 3-10)"


def test_an_nvidia_smi_q_paste_indented_with_tabs_is_read():
    # the H200 -q output with each 4-space indent turned into a tab (as some editors and mail clients copy it)
    q = fixture(H200_Q).split("\n")
    env, note = read_as("tab", "\n".join(line.replace("    ", "\t") for line in q[1:12]))
    assert (env.driver.version, env.gpus[0].name) == ("580.159.04", "NVIDIA H200")
    assert note == "tab: read as nvidia-smi -q (lines 1-11)"


def test_the_nvidia_smi_h_banner_inside_a_sentence_or_cut_short():
    # candle#733's banner, quoted inside a sentence in inline code; and the same banner cut before its version
    env, note = read_as("b", "nvidia-smi version: `NVIDIA System Management Interface -- v470.182.03`\n")
    assert env.driver.version == "470.182.03" and note == "b: read as nvidia-smi -h (line 1)"
    assert env.driver.source == "nvidia-smi -h"
    said = from_reports([("s", "NVIDIA System Management Interface -- v470.182.03 (its first line)\n")])
    assert said.driver.version == "470.182.03"
    assert Note("report:nvidia-smi", "driver 470.182.03: the version nvidia-smi -h prints for itself (it ships with "
                "the driver)") in env.notes
    cut = from_reports([("c", "nvidia-smi -h prints:\nNVIDIA System Management Interface -- v\n")])
    assert cut.driver.version is None
    assert not [n for n in cut.notes if "could not read" in n.message]


def test_an_nvidia_smi_list_after_a_pipe_is_read():
    # pynvml#19's GPU line, below an `nvidia-smi -L | head` command whose "|" would start a table
    env, note = read_as("l", "$ nvidia-smi -L | head -1\n"
                             "GPU 0: Tesla V100-SXM2-32GB (UUID: GPU-96ab329d-7a1f-73a8-a9b7-18b4b2855f92)\n")
    assert [(g.index, g.name) for g in env.gpus] == [(0, "Tesla V100-SXM2-32GB")]
    assert note == "l: read as nvidia-smi -L (line 2)"


def test_a_query_after_a_query_with_a_header_is_read_too():
    # two --query-gpu commands typed after the documented CSV format: the first prints its header line (which names
    # fields, as a query's command does) and a row; the second, one value
    env, note = read_as("q", "$ nvidia-smi --query-gpu=name,memory.total --format=csv\nname, memory.total [MiB]\n"
                             "NVIDIA A100-SXM4-40GB, 40960 MiB\n\n"
                             "$ nvidia-smi --query-gpu=driver_version --format=csv,noheader\n550.54.15\n")
    assert [(g.name, g.memory_total_mib) for g in env.gpus] == [("NVIDIA A100-SXM4-40GB", 40960)]
    assert env.driver.version == "550.54.15"
    assert note == "q: read as nvidia-smi --query-gpu (lines 2-6)"  # the blank line and the command join them


def test_one_field_queries_typed_one_after_the_other_are_each_read():
    # pytorch#88364's query and a second one-field query, pasted without prompts or fences between them: the second
    # command line ends the first query's rows
    env, note = read_as("q", "nvidia-smi --query-gpu=driver_version --format=csv,noheader\n515.57\n"
                             "nvidia-smi --query-gpu=name --format=csv,noheader\nTesla T4\n")
    assert (env.driver.version, [g.name for g in env.gpus]) == ("515.57", ["Tesla T4"])
    assert note == "q: read as nvidia-smi --query-gpu (lines 2, 4)"


@pytest.mark.parametrize("between", ["", "Output:"])
def test_a_one_field_query_after_a_blank_line_or_a_label_is_read(between):
    # the one-field form of the query rows above (the value alone on its line), after a blank line or a label
    env, note = read_as("q", f"$ nvidia-smi --query-gpu=driver_version --format=csv,noheader\n{between}\n550.54.15\n")
    assert (env.driver.version, env.driver.source) == ("550.54.15", "nvidia-smi --query-gpu")
    assert note == "q: read as nvidia-smi --query-gpu (line 3)"


def test_a_query_typed_without_a_prompt_after_rows_is_read_as_its_own_query():
    # the header and row of a two-field query, then a one-field query's command typed without a prompt: its
    # "--format=csv,noheader" has a comma, yet it is a command that starts a query of its own, not a row
    env, note = read_as("q", "name, memory.total [MiB]\nTesla T4, 15360 MiB\n"
                             "nvidia-smi --query-gpu=compute_cap --format=csv,noheader\n7.5\n")
    assert [(g.name, g.memory_total_mib, g.compute_capability) for g in env.gpus] == [("Tesla T4", 15360, "7.5")]
    assert note == "q: read as nvidia-smi --query-gpu (lines 1-2, 4)"


@pytest.mark.parametrize("between", ["It printed nothing.", "\n\n"])
def test_a_query_that_printed_nothing_reads_no_row_from_a_sentence_below_it(between):
    # a query's command, then a line of prose or three blank lines (no row within three lines), then a sentence
    # with as many comma-separated parts as the query has fields: no GPU, nothing read
    env = from_reports([("q", "$ nvidia-smi --query-gpu=name,memory.total --format=csv,noheader\n"
                              f"{between}\nNote that, 16 GB should be free")])  # the paste's last line
    assert env.gpus == [] and not [n for n in env.notes if n.message.startswith("q: read as")]


def test_a_query_reads_no_row_from_a_sentence_after_its_output():
    # a sentence with as many comma-separated parts as the query has fields, two lines below its rows: no GPU
    env, note = read_as("q", "$ nvidia-smi --query-gpu=name,memory.total --format=csv,noheader\nTesla T4, 15360 MiB\n"
                             "\nThat is the one GPU.\nNote that, 16 GB of it is free\n")
    assert [(g.name, g.memory_total_mib) for g in env.gpus] == [("Tesla T4", 15360)]
    assert note == "q: read as nvidia-smi --query-gpu (line 2)"


def test_a_table_cut_after_its_header_is_no_complete_table_for_a_sentence_that_says_processes():
    # a table cut below its header (no GPU row): the GPUs are unknown, not "no device", though a sentence under it
    # says "Processes:" as the end of a complete table does
    env, note = read_as("t", "+" + "-" * 77 + "+\n"
                             "| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2     |\n"
                             "|-------------------------------+----------------------+----------------------+\n"
                             "\n(I cut the rest. Processes: only Xorg and gnome-shell.)\n")
    assert (env.driver.version, env.driver.status, env.gpus) == ("535.104.05", "unknown", [])
    assert note == "t: read as nvidia-smi (lines 1-3)"


@pytest.mark.parametrize("before,after,read", [
    ([], ["", "", "Driver Version: 470.82.01"], "lines 1-11"),  # the block from the paste's first line
    ([""], ["", "", "Driver Version: 470.82.01"], "lines 2-12"),  # from its second, below a blank line
    (["Driver Version: 470.82.01", "", ""], [], "lines 4-14"),  # two blank lines above it
    (["Driver Version: 470.82.01", "On the host:"], [], "lines 3-13"),  # a line of prose right above it
])
def test_an_nvidia_smi_q_block_ends_at_two_blank_lines_or_prose_and_never_wraps(before, after, read):
    # the H200 -q output from its banner on, with a driver typed in a sentence-like line above or below it, past
    # two blank lines or a line of prose: that line is no part of the block (nor, from the first lines of the
    # paste, is the paste's last line)
    q = fixture(H200_Q).split("\n")
    env, note = read_as("q", "\n".join([*before, *q[1:12], *after]))
    assert (env.driver.version, env.gpus[0].name) == ("580.159.04", "NVIDIA H200")
    assert note == f"q: read as nvidia-smi -q ({read})"


# --- what users print from Python (pastes/prints.py) ---------------------------------------------------------

TF_BUILD = "tf-get_build_info_pprint_cuda11.2_cudnn8_tf-feedstock157"


def test_tensorflow_build_info_is_tied_to_the_tensorflow_the_paste_names():
    """tensorflow-feedstock#157's get_build_info() (CUDA 11.2, cuDNN 8), with a freeze line naming the TensorFlow
    (typed): that TensorFlow is built for them; its multi-line pretty print is read as the build info, every line."""
    body = paste_text(TF_BUILD)[1]
    for freeze, source in (("tensorflow==2.7.0", "report"), ("tensorflow-gpu==2.7.0", "report:tf build info")):
        env = from_reports([("b", body + freeze + "\n")])
        assert [(f.name, f.version, f.cuda, f.cudnn, f.source) for f in env.frameworks] == [
            ("tensorflow", "2.7.0", "11.2", "8", source)]
    assert read_as("b", body)[1] == "b: read as tf.sysconfig.get_build_info() (lines 2-19)"


def test_apply_tf_build_keeps_what_is_known_and_names_its_source():
    from cudamatrix.models import Environment, Framework
    from cudamatrix.pastes.prints import apply_tf_build

    build = {"cuda_version": "11.2", "cudnn_version": "8"}
    env = Environment(packages={"tensorflow": "2.7.0"})
    assert apply_tf_build(env, build) is True
    assert [(f.name, f.version, f.cuda, f.cudnn, f.source) for f in env.frameworks] == [
        ("tensorflow", "2.7.0", "11.2", "8", "report:tf build info")]
    gpu = Environment(packages={"tensorflow-gpu": "2.3.0"})
    assert apply_tf_build(gpu, build) is True
    assert [(f.name, f.version, f.cuda) for f in gpu.frameworks] == [("tensorflow", "2.3.0", "11.2")]
    known = Environment(frameworks=[Framework(name="tensorflow-gpu", version="2.4.0", cuda="11.0", cudnn="8.0.4")])
    assert apply_tf_build(known, build) is True
    assert [(f.version, f.cuda, f.cudnn) for f in known.frameworks] == [("2.4.0", "11.0", "8.0.4")]
    half = Environment(frameworks=[Framework(name="tensorflow", version="2.7.0")])
    assert apply_tf_build(half, {"cuda_version": "11.2"}) is True
    assert (half.frameworks[0].cuda, half.frameworks[0].cudnn) == ("11.2", None)
    nothing = Environment(packages={"torch": "2.1.0"})
    assert apply_tf_build(nothing, build) is False and nothing.frameworks == []


@pytest.mark.parametrize("line,key,value", [
    # the inline forms the reader's docstring names (typed: the corpus holds none of them)
    ("torch.__version__ = 2.1.0", "torch", "2.1.0"),
    ("torch.__version__ = 2.1.0\ntorch.version.cuda: 12.1", "cuda", "12.1"),
    ("torch.__version__ is 2.1.0+cu121", "torch", "2.1.0+cu121"),
    ("torch.__version__ -> 2.1.0", "torch", "2.1.0"),
    ("tf.__version__ = '2.15.0'", "tensorflow", "2.15.0"),
    ("torch.__version__ = 2.1.0\ntorch.version.cuda = 12.1 (conda's pytorch-cuda)", "cuda", "12.1"),
])
def test_a_value_printed_inline_after_its_expression_is_read(line, key, value):
    env, note = read_as("p", line + "\n")
    got = {"torch": env.packages.get("torch"), "tensorflow": env.packages.get("tensorflow"),
           "cuda": next((f.cuda for f in env.frameworks if f.name == "torch"), None)}
    assert got[key] == value
    where = "lines 1-2" if "\n" in line else "line 1"
    assert note == f"p: read as python prints ({where})"


@pytest.mark.parametrize("line", ["torch.__version__ = ", "torch.__version__ =", "see torch.__version__ isn't set",
                                  # an answer that is no version, a count that is no expression's version
                                  "torch.__version__ = unknown", "torch.cuda.device_count(): 2"])
def test_an_expression_without_an_inline_value_reads_nothing(line):
    env, note = read_as("p", line + "\n")
    assert "torch" not in env.packages and note is None


def test_a_python_command_printing_one_value_a_line_is_read_value_by_value():
    # typed after the prints the reader's docstring names: one print per expression, one output line each
    env, note = read_as("p", "$ python -c \"import torch; print(torch.__version__); print(torch.version.cuda); "
                             "print(torch.backends.cudnn.version()); print(torch.cuda.get_device_name(0))\"\n"
                             "2.1.0+cu121\n12.1\n8902\nNVIDIA GeForce RTX 4090\n")
    torch = fw(env, "torch")
    assert (torch.version, torch.cuda, torch.variant, torch.cudnn) == ("2.1.0+cu121", "12.1", "cu121", "8.9.2")
    assert [(g.index, g.name, g.source) for g in env.gpus] == [(0, "NVIDIA GeForce RTX 4090", "report:python")]
    assert note == "p: read as python prints (lines 2-5)"


def test_a_python_command_printing_its_values_on_one_line_reads_that_line_only():
    env, note = read_as("p", "$ python -c \"import torch; print(torch.__version__, torch.version.cuda, "
                             "torch.backends.cudnn.version())\"\n2.1.0+cu121 12.1 8902\nsome warning the import printed\n")
    torch = fw(env, "torch")
    assert (torch.version, torch.cuda, torch.cudnn) == ("2.1.0+cu121", "12.1", "8.9.2")
    assert note == "p: read as python prints (line 2)"


def test_the_interpreter_banner_gives_the_python_version_and_is_read_whole():
    # the banner `python3` prints on start (CPython's, as Anaconda builds it): version line, compiler line, help line
    env, note = read_as("p", "$ python3\nPython 3.9.12 (main, Apr  5 2022, 06:56:58) \n"
                             "[GCC 7.5.0] :: Anaconda, Inc. on linux\n"
                             "Type \"help\", \"copyright\", \"credits\" or \"license\" for more information.\n")
    assert env.python.version == "3.9.12"
    assert note == "p: read as python prints (lines 2-4)"


def test_a_torch_without_a_local_tag_is_built_for_the_cuda_torch_version_cuda_prints():
    """A conda torch's version carries no "+cuXXX" tag ('1.12.1'): the build's CUDA is what torch.version.cuda
    printed ('11.3', the variant cu113), from a REPL session as a conda environment's README shows it (typed);
    torch 1.0's torch.version.cuda has three parts ('9.0.176'): CUDA 9.0, variant cu90."""
    env, note = read_as("p", ">>> import torch\n>>> torch.cuda.is_available()\nTrue\n>>> torch.version.cuda\n'11.3'\n"
                             ">>> torch.__version__\n'1.12.1'\n>>> torch.cuda.get_device_name(0)\n"
                             "'NVIDIA GeForce RTX 3060 Laptop GPU'\n")
    assert [(f.name, f.version, f.variant, f.cuda, f.source) for f in env.frameworks] == [
        ("torch", "1.12.1", "cu113", "11.3", "report:python")]
    assert env.packages == {"torch": "1.12.1"}
    assert [(g.index, g.name, g.source) for g in env.gpus] == [(0, "NVIDIA GeForce RTX 3060 Laptop GPU", "report:python")]
    assert note == "p: read as python prints (lines 3-9)"
    old, _ = read_as("p", "$ python -c \"import torch; print(torch.__version__, torch.version.cuda, "
                          "torch.backends.cudnn.version())\"\n1.0.0 9.0.176 7401\n")
    assert [(f.version, f.variant, f.cuda, f.cudnn) for f in old.frameworks] == [("1.0.0", "cu90", "9.0", "7.4.1")]


def test_a_cpu_build_whose_torch_version_cuda_prints_none_is_a_cpu_build():
    """print(torch.version.cuda) prints "None" for a build without CUDA: a torch version without a local tag
    ('2.0.1', conda's or macOS's) is then a CPU build, not one of unknown variant; a tagged build keeps its tag's
    variant (a ROCm build's torch.version.cuda is None too)."""
    env, note = read_as("p", "$ python -c \"import torch; print(torch.__version__); print(torch.version.cuda)\"\n"
                             "2.0.1\nNone\n")
    assert [(f.version, f.variant, f.cuda) for f in env.frameworks] == [("2.0.1", "cpu", None)]
    assert note == "p: read as python prints (lines 2-3)"
    rocm, _ = read_as("p", "$ python -c \"import torch; print(torch.__version__, torch.version.cuda)\"\n"
                           "2.0.1+rocm5.4.2 None\n")
    assert [(f.version, f.variant, f.cuda) for f in rocm.frameworks] == [("2.0.1+rocm5.4.2", "rocm5.4.2", None)]


def test_tensorflow_jax_and_jaxlib_versions_printed_are_their_packages():
    env, note = read_as("p", "$ python -c \"import tensorflow as tf; print(tf.__version__)\"\n2.15.0\n"
                             "$ python -c \"import jax, jaxlib; print(jax.__version__, jaxlib.__version__)\"\n"
                             "0.4.23 0.4.23+cuda12.cudnn89\n")
    assert env.packages == {"tensorflow": "2.15.0", "jax": "0.4.23", "jaxlib": "0.4.23+cuda12.cudnn89"}
    assert note == "p: read as python prints (lines 2-4)"


def test_a_python_version_printed_does_not_replace_the_one_an_earlier_paste_gave():
    env = from_reports([("p", "$ python3 --version\nPython 3.10.12\n"),
                        ("q", "$ python -c \"import sys; print(sys.version)\"\n3.8.10 (default, Nov 22 2023, 10:22:35) \n")])
    assert env.python.version == "3.10.12"
    alone, note = read_as("q", "$ python -c \"import sys; print(sys.version)\"\n3.8.10 (default, Nov 22 2023, 10:22:35) \n")
    assert alone.python.version == "3.8.10" and note == "q: read as python prints (line 2)"


def test_an_untagged_torch_without_its_cuda_printed_is_of_unknown_variant_and_a_later_print_replaces_a_read_torch():
    """print(torch.__version__) alone ('1.12.1', no tag): which build it is stays unknown (not a CPU build); a torch
    printed in a later paste is the one torch of the environment (vLLM#3785's collect_env read first)."""
    printed = "$ python -c \"import torch; print(torch.__version__)\"\n1.12.1\n"
    env, _ = read_as("p", printed)
    assert [(f.version, f.variant, f.cuda) for f in env.frameworks] == [("1.12.1", None, None)]
    both = from_reports([("c", paste_text("collect_env_2.1.2cu121_8xP100_title-no-kernel-image_vllm3785")[1]),
                         ("p", printed)])
    assert [(f.name, f.version, f.source) for f in both.frameworks] == [("torch", "1.12.1", "report:python")]


def test_a_python_version_is_read_from_platform_python_version_and_python_2s_answer_alone():
    """platform.python_version() printed ('3.10.12'); a later bare "Python 3.8.10 :: Anaconda, Inc." (another
    interpreter's --version) is not read once a version is known; "Python 2.7.18" alone is python2 --version's
    answer."""
    env, note = read_as("p", "$ python -c \"import platform; print(platform.python_version())\"\n3.10.12\n\n"
                             "Python 3.8.10 :: Anaconda, Inc.\n")
    assert env.python.version == "3.10.12" and note == "p: read as python prints (line 2)"
    two, note = read_as("p", "Python 2.7.18\n")
    assert two.python.version == "2.7.18" and note == "p: read as python prints (line 1)"


def test_python_version_answered_on_the_pastes_last_line_or_not_at_all():
    """A paste cut without its last newline: the answer on its last line is read; a python command on the last
    line (its answer cut off) reads nothing and trips nothing."""
    env, note = read_as("p", "$ python3 --version\nPython 3.10.12")
    assert env.python.version == "3.10.12" and note == "p: read as python prints (line 2)"
    banner, _ = read_as("p", "$ python3\nPython 3.9.12 (main, Apr  5 2022, 06:56:58)")
    assert banner.python.version == "3.9.12"
    cut = from_reports([("p", "$ nvcc --version\n$ python3 --version")])
    assert cut.python.version is None and not [n for n in cut.notes if "could not read" in n.message]


def test_the_one_line_banner_of_python_3_10_is_read_with_its_help_line_only():
    """Python 3.10's banner is two lines (version and compiler on one); the lines around it are not its own: a
    pip notice above, a list a later command printed below."""
    env, note = read_as("p", "[notice] A new release of pip is available: 23.0.1 -> 23.3.1\n$ python3\n"
                             "Python 3.10.13 (main, Aug 25 2023, 13:20:03) [GCC 9.4.0] on linux\n"
                             "Type \"help\", \"copyright\", \"credits\" or \"license\" for more information.\n"
                             ">>> torch.cuda.get_arch_list()\n['sm_50', 'sm_60', 'sm_70', 'sm_75', 'sm_80', 'sm_86']\n")
    assert env.python.version == "3.10.13"
    assert note == "p: read as python prints (lines 3-4)"


def test_a_gpu_name_is_read_whole_never_word_by_word():
    """A GPU name has blanks, so a one-line print whose word count matches its expressions only by chance is not
    split ("Tesla T4" is not a name "Tesla" and an answer "T4"); a name ending in X keeps it; a name given inline
    after its expression is read and its line claimed."""
    env, note = read_as("p", "$ python -c \"import torch; print(torch.cuda.get_device_name(0) if "
                             "torch.cuda.is_available() else 'cpu')\"\nTesla T4\n")
    assert env.gpus == [] and note is None
    titan, _ = read_as("p", ">>> torch.cuda.get_device_name(0)\n'GeForce GTX TITAN X'\n")
    assert [g.name for g in titan.gpus] == ["GeForce GTX TITAN X"]
    inline, note = read_as("p", "torch.cuda.get_device_name(0): NVIDIA GeForce RTX 4090\n")
    assert [g.name for g in inline.gpus] == ["NVIDIA GeForce RTX 4090"] and note == "p: read as python prints (line 1)"


def test_a_python_command_typed_without_a_prompt_is_read_with_its_output():
    """A `python -c` line without a shell prompt (indented in a Markdown list) still prints its values below it."""
    env, note = read_as("p", "  python -c \"import torch; print(torch.__version__)\"\n  2.1.0+cu121\n")
    assert fw(env, "torch").version == "2.1.0+cu121" and note.startswith("p: read as python prints (line 2)")


def test_the_prints_reader_says_whether_the_paste_held_python_prints():
    from cudamatrix.detect.text import Paste
    from cudamatrix.models import Environment
    from cudamatrix.pastes import prints

    assert prints.read(Paste("$ python3 --version\nPython 3.10.12\n"), Environment(), {}) is True
    assert prints.read(Paste("$ nvcc --version\nCuda compilation tools, release 12.1, V12.1.105\n"), Environment(),
                       {}) is False


TF215_BUILD = ("{'cpu_compiler': '/usr/lib/llvm-16/bin/clang',\n"
               " 'cuda_compute_capabilities': ['sm_50', 'sm_60', 'sm_70', 'sm_75', 'compute_80'],\n"
               " 'cuda_version': '12.2',\n 'cudnn_version': '8',\n 'is_cuda_build': True,\n 'is_rocm_build': False,\n"
               " 'is_tensorrt_build': True}")


def test_a_build_info_printed_as_a_dict_is_read_whole_from_the_pastes_first_to_its_last_line():
    # pprint of TensorFlow 2.15's get_build_info() (a dict: CUDA 12.2, cuDNN 8 as its tested builds table says),
    # typed, at the very start and end of the paste, and in a REPL session between two commands
    env, note = read_as("b", TF215_BUILD)
    assert note == "b: read as tf.sysconfig.get_build_info() (lines 1-7)"
    assert "TensorFlow build info (CUDA 12.2, cuDNN 8) without a TensorFlow version in the paste" in [
        n.message for n in env.notes]
    session = (">>> import pprint, tensorflow as tf\n>>> pprint.pprint(tf.sysconfig.get_build_info())\n"
               + TF215_BUILD + " \n>>> exit()\n")  # a blank left after its closing brace
    assert read_as("b", session)[1] == "b: read as tf.sysconfig.get_build_info() (lines 3-9)"


def test_a_build_info_indented_cut_short_or_deep_in_a_paste_is_read_to_its_own_bounds():
    """tensorflow-feedstock#157's pretty print indented as a Markdown code block (four blanks, a blank left after
    its closing line) is read whole; cut before its closing line, only its version lines are read; after a
    37-line collect_env (vLLM#3785) and 30 lines of notes, at its own line numbers."""
    body = paste_text(TF_BUILD)[1].replace("```\n", "")
    lines = body.splitlines()
    indented = "".join(f"    {line}\n" for line in lines[:-1]) + f"    {lines[-1]} \n"
    assert read_as("b", indented)[1] == "b: read as tf.sysconfig.get_build_info() (lines 1-18)"
    quoted = "The build info:\n\n" + indented + "\nAny idea?\n"
    assert read_as("b", quoted)[1] == "b: read as tf.sysconfig.get_build_info() (lines 3-20)"
    cut = "".join(f"{line}\n" for line in lines[:16])
    assert read_as("b", cut)[1] == "b: read as tf.sysconfig.get_build_info() (lines 14-15)"
    collect_env = paste_text("collect_env_2.1.2cu121_8xP100_title-no-kernel-image_vllm3785")[1]
    deep = collect_env + "\n" + "see below\n" * 30 + "\n" + body
    note = read_as("b", deep)[1]
    start = len(collect_env.splitlines()) + 33
    assert note.endswith(f"tf.sysconfig.get_build_info() (lines {start}-{start + 17})"), note


# --- the labelled fields reader (pastes/fields.py): values, GPU fields, headings, SGLang's package block ---

def test_markdown_bold_code_and_links_are_taken_off_a_value():
    from cudamatrix.pastes.fields import demark

    assert demark("**2.1.0**") == "2.1.0" and demark("`12.1`") == "12.1"
    assert demark("[CUDA 12.1](https://developer.nvidia.com/cuda-12-1-0-download-archive) **on** `WSL`") == \
        "CUDA 12.1 on WSL"
    env = from_reports([("t", "- **PyTorch version**: **2.1.0+cu118**\n- **Python version**: 3.10.12\n"
                              "- **CUDA/cuDNN version**: [12.1](https://developer.nvidia.com/cuda-toolkit)\n")])
    assert fw(env, "torch").version == "2.1.0+cu118" and env.python.version == "3.10.12"


@pytest.mark.parametrize("text,cc", [("sm_120", "12.0"), ("sm_86", "8.6"), ("sm_90a", None), ("sm_8", None),
                                     ("sm_1200", None), ("sm120", None), ("16gb", None), ("8.6", None)])
def test_a_compute_capability_in_parentheses_is_sm_and_two_or_three_digits(text, cc):
    from cudamatrix.pastes.fields import _sm

    assert _sm(text) == cc


@pytest.mark.parametrize("value,name,cc,memory", [
    ("NVIDIA GeForce RTX 5090 (SM_120)", "NVIDIA GeForce RTX 5090", "12.0", None),
    ("RTX 5090 (32 GB) (sm_120)", "RTX 5090", "12.0", 32768),
    ("Tesla T4 (16GB)", "Tesla T4", None, 16384),  # a memory size after the name, in parentheses, brackets, bare
    ("RTX 4090 [24GB]", "RTX 4090", None, 24576),
    ("RTX 5090 32GB", "RTX 5090", None, 32768),
    ("A100 SXM4(40G)", "A100 SXM4", None, 40960),
    ("RTX 3090 24 GB", "RTX 3090", None, 24576),
    ("RTX A6000 (sm_86)", "RTX A6000", "8.6", None),
    ("Tesla P100 (rev a1)", "Tesla P100 (rev a1)", None, None),
    ("NVIDIA GeForce GTX 960M, 4096MiB", "NVIDIA GeForce GTX 960M", None, 4096),
    ("NVIDIA A100-SXM4-40GB, 40960 MiB", "NVIDIA A100-SXM4-40GB", None, 40960),
    ("NVIDIA RTX A6000, 8.6, 49140 MiB", "NVIDIA RTX A6000, 8.6", None, 49140),  # name, compute_cap, memory.total
    ("NVIDIA GeForce RTX 3090, 24GB", "NVIDIA GeForce RTX 3090", None, 24576),
    ("GeForce GTX 1080 8", "GeForce GTX 1080 8", None, None),  # a number without its unit is no memory
    ("1080 Ti", "1080 Ti", None, None),
    ("RTX 4090 / 24GB", "RTX 4090", None, None),
])
def test_a_gpu_fields_value_is_its_name_with_compute_capability_or_memory(value, name, cc, memory):
    from cudamatrix.pastes.fields import _gpu_value

    g = _gpu_value(value)
    assert (g.index, g.name, g.compute_capability, g.memory_total_mib) == (0, name, cc, memory)


def test_a_template_gpu_field_is_gpu_0():
    env = from_reports([("t", "- PyTorch version: 2.5.1+cu121\n- GPU: NVIDIA GeForce RTX 5090 (sm_120)\n")])
    assert [(g.index, g.name, g.compute_capability) for g in env.gpus] == [(0, "NVIDIA GeForce RTX 5090", "12.0")]


@pytest.mark.parametrize("value,read", [
    ("2.5.1+cu121", (None, "2.5.1+cu121")),
    ("1.13.1+cu117 with CUDA 11.7", (None, "1.13.1+cu117")),
    ("tensorflow-gpu==1.15.0", ("tensorflow-gpu", "1.15.0")),
    ("tensorflow-gpu==1.15.0 (pip install tensorflow-gpu==1.15.0)", ("tensorflow-gpu", "1.15.0")),
    ("TF 2.11 (tf-nightly==2.12.0)", (None, "2.11")),
    ("v2.13.0-rc2-7-g1cb1a030a62 2.13.0", (None, "2.13.0")),
    ("v2.1.0", (None, "2.1.0")),
    ("tensorflow v2.4.0", (None, "2.4.0")),  # the version 12 characters in
    ("built from source", None), ("could not collect", None), ("", None),
])
def test_a_package_fields_value_names_its_version(value, read):
    from cudamatrix.pastes.fields import _pkg_version

    assert _pkg_version(value) == read


@pytest.mark.parametrize("value,cuda,cudnn", [
    ("10.1 / 7.6.5", "10.1", "7.6.5"),
    ("CUDA 10.1 / 7.6.5", "10.1", "7.6.5"),
    ("CUDA 9.0 cuDNN 7.0.5", "9.0", "7.0.5"),
    ("cuda 10 /  cudnn 7.6.0", None, "7.6.0"),
    ("CUDA 10.1 / cuDNN 7.6.5 (cudnn64_7.dll)", "10.1", "7.6.5"),
    ("cuDNN 7.6.5 / CUDA 10.1", None, "7.6.5"),
])
def test_a_cuda_cudnn_field_names_both(value, cuda, cudnn):
    env = from_reports([("t", f"- PyTorch version: 1.4.0\n- CUDA/cuDNN version: {value}\n- Python version: 3.7\n")])
    torch = fw(env, "torch")
    assert (torch.cuda, torch.cudnn) == (cuda, cudnn)


def test_a_second_cudnn_a_field_names_is_a_report_note():
    env = from_reports([("t", "PyTorch version: 1.7.0\nCUDA used to build PyTorch: 11.0\ncuDNN version: 8.0.4/8.0.3\n")])
    assert fw(env, "torch").cudnn == "8.0.4"
    notes = [(n.probe, n.message) for n in env.notes if n.message.startswith("cuDNN")]
    assert notes == [("report", "cuDNN 8.0.3 named in the paste, of no framework it could be tied to")]


def test_markdown_headings_give_their_values_from_the_next_lines():
    """A heading's value is its next non-blank line within three; another heading there is no value; headings
    that carry nothing are passed over; a cuDNN heading reads the library paths under it."""
    text = ("### Describe the bug\nIt fails.\n### TensorFlow version\nTF 2.11\n### OS\n  ### Python version\n"
            "\n3.8.10\n### cuDNN version\n/usr/lib/x86_64-linux-gnu/libcudnn.so.8.1.0\n"
            "/usr/lib/x86_64-linux-gnu/libcudnn_ops_infer.so.8.1.0\n### GPU model and memory\n\n\n\nNVIDIA A16\n"
            "### Bazel version")
    env, note = read_as("h", text)
    assert (env.packages["tensorflow"], env.python.version, env.context.os) == ("2.11", "3.8.10", None)
    assert env.gpus == []
    assert [lib.path for lib in env.libraries if lib.name == "cudnn"] == ["/usr/lib/x86_64-linux-gnu/libcudnn.so.8.1.0"]
    assert note == "h: read as environment fields (lines 3-4, 6-11)"


def test_three_headings_alone_are_enough_to_read():
    env = from_reports([("h", "### TensorFlow version\n2.11\n### Python version\n3.8.10\n### OS\nUbuntu 20.04\n")])
    assert (env.packages["tensorflow"], env.python.version, env.context.os) == ("2.11", "3.8.10", "linux")


SGLANG_2805 = "sglang-check_env_A40_cu121_pydantic-warning_sglang2805"


def test_sglang_check_env_lists_every_package_of_its_block():
    """Every "name: version" line of the block around "sglang:" (up to the lines without a colon: the pydantic
    warning above it) is a package; the warning's lines and the fields with blanks in their values are not."""
    env, note = read_as("s", paste_text(SGLANG_2805)[1])
    listed = ["sglang: 0.4.0.post2", "flashinfer: 0.1.6+cu121torch2.4", "triton: 3.0.0", "transformers: 4.47.1",
              "torchao: 0.7.0", "numpy: 1.26.4", "aiohttp: 3.8.5", "fastapi: 0.115.6", "hf-transfer: 0.1.9",
              "huggingface-hub: 0.27.1", "interegular: 0.3.3", "modelscope: 1.22.0", "orjson: 3.10.13",
              "packaging: 23.1", "psutil: 5.9.0", "pydantic: 2.10.4", "multipart: 0.0.20", "zmq: 26.2.0",
              "uvicorn: 0.34.0", "uvloop: 0.21.0", "vllm: 0.6.3.post1", "openai: 1.59.4", "anthropic: 0.42.0",
              "decord: 0.6.0"]
    assert {k: v for k, v in env.packages.items() if k not in ("torch", "pytorch")} == \
        dict(line.split(": ") for line in listed)
    assert note == "s: read as sglang check_env (lines 5-36)"


def test_sglang_blocks_typed_one_after_the_other_are_each_read():
    """Two check_env outputs separated by prose: each block's packages (the first from the paste's first line),
    none of the "name: version" lines outside them (between them, or after the last, below prose)."""
    text = ("aiohttp: 3.9.5\nsglang: 0.1.21\nflashinfer: 0.0.9\nthen on the other node\nhf_transfer: 0.1.6\n"
            "as installed there\ntriton: 2.3.0\nsglang: 0.1.21\nvllm: 0.5.1\nrpyc: 6.0.0\nand on the client\n"
            "uvloop: 0.19.0\n")
    env = from_reports([("s", text)])
    assert {k: v for k, v in env.packages.items() if k not in ("torch", "pytorch")} == {
        "aiohttp": "3.9.5", "sglang": "0.1.21", "flashinfer": "0.0.9", "triton": "2.3.0", "vllm": "0.5.1", "rpyc": "6.0.0"}


@pytest.mark.parametrize("stem,os_name,platform,wsl", [
    ("collect_env_2.0.1cu117_windows_dll-cudnn_cpu-wmic_pytorch51858", "windows", "win_amd64", False),
    ("collect_env_2.4.0cu121_wsl2_rtx4070-laptop_prompt_vllm9293", "linux", "linux_x86_64", True),
    ("collect_env_2.1.2cu121_8xP100_title-no-kernel-image_vllm3785", "linux", "linux_x86_64", False),
    ("collect_env_2.7.0-cpu_macos_pip3-conda_vllm18285", "darwin", None, False),
    ("collect_env_1.1.0a0_macos-gpu_dylib-cudnn_pytorch16999", "darwin", None, False),
])
def test_the_operating_system_and_python_platform_of_a_collect_env(stem, os_name, platform, wsl):
    env = paste_env(stem)
    assert (env.context.os, env.python.platform, env.context.wsl) == (os_name, platform, wsl)


@pytest.mark.parametrize("lines,os_name,platform,wsl", [
    (["Python platform: Linux-5.15.136-tegra-aarch64-with-glibc2.35"], "linux", "linux_aarch64", False),
    (["OS: Ubuntu 22.04.4 LTS (x86_64)"], "linux", "linux_x86_64", False),
    (["OS: Rocky Linux 9.3 (Blue Onyx) (aarch64)"], "linux", "linux_aarch64", False),
    (["OS: Debian GNU/Linux 12 (bookworm)"], "linux", None, False),
    (["Python platform: Linux-5.10.16.3-microsoft-standard-WSL2-x86_64-with-glibc2.31"], "linux", "linux_x86_64",
     True),
    (["OS: Microsoft Windows 10 Pro"], "windows", "win_amd64", False),
    (["Python version: 3.8.5 (tags/v3.8.5:580fbb0, Jul 20 2020) [MSC v.1926 32 bit (Intel)] (32-bit runtime)",
      "Python platform: Windows-10-10.0.19041-SP0"], "windows", None, False),
    (["Python version: 3.11.4 (main) [MSC v.1934 64 bit (AMD64)] (64-bit runtime)",
      "Python platform: Windows-10-10.0.19045-SP0"], "windows", "win_amd64", False),
    (["Python platform: macOS-14.1-arm64-arm-64bit"], "darwin", None, False),
    (["OS: Mac OSX 10.15.5 (x86_64)"], "darwin", None, False),
    (["OS: macOS 13.4 (arm64)"], "darwin", None, False),  # a collect_env without its Python platform line
    # WSL 1's kernel says "Microsoft" without "WSL" (Python's platform.platform() on WSL 1)
    (["Python platform: Linux-4.4.0-19041-Microsoft-x86_64-with-glibc2.29"], "linux", "linux_x86_64", True),
    (["OS: FreeBSD 14.0"], None, None, False),
])
def test_the_operating_system_from_the_os_and_python_platform_fields(lines, os_name, platform, wsl):
    env = from_reports([("t", "\n".join(["PyTorch version: 2.5.1", *lines]) + "\n")])
    assert (env.context.os, env.python.platform, env.context.wsl) == (os_name, platform, wsl)


@pytest.mark.parametrize("value,libraries,cudnn", [
    ("Could not collect", [], None),
    ("8902", [], "8.9.2"),
    ("90100", [], "9.1.0"),
    ("100100", [], "10.1.0"),  # six digits: cuDNN's major * 10000 + minor * 100 + patch from 9 on
    ("8902000", [], None),  # seven digits are no cuDNN version
    ("C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v11.8\\bin\\zlibwapi.dll", [], None),  # not cuDNN's
    ("8.9.2", [], "8.9.2"),
    ("Probably one of the following:", [], None),
    ("/usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.2", [("libcudnn.so.8", "8.9.2")], None),
    ("C:\\Program Files\\NVIDIA\\CUDNN\\v8.9\\bin\\cudnn64_8.dll", [("cudnn64_8.dll", None)], None),
    ("/usr/lib/x86_64-linux-gnu/libcudnn_ops_infer.so.8.9.2", [], None),
])
def test_a_cudnn_field_is_a_library_path_or_a_version(value, libraries, cudnn):
    env = from_reports([("t", f"PyTorch version: 2.1.0+cu121\nCUDA used to build PyTorch: 12.1\ncuDNN version: {value}\n")])
    assert [(lib.soname, lib.version) for lib in env.libraries if lib.name == "cudnn"] == libraries
    assert fw(env, "torch").cudnn == cudnn


@pytest.mark.parametrize("line,wide,read", [
    ("PyTorch version: 1.5.0", True, ("pytorch version", "1.5.0")),
    ("PyTorch version : 1.5.0", True, ("pytorch version", "1.5.0")),
    ("PyTorch version:1.5.0", True, ("pytorch version", "1.5.0")),
    ("- PyTorch Version (e.g., 1.0): 1.5.0", True, ("pytorch version", "1.5.0")),
    ("- PyTorch version 1.5.0", True, ("pytorch version", "1.5.0")),
    ("* PyTorch version 1.5.0", True, ("pytorch version", "1.5.0")),
    ("Driver version  535.104.05", True, None),  # no colon: only "PyTorch version" is read without one
    ("GPU 0\uff1aTITAN RTX", True, ("gpu 0", "TITAN RTX")),
    ("GPU 0\uff1aTITAN RTX", False, None),
    ("GPU 0\uff1aTITAN RTX: 24GB", True, ("gpu 0", "TITAN RTX: 24GB")),
    ("GPU 0: TITAN RTX\uff1a24GB", True, ("gpu 0", "TITAN RTX\uff1a24GB")),
    ("CUDA used to build PyTorch: 12.1: from the wheel", True, ("cuda used to build pytorch", "12.1: from the wheel")),
    ("x" * 80 + ": y", True, ("x" * 80, "y")),  # the label ends within the first 81 characters
    ("x" * 81 + ": y", True, None),
    ("x" * 80 + "\uff1ay", True, ("x" * 80, "y")),
    ("x" * 81 + "\uff1ay", True, None),
])
def test_a_line_is_cut_at_its_first_colon_or_full_width_colon(line, wide, read):
    from cudamatrix.pastes.fields import _label

    assert _label(line, wide) == read


def test_gpu_index_lines_are_read_with_other_fields_but_do_not_count_as_one():
    """"GPU 1: NAME (80GB)" keeps its parentheses (only a "(UUID: ...)" is cut); two weak fields and GPU lines are
    not enough to call a text a field block (a GPU index line is no field of its own)."""
    text = ("PyTorch version: 2.1.0\nCUDA used to build PyTorch: 12.1\nGPU models and configuration:\n"
            "GPU 0: NVIDIA A100 (80GB)\nGPU 1: NVIDIA A100 (80GB)\n")
    env = from_reports([("t", text)])
    assert [(g.index, g.name) for g in env.gpus] == [(0, "NVIDIA A100 (80GB)"), (1, "NVIDIA A100 (80GB)")]
    weak = "OS: Ubuntu 22.04.3 LTS (x86_64)\nGCC version: (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0\nGPU 0\uff1aNVIDIA A100\n"
    env = from_reports([("w", weak)], strict=False)
    assert (env.gpus, env.context.os) == ([], None)


@pytest.mark.parametrize("label,indices", [
    ("gpu 0", [0]), ("gpu 0,1,2,3", [0, 1, 2, 3]), ("gpu 0, 1", [0, 1]), ("gpu 0,1 compute capability", [0, 1]),
    ("gpu 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31", None),  # over 80
    ("gpu topology", None), ("gpus", None),
    ("gpu " + "0," * 37 + "10", [0] * 37 + [10]),  # 80 characters: the longest label read
    ("gpu " + "0," * 37 + "100", None),  # 81
])
def test_the_gpu_indices_a_label_names(label, indices):
    from cudamatrix.pastes.fields import _gpu_indices

    assert _gpu_indices(label) == indices


def test_every_cudnn_path_under_the_field_to_the_end_of_the_paste():
    text = ("PyTorch version: 2.1.0+cu121\nCUDA used to build PyTorch: 12.1\ncuDNN version: Probably one of the following:\n"
            "/usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.2\n/usr/local/cuda/lib64/libcudnn.so.9.1.0\n"
            "/usr/lib/x86_64-linux-gnu/libcudnn_adv_infer.so.8.9.2")  # no newline after the last line
    env, note = read_as("c", text)
    assert [(lib.path, lib.version) for lib in env.libraries if lib.name == "cudnn"] == [
        ("/usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.2", "8.9.2"), ("/usr/local/cuda/lib64/libcudnn.so.9.1.0", "9.1.0")]
    assert note == "c: read as collect_env (lines 1-6)"


def test_a_template_field_alone_is_read_when_it_names_a_gpu_and_a_linked_value_is_its_text():
    env = from_reports([("t", "- GPU: NVIDIA GeForce RTX 4090\n")])
    assert [(g.index, g.name) for g in env.gpus] == [(0, "NVIDIA GeForce RTX 4090")]
    linked = from_reports([("t", "- TensorFlow version: [2.11](https://github.com/tensorflow/tensorflow/releases)\n"
                                 "- Python version: 3.8.10\n- OS: Ubuntu 20.04\n")])
    assert linked.packages["tensorflow"] == "2.11"


def test_a_cudnn_library_a_field_names_says_where_it_was_read():
    env = from_reports([("t", "PyTorch version: 2.1.0+cu121\nCUDA used to build PyTorch: 12.1\n"
                              "cuDNN version: /usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.2\n")])
    assert [(lib.origin, lib.path) for lib in env.libraries if lib.name == "cudnn"] == [
        ("report:collect_env", "/usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.2")]


@pytest.mark.parametrize("stem,read", [
    ("collect_env-like_doctr_torch1.8.0_tf2.5.0_cudnn8.2.0_doctr345", "collect_env (lines 2-22)"),
    ("jax_env-info_cpu-and-gpu_460.32.03_T4_jax12213",
     "jax.print_environment_info (lines 4-22); nvidia-smi (lines 23-31)"),
    ("sglang-check_env_4xRTX6000Ada_venv-prompt_sglang4812", "sglang check_env (lines 3-40, 47)"),
    ("collect_env_sectioned_from-driver-line_cpu-info_vllm34296",
     "environment fields (lines 2-6, 11-15, 17-20, 23-25)"),
])
def test_a_field_block_is_named_by_the_labels_it_holds(stem, read):
    """The kind follows from the labels; a collect_env block takes the lines between its fields and the paragraph
    after them."""
    _, note = read_as("s", paste_text(stem)[1])
    assert note == f"s: read as {read}"
    _, typed = read_as("v", "PyTorch version: 2.1.2+cu121\nIs debug build: False\nvLLM Version: 0.3.0\n")
    assert typed == "v: read as collect_env (vLLM) (lines 1-3)"


def test_unknown_fields_after_a_known_one_are_read_as_part_of_the_block():
    """A "GPU ..." label that names no index ("GPU memory_total.used-MiB") is claimed with the block once a field
    was recognised; before any field it is not."""
    _, note = read_as("t", "- PyTorch version: 2.1.0\n- GPU memory_total.used-MiB: 24564\n")
    assert note == "t: read as environment fields (lines 1-2)"
    _, first = read_as("t", "- GPU memory_total.used-MiB: 24564\n- PyTorch version: 2.1.0\n")
    assert first == "t: read as environment fields (line 2)"


VLLM3785 = "collect_env_2.1.2cu121_8xP100_title-no-kernel-image_vllm3785"


def test_a_collect_env_after_python_prints_keeps_the_python_version_and_gives_the_one_torch():
    """A python version printed first stays (vLLM#3785's collect_env after it says 3.10); the collect_env's
    torch is the environment's one torch, with its CUDA; its driver and GPUs say they come from the collect_env."""
    env = from_reports([("p", "$ python3 --version\nPython 3.11.8\n$ python -c \"import torch; "
                              "print(torch.__version__)\"\n2.2.0+cu118\n"), ("c", paste_text(VLLM3785)[1])])
    assert env.python.version == "3.11.8"
    assert [(f.name, f.version, f.cuda, f.source) for f in env.frameworks] == [
        ("torch", "2.1.2+cu121", "12.1", "report:collect_env")]
    assert env.driver.source == "report:collect_env"
    assert {g.source for g in env.gpus} == {"report:collect_env"} and len(env.gpus) == 8


def test_a_gpu_compute_capability_field_alone_is_a_gpu_of_its_block():
    # SGLang's check_env names each GPU's compute capability on its own line (typed after sglang#4812's)
    env, note = read_as("s", "Python: 3.10.12\nCUDA available: True\nGPU 0,1: NVIDIA A100-SXM4-80GB\n"
                             "GPU 0,1 Compute Capability: 8.0\nsglang: 0.4.3\n")
    assert [(g.index, g.name, g.compute_capability, g.source) for g in env.gpus] == [
        (0, "NVIDIA A100-SXM4-80GB", "8.0", "report:sglang"), (1, "NVIDIA A100-SXM4-80GB", "8.0", "report:sglang")]
    alone, _ = read_as("s", "Python: 3.10.12\nGPU 0 Compute Capability: 8.0\nsglang: 0.4.3\n")
    assert [(g.index, g.name, g.compute_capability, g.source) for g in alone.gpus] == [(0, None, "8.0", "report:sglang")]


def test_a_gpu_index_fields_name_is_cut_before_its_uuid():
    """"GPU 0: NAME (UUID: GPU-...)" (nvidia-smi -L's line, whose reader claims it first in a paste) names the
    GPU without its UUID; a name that only ends in a parenthesis keeps it."""
    from cudamatrix.pastes.fields import _Facts, _gpu_field

    facts = _Facts()
    _gpu_field(facts, "gpu 0", [0], "NVIDIA GeForce RTX 5090 (UUID: GPU-9c3c2d33-2b5a-4f0e-8f11-3a1f4e0b6c21)")
    _gpu_field(facts, "gpu 1", [1], "NVIDIA RTX 6000 Ada Generation (48GB)")
    assert [(g.index, g.name) for g in facts.gpus] == [(0, "NVIDIA GeForce RTX 5090"),
                                                       (1, "NVIDIA RTX 6000 Ada Generation (48GB)")]


@pytest.mark.parametrize("text,read", [
    # jax alone, in a template, is no jax.print_environment_info() (which prints jax and jaxlib)
    ("jax: 0.4.23\nPython: 3.10.12\nOS: Ubuntu 22.04\n", "environment fields (lines 1-3)"),
    # a collect_env cut after its second line: "Is debug build" is collect_env's own
    ("PyTorch version: 1.0.0\nIs debug build: No\n", "collect_env (lines 1-2)"),
])
def test_the_kind_of_a_short_block_follows_from_its_labels(text, read):
    assert read_as("t", text)[1] == f"t: read as {read}"


@pytest.mark.parametrize("text", [
    "* PyTorch version: 2.1.0+cu121\n* Python version: 3.10.12\n",  # "*" bullets
    "-   PyTorch version: 2.1.0+cu121\n-   Python version: 3.10.12\n",  # bullets with three blanks after
    "-  PyTorch version: 2.1.0+cu121\n-  Python version: 3.10.12\n",  # and with two
    "PyTorch version : 2.1.0+cu121\nPython version : 3.10.12\n",  # a blank before the colon
    "`PyTorch version`: 2.1.0+cu121\n`Python version`: 3.10.12\n",  # labels in inline code
    "PyTorch  version: 2.1.0+cu121\nPython\tversion: 3.10.12\n",  # two blanks, a tab
    "PyTorch version: '2.1.0+cu121'\nPython version: \"3.10.12\"\n",  # values in quotes
])
def test_a_labelled_field_is_read_through_bullets_blanks_code_and_quotes(text):
    env, note = read_as("t", text)
    assert (fw(env, "torch").version, env.python.version) == ("2.1.0+cu121", "3.10.12")
    assert note == "t: read as environment fields (lines 1-2)"


def test_a_gpu_field_keeps_a_name_ending_in_x():
    env = from_reports([("t", "- PyTorch version: 1.4.0\n- GPU: GeForce GTX TITAN X\n")])
    assert [g.name for g in env.gpus] == ["GeForce GTX TITAN X"]


@pytest.mark.parametrize("text,kind", [
    ("CUDA used to build PyTorch: 12.1", "collect_env"),
    ("GPU models and configuration: Could not collect", "environment fields"),  # collect_env with no GPU
    ("Nvidia driver version: 535.104.05", "environment fields"),
    ("cuDNN version: 8.9.2", "environment fields"),
    ("jaxlib: 0.4.23", "environment fields"),
    ("sglang: 0.4.3", "sglang check_env"),
    ("vLLM Version: 0.3.0", "collect_env (vLLM)"),
    ("Python platform: Linux-5.15.0-105-generic-x86_64-with-glibc2.35", "environment fields"),
    ("Is CUDA available: True", "environment fields"),
    ("CUDA runtime version: 12.1.105", "environment fields"),
    ("CUDA/cuDNN version: 12.1/8.9", "environment fields"),
    ("PyTorch version (GPU?): 2.1.0+cu121 (True)", "environment fields"),
    ("torch version: 2.1.0", "environment fields"),
    ("PyTorch: 2.1.0", "environment fields"),
    ("PyTorch version: 2.1.0", "environment fields"),
    ("GPU: NVIDIA GeForce RTX 4090", "environment fields"),
])
def test_one_field_only_an_environment_report_prints_is_enough_to_read(text, kind):
    assert read_as("t", text + "\n")[1] == f"t: read as {kind} (line 1)"


@pytest.mark.parametrize("text,read", [
    # the tail of a collect_env from its "Versions of relevant libraries" marker, or its head with no strong field
    ("Versions of relevant libraries:\n[pip3] numpy==1.26.4\n[pip3] torch==2.1.0\n", "collect_env (lines 1-3)"),
    ("Collecting environment information...\nGCC version: (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0\n",
     "collect_env (lines 1-2)"),
    ("Python version: 3.10.12\nOS: Ubuntu 22.04\nGCC version: 11.4.0\n", "environment fields (lines 1-3)"),
    ("Python version: 3.10.12\nOS: Ubuntu 22.04\n", None),  # two ordinary fields are no report
    ("GPU 0: NVIDIA GeForce RTX 4090\nOS: Ubuntu 22.04\nPython version: 3.10.12\n", None),  # an index is no field
    ("GPU: yes\n", None),  # a GPU field whose value names no GPU
])
def test_a_marker_line_or_three_ordinary_fields_make_a_block(text, read):
    note = read_as("t", text)[1]
    assert note == (f"t: read as {read}" if read else None)


@pytest.mark.parametrize("stem,read", [
    # section titles, wmic's CPU lines, topology tables and the paragraph after the last field are the block's
    ("collect_env_2.0.1cu117_windows_dll-cudnn_cpu-wmic_pytorch51858", "collect_env (lines 6-48)"),
    ("collect_env_2.2.1cu121_L40S_k8s-pod_vllm4462", "collect_env (lines 7-26)"),
    ("collect_env_2.4.0cu121_driver-too-old-11040_undefined-symbol_vllm11623", "collect_env (lines 7-21)"),
    ("collect_env_2.4.0cu121_wsl2_rtx4070-laptop_prompt_vllm9293", "collect_env (lines 3-36)"),
    ("collect_env_2.5.1cu121_rtx4090_cudnn8.9.0_vllm13497", "collect_env (lines 4-38)"),
    ("collect_env_2.7.0-cpu_macos_pip3-conda_vllm18285", "collect_env (lines 2-41)"),
    ("collect_env_sectioned_2.5.1cu124_rhel8_odd-prompt_vllm21310", "collect_env (lines 4-28)"),
])
def test_a_collect_env_block_takes_the_lines_between_and_after_its_fields(stem, read):
    assert read_as("s", paste_text(stem)[1])[1] == f"s: read as {read}"


def test_the_fields_reader_says_whether_the_paste_held_a_block_of_fields():
    from cudamatrix.detect.text import Paste
    from cudamatrix.models import Environment
    from cudamatrix.pastes import fields

    assert fields.read(Paste("PyTorch version: 2.1.0\nCUDA used to build PyTorch: 12.1\n"), Environment()) is True
    assert fields.read(Paste("Python version: 3.10.12\n"), Environment()) is False


def test_lines_another_reader_read_are_not_fields_of_a_block_after_them():
    """nvidia-smi -q's "Driver Version : ..." lines are its own (nvidia-docker#1256's), not the first fields of
    the collect_env pasted under them (vLLM#3785's): the collect_env block starts at its own first field, and
    the torch error between them stays a torch error."""
    smi = fixture("nvidia-smi/q_440.33.01_T4_aws_nvidia-docker1256.txt")
    _, note = read_as("s", smi + "\n" + paste_text(VLLM3785)[1])
    assert note == "s: read as nvidia-smi -q (lines 1-30); torch error (line 32); collect_env (lines 37-68)"


def test_a_paste_that_repeats_its_lines_reads_as_searched_line_by_line(monkeypatch):
    """Every reader's answer on the corpus of real pastes, repeated as a long log repeats itself, is the same
    whether the paste is searched once per distinct line or over its whole text."""
    from cudamatrix.detect.text import Paste

    corpus = sorted((DATA / "pastes").glob("*.txt"))
    text = "\n".join(p.read_text(encoding="utf-8").split("\n", 1)[1] for p in corpus) * 3
    assert Paste(text)._distinct() is not None
    distinct = from_reports([("log.txt", text)]).to_dict()
    monkeypatch.setattr(Paste, "_distinct", lambda self: None)
    assert from_reports([("log.txt", text)]).to_dict() == distinct
