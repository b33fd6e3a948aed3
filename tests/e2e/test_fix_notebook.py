"""``cudamatrix.fix()`` in a real Jupyter kernel (ipykernel, driven by nbclient and jupyter_client), run by the
venv it changes: a throwaway venv holding a stand-in CPU torch, ipykernel and cudamatrix's dependencies (repacked
from this test venv's installed files, so nothing is downloaded), real pip, and the framework index on loopback.
The machine is described by the driver and GPU keywords (no GPU here), as the fix end-to-end tests do."""
from __future__ import annotations

import json
import os
import subprocess
from importlib import metadata
from pathlib import Path

import pytest
from support.fakes import run_cli
from support.localindex import LocalIndex, build_wheel, copy_venv, pip_list

ROOT = Path(__file__).parent.resolve().parents[1]
nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
jupyter_client = pytest.importorskip("jupyter_client")

from test_fix_e2e import FAKE_TORCH, _wheels  # noqa: E402  (the same stand-in torch and solved-set wheels)

KERNEL = "cudamatrix-test"
TARGET = 'driver="550.54.14", gpus=["Tesla T4"], frameworks="torch", verify=False, allow_http=True'


def _closure(roots: list[str]) -> dict[str, metadata.Distribution]:
    """The installed distributions ``roots`` need (their Requires-Dist without extras, markers evaluated here)."""
    from packaging.requirements import Requirement

    from cudamatrix.names import canonical

    seen: dict[str, metadata.Distribution] = {}
    todo = list(roots)
    while todo:
        name = canonical(todo.pop())
        if name in seen or name == "pip":
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen[name] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


@pytest.fixture(scope="module")
def kernel_template(template_venv, tmp_path_factory) -> Path:
    """A venv with ipykernel and cudamatrix's dependencies, from wheels repacked out of this test venv."""
    from cudamatrix.install.journal import repack

    base = tmp_path_factory.mktemp("kernelvenv")
    wheels = base / "wheels"
    needs = [Requirement_name(r) for r in metadata.distribution("cudamatrix").requires or [] if "extra" not in r]
    for dist in _closure(["ipykernel", *needs]).values():
        repack(Path(str(dist._path)), wheels)  # type: ignore[attr-defined]  # the .dist-info folder
    py = copy_venv(template_venv, base / "venv")
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                    *map(str, wheels.iterdir())],
                   check=True, capture_output=True, timeout=300)
    return base / "venv"


def Requirement_name(text: str) -> str:  # noqa: N802
    from packaging.requirements import Requirement

    return Requirement(text).name


