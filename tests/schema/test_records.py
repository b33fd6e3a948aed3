"""The cheaper stand-ins on the start-up path behave as the standard ones they replace: ``schema.record`` as
``dataclasses.dataclass``, ``Paste.where`` and ``Paste.having`` as a scan line by line, ``proc.which`` as
``shutil.which``, ``names.name_and_specifier`` as ``packaging.requirements.Requirement``."""
from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys
import typing
from dataclasses import field
from pathlib import Path

import pytest
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet

from cudamatrix.names import name_and_specifier
from cudamatrix.schema import field as schema_field
from cudamatrix.schema import field_names, record, records, replace
from cudamatrix.schema.records import maker


def _pair(frozen: bool, eq: bool = True):
    """The same class body under the standard decorator and under record."""
    def body():
        class Row:
            name: str
            version: str = "1.0"
            tags: list[str] = field(default_factory=list, compare=False)
            secret: str = field(default="", repr=False)
            weight: int = field(default=0, hash=False)
        return Row
    return (dataclasses.dataclass(frozen=frozen, eq=eq)(body()), record(frozen=frozen, eq=eq)(body()))


@pytest.mark.parametrize("frozen", [False, True])
def test_record_repr_eq_hash_match_dataclass(frozen):
    std, rec = _pair(frozen)
    a_std, a_rec = std("torch", "2.5", ["x"], "s", 3), rec("torch", "2.5", ["x"], "s", 3)
    assert repr(a_rec) == repr(a_std) == f"{std.__qualname__}(name='torch', version='2.5', tags=['x'], weight=3)"
    # compare=False fields do not count; other fields do; another class never equals
    assert (rec("torch", "2.5", ["y"]) == rec("torch", "2.5", ["z"])) is (std("torch", "2.5", ["y"]) == std("torch", "2.5", ["z"])) is True
    assert (rec("torch", "2.5") == rec("torch", "2.6")) is (std("torch", "2.5") == std("torch", "2.6")) is False
    assert rec("torch").__eq__(std("torch")) is NotImplemented
    if frozen:
        # hash: the compared fields with hash not switched off, as the standard decorator
        assert hash(rec("torch", "2.5", weight=1)) == hash(rec("torch", "2.5", weight=2)) == hash(("torch", "2.5", "", ))
        assert hash(std("torch", "2.5", weight=1)) == hash(("torch", "2.5", ""))
        with pytest.raises(dataclasses.FrozenInstanceError):
            a_rec.name = "jax"  # type: ignore[misc]
    else:
        assert std.__hash__ is None and rec.__hash__ is None  # mutable with __eq__: unhashable


def test_record_without_eq_keeps_identity():
    std, rec = _pair(frozen=True, eq=False)
    a, b = rec("torch"), rec("torch")
    assert a != b and a == a and hash(a) == object.__hash__(a)
    assert (std("torch") == std("torch")) is False


def test_record_keeps_a_method_the_class_defines():
    @record
    class Shown:
        name: str

        def __repr__(self) -> str:
            return f"<{self.name}>"

    assert repr(Shown("x")) == "<x>"
    assert dataclasses.is_dataclass(Shown) and [f.name for f in dataclasses.fields(Shown)] == ["name"]


def _kinds():
    """A class body with what the models use beyond plain fields: a keyword-only field, a field left out of
    ``__init__``, ``__post_init__``, a ClassVar and inheritance."""
    def body(decorate, fld=field, **kw):
        @decorate(**kw)
        class Base:
            name: str
            size: int = 0

        @decorate(**kw)
        class Row(Base):
            limit: typing.ClassVar[int] = 3
            tags: list[str] = fld(default_factory=list)
            seen: int = fld(default=0, init=False)
            note: str = fld(default="", kw_only=True)

            def __post_init__(self) -> None:
                object.__setattr__(self, "seen", len(self.tags))
        return Row
    return body


@pytest.mark.parametrize("frozen", [False, True])
def test_record_init_matches_dataclass(frozen):
    std, rec = _kinds()(dataclasses.dataclass, frozen=frozen), _kinds()(record, schema_field, frozen=frozen)
    for args, kw in [(("a",), {}), (("a", 2, ["x", "y"]), {"note": "n"}), ((), {"name": "b", "tags": ["z"]})]:
        a, b = std(*args, **kw), rec(*args, **kw)
        assert repr(a).split("(", 1)[1] == repr(b).split("(", 1)[1]
        assert [getattr(a, f.name) for f in dataclasses.fields(a)] == [getattr(b, n) for n in field_names(b)]
    assert field_names(rec) == ("name", "size", "tags", "seen", "note") and rec.limit == 3
    fresh = _kinds()(record, schema_field, frozen=frozen)  # no instance yet: its __init__ is not compiled
    dataclasses.fields(fresh)  # turning into a dataclass compiles it: the standard decorator reads its signature

    def params(cls):
        return [(p.name, p.kind) for p in inspect.signature(cls).parameters.values()]
    assert params(fresh) == params(rec) == params(std)
    assert rec("a").tags is not rec("a").tags  # a fresh list each time
    for args, kw in [(("a", 1, [], 5), {}), ((), {"seen": 1, "name": "a"}), ((), {}), (("a",), {"other": 1})]:
        with pytest.raises(TypeError):
            std(*args, **kw)
        with pytest.raises(TypeError):
            rec(*args, **kw)


