"""A fleet's node files in this process (cudamatrix.fleet.nodes): the folders ``--env`` names, with or without the
``fleet.json`` index ``fleet gather`` writes; the node files read once per kind (load_nodes) and their Targets
made once per kind (node_targets), each equal to what the file alone gives.

The node files are real ``detect --json`` outputs of GPU machines lent to the project (tests/data/gpu_speed,
tests/data/gpu_h200) and a saved Environment (tests/data/environments), written into folders by the library's own
writer, :func:`cudamatrix.fleet.gather.write_fleet`, as ``cudamatrix fleet gather -o DIR`` writes them.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cudamatrix.errors import UsageError

DATA = Path(__file__).parent.parent / "data"
H100 = DATA / "gpu_speed" / "h100-2026-11-27e" / "detect.json"  # a real H100's detect --json (an envelope)
H200 = DATA / "gpu_h200" / "detect.json"  # a real H200's detect --json
SAVED = DATA / "environments" / "h100_driver580.json"  # a saved Environment without timings_ms


def node(path: Path, **changes) -> dict:
    """The environment object of a saved ``detect --json`` file, with ``changes`` over it."""
    from cudamatrix.detect import read_environment

    return {**read_environment(str(path)), **changes}


def gathered(folder: Path, nodes: dict[str, dict], failed: tuple[str, ...] = ()) -> dict:
    """``folder`` as ``fleet gather -o folder`` writes it, the nodes in this order: their files and fleet.json."""
    from cudamatrix.fleet.gather import Gathered, Node, write_fleet
    from cudamatrix.models import Environment
    from cudamatrix.schema import validate

    answers = [Node(name, env.get("hostname"), f"task{i}", validate(Environment, env, name, UsageError))
               for i, (name, env) in enumerate(nodes.items())]
    answers += [Node(name, name, "task9", None, "detect failed there: no answer") for name in failed]
    return write_fleet(Gathered("slurm", answers), folder)


def per_node(env: dict, number: int) -> dict:
    """``env`` as another node of its kind saves it: its own hostname, time and timings."""
    timings = {k: v + number for k, v in env.get("timings_ms", {}).items()}
    return {**env, "hostname": f"node-{number}", "captured_at": f"2026-11-27T10:00:{number:02d}+00:00",
            **({"timings_ms": timings} if "timings_ms" in env else {})}


def patch(env: dict, version: str, **driver) -> dict:
    """``env`` under another driver version (and other driver values)."""
    return {**env, "driver": {**env["driver"], "version": version, **driver}}


def raises(call, *args) -> UsageError:
    with pytest.raises(UsageError) as caught:
        call(*args)
    return caught.value


# --- env_paths and the fleet index ---------------------------------------------------------------------------

def test_env_paths_reads_a_gathered_folder_in_its_index_order_among_files_and_plain_folders(tmp_path: Path):
    """A folder with fleet.json: the files it lists, in its order (a stray *.json beside them is not a node); a
    folder without: its *.json sorted by name (other files are not nodes); a file: itself, where it stands."""
    from cudamatrix.fleet.nodes import env_paths

    h100, h200 = node(H100), node(H200)
    fleet = tmp_path / "fleet"
    index = gathered(fleet, {"h200": h200, "b-h100": h100, "a-h100": per_node(h100, 1)})
    assert [n["file"] for n in index["nodes"]] == ["h200.json", "b-h100.json", "a-h100.json"]
    (fleet / "stray.json").write_text(json.dumps(h100))
    plain = tmp_path / "plain"
    plain.mkdir()
    for name in ("n2.json", "n1.json"):
        (plain / name).write_text(json.dumps(h100))
    (plain / "notes.txt").write_text("not a node\n")
    alone, last = tmp_path / "alone.json", tmp_path / "last.json"
    alone.write_text(json.dumps(h200))
    last.write_text(json.dumps(h200))
    assert env_paths([alone, fleet, plain, last]) == [
        alone, fleet / "h200.json", fleet / "b-h100.json", fleet / "a-h100.json", plain / "n1.json",
        plain / "n2.json", last]
    assert env_paths([str(fleet)]) == [fleet / "h200.json", fleet / "b-h100.json", fleet / "a-h100.json"]


def test_a_folder_without_node_files_says_how_to_gather_them(tmp_path: Path):
    """No *.json in a folder, or a fleet.json whose every node failed: a UsageError naming the folder."""
    from cudamatrix.fleet.nodes import env_paths

    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("not a node\n")
    failed = tmp_path / "failed"
    index = gathered(failed, {}, failed=("gpu-1",))
    assert index["nodes"] == [] and index["failed"][0]["node"] == "gpu-1"
    for folder in (plain, failed):
        error = raises(env_paths, [folder])
        assert error.message == f"--env {folder}: no node files (*.json) in this folder"
        assert error.hint == "gather them with: cudamatrix fleet gather -o DIR"


INDEX_HINT = "regenerate it with `cudamatrix fleet gather`, or remove it to read every *.json"


@pytest.mark.parametrize(("text", "cause"), [
    ("{not json", "JSONDecodeError: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
    ('{"nodes": [{"node": "a"}]}', "KeyError: 'file'"),
    ('{"engine": "slurm"}', "KeyError: 'nodes'"),
    ('[{"file": "a.json"}]', "TypeError: list indices must be integers or slices, not str"),
    ('{"nodes": 5}', "TypeError: 'int' object is not iterable"),
    ('{"nodes": [{"file": "a.json", "x": ' + "[" * 15 + "]" * 15 + "}]}",
     "ValueError: nested more than 16 levels deep"),
])
def test_a_fleet_index_that_is_not_one_is_refused_with_its_cause(tmp_path: Path, text: str, cause: str):
    from cudamatrix.fleet.nodes import env_paths

    fleet = tmp_path / "fleet"
    gathered(fleet, {"a": node(H100)})
    (fleet / "fleet.json").write_text(text)
    error = raises(env_paths, [fleet])
    assert error.message == f"{fleet / 'fleet.json'}: not a fleet index ({cause})"
    assert error.hint == INDEX_HINT


@pytest.mark.slow  # about 0.5 s: 32,000 paths
def test_an_index_of_32000_nodes_is_read_past_the_4_mib_other_inputs_may_have(tmp_path: Path):
    """fleet.json is bounded at 64 MiB, not at the 4 MiB of the tool's other input files: a fleet of 32,000 nodes
    (fleet gather's entries, about 140 bytes each) is listed whole."""
    from cudamatrix.fleet.nodes import env_paths

    fleet = tmp_path / "fleet"
    index = gathered(fleet, {"a": node(H100)})
    entry = index["nodes"][0]
    index["nodes"] = [{**entry, "node": f"gpu-{i:05d}", "file": f"gpu-{i:05d}.json", "hostname": f"gpu-{i:05d}"}
                      for i in range(32_000)]
    text = json.dumps(index)
    assert 4 << 20 < len(text) < 64 << 20
    (fleet / "fleet.json").write_text(text)
    paths = env_paths([fleet])
    assert len(paths) == 32_000 and paths[-1] == fleet / "gpu-31999.json"


def test_a_fleet_index_over_64_mib_or_a_fifo_is_refused_before_any_read(tmp_path: Path):
    """A FIFO planted at the index's name would make a read wait for a writer."""
    from cudamatrix.fleet.nodes import env_paths

    fleet = tmp_path / "fleet"
    gathered(fleet, {"a": node(H100)})
    with open(fleet / "fleet.json", "wb") as fh:
        fh.truncate((64 << 20) + 1)
    error = raises(env_paths, [fleet])
    assert error.message == f"fleet index {fleet / 'fleet.json'} is larger than 64 MB"
    os.unlink(fleet / "fleet.json")
    os.mkfifo(fleet / "fleet.json")
    error = raises(env_paths, [fleet])
    assert error.message.startswith(f"fleet index {fleet / 'fleet.json'} is a FIFO"), error.message


@pytest.mark.parametrize("name", ["../elsewhere.json", "sub/a.json", "/etc/hostname", "", ".", "..", "a/..", 5,
                                  None, ["a.json"]])
def test_a_fleet_index_naming_anything_but_a_file_in_its_folder_is_refused(tmp_path: Path, name):
    """An index must not point outside its folder, nor at the folder itself."""
    from cudamatrix.fleet.nodes import env_paths

    fleet = tmp_path / "fleet"
    index = gathered(fleet, {"a": node(H100)})
    index["nodes"].append({**index["nodes"][0], "file": name})
    (fleet / "fleet.json").write_text(json.dumps(index))
    error = raises(env_paths, [fleet])
    assert error.message == f"{fleet / 'fleet.json'}: nodes[].file {name!r} is not a file name in {fleet}"


# --- load_nodes: each kind of node file validated once -------------------------------------------------------

@pytest.fixture
def validations(monkeypatch) -> list[str]:
    """The files load_nodes validates whole (cudamatrix.detect.environment_of, the real one, counted)."""
    import cudamatrix.detect

    seen: list[str] = []
    real = cudamatrix.detect.environment_of

    def counted(path, obj):
        seen.append(Path(path).stem)
        return real(path, obj)

    monkeypatch.setattr(cudamatrix.detect, "environment_of", counted)
    return seen


def as_json(env) -> str:
    from cudamatrix.schema import to_dict

    return json.dumps(to_dict(env), sort_keys=True)


def test_load_nodes_validates_each_kind_once_and_gives_every_node_its_own_values(tmp_path: Path, validations):
    """Nodes alike but for hostname, time, timings and a dotted driver version share the first one's
    validation; every Environment is the file's own (its JSON too: 1.0, not 1), the fields validated once shared."""
    from cudamatrix.detect import load_environment
    from cudamatrix.fleet.nodes import env_paths, load_nodes

    h100, h200, saved = node(H100), node(H200), node(SAVED)
    kinds = {"h100-0": h100, "h200-0": h200, "saved-0": saved, "h100-1": per_node(h100, 1),
             "h100-2": patch(per_node(h100, 2), "580.159.05"), "h200-1": per_node(h200, 1),
             "saved-1": {**saved, "hostname": "saved-1", "captured_at": None}, "h100-3": per_node(h100, 3)}
    fleet = tmp_path / "fleet"
    gathered(fleet, kinds)
    paths = env_paths([fleet])
    envs, same = load_nodes(paths)
    assert same == [0, 1, 2, 0, 0, 1, 2, 0]
    assert validations == ["h100-0", "h200-0", "saved-0"]
    for env, path in zip(envs, paths, strict=True):
        assert env == load_environment(str(path)) and as_json(env) == as_json(load_environment(str(path)))
    assert envs[4].driver.version == "580.159.05" and envs[0].driver.version == "580.159.04"
    assert envs[4].hostname == "node-2" and envs[4].timings_ms["total"] == h100["timings_ms"]["total"] + 2
    assert envs[6].captured_at is None and envs[6].timings_ms == {} and envs[2].hostname is None
    assert envs[3].gpus is envs[0].gpus and envs[5].python is envs[1].python  # validated once, shared


def test_saved_nodes_without_timings_are_alike_too(tmp_path: Path, validations):
    """Saved Environments written without timings_ms (by hand, or by a tool older than timings) are nodes alike."""
    from cudamatrix.detect import load_environment
    from cudamatrix.fleet.nodes import load_nodes

    saved = node(SAVED)
    assert "timings_ms" not in saved
    paths = []
    for i in range(3):
        paths.append(tmp_path / f"s{i}.json")
        paths[-1].write_text(json.dumps({**saved, "hostname": f"s{i}"}))
    envs, same = load_nodes(paths)
    assert same == [0, 0, 0] and validations == ["s0"]
    assert envs == [load_environment(str(p)) for p in paths] and envs[2].hostname == "s2"


@pytest.mark.parametrize(("values", "refused"), [
    ({"hostname": ["not", "text"]}, "hostname: Input should be a valid string"),
    ({"hostname": 5}, "hostname: Input should be a valid string"),
    ({"captured_at": 20261127}, "captured_at: Input should be a valid string"),
    ({"timings_ms": []}, "timings_ms: Input should be a valid dictionary"),
    ({"timings_ms": None}, "timings_ms: Input should be a valid dictionary"),
    ({"timings_ms": {"total": "fast"}}, "timings_ms.total: Input should be a valid number"),
    ({"timings_ms": {"total": 93}}, None),  # an integer: validation makes it 93.0
    ({"timings_ms": {"total": True, "nvml": 1.5}}, None),
])
def test_a_node_alike_but_for_a_per_node_value_validation_changes_or_refuses_is_validated_whole(
        tmp_path: Path, validations, values: dict, refused: str | None):
    """Only text or null names and times and a map of floats are taken as they are; any other per-node value
    makes the file validated whole: refused with its own message, or converted as the file alone is."""
    from cudamatrix.detect import load_environment
    from cudamatrix.fleet.nodes import env_paths, load_nodes

    h100 = node(H100)
    h100["driver"] = {**h100["driver"], "jetson_linux": None}  # as this version's detect writes it (gathered's files)
    items, at = list(h100.items()), list(h100).index("library_loads") + 1  # extensions: a field later than the
    h100 = dict([*items[:at], ("extensions", []), *items[at:]])  # saved node's file, where gathered writes it
    fleet = tmp_path / "fleet"
    gathered(fleet, {"a": h100, "b": per_node(h100, 1)})
    odd = fleet / "odd.json"
    odd.write_text(json.dumps({**h100, **values}))
    paths = [*env_paths([fleet]), odd]
    if refused:
        alone = raises(load_environment, str(odd))
        assert f"odd.json: {refused}" in alone.message
        assert raises(load_nodes, paths).message == alone.message
        return
    envs, same = load_nodes(paths)
    assert same == [0, 0, 0] and validations == ["a", "odd"]
    assert as_json(envs[2]) == as_json(load_environment(str(odd)))
    assert all(type(v) is float for v in envs[2].timings_ms.values())


def test_nodes_alike_but_for_their_driver_are_alike_only_for_dotted_versions(tmp_path: Path, validations):
    """Dotted driver versions are per node; any other difference of the driver (its CUDA, its status), or a
    version that is not dotted, or none, keeps files apart, and a driver that is not an object is refused."""
    from cudamatrix.detect import load_environment
    from cudamatrix.fleet.nodes import load_nodes

    h100 = node(H100)
    drv = {k: v for k, v in h100["driver"].items() if k != "version"}
    files = {"a": h100, "b": patch(h100, "580.126.09"), "c": patch(h100, "580.159.04", cuda_version="12.9"),
             "d": patch(h100, "580.159.04", status="error"), "e": patch(h100, "580.159.04.post1"),
             "f": patch(h100, "580.159.04.post1"), "g": patch(h100, None), "h": patch(h100, None),
             "i": {**h100, "driver": drv}, "j": {**h100, "driver": drv},
             "k": {k: v for k, v in h100.items() if k != "driver"}, "l": {k: v for k, v in h100.items() if k != "driver"}}
    paths = []
    for name, env in files.items():
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(per_node(env, len(paths))))
    envs, same = load_nodes(paths)
    assert same == [0, 0, 2, 3, 4, 4, 6, 6, 8, 8, 10, 10]
    assert validations == ["a", "c", "d", "e", "g", "i", "k"]
    for env, path in zip(envs, paths, strict=True):
        assert as_json(env) == as_json(load_environment(str(path)))
    assert [e.driver.version for e in envs[:6]] == ["580.159.04", "580.126.09", "580.159.04", "580.159.04",
                                                   "580.159.04.post1", "580.159.04.post1"]
    for driver in (None, [], "580.159.04"):
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps({**h100, "driver": driver}))
        alone = raises(load_environment, str(bad))
        assert "bad.json: driver: Input should be a dictionary" in alone.message
        assert raises(load_nodes, [*paths, bad]).message == alone.message


