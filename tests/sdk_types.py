"""Check wire bodies against the official SDKs' own types.

The official Python SDKs (``openai``, ``anthropic``, ``google-genai``) describe each request body
as ``TypedDict`` s and each answer as pydantic models. Neither says everything on its own:
pydantic validates a ``TypedDict`` without complaining about keys it does not declare, checks an
``Iterable`` field lazily (only when something iterates it), and the openai and anthropic models
keep undeclared keys as extras. So a body is checked twice:

1. :func:`problems` walks the value along the type: every key must be declared by the
   ``TypedDict`` or model at that place, every required key present, every literal and scalar of
   the declared kind; a union fits when one of its members does (a union of objects is settled
   by the literal field its members share, such as ``type`` or ``role``). A provider's own
   fields are allowed only where its :data:`Extensions` table names them, with the type given
   there (which replaces the SDK's type of a field the provider spells differently).
2. :func:`check_request` / :func:`check_response` then hand the value, minus the extension
   fields, to pydantic (``TypeAdapter(...).validate_python`` for a ``TypedDict``, draining every
   lazily validated iterable; the model's own validation for an answer).

Both return the list of problems, each naming the path (``$.messages[2].content[0].detail``).
"""

from __future__ import annotations

import collections.abc
import functools
import json
import types
import typing
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, Required, Union, get_args, get_origin

import pydantic
from typing_extensions import ReadOnly, is_typeddict

__all__ = ["Extensions", "check_request", "check_response", "problems"]

Extensions = Mapping[type, Mapping[str, Any]]
"""Fields a provider adds to an SDK type: SDK class -> {field name: the field's type}."""

_WRAPPERS = (typing.Annotated, Required, NotRequired, ReadOnly, typing.ClassVar)
_LISTS = (
    list,
    tuple,
    collections.abc.Iterable,
    collections.abc.Sequence,
    collections.abc.MutableSequence,
)
_MAPPINGS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)
_SCALARS: dict[type, tuple[type, ...]] = {
    str: (str,),
    int: (int,),
    float: (int, float),
    bool: (bool,),
    bytes: (str, bytes),
    type(None): (type(None),),
}


@dataclass(frozen=True)
class _Object:
    """A ``TypedDict`` or model: its wire keys and their types, required keys, literal keys."""

    cls: type
    fields: Mapping[str, Any]
    required: frozenset[str]
    literals: tuple[tuple[str, tuple[Any, ...]], ...]


@dataclass(frozen=True)
class _Plan:
    """How to walk one type, worked out once per type."""

    kind: str  # any, union, literal, object, list, map, scalar, other
    args: tuple[Any, ...] = ()
    nullable: bool = False
    key: str | None = None  # union of objects: the literal field that settles it
    index: Mapping[Any, tuple[Any, ...]] | None = None  # that field's value -> members
    obj: _Object | None = None


def _unwrap(tp: Any) -> Any:
    while True:
        origin = get_origin(tp)
        if origin in _WRAPPERS:
            tp = get_args(tp)[0]
        elif type(tp).__name__ == "TypeAliasType":
            tp = tp.__value__
        else:
            return tp


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, pydantic.BaseModel)


def _is_list_like(origin: Any) -> bool:
    if origin is None:
        return False
    # openai's SequenceNotStr is a protocol over sequences.
    return origin in _LISTS or getattr(origin, "__name__", "") == "SequenceNotStr"


@functools.cache
def _object(cls: type) -> _Object:
    if is_typeddict(cls):
        hints = typing.get_type_hints(cls, include_extras=True)
        # The SDKs write `Required[...]` in string annotations (`from __future__ import
        # annotations`), which `__required_keys__` does not always see: read the hints too.
        marked = {k for k, v in hints.items() if get_origin(v) is Required}
        optional = {k for k, v in hints.items() if get_origin(v) is NotRequired}
        required = (frozenset(cls.__required_keys__) | marked) - optional
        fields: dict[str, Any] = dict(hints)
    else:
        cls.model_rebuild()
        fields = {}
        required = set()
        for name, info in cls.model_fields.items():
            for key in {info.alias or name, name}:
                fields[key] = info.annotation
            if info.is_required():
                required.add(info.alias or name)
    literals = tuple(
        (key, get_args(_unwrap(tp)))
        for key, tp in fields.items()
        if get_origin(_unwrap(tp)) is Literal
    )
    return _Object(cls, fields, frozenset(required), literals)


_PLANS: dict[int, tuple[Any, _Plan]] = {}


def _plan(tp: Any) -> _Plan:
    # Keyed by identity: hashing a typing construct costs more than walking a small value.
    found = _PLANS.get(id(tp))
    if found is None:
        found = _PLANS[id(tp)] = (tp, _make_plan(tp))
    return found[1]