@pytest.mark.parametrize("frozen", [False, True])
def test_init_bound_in_python_then_compiled_makes_what_dataclass_makes(frozen):
    """The first instances of a class are made by binding the arguments in Python, the later ones by the compiled
    ``__init__`` (from the _COMPILE_AT-th): both as the standard decorator's, and both refuse what it refuses."""
    calls = [(("a",), {}), (("a", 2, ["x", "y"]), {"note": "n"}), ((), {"name": "b", "tags": ["z"]}),
             (("c",), {"size": 4}), ((), {"note": "m", "name": "d"})]
    bad = [(("a", 1, [], 5), {}), (("a",), {"name": "b"}), ((), {"seen": 1, "name": "a"}), ((), {}),
           (("a",), {"other": 1}), ((), {"size": 1})]
    std, rec = _kinds()(dataclasses.dataclass, frozen=frozen), _kinds()(record, schema_field, frozen=frozen)
    for bad_args, bad_kw in bad:  # refused while bound in Python (a refused call makes no instance)
        with pytest.raises(TypeError):
            std(*bad_args, **bad_kw)
        with pytest.raises(TypeError):
            rec(*bad_args, **bad_kw)
    compiled_at = None
    for i in range(2 * records._COMPILE_AT):
        args, kw = calls[i % len(calls)]
        a, b = std(*args, **kw), rec(*args, **kw)
        assert repr(a).split("(", 1)[1] == repr(b).split("(", 1)[1]
        assert [getattr(a, f.name) for f in dataclasses.fields(a)] == [getattr(b, n) for n in field_names(b)]
        if compiled_at is None and not getattr(rec.__dict__["__init__"], "__record_first__", False):
            compiled_at = i + 1
    assert compiled_at == records._COMPILE_AT
    assert rec("a").tags is not rec("a").tags
    for bad_args, bad_kw in bad:  # and refused by the compiled one
        with pytest.raises(TypeError):
            rec(*bad_args, **bad_kw)
    if frozen:
        with pytest.raises(dataclasses.FrozenInstanceError):
            rec("a").name = "b"


def test_signature_of_a_record_is_its_fields_before_any_instance():
    """inspect.signature of a class whose __init__ is still the one that binds in Python compiles it first: the
    parameters are the fields, as the standard decorator's."""
    fresh, std = _kinds()(record, schema_field), _kinds()(dataclasses.dataclass)
    assert getattr(fresh.__dict__["__init__"], "__record_first__", False)

    def params(cls):
        return [(p.name, p.kind, p.default) for p in inspect.signature(cls).parameters.values()
                if p.name != "tags"]  # its default is the factory's stand-in in each
    assert params(fresh) == params(std)
    assert not getattr(fresh.__dict__["__init__"], "__record_first__", False)


@pytest.mark.parametrize("frozen", [False, True])
def test_maker_builds_what_init_builds_without_compiling_it(frozen):
    def body():
        @record(frozen=frozen)
        class Base:
            name: str
            size: int = 0

        @record(frozen=frozen)
        class Row(Base):
            tags: list[str] = schema_field(default_factory=list)
            seen: int = schema_field(default=7, init=False)
            made: list[str] = schema_field(default_factory=lambda: ["x"], init=False)
            note: str = schema_field(default="", kw_only=True)
        return Row
    called, made = body(), body()
    make = maker(made)
    for fields in [{"name": "a"}, {"name": "a", "size": 2, "tags": ["t"], "note": "n"}, {"note": "m", "name": "b"}]:
        a, b = called(**fields), make(dict(fields))
        assert type(b) is made and repr(a).split("(", 1)[1] == repr(b).split("(", 1)[1]
        assert [getattr(a, n) for n in field_names(a)] == [getattr(b, n) for n in field_names(b)]
    assert make({"name": "a"}).tags is not make({"name": "a"}).tags  # a fresh list each time
    assert getattr(made.__dict__["__init__"], "__record_first__", False)  # its __init__ was never compiled
    with pytest.raises(TypeError, match="missing 'name'"):
        make({"size": 1})
    with pytest.raises(TypeError, match="unexpected 'made'"):  # not an init field, as Row(made=...) refuses it
        make({"name": "a", "made": []})
    if frozen:
        with pytest.raises(dataclasses.FrozenInstanceError):
            make({"name": "a"}).name = "b"