@pytest.fixture()
def kernel(kernel_template, tmp_path, monkeypatch):
    """The kernel venv (stand-in CPU torch installed), its kernel spec, and the solved set's wheels."""
    py = copy_venv(kernel_template, tmp_path / "venv")
    start = build_wheel(tmp_path / "start", "torch", "2.4.1+cpu",
                        files={"torch/__init__.py": FAKE_TORCH.format(version="2.4.1+cpu", cuda=None)})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "JUPYTER"))}
    env.update({"PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_DEFAULT_TIMEOUT": "5",
                "PIP_RETRIES": "0", "PIP_CACHE_DIR": str(tmp_path / "pipcache"), "PYTHONPATH": str(ROOT),
                "JUPYTER_PATH": str(tmp_path / "jupyter"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")})
    env.pop("LD_LIBRARY_PATH", None)
    subprocess.run([str(py), "-m", "pip", "install", "--no-index", "--no-deps", str(start)], env=env, check=True,
                   capture_output=True, timeout=300)
    solved = run_cli(["solve", "--python", str(py), "--gpu", "Tesla T4", "--driver", "550.54.14", "--json"], env=env,
                     text=True, cwd=ROOT, timeout=300)  # in this process
    solution = json.loads(solved.stdout)["data"]["solution"]
    _wheels(tmp_path / "wheels", solution)
    spec = tmp_path / "jupyter" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    spec.joinpath("kernel.json").write_text(json.dumps({
        "argv": [str(py), "-m", "ipykernel_launcher", "-f", "{connection_file}"], "display_name": "cudamatrix test",
        "language": "python"}))
    for key in list(os.environ):
        if key.startswith(("PIP_", "UV_", "JUPYTER")):
            monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    return py, env, solution


def _run(cells: list[str]) -> list[str]:
    """Execute the cells in a fresh kernel with nbclient (no input channel, as papermill runs them): each cell's
    text output (stream, result, error)."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(nb, kernel_name=KERNEL, timeout=240, allow_errors=True).execute()
    out = []
    for cell in nb.cells:
        text = ""
        for o in cell.outputs:
            if o.output_type == "stream":
                text += o.text
            elif o.output_type == "execute_result":
                text += o.data.get("text/plain", "") + "\n"
            elif o.output_type == "error":
                text += f"{o.ename}: {o.evalue}\n"
        out.append(text)
    return out


@pytest.mark.installs
def test_fix_in_a_kernel_asks_refuses_without_input_then_applies_and_names_the_stale_modules(kernel, tmp_path,
                                                                                            monkeypatch):
    py, env, solution = kernel
    torch_pin = next(p["version"] for p in solution["packages"] if p["name"] == "torch")
    with LocalIndex(tmp_path / "wheels") as index:
        monkeypatch.setenv("PIP_INDEX_URL", index.url + "/simple")  # the kernel inherits it
        mirror = f'mirror="{index.url}/whl"'
        cells = _run([
            "import torch; print(torch.__version__)",
            f"import cudamatrix\ncudamatrix.fix({TARGET}, {mirror})",
            "from importlib.metadata import version; print(torch.__version__, version('torch'))",  # memory, disk
            f"r = cudamatrix.fix({TARGET}, {mirror}, yes=True)",
            "print(torch.__version__, r.status, [s['module'] for s in r.stale_modules])",
            "r",
        ])
    assert cells[0].strip() == "2.4.1+cpu"
    # no input channel (nbclient): refused, naming yes=True, before anything changed
    plan, _, error = cells[1].partition("UsageError: ")
    assert "[install]" in plan and "cudamatrix.fix(yes=True)" in error and "nothing was changed" in error, cells[1]
    assert cells[2].split() == ["2.4.1+cpu", "2.4.1+cpu"], cells[2]  # the refusal changed nothing on disk
    applied = cells[3]
    assert "[install]" in applied and f"torch 2.4.1+cpu -> {torch_pin}" in applied, applied
    assert "[1/" in applied and "step(s) done" in applied, applied  # live progress, one line per event
    assert "stale in this process" in applied and "Jupyter: Kernel -> Restart Kernel" in applied, applied
    assert f"torch: torch 2.4.1+cpu in memory, {torch_pin} on disk" in applied, applied
    # the kernel still runs the old code: exactly what the message said
    assert cells[4].split() == ["2.4.1+cpu", "applied", "['torch']"], cells[4]
    assert cells[5].startswith("FixResult(status='applied'"), cells[5]  # shown once, then the short repr
    installed = {d["name"]: d["version"] for d in pip_list(py, env)}
    assert installed["torch"] == torch_pin


@pytest.mark.installs
def test_fix_in_a_kernel_asks_through_the_frontend_and_no_changes_nothing(kernel, tmp_path):
    py, env, _ = kernel
    before = pip_list(py, env)
    km = jupyter_client.KernelManager(kernel_name=KERNEL)
    km.start_kernel()
    client = km.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=120)
        with LocalIndex(tmp_path / "wheels") as index:
            code = f'import cudamatrix\nr = cudamatrix.fix({TARGET}, mirror="{index.url}/whl")\nprint(r.status)'
            msg_id = client.execute(code, allow_stdin=True)
            prompt = client.get_stdin_msg(timeout=180)
            assert prompt["content"]["prompt"] == "Apply this plan? [y/N]: "
            client.input("n")
            texts = []
            while True:
                msg = client.get_iopub_msg(timeout=120)
                if msg["parent_header"].get("msg_id") != msg_id:
                    continue
                if msg["msg_type"] == "stream":
                    texts.append(msg["content"]["text"])
                if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                    break
    finally:
        client.stop_channels()
        km.shutdown_kernel(now=True)
    out = "".join(texts)
    assert "[install]" in out and "cancelled: nothing was changed" in out, out  # the plan, then the answer's effect
    assert out.rstrip().endswith("cancelled")
    assert pip_list(py, env) == before