# --- node_targets: one Target per kind ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def matrix():
    from cudamatrix.matrix.load import load_matrix

    return load_matrix()


def test_node_targets_are_made_once_per_kind_and_equal_each_nodes_own(tmp_path: Path, matrix, monkeypatch):
    """Nodes alike but for a dotted driver version take the first one's Target, renamed, with their own driver."""
    import cudamatrix.solve.target
    from cudamatrix.fleet.nodes import load_nodes
    from cudamatrix.fleet.nodetargets import node_targets
    from cudamatrix.solve.target import from_environment

    h100, h200 = node(H100), node(H200)
    envs = [per_node(h100, 0), per_node(h100, 1), patch(per_node(h100, 2), "575.57.08"), per_node(h200, 3),
            patch(per_node(h200, 4), "580.159.05")]
    paths = []
    for i, env in enumerate(envs):
        paths.append(tmp_path / f"n{i}.json")
        paths[-1].write_text(json.dumps(env))
    loaded, same = load_nodes(paths)
    assert same == [0, 0, 0, 3, 3]
    names = [p.stem for p in paths]
    made: list[str] = []

    def counted(env, matrix, name="this machine"):
        made.append(name)
        return from_environment(env, matrix, name=name)

    monkeypatch.setattr(cudamatrix.solve.target, "from_environment", counted)
    targets = node_targets(matrix, loaded, same, names)
    assert made == ["n0", "n3"]
    assert targets == [from_environment(env, matrix, name=name) for env, name in zip(loaded, names, strict=True)]
    assert [t.driver for t in targets] == ["580.159.04", "580.159.04", "575.57.08", "580.159.04", "580.159.05"]
    with pytest.raises(ValueError):  # a name per node, no fewer
        node_targets(matrix, loaded, same, names[:-1])


@pytest.mark.parametrize("stated", [(None, "580.159.04"), ("580.159.04", None)])
def test_a_node_whose_driver_version_or_its_firsts_is_not_stated_gets_its_own_target(matrix, stated):
    """A Target reads the driver from the CUDA the driver runs where no version is stated: such a node, or one
    whose first node alike states none, is not the first one's Target renamed."""
    from cudamatrix.fleet.nodetargets import node_targets
    from cudamatrix.models import Environment
    from cudamatrix.schema import validate
    from cudamatrix.solve.target import from_environment

    h100 = node(H100)
    envs = [validate(Environment, patch(h100, version, cuda_version="12.4"), "n", UsageError) for version in stated]
    targets = node_targets(matrix, envs, [0, 0], ["first", "second"])
    assert targets == [from_environment(envs[0], matrix, name="first"), from_environment(envs[1], matrix,
                                                                                        name="second")]
    assert targets[0].driver != targets[1].driver