def test_maker_calls_a_class_that_writes_its_own_init_or_post_init():
    rows = _kinds()(record, schema_field)  # __post_init__ sets seen from tags
    assert maker(rows)({"name": "a", "tags": ["x", "y"]}).seen == 2

    @record
    class Own:
        name: str

        def __init__(self, name: str) -> None:
            self.name = name.upper()
    assert maker(Own)({"name": "a"}).name == "A"


def test_record_refuses_what_dataclass_refuses():
    def mutable():
        class Row:
            tags: list = []  # noqa: RUF012
        return Row

    def order():
        class Row:
            a: int = 0
            b: int
        return Row

    for body in (mutable, order):
        with pytest.raises((ValueError, TypeError)) as std_error:
            dataclasses.dataclass(body())
        with pytest.raises(std_error.type):
            record(body())


def test_record_becomes_a_dataclass_when_asked():
    Row = _kinds()(record, schema_field, frozen=True)
    row = Row("a", 1, ["x"], note="n")
    assert not isinstance(vars(Row)["__dataclass_fields__"], dict)  # nobody asked yet: no fields made
    assert dataclasses.is_dataclass(row)
    assert [f.name for f in dataclasses.fields(Row)] == list(field_names(Row))
    assert dataclasses.replace(row, size=2) == Row("a", 2, ["x"], note="n")
    assert replace(row, size=2) == Row("a", 2, ["x"], note="n") and replace(row, size=2).seen == 1
    assert dataclasses.asdict(row) == {"name": "a", "size": 1, "tags": ["x"], "seen": 1, "note": "n"}
    assert repr(row).endswith(".Row(name='a', size=1, tags=['x'], seen=1, note='n')")  # its own repr kept
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.size = 3  # type: ignore[misc]
    with pytest.raises(ValueError):
        replace(row, seen=2)  # init=False: as dataclasses.replace