def _make_plan(tp: Any) -> _Plan:
    tp = _unwrap(tp)
    if tp is Any or tp is object:
        return _Plan("any")
    origin = get_origin(tp)
    if origin is Union or origin is types.UnionType:
        members = tuple(_flattened(tp))
        objects = [m for m in members if _plan(m).kind == "object"]
        ordered = (*objects, *(m for m in members if m not in objects))
        key, index = _discriminator(objects)
        nullable = any(m is type(None) for m in get_args(tp))
        return _Plan("union", ordered, nullable, key, index)
    if origin is Literal:
        return _Plan("literal", get_args(tp))
    if is_typeddict(tp) or _is_model(tp):
        return _Plan("object", obj=_object(tp))
    if _is_list_like(origin):
        return _Plan("list", get_args(tp)[:1] or (Any,))
    if origin in _MAPPINGS or tp in (dict, collections.abc.Mapping):
        args = get_args(tp)
        return _Plan("map", (args[1],) if len(args) == 2 else (Any,))
    if tp in _SCALARS:
        return _Plan("scalar", (tp,))
    return _Plan("other", (tp,))


def _flattened(tp: Any) -> list[Any]:
    """The members of a union, unions inside it (an ``Annotated`` union) spread out."""
    out: list[Any] = []
    for member in get_args(tp):
        inner = _unwrap(member)
        if get_origin(inner) is Union or get_origin(inner) is types.UnionType:
            out += [m for m in _flattened(inner) if m not in out]
        elif member is not type(None) and member not in out:
            out.append(member)
    return out


def _discriminator(objects: list[Any]) -> tuple[str | None, Mapping[Any, tuple[Any, ...]] | None]:
    """The literal field every object member declares, and which members each value selects."""
    if len(objects) < 2:
        return None, None
    shared = set.intersection(*(set(dict(_object(_unwrap(m)).literals)) for m in objects))
    for key in sorted(shared, key=lambda k: (k != "type", k != "role", k)):
        index: dict[Any, list[Any]] = {}
        for member in objects:
            for value in dict(_object(_unwrap(member)).literals)[key]:
                index.setdefault(value, []).append(member)
        return key, {value: tuple(members) for value, members in index.items()}
    return None, None


def problems(
    tp: Any, value: Any, path: str = "$", extensions: Extensions | None = None
) -> list[str]:
    """Everything about ``value`` that the type ``tp`` does not declare (see the module doc)."""
    return _walk(tp, value, path, extensions or {}, [])


def _walk(tp: Any, value: Any, path: str, ext: Extensions, used: list[str]) -> list[str]:
    plan = _plan(tp)
    kind = plan.kind
    if kind == "object":
        assert plan.obj is not None
        return _walk_object(plan.obj, value, path, ext, used)
    if kind == "scalar":
        (scalar,) = plan.args
        kinds = _SCALARS[scalar]
        if isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds):
            return []
        return [f"{path}: expected {scalar.__name__}, got {value!r}"]
    if kind == "union":
        return _walk_union(plan, value, path, ext, used)
    if kind == "literal":
        return [] if value in plan.args else [f"{path}: {value!r} is not one of {plan.args}"]
    if kind == "list":
        if isinstance(value, str | bytes | Mapping) or not isinstance(value, list | tuple):
            return [f"{path}: expected a list, got {type(value).__name__}"]
        out: list[str] = []
        for index, element in enumerate(value):
            out += _walk(plan.args[0], element, f"{path}[{index}]", ext, used)
        return out
    if kind == "map":
        if not isinstance(value, Mapping):
            return [f"{path}: expected an object, got {type(value).__name__}"]
        out = []
        for key, element in value.items():
            out += _walk(plan.args[0], element, f"{path}.{key}", ext, used)
        return out
    if kind == "other":
        return _pydantic(plan.args[0], value, path)
    return []


def _pydantic(tp: Any, value: Any, path: str) -> list[str]:
    # Enums, dates, classes of their own: pydantic decides. google-genai's enums take an
    # unknown value with a UserWarning only: here it is an error.
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            _adapter(tp).validate_python(value)
    except pydantic.ValidationError as exc:
        return [f"{path}: {exc.errors()[0]['msg']}"]
    except UserWarning as exc:
        return [f"{path}: {exc}"]
    return []


def _candidates(plan: _Plan, value: Any) -> tuple[Any, ...]:
    if plan.key is not None and isinstance(value, Mapping) and plan.index is not None:
        chosen = plan.index.get(value.get(plan.key))
        if chosen is not None:
            return chosen
    return plan.args


def _walk_union(plan: _Plan, value: Any, path: str, ext: Extensions, used: list[str]) -> list[str]:
    if value is None and plan.nullable:
        return []
    best: tuple[bool, int, list[str]] | None = None
    for member in _candidates(plan, value):
        tried: list[str] = []
        found = _walk(member, value, path, ext, tried)
        if not found:
            used += tried
            return []
        # Report the member whose shape (list, object with matching literals) is the value's.
        rank = (not _shape_matches(member, value), len(found), found)
        if best is None or rank[:2] < best[:2]:
            best = rank
    return best[2] if best else [f"{path}: {value!r} fits none of {plan.args}"]


