"""flash-attn's release files through lock and check -r (issue #39: "Locks carry the extension's file"; "check -r
gates a file that pairs an extension with the wrong torch"). The file sets are data/extensions.json's
release_file_sets (flash-attn's release workflow at each tag); the expectations are read from solve's own answer
and from those rows, never typed here."""
from __future__ import annotations

import json

from packaging.requirements import Requirement
from support.fakes import run_cli

from cudamatrix.lock.lockfile import passed_through
from cudamatrix.matrix.data import default_data_dir, load_matrix_from
from cudamatrix.solve.solver import parse_request, solve
from cudamatrix.solve.target import from_flags

M = load_matrix_from(default_data_dir(), trusted=True)
H100 = ["--gpu", "H100", "--driver", "580.65.06", "--python", "3.11", "--platform", "linux_x86_64"]


def _solved_file(request: list[str]) -> str:
    target = from_flags(M, driver="580.65.06", gpus=["H100"], python="3.11", platform="linux_x86_64",
                        cuda_toolkit=None)
    sol = solve([target], parse_request(request), M)
    return next(a for a in sol.pip_args if a.startswith("flash-attn @ "))


def test_lock_pins_only_writes_the_release_file_solve_chose_and_check_passes_it(tmp_path):
    line = _solved_file(["torch==2.4.0", "flash-attn"])
    lock = tmp_path / "requirements.txt"
    out = run_cli(["lock", "torch==2.4.0", "flash-attn", *H100, "--pins-only", "-o", str(lock)], text=True)
    assert out.returncode == 0, out.stderr
    lines = [x for x in lock.read_text().splitlines() if x and not x.startswith("#")]
    assert line in lines and "flash-attn" not in lines  # the file, never the bare name pip would build from source
    req = Requirement(line)  # the line as pip's requirement parser reads it: a direct reference to one wheel
    assert req.name == "flash-attn" and req.url and req.url.endswith("cxx11abiFALSE-cp311-cp311-linux_x86_64.whl")
    check = run_cli(["check", "-r", str(lock), *H100], text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_check_refuses_a_flash_attn_range_with_no_file_for_the_files_torch(tmp_path):
    # the rows: flash-attn releases below 2.7.4 build torch 2.6 only against a nightly (2.6.0.dev...), which is
    # not vouched for torch 2.6.0's release; 2.7.4 and later build a torch 2.6 file
    sets = {r.version: r for r in M.extensions.release_file_sets}
    older = [v for v in sets if str(v) < "2.7.4" and str(v).startswith("2.7.")]
    assert older and all("2.6.0" not in [str(t) for t in sets[v].torch] for v in older)
    req = tmp_path / "r.txt"
    req.write_text("torch==2.6.0\nflash-attn<2.7.4\n")
    out = run_cli(["check", "-r", str(req), *H100, "--json"], text=True)
    assert out.returncode == 1, out.stdout + out.stderr
    data = json.loads(out.stdout)["data"]
    assert any("no release of flash-attn" in p for p in data["problems"]), data["problems"]


def test_locked_takes_each_requirement_as_the_solution_resolved_it():
    url = "https://example.org/flash_attn-2.8.3.post1+cu12torch2.4cxx11abiFALSE-cp311-cp311-linux_x86_64.whl"
    args = ["torch==2.4.0", f"flash-attn @ {url}", "other"]
    assert passed_through([Requirement("flash-attn"), Requirement("other>=1")], args, M) == \
        ([f"flash-attn @ {url}", "other>=1"], [])
