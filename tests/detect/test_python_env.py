

def test_a_forked_probes_clock_becomes_its_times_and_leaves_the_answer():
    """The forked probe's ``clock`` ([its start, the end of its reading], time.monotonic() instants) against the
    fork's instant: its start-up and reading milliseconds; the key is taken out of the answer either way, and a
    clock that is not two numbers in order after the fork gives no times."""
    from cudamatrix.detect.python_env import _child_times

    raw = {"clock": [10.002, 10.0205], "dists": []}
    assert _child_times(raw, 10.0) == {"start": 2.0, "collect": 18.5} and raw == {"dists": []}
    for bad in ([9.0, 10.0], [10.3, 10.1], "x", [10.1], None):
        raw = {"clock": bad, "dists": []}
        assert _child_times(raw, 10.0) == {} and raw == {"dists": []}
    assert _child_times({"dists": []}, 10.0) == {}


def _dist(name: str, version: str, files: list[str], location: str = "/sp") -> dict:
    return {"name": name, "version": version, "location": location, "requires": [], "files": files}


def test_the_shared_libraries_a_wheel_installed_are_owned_by_it_and_the_first_owner_is_named():
    """wheel_owner: each installed file the loader can map (``.so``, ``.so.N...``), under the distribution's
    canonical name, at its absolute path; other files, ``..`` paths and metadata are no shared libraries; where two
    distributions install one library, the first found is named."""
    from cudamatrix.detect.python_env import build

    a = _dist("NVIDIA_cudnn.cu12", "9.1.0.70", ["nvidia/cudnn/lib/libcudnn.so.9", "nvidia/cudnn/lib/libcudnn_graph.so",
                                               "nvidia/cudnn/lib/libcudnn.so.9.1.0", "nvidia/cudnn/include/cudnn.h",
                                               "nvidia/cudnn/lib/libcudnn.so.9.txt", "nvidia/cudnn/lib/x.sources",
                                               "../bin/libtool.so", "nvidia/__init__.py"])
    b = _dist("nvidia-cudnn-cu13", "9.19.0.56", ["nvidia/cudnn/lib/libcudnn.so.9"], location="/sp/./")
    side = build({"dists": [a, b]})
    assert side.wheel_owner == {"/sp/nvidia/cudnn/lib/libcudnn.so.9": "nvidia-cudnn-cu12",
                                "/sp/nvidia/cudnn/lib/libcudnn_graph.so": "nvidia-cudnn-cu12",
                                "/sp/nvidia/cudnn/lib/libcudnn.so.9.1.0": "nvidia-cudnn-cu12"}


def test_files_two_distributions_install_are_conflicts_in_path_order_cut_at_200():
    """Every file two distributions both installed is a FileConflict naming both (canonical name==version), in path
    order; ``__init__.py``, ``.pyc`` and metadata files are never one; past 200 the list is cut with a warning."""
    from cudamatrix.detect.python_env import build

    both = ["nvidia/cu13/lib/libcublas.so.13", "nvidia/cu13/include/cublas.h", "nvidia/__init__.py",
            "nvidia/__pycache__/x.cpython-312.pyc", "nvidia_x-1.dist-info/RECORD"]
    side = build({"dists": [_dist("nvidia-cublas", "13.1", both + ["only/a.so"]), _dist("Nvidia_Cu13", "0.0.1", both)]})
    assert [(c.path, c.distributions) for c in side.file_conflicts] == [
        ("nvidia/cu13/include/cublas.h", ["nvidia-cublas==13.1", "nvidia-cu13==0.0.1"]),
        ("nvidia/cu13/lib/libcublas.so.13", ["nvidia-cublas==13.1", "nvidia-cu13==0.0.1"])]
    assert [n.message for n in side.notes] == [
        "distributions overwrite each other's files: nvidia-cublas==13.1 and nvidia-cu13==0.0.1"]
    many = [f"nvidia/lib/f{i:03d}.h" for i in range(250)]
    side = build({"dists": [_dist("a", "1", many), _dist("b", "2", many[::-1])]})
    assert [c.path for c in side.file_conflicts] == many[:200]
    assert any(n.message == "more than 200 files installed twice; list cut" and n.level == "warning"
               for n in side.notes)


def test_a_distribution_without_files_needs_no_location():
    """An answer listing distributions without their files or location (another interpreter's probe may give no
    more): they are packages and frameworks, and no file of theirs is owned."""
    from cudamatrix.detect.python_env import build

    side = build({"dists": [{"name": "tensorflow", "version": "2.18.0", "requires": []},
                            {"name": "nvidia-cudnn-cu12", "version": "9.3.0.75", "requires": [], "files": []}]})
    assert side.packages == {"nvidia-cudnn-cu12": "9.3.0.75", "tensorflow": "2.18.0"}
    assert [f.name for f in side.frameworks] == ["tensorflow"] and side.wheel_owner == {} and not side.file_conflicts


