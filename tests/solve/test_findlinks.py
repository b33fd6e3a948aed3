"""PyG's compiled extensions solved with torch from their find-links pages (cudamatrix/solve/findlinks.py, issue #39):
the newest torch that runs on the target with a page carrying the package, the page's wheel pinned with its local
tag, the page as ``--find-links``; a torch pin without a page is exit 3 with the nearest pages as ways out.

Every expectation is worked out here from data/extensions.json ``find_links`` (the packages' own build workflows at
a commit: torch_scatter's building.yml at efbe465 builds 2.1.2 for torch 2.8.0 cpu/cu126/cu128/cu129), never typed.
"""
from __future__ import annotations

import json

import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from support import tomlread
from support.fakes import run_cli

from cudamatrix.errors import NoSolution
from cudamatrix.lock.lockfile import passed_through
from cudamatrix.matrix.data import FindLinks, FindLinksBuild, default_data_dir, load_matrix_from
from cudamatrix.solve import findlinks
from cudamatrix.solve.solver import parse_request, solve
from cudamatrix.solve.target import from_flags

M = load_matrix_from(default_data_dir(), trusted=True)
PAGES = M.extensions.find_links[0]
R580 = "580.65.06"


def target(python: str = "3.11", platform: str = "linux_x86_64", driver: str | None = R580,
           gpus: tuple[str, ...] = ("H100",)):
    return from_flags(M, driver=driver, gpus=list(gpus), python=python, platform=platform, cuda_toolkit=None)


def builds(name: str) -> list[FindLinksBuild]:
    return sorted((b for b in PAGES.builds if b.name == name), key=lambda b: b.torch, reverse=True)


def chosen(sol, family: str = "torch"):
    return next(fw for fw in sol.frameworks if fw.name == family)


def wheel(name: str, sol) -> str:
    return next(a for a in sol.pip_args if a.startswith(f"{name}=="))


def test_torch_scatter_is_the_wheel_of_the_newest_torch_with_a_page():
    sol = solve([target()], parse_request(["torch", "torch-scatter"]), M)
    newest = builds("torch-scatter")[0]
    torch = chosen(sol)
    assert Version(torch.version).release[:2] == newest.torch.release[:2] and torch.variant in newest.variants
    local = PAGES.local.format(torch=f"{newest.torch.major}{newest.torch.minor}", variant=torch.variant)
    assert wheel("torch-scatter", sol) == f"torch-scatter=={newest.version}{local}"
    page = PAGES.url.format(torch=newest.torch, variant=torch.variant)
    assert sol.pip_args[sol.pip_args.index("--find-links") + 1] == page
    note = next(n for n in sol.notes if n.startswith("torch-scatter "))
    assert page in note and "the newest release that runs on the target with a page carrying torch-scatter" in note
    assert "pytorch_scatter/blob/" in note and "not read here" in note
    # torch releases newer than the page's run on the target: the sentence names them as having no page
    assert f"torch {newest.torch.major}.{newest.torch.minor + 1} to " in note


def test_before_this_change_the_package_was_passed_through_unpinned():
    sol = solve([target()], parse_request(["torch", "torch-scatter"]), M)
    assert "torch-scatter" not in sol.pip_args and "--find-links" in sol.pip_args


def test_the_package_alone_brings_torch_with_it():
    sol = solve([target()], parse_request(["pyg-lib"]), M)
    newest = builds("pyg-lib")[0]
    assert Version(chosen(sol).version).release[:2] == newest.torch.release[:2]
    assert wheel("pyg-lib", sol).startswith(f"pyg-lib=={newest.version}+pt{newest.torch.major}{newest.torch.minor}")


def test_two_packages_meet_on_the_newest_torch_both_pages_carry():
    sol = solve([target()], parse_request(["torch-scatter", "torch-sparse"]), M)
    both = max(set(b.torch for b in builds("torch-scatter")) & set(b.torch for b in builds("torch-sparse")))
    assert Version(chosen(sol).version).release[:2] == both.release[:2]
    assert sol.pip_args.count("--find-links") == 1  # one page carries both