@pytest.mark.slow
def test_a_model_validates_through_pydantic_and_the_start_up_path_never_loads_dataclasses_nor_packaging():
    code = ("import sys, cudamatrix.cli.fast, cudamatrix.pastes.reports\n"
            "from cudamatrix.pastes.reports import from_reports\n"
            "env = from_reports([('p', 'nvcc: NVIDIA (R) Cuda compiler driver\\nCuda compilation tools, release 12.4,"
            " V12.4.131')])\n"
            "assert env.toolkits and env.to_dict()['toolkits'][0]['version'] == '12.4.131', env\n"
            "print(sorted(m for m in ('dataclasses', 'inspect', 'pydantic', 'packaging') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    from cudamatrix.models import Environment
    from cudamatrix.schema import validate

    env = validate(Environment, {"origin": "report", "toolkits": [{"source": "nvcc", "version": "12.4"}]}, "env.json")
    assert env.toolkits[0].version == "12.4" and env.origin == "report"


@pytest.mark.parametrize("text", [
    "torch", "torch==2.0.1", "torch>=1.12,<1.13", "nvidia-cudnn-cu12>=9.11", "tensorflow==2.16.1",
    "torch >= 2.1 , < 3", "a.b_c==1.0.*", "x===1.0", "torch ~= 2.1", "Torch_Vision!=0.1",
    # not plain: through packaging
    "torch[cuda]>=1", 'torch; python_version<"3.9"', "torch @ https://example.invalid/t.whl",
])
def test_name_and_specifier_matches_packaging(text):
    req = Requirement(text)
    name, spec = name_and_specifier(text)
    assert name == req.name
    assert SpecifierSet(spec) == req.specifier


@pytest.mark.parametrize("text", ["", "==1.0", "torch==", "torch>=", "-torch", "torch 1.0"])
def test_name_and_specifier_refuses_what_packaging_refuses(text):
    with pytest.raises(InvalidRequirement):
        Requirement(text)
    with pytest.raises(InvalidRequirement):
        name_and_specifier(text)


def test_paste_having_is_every_line_holding_a_needle():
    """Paste.having finds rare needles by position and common ones line by line: either way, every line that
    holds one of the needles, each once, in order."""
    from cudamatrix.detect.text import Paste

    lines = [f"GPU {i}: NVIDIA A100 (UUID: GPU-{i})" if i % 50 == 0 else f"row {i} | {i % 7}: x" for i in range(2000)]
    lines[7] = "CUDA Version: 12.4 CUDA Version: 12.4"  # twice on one line
    paste = Paste("\n".join(lines))
    for needles in [("(UUID:",), (":",), ("|",), ("CUDA Version",), ("(UUID:", "CUDA Version"), ("absent",),
                    ("absent", "(UUID:"), (":", "(UUID:"), ("row 1", "GPU")]:
        assert paste.having(*needles) == [i for i, line in enumerate(lines) if any(n in line for n in needles)]


def test_paste_that_repeats_its_lines_is_searched_once_per_distinct_line():
    """A paste whose lines repeat (a log's warnings, a watched table) is searched over its distinct lines, each hit
    spread to every copy: the same lines as searching line by line, for having, having_lower and where, with the
    needles rare, common and absent, a line repeated at the first and the last place, an empty line among the
    copies, and a character that lower-cases to two."""
    from cudamatrix.detect.text import Paste
    from cudamatrix.pastes import nvsmi, packages

    block = ["+-----+", "| 0  Tesla T4  | 12MiB |", "", "numpy 1.26.4", "GPU 0: NVIDIA A100 (UUID: GPU-0)",
             "CUDA Version: 12.4 CUDA Version: 12.4", "torch==2.3.0"]
    lines = block * 40 + ["only once: here", "+-----+"]
    paste = Paste("\n".join(lines))
    assert paste._distinct() is not None  # the path under test is the one taken
    for needles in [("(UUID:",), (":",), ("|",), ("CUDA Version",), ("(UUID:", "CUDA Version"), ("absent",),
                    ("absent", "once"), (":", "(UUID:"), ("+--", "numpy"), ("",), ("a\nb",)]:
        assert paste.having(*needles) == [i for i, line in enumerate(lines) if any(n in line for n in needles)]
    for pattern in (packages._CANDIDATE, nvsmi._EDGE):
        assert paste.where(pattern) == [i for i, line in enumerate(lines) if pattern.match(line)]
    for needle in ("cuda version", "tesla t4", "absent", "only once"):
        assert paste.having_lower(needle) == [i for i, line in enumerate(lines) if needle in line.lower()]
    moved = Paste("\n".join(lines + ["\u0130 CUDA VERSION"]))  # lower-casing makes two characters of one
    assert moved._distinct() is not None
    assert moved.having_lower("cuda version") == [i for i, line in enumerate(lines + ["\u0130 CUDA VERSION"])
                                                  if "cuda version" in line.lower()]
    distinct = Paste("\n".join(f"line {i}: x" for i in range(200)))
    assert distinct._distinct() is None  # nothing repeats: the whole text is searched as before
    assert distinct.having(": x") == list(range(200))


def test_paste_where_is_every_line_the_pattern_matches_at_its_start():
    """Paste.where searches the whole text behind each newline: the same lines as matching line by line, for
    the patterns the readers give it, on the corpus and on lines made to sit at the edges (first line, last
    line, empty lines, a match right after another)."""
    from cudamatrix.detect.text import Paste
    from cudamatrix.pastes import nvsmi, packages

    corpus = Path(__file__).parent.parent / "data" / "pastes"
    texts = [p.read_text(encoding="utf-8") for p in sorted(corpus.glob("*.txt"))]
    texts += ["| 0  Tesla T4 |\n|\n+---+\n\n  | x |\nnumpy 1.26.4\n", "", "\n\n|", "torch==2.3.0", "+\n+\n+"]
    for text in texts:
        paste = Paste(text)
        for pattern in (packages._CANDIDATE, nvsmi._EDGE):
            assert paste.where(pattern) == [i for i, line in enumerate(paste.lines) if pattern.match(line)]


def test_package_candidate_pattern_means_what_the_plain_one_means():
    """packages._CANDIDATE takes a name atomically (no giving back): it matches exactly the lines the plain,
    backtracking spelling of it matches, on the corpus and at the name-length bound."""
    import re

    from cudamatrix.pastes import packages

    plain = re.compile(r"[ \t]*(?:\[(?:pip\d?|conda)\]|Package[ \t]|# |-{3,}|[-*][ \t]{1,4}`|"
                       r"[A-Za-z0-9_][\w.+-]{0,100}(?:==|[ \t]+\d))")  # "_": conda's "_libgcc_mutex" rows
    corpus = Path(__file__).parent.parent / "data" / "pastes"
    lines = [line for p in sorted(corpus.glob("*.txt")) for line in p.read_text(encoding="utf-8").split("\n")]
    for n in (99, 100, 101, 102):
        name = "a" * n
        lines += [f"{name}==1.0", f"{name} 1.0", f"{name}\t2", f"{name}=1", f"{name}.x 3", f"{name} x", name]
    lines += ["torch 2.3.0", "torch==2.3", "torch  =2", "a-b.c+d 1", "-torch 1", "numpy", "x 1", "x= =1",
              "_libgcc_mutex             0.1"]
    assert [bool(packages._CANDIDATE.match(s)) for s in lines] == [bool(plain.match(s)) for s in lines]
    assert sum(bool(plain.match(s)) for s in lines) > 100  # the corpus has package lists