def _shape_matches(member: Any, value: Any) -> bool:
    plan = _plan(member)
    if plan.kind == "list":
        return isinstance(value, list | tuple)
    if plan.kind != "object":
        return not isinstance(value, list | tuple | Mapping)
    assert plan.obj is not None
    return isinstance(value, Mapping) and all(
        value[key] in allowed for key, allowed in plan.obj.literals if key in value
    )


def _added(cls: type, ext: Extensions) -> Mapping[str, Any]:
    """The extension fields of ``cls`` or of the TypedDict it extends (``...Streaming`` of
    ``...Base``)."""
    if not ext:
        return {}
    found = ext.get(cls)
    if found is not None:
        return found
    for base in getattr(cls, "__orig_bases__", ()):
        if base in ext:
            return ext[base]
    return {}


def _walk_object(
    obj: _Object, value: Any, path: str, ext: Extensions, used: list[str]
) -> list[str]:
    name = obj.cls.__name__
    if not isinstance(value, Mapping):
        return [f"{path}: expected a {name} object, got {type(value).__name__}"]
    added = _added(obj.cls, ext)
    # Literal keys first: a wrong union member fails on its discriminator at once.
    for key, allowed in obj.literals:
        if key in value and key not in added and value[key] not in allowed:
            return [f"{path}.{key}: {value[key]!r} is not one of {allowed}"]
    out = [
        f"{path}: {name} requires {key!r}"
        for key in sorted(obj.required)
        if key not in value and key not in added
    ]
    declared = obj.fields
    for key, element in value.items():
        if key in added:
            used.append(f"{path}.{key}")
            out += _walk(added[key], element, f"{path}.{key}", ext, used)
        elif key in declared:
            out += _walk(declared[key], element, f"{path}.{key}", ext, used)
        else:
            out.append(f"{path}.{key}: {name} declares no {key!r}")
    return out


def without_extensions(tp: Any, value: Any, ext: Extensions) -> Any:
    """``value`` with every extension field removed where ``tp`` (walked as above) has it, so
    that pydantic sees only what the SDK declares."""
    if not ext:
        return value
    plan = _plan(tp)
    if plan.kind == "union":
        for member in _candidates(plan, value):
            if not _walk(member, value, "$", ext, []):
                return without_extensions(member, value, ext)
        return value
    if plan.kind == "object" and isinstance(value, Mapping):
        assert plan.obj is not None
        added = _added(plan.obj.cls, ext)
        declared = plan.obj.fields
        return {
            key: without_extensions(declared[key], element, ext)
            for key, element in value.items()
            if key not in added and key in declared
        }
    if plan.kind == "list" and isinstance(value, list | tuple):
        return [without_extensions(plan.args[0], element, ext) for element in value]
    if plan.kind == "map" and isinstance(value, Mapping):
        return {k: without_extensions(plan.args[0], v, ext) for k, v in value.items()}
    return value


@functools.cache
def _adapter(tp: Any) -> pydantic.TypeAdapter[Any]:
    return pydantic.TypeAdapter(tp)


def _drain(value: Any) -> None:
    """Iterate every lazily validated iterable pydantic returned, so each item is validated."""
    if isinstance(value, Mapping):
        for element in value.values():
            _drain(element)
    elif isinstance(value, list | tuple | collections.abc.Iterator):
        for element in value:
            _drain(element)


def _errors(exc: pydantic.ValidationError) -> list[str]:
    return [f"$.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]


def check_request(tp: Any, body: Any, extensions: Extensions | None = None) -> list[str]:
    """Problems of a request ``body`` against the SDK's request ``TypedDict`` ``tp``."""
    ext = extensions or {}
    used: list[str] = []
    found = _walk(tp, body, "$", ext, used)
    if found:
        return found
    try:
        _drain(_adapter(tp).validate_python(without_extensions(tp, body, ext) if used else body))
    except pydantic.ValidationError as exc:
        return _errors(exc)
    return []


def check_response(
    model: Any, data: Any, extensions: Extensions | None = None, *, json_bytes: bool = False
) -> list[str]:
    """Problems of an answer or stream event ``data`` against the SDK's model (or union).

    ``json_bytes``: validate in JSON mode, where ``bytes`` fields must be base64 (google-genai's
    models, ``val_json_bytes="base64"``).
    """
    ext = extensions or {}
    used: list[str] = []
    found = _walk(model, data, "$", ext, used)
    if found:
        return found
    projected = without_extensions(model, data, ext) if used else data
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            if json_bytes:
                _adapter(model).validate_json(json.dumps(projected))
            else:
                _adapter(model).validate_python(projected)
    except pydantic.ValidationError as exc:
        return _errors(exc)
    except UserWarning as exc:
        return [f"$: {exc}"]
    return []