def test_a_local_pin_names_its_page():
    row = next(b for b in builds("torch-scatter") if b.torch.release[:2] == (2, 7))
    variant = row.variants[-1]
    sol = solve([target()], parse_request([f"torch-scatter=={row.version}+pt27{variant}"]), M)
    assert Version(chosen(sol).version).release[:2] == (2, 7) and chosen(sol).variant == variant


def test_a_torch_pin_without_a_page_is_exit_3_with_the_nearest_pages():
    newest = builds("torch-scatter")[0]
    with pytest.raises(NoSolution) as info:
        solve([target()], parse_request(["torch==2.15.0", "torch-scatter"]), M)
    exc = info.value
    assert exc.exit_code == 3 and [c.rule for c in exc.causes] == ["find_links"]
    assert "torch 2.15" in exc.causes[0].message
    nearest = f"torch=={newest.torch.major}.{newest.torch.minor}.*"
    assert exc.ways_out[0].change == {"family": "torch", "requirement": nearest}
    assert f"ask for {nearest} instead" in exc.ways_out[0].message


def test_a_python_no_page_builds_for_is_named():
    newest = builds("torch-scatter")[0]
    beyond = f"3.{max(int(p.split('.')[1]) for b in builds('torch-scatter') for p in b.python) + 1}"
    assert beyond not in newest.python
    with pytest.raises(NoSolution) as info:
        solve([target(python=beyond)], parse_request(["torch", "torch-scatter"]), M)
    assert f"no page carries a wheel for Python {beyond} on linux_x86_64" in info.value.causes[0].message
    assert info.value.ways_out == []


def test_a_version_no_build_has_is_named():
    with pytest.raises(NoSolution) as info:
        solve([target()], parse_request(["torch", "torch-scatter>=99"]), M)
    assert "no build of torch-scatter on the pyg pages meets torch-scatter>=99" in info.value.causes[0].message


def test_the_pin_keeps_the_requirements_extras_and_marker():
    sol = solve([target()], parse_request(["torch", 'torch-scatter[x]>=2; python_version >= "3.10"']), M)
    (arg,) = [a for a in sol.pip_args if a.startswith("torch-scatter")]
    req = Requirement(arg)
    assert req.extras == {"x"} and str(req.marker) == 'python_version >= "3.10"' and "+pt28" in str(req.specifier)


def test_a_url_requirement_is_passed_as_given():
    sol = solve([target()], parse_request(["torch", "torch-scatter @ https://example.org/t.whl"]), M)
    assert "--find-links" not in sol.pip_args
    assert [a for a in sol.pip_args if a.startswith("torch-scatter")] == [str(Requirement("torch-scatter @ "
                                                                                          "https://example.org/t.whl"))]


# --- the rules, on pages made here ---------------------------------------------------------------------------------

SOURCE = "https://example.org/building.yml (a workflow)"
SMALL = FindLinks(name="p", url="https://example.org/torch-{torch}+{variant}.html", local="+pt{torch}{variant}",
                  source=SOURCE, builds=[
                      FindLinksBuild(name="ext", version=Version("1.0"), torch=Version("2.7.0"), variants=["cu126"],
                                     source=SOURCE, python=["3.11"], platforms=["linux_x86_64"]),
                      FindLinksBuild(name="ext", version=Version("1.1"), torch=Version("2.7.0"), variants=["cpu"],
                                     source=SOURCE)])


class _Cand:
    def __init__(self, version: str, variant: str):
        self.release = type("R", (), {"version": Version(version)})()
        self.variant = type("V", (), {"name": variant})()