def _metadata_folder(site, name: str, version: str, requires: list[str], purelib: bool, record: list[str]) -> None:
    meta = site / f"{name}-{version}.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                   + "".join(f"Requires-Dist: {r}\n" for r in requires) + "\nA README body.\n")
    (meta / "WHEEL").write_text(f"Wheel-Version: 1.0\nRoot-Is-Purelib: {'true' if purelib else 'false'}\n")
    (meta / "RECORD").write_text("".join(f"{r}\n" for r in record))


def test_every_distribution_is_read_for_what_it_declares_of_a_framework_and_the_objects_it_installed(tmp_path):
    """The probe lists every wheel-installed distribution but the frameworks and CUDA's own wheels, reading nothing
    of them; the parent reads each one's Requires-Dist for torch, jax, jaxlib and tensorflow and a platform wheel's
    RECORD for its shared objects (a pure wheel's RECORD is not read for them), and keeps the answer in the user
    cache while RECORD and METADATA stay as they were."""
    from cudamatrix.detect import _pyprobe, extensions
    from cudamatrix.detect.python_env import Candidate, build
    from cudamatrix.ldso import elfcache

    site = tmp_path / "site-packages"
    _metadata_folder(site, "ext_a", "1.0", ["numpy", "torch==2.6.0", "Jax (>=0.4); extra == 'jax'"], False, [
        "ext_a/_C.cpython-311-x86_64-linux-gnu.so,sha256=x,10", '"ext_a/odd, name.so",sha256=x,1',
        "ext_a/libbundled.so.12.4,,", "ext_a/notes.so.txt,sha256=x,1", "../../bin/tool.so,sha256=x,1",
        "ext_a-1.0.dist-info/RECORD,,"])
    _metadata_folder(site, "pure_b", "2.0", ["tensorflow>=2.15"], True, ["pure_b/fake.so,sha256=x,1"])
    _metadata_folder(site, "plain_c", "3.0", ["requests"], False, ["plain_c/speedups.so,sha256=x,1"])
    _metadata_folder(site, "torch", "2.5.1", ["filelock"], False, ["torch/lib/libc10.so,sha256=x,1"])
    _metadata_folder(site, "nvidia_cudnn_cu12", "9.1.0.70", [], False, ["nvidia/cudnn/lib/libcudnn.so.9,,"])
    raw = _pyprobe.collect([str(site)])
    assert [(d["name"], d["version"], d["meta"]) for d in raw["stack"]] == [
        ("ext-a", "1.0", "ext_a-1.0.dist-info"), ("plain-c", "3.0", "plain_c-3.0.dist-info"),
        ("pure-b", "2.0", "pure_b-2.0.dist-info")]
    side = build(raw)
    assert side.candidates == [Candidate("ext-a", "1.0", str(site / "ext_a-1.0.dist-info")),
                               Candidate("plain-c", "3.0", str(site / "plain_c-3.0.dist-info")),
                               Candidate("pure-b", "2.0", str(site / "pure_b-2.0.dist-info"))]
    assert "ext-a" not in side.packages  # packages stay the distributions detect always read
    read = {c.name: extensions.read_distribution(c.meta) for c in side.candidates}
    assert read == {"ext-a": (["torch==2.6.0", "Jax (>=0.4); extra == 'jax'"],
                              [str(site / "ext_a/_C.cpython-311-x86_64-linux-gnu.so"),
                               str(site / "ext_a/libbundled.so.12.4")], False),
                    "plain-c": ([], [str(site / "plain_c/speedups.so")], False),
                    "pure-b": (["tensorflow>=2.15"], [], False)}
    meta = str(site / "ext_a-1.0.dist-info")
    extensions.keep_distribution(meta, read["ext-a"][0], read["ext-a"][1][1:])  # one object links torch or CUDA
    assert elfcache.save() is None
    elfcache.forget()
    (site / "ext_a-1.0.dist-info" / "WHEEL").write_text("Root-Is-Purelib: true\n")  # not read again: RECORD kept
    assert extensions.read_distribution(meta) == (read["ext-a"][0], read["ext-a"][1][1:], True)
    with open(site / "ext_a-1.0.dist-info" / "METADATA", "a") as fh:
        fh.write("more\n")  # METADATA changed: read again
    assert extensions.read_distribution(meta) == (read["ext-a"][0], [], False)
    elfcache.forget()


def test_shared_objects_of_a_record():
    from cudamatrix.detect.extensions import shared_objects

    record = (b'a/x.so,sha256=1,2\r\n"a/y z.so.1",,\nb/README.so.md,,\nc/libq.so.3.1,,\n../lib.so,,\n/abs/l.so,,\n'
              b'a/../../b.so,,\nd/tail.so')
    assert shared_objects(record) == ["a/x.so", "a/y z.so.1", "c/libq.so.3.1"]
