"""Record classes: what ``dataclasses.dataclass`` makes, built without importing :mod:`dataclasses`.

Every command starts by defining the models, and the standard decorator is costly on that path: importing
it pulls in :mod:`inspect` (and with it ``ast``, ``dis``, ``tokenize``), and it compiles up to six methods per
class. :func:`record` compiles one method, ``__init__``, and shares the others (``__repr__``, ``__eq__``,
``__hash__``, and for a frozen class ``__setattr__`` / ``__delattr__``) with the standard meaning. Measured
against the standard decorator on the same models (paired runs, medians of 15): ``doctor`` takes 17 % more CPU
time and 22 % more wall time with ``dataclasses``, ``detect`` 10 % more CPU, ``solve`` 9 %: over the 10 % a
replacement must earn, so it stays. Re-run after the package's rooms were redrawn (issue #41), ``doctor --json``
on a torch venv, 15 paired runs: with every record also made a standard dataclass at definition (a lower bound:
the standard ``__init__``, ``__repr__`` and ``__eq__`` not compiled), CPU time 24 % more (ratio 0.81).

A record is still a dataclass to whoever asks: ``dataclasses.is_dataclass``, ``fields``, ``replace``,
``asdict`` and pydantic all read ``__dataclass_fields__``, and the first such read turns the class into a
standard dataclass in place (its ``__init__``, ``__repr__`` and ``__eq__`` kept). Code of this package on the
start-up path asks :func:`is_record`, :func:`field_names` and :func:`replace` instead, which never import it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, TypeVar

T = TypeVar("T")


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()  # no default (dataclasses.MISSING's role)
_FACTORY: Any = _Missing()  # an argument left out where a default_factory fills it


class Spec:
    """What :func:`field` says of one field (the meaning of ``dataclasses.Field``'s attributes)."""

    __slots__ = ("name", "type", "default", "default_factory", "init", "repr", "hash", "compare", "kw_only")

    def __init__(self, default: Any = MISSING, default_factory: Any = MISSING, init: bool = True, repr: bool = True,
                 hash: bool | None = None, compare: bool = True, kw_only: Any = MISSING) -> None:
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name, self.type = "", None
        self.default, self.default_factory = default, default_factory
        self.init, self.repr, self.hash, self.compare, self.kw_only = init, repr, hash, compare, kw_only

    def copy(self) -> Spec:
        out = Spec(self.default, self.default_factory, self.init, self.repr, self.hash, self.compare, self.kw_only)
        out.name, out.type = self.name, self.type
        return out


if TYPE_CHECKING:
    from dataclasses import field
    from dataclasses import replace as replace

    from typing_extensions import dataclass_transform
else:
    def field(*, default: Any = MISSING, default_factory: Any = MISSING, init: bool = True, repr: bool = True,
              hash: bool | None = None, compare: bool = True, metadata: Any = None, kw_only: Any = MISSING) -> Any:
        """``dataclasses.field`` for records (``metadata`` is accepted and not kept)."""
        return Spec(default, default_factory, init, repr, hash, compare, kw_only)

    def dataclass_transform(**_: Any) -> Callable[[T], T]:
        return lambda f: f

    def replace(obj: Any, /, **changes: Any) -> Any:
        """``dataclasses.replace`` for records: a copy with ``changes``, built through ``__init__``."""
        cls = type(obj)
        specs = cls.__dict__.get("__record_specs__")
        if specs is None:
            import dataclasses

            return dataclasses.replace(obj, **changes)
        for name, spec in specs.items():
            if not spec.init:
                if name in changes:
                    raise ValueError(f"field {name} is declared with init=False, it cannot be specified with replace()")
            elif name not in changes:
                changes[name] = getattr(obj, name)
        return cls(**changes)


def _spec_of(value: Any) -> Spec | None:
    """The Spec a class attribute stands for: ours, a ``dataclasses.Field`` (its module is then loaded), or
    None for a plain default."""
    if isinstance(value, Spec):
        return value.copy()
    kind = type(value)
    if kind.__name__ == "Field" and kind.__module__ == "dataclasses":
        import dataclasses

        def ours(v: Any) -> Any:
            return MISSING if v is dataclasses.MISSING else v

        return Spec(ours(value.default), ours(value.default_factory), value.init, value.repr, value.hash,
                    value.compare, ours(value.kw_only))
    return None


def is_record(obj: Any) -> bool:
    """A record class or instance (never imports :mod:`dataclasses`)."""
    cls = obj if isinstance(obj, type) else type(obj)
    return "__record_specs__" in cls.__dict__


def field_names(obj: Any) -> tuple[str, ...]:
    """The field names of a record class or instance, in order."""
    cls: Any = obj if isinstance(obj, type) else type(obj)
    return cls.__record_names__


class _AsDataclass:
    """``__dataclass_fields__`` of a record before anyone asked: asking makes the class a standard dataclass."""

    def __get__(self, obj: Any, owner: type) -> Any:
        _upgrade(owner)
        return owner.__dict__["__dataclass_fields__"]


def _upgrade(cls: Any) -> None:
    """Make the record ``cls`` a standard dataclass in place (its methods kept; a frozen one gets the standard
    setters, which mean the same)."""
    import dataclasses

    if isinstance(cls.__dict__.get("__dataclass_fields__"), dict):
        return
    own = cls.__dict__.get("__annotations__", {})
    # a data descriptor standing for a field (matrix.sources.LazySource) is put back after the standard decorator
    kept = {n: v for n, v in cls.__dict__.items() if n in cls.__record_specs__ and hasattr(v, "__set__")}
    for name, spec in cls.__record_specs__.items():
        if name in own:  # the class's own fields, as standard Fields (inherited ones come from the upgraded base)
            setattr(cls, name, dataclasses.field(
                default=dataclasses.MISSING if spec.default is MISSING else spec.default,
                default_factory=dataclasses.MISSING if spec.default_factory is MISSING else spec.default_factory,
                init=spec.init, repr=spec.repr, hash=spec.hash, compare=spec.compare, kw_only=spec.kw_only))
    if "__init__" in cls.__dict__:
        _compiled_init(cls)  # the standard decorator reads its signature
    frozen = cls.__record_frozen__
    if frozen:
        del cls.__setattr__, cls.__delattr__  # the standard decorator installs its own, of the same meaning
    del cls.__dataclass_fields__
    dataclasses.dataclass(cls, init=False, repr=False, eq=False, frozen=frozen)
    for name, descriptor in kept.items():
        setattr(cls, name, descriptor)


@dataclass_transform(field_specifiers=(field,))
def record(cls: Any = None, /, *, frozen: bool = False, eq: bool = True, repr: bool = True,
           kw_only: bool = False) -> Any:
    """``dataclasses.dataclass(cls, frozen=..., eq=..., repr=..., kw_only=...)``: the same ``__init__``,
    ``__repr__`` (the fields with ``repr`` set, in order), ``__eq__`` (the fields with ``compare`` set, only
    between instances of the same class) and ``__hash__`` (a mutable class with ``__eq__`` is unhashable, a
    frozen one hashes its compared fields); a method the class defines itself is kept."""

    def wrap(klass: Any) -> Any:
        _build(klass, frozen, eq, repr, kw_only)
        return klass

    return wrap if cls is None else wrap(cls)


def _build(klass: Any, frozen: bool, eq: bool, want_repr: bool, kw_only: bool) -> None:
    specs = _inherited(klass, frozen)
    specs.update(_own_fields(klass, kw_only))
    _check_order(specs)
    klass.__record_specs__ = specs
    klass.__record_frozen__ = frozen
    klass.__record_names__ = tuple(specs)
    klass.__record_repr__ = tuple(n for n, s in specs.items() if s.repr)
    klass.__record_compare__ = tuple(n for n, s in specs.items() if s.compare)
    klass.__record_hash__ = tuple(n for n, s in specs.items() if (s.compare if s.hash is None else s.hash))
    klass.__dataclass_fields__ = _AsDataclass()
    _methods(klass, frozen, eq, want_repr)


def _inherited(klass: Any, frozen: bool) -> dict[str, Spec]:
    """The fields of the record bases, base first. Refused: a standard dataclass base, a frozen record extending
    a mutable one or the reverse (as the standard decorator refuses it)."""
    specs: dict[str, Spec] = {}
    for base in reversed(klass.__mro__[1:]):
        if "__dataclass_fields__" in base.__dict__ and "__record_specs__" not in base.__dict__:
            raise TypeError(f"{klass.__name__}: a record cannot extend the standard dataclass {base.__name__}")
        inherited = base.__dict__.get("__record_specs__")
        if inherited:
            if base.__record_frozen__ != frozen:
                raise TypeError(f"{klass.__name__}: cannot inherit {'non-' if frozen else ''}frozen record from a "
                                f"{'non-' if not frozen else ''}frozen one")
            specs.update(inherited)
    return specs


def _own_fields(klass: Any, kw_only: bool) -> dict[str, Spec]:
    """The class's own annotated fields (not ClassVars), each default set as the class attribute; a mutable
    default is refused, as the standard decorator refuses it."""
    body = klass.__dict__
    specs: dict[str, Spec] = {}
    for name, annotation in body.get("__annotations__", {}).items():
        if isinstance(annotation, str) and annotation.split("[")[0] in ("ClassVar", "typing.ClassVar"):
            continue
        value = body.get(name, MISSING)
        spec = _spec_of(value)
        if spec is None:
            spec = Spec(default=value)
        elif spec.default is MISSING:
            delattr(klass, name)
        else:
            setattr(klass, name, spec.default)
        if type(spec.default).__hash__ is None and spec.default is not MISSING:
            raise ValueError(f"mutable default {type(spec.default)} for field {name} is not allowed: use "
                             "default_factory")
        spec.name, spec.type = name, annotation
        if spec.kw_only is MISSING:
            spec.kw_only = kw_only
        specs[name] = spec
    return specs


def _check_order(specs: dict[str, Spec]) -> None:
    """As the standard decorator, refused when the class is defined: a positional field without a default after
    one with a default."""
    seen_default = None
    for name, spec in specs.items():
        if not spec.init or spec.kw_only:
            continue
        if spec.default is MISSING and spec.default_factory is MISSING:
            if seen_default:
                raise TypeError(f"non-default argument {name!r} follows default argument {seen_default!r}")
        else:
            seen_default = seen_default or name


def _methods(klass: Any, frozen: bool, eq: bool, want_repr: bool) -> None:
    """``__init__``, ``__repr__``, ``__eq__``, ``__hash__`` and a frozen record's setters; a method the class
    defines itself is kept."""
    body = klass.__dict__
    klass.__record_init__ = "__init__" not in body  # the record writes __init__ (:func:`maker` may stand in)
    if "__init__" not in body:
        klass.__init__ = _first_init(klass)
        klass.__signature__ = _Signature()
    if want_repr and "__repr__" not in body:
        klass.__repr__ = _record_repr
    if eq:
        explicit_hash = "__hash__" in body and not (body["__hash__"] is None and "__eq__" in body)
        if "__eq__" not in body:
            klass.__eq__ = _record_eq
        if not explicit_hash:
            klass.__hash__ = _record_hash if frozen else None
    if frozen:
        if "__setattr__" in body or "__delattr__" in body:
            raise TypeError(f"a frozen record cannot define __setattr__ or __delattr__ ({klass.__name__})")
        klass.__setattr__ = _frozen_setattr
        klass.__delattr__ = _frozen_delattr


def maker(klass: Any) -> Callable[[dict[str, Any]], Any]:
    """A function building an instance of the record class ``klass`` from its init fields as a dict, as
    ``klass(**fields)`` does (defaults and factories filled in, a missing required field a TypeError), without
    calling, or compiling, ``__init__``. Where the class wrote its own ``__init__`` or has a ``__post_init__``,
    the function calls the class.

    The trusted matrix build makes some 750 rows of 19 classes: compiling their ``__init__`` took 1.5 ms of every
    ``solve``. Each field is set as ``__init__`` sets it, so the instances keep the class's shared key table (a
    dict of their own would take a third more memory)."""
    if not klass.__dict__.get("__record_init__") or hasattr(klass, "__post_init__"):
        return lambda fields: klass(**fields)
    binding, new, put = _binding(klass), object.__new__, object.__setattr__

    def make(fields: dict[str, Any]) -> Any:
        obj = new(klass)
        _fill(klass, obj, fields, binding, put)
        return obj

    return make


_COMPILE_AT = 8  # the instance whose making compiles the class's __init__ (the ones before are bound in Python)


def _first_init(klass: Any) -> Callable[..., None]:
    """``__init__`` until the class has made a few instances: the arguments bound here in Python (:func:`_bind`),
    each field set as the compiled one sets it; the :data:`_COMPILE_AT`-th instance compiles the real one
    (:func:`_compiled_init`) and puts it in its place. Compiling costs 150-200 us a class on a cold interpreter
    and most classes make a handful of instances in a run (detect: 23 classes compiled, 3.5 ms; fix: 42, 7.7 ms;
    908 instances, 536 of them LdEntry), so only the classes made often pay it; binding in Python costs a few
    microseconds an instance more."""
    made = 0

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal made
        if made >= _COMPILE_AT - 1:
            _compiled_init(klass)(self, *args, **kwargs)
        else:
            _bind(klass, self, args, kwargs)
            made += 1  # a refused call made no instance

    __init__.__qualname__ = f"{klass.__qualname__}.__init__"
    __init__.__record_first__ = True  # type: ignore[attr-defined]
    return __init__


def _bind(klass: Any, obj: Any, args: tuple, kwargs: dict[str, Any]) -> None:
    """What the compiled ``__init__`` does with ``args`` and ``kwargs``: a TypeError for arguments it would refuse
    (too many positional ones, one given twice, a missing or unknown field), else each field set in order (the
    given value, its default, or its factory's new value; object.__setattr__ for a frozen class), then
    ``__post_init__``."""
    binding = _binding(klass)
    positional = binding[0]
    if len(args) > len(positional):
        raise TypeError(f"{klass.__qualname__}.__init__() takes {len(positional) + 1} positional arguments but "
                        f"{len(args) + 1} were given")
    fields = dict(zip(positional, args, strict=False))  # fewer args than parameters: the rest by keyword or default
    for name in kwargs.keys() & fields.keys():
        raise TypeError(f"{klass.__qualname__}.__init__() got multiple values for argument {name!r}")
    fields.update(kwargs)
    _fill(klass, obj, fields, binding, object.__setattr__ if binding[4] else setattr)
    if hasattr(klass, "__post_init__"):
        obj.__post_init__()


def _fill(klass: Any, obj: Any, fields: dict[str, Any], binding: tuple, put: Callable[[Any, str, Any], None]) -> None:
    """Each field of ``obj`` set with ``put`` in order: the value ``fields`` gives for an init field, else its
    default or its factory's new value; a TypeError naming each required field missing and each one unknown."""
    _positional, required, accepted, steps, _frozen = binding
    given = fields.keys()
    if not required <= given <= accepted:
        wrong = [*(f"missing {n!r}" for n in required - given), *(f"unexpected {n!r}" for n in given - accepted)]
        raise TypeError(f"{klass.__qualname__}.__init__(): {', '.join(wrong)}")
    for name, init, default, factory in steps:
        put(obj, name, fields[name] if init and name in fields else default if factory is MISSING else factory())


def _binding(klass: Any) -> tuple:
    """(the positional parameters in order, the required fields, the init fields, per field to set: its name,
    whether a given value counts, its default and its factory, frozen), worked out once per class."""
    found = klass.__dict__.get("__record_binding__")
    if found is None:
        specs: dict[str, Spec] = klass.__record_specs__
        accepted = frozenset(n for n, s in specs.items() if s.init)
        found = (tuple(n for n in specs if specs[n].init and not specs[n].kw_only),
                 frozenset(n for n in accepted if specs[n].default is MISSING and specs[n].default_factory is MISSING),
                 accepted,
                 tuple((n, s.init, s.default, s.default_factory) for n, s in specs.items()
                       if s.init or s.default is not MISSING or s.default_factory is not MISSING),
                 klass.__record_frozen__)
        type.__setattr__(klass, "__record_binding__", found)
    return found


class _Signature:
    """``__signature__`` of a record class that writes its ``__init__``: asking (:func:`inspect.signature`)
    compiles that ``__init__`` first, so that the parameters read are the fields, not ``*args, **kwargs``;
    None then lets inspect read them from it."""

    def __get__(self, obj: Any, owner: type) -> None:
        for klass in owner.__mro__:
            if "__init__" in klass.__dict__:
                if getattr(klass.__dict__["__init__"], "__record_first__", False):
                    _compiled_init(klass)
                break


def _compiled_init(klass: Any) -> Callable[..., None]:
    """The class's compiled ``__init__``, compiled now if it was not yet."""
    current = klass.__dict__["__init__"]
    if getattr(current, "__record_first__", False):
        current = klass.__init__ = _init(klass, klass.__record_specs__, klass.__record_frozen__)
    return current


def _init(klass: Any, specs: dict[str, Spec], frozen: bool) -> Callable[..., None]:
    """Compile ``__init__``: the init fields as parameters (keyword-only ones after a ``*``), each field set."""
    scope: dict[str, Any] = {"_FACTORY": _FACTORY, "_set": object.__setattr__}
    positional: list[str] = []
    keyword: list[str] = []
    lines: list[str] = []
    for name, s in specs.items():
        if s.default_factory is not MISSING:
            scope[f"_f_{name}"] = s.default_factory
        elif s.default is not MISSING:
            scope[f"_d_{name}"] = s.default
        if s.init:
            if s.default_factory is not MISSING:
                param, value = f"{name}=_FACTORY", f"_f_{name}() if {name} is _FACTORY else {name}"
            elif s.default is not MISSING:
                param, value = f"{name}=_d_{name}", name
            else:
                param, value = name, name
            (keyword if s.kw_only else positional).append(param)
        elif s.default_factory is not MISSING:
            value = f"_f_{name}()"
        elif s.default is not MISSING:
            value = f"_d_{name}"
        else:
            continue
        lines.append(f"_set(self, {name!r}, {value})" if frozen else f"self.{name} = {value}")
    if hasattr(klass, "__post_init__"):
        lines.append("self.__post_init__()")
    params = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    source = f"def __init__({params}):\n    " + ("\n    ".join(lines) or "pass") + "\n"
    exec(source, scope)  # noqa: S102 (source built above from the class's own field names)
    fn = scope["__init__"]
    fn.__qualname__ = f"{klass.__qualname__}.__init__"
    fn.__module__ = klass.__module__
    return fn


def _record_repr(self: Any) -> str:
    return f"{type(self).__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in self.__record_repr__)})"


def _record_eq(self: Any, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    names = self.__record_compare__
    return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)


def _record_hash(self: Any) -> int:
    return hash(tuple(getattr(self, n) for n in self.__record_hash__))


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    from dataclasses import FrozenInstanceError

    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: Any, name: str) -> None:
    from dataclasses import FrozenInstanceError

    raise FrozenInstanceError(f"cannot delete field {name!r}")