@pytest.mark.parametrize("req, torch, variant, python, platform, expected", [
    ("ext", "2.7.1", "cu126", "3.11", "linux_x86_64", "1.0"),  # a page serves every 2.7.x
    ("ext", "2.8.0", "cu126", "3.11", "linux_x86_64", None),  # another torch minor: no page
    ("ext", "2.7.1", "cu128", "3.11", "linux_x86_64", None),  # a variant the row does not build
    ("ext", "2.7.1", "cu126", "3.12", "linux_x86_64", None),  # a Python the row does not name
    ("ext", "2.7.1", "cu126", "3.11", "win_amd64", None),  # a platform the row does not name
    ("ext", "2.7.1", "cpu", "3.14", "win_amd64", "1.1"),  # a row naming neither: any
    ("ext==1.0+pt27cu126", "2.7.1", "cu126", "3.11", "linux_x86_64", "1.0"),  # the whole local version matched
    ("ext==1.0+pt27cu118", "2.7.1", "cu126", "3.11", "linux_x86_64", None),
])
def test_which_page_carries_the_package(req, torch, variant, python, platform, expected):
    wanted = findlinks.Wanted(Requirement(req), SMALL)
    t = target(python=python, platform=platform)
    found = findlinks.carrying(wanted, _Cand(torch, variant), [t])
    assert (str(found.version) if found else None) == expected


# --- lock and check -r ---------------------------------------------------------------------------------------------

H100 = ["--gpu", "H100", "--driver", R580, "--python", "3.11", "--platform", "linux_x86_64"]


def expected_pin() -> tuple[str, str]:
    """The wheel and page solve answers for torch + torch-scatter on H100/R580 (read from its own answer)."""
    sol = solve([target()], parse_request(["torch", "torch-scatter"]), M)
    return wheel("torch-scatter", sol), sol.pip_args[sol.pip_args.index("--find-links") + 1]


def test_lock_pins_only_writes_the_page_and_the_wheel(tmp_path):
    pin, page = expected_pin()
    lock = tmp_path / "requirements.txt"
    out = run_cli(["lock", "torch", "torch-scatter", *H100, "--pins-only", "-o", str(lock)], text=True)
    assert out.returncode == 0, out.stderr
    lines = [line for line in lock.read_text().splitlines() if line and not line.startswith("#")]
    assert lines[0] == f"--find-links {page}" and lines[-1] == pin and "torch-scatter" not in lines[1:-1]
    # the file it wrote fits the target, its PyG page known (it carries no torch)
    check = run_cli(["check", "-r", str(lock), *H100], text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert pin in check.stdout


def test_lock_uv_names_the_page_as_find_links():
    pin, page = expected_pin()
    out = run_cli(["lock", "torch", "torch-scatter", *H100, "--format", "uv"], text=True)
    assert out.returncode == 0, out.stderr
    doc = tomlread.loads(out.stdout)
    assert doc["tool"]["uv"]["find-links"] == [page] and pin in doc["project"]["dependencies"]


def test_check_a_wheel_of_another_torch_does_not_fit(tmp_path):
    pin, page = expected_pin()
    old = next(b for b in builds("torch-scatter") if b.torch.release[:2] == (2, 4))
    other = f"torch-scatter=={old.version}+pt24{old.variants[-1]}"
    req = tmp_path / "r.txt"
    req.write_text(f"--find-links {page}\ntorch==2.8.0\n{other}\n")
    out = run_cli(["check", "-r", str(req), *H100, "--json"], text=True)
    assert out.returncode == 1, out.stdout + out.stderr
    data = json.loads(out.stdout)["data"]
    assert any("its pages are for torch 2.4" in p for p in data["problems"])


@pytest.mark.parametrize("url, known", [
    (PAGES.url.format(torch="2.8.0", variant="cu128"), True),
    (PAGES.url.format(torch="2.12.0", variant="cpu"), True),
    (PAGES.url.format(torch="2.8.0", variant="rocm6.2"), False),
    ("https://example.org/whl/torch-2.8.0+cu128.html", False),
])
def test_which_pages_the_data_knows(url, known):
    assert findlinks.is_page(url, M) is known


def test_locked_reads_the_solved_pins_and_pages():
    args = ["--find-links", "https://example.org/p.html", "torch==2.8.0", "torch-scatter==2.1.2+pt28cu128", "other"]
    passthrough = [Requirement("torch-scatter"), Requirement("other>=1")]
    assert passed_through(passthrough, args, M) == (["torch-scatter==2.1.2+pt28cu128", "other>=1"],
                                                      ["https://example.org/p.html"])
    assert passed_through([Requirement("other")], args, M) == (["other"], [])
