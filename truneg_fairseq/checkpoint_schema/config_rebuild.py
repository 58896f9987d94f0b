"""A checkpoint's config rebuilt from fairseq's schema (:func:`rebuild_config`,
:func:`rebuild_args`), so that what fairseq's model, task, criterion and optimizer constructors
receive from a file is a config made here from known fields, never the objects the file held.

Every form a fairseq config takes is read the same way, at every depth: a ``DictConfig``, a
plain dict, an ``argparse.Namespace`` (fairseq keeps a legacy model's whole argument namespace as
``cfg.model``; an old-style checkpoint has one ``args``), a dataclass instance, a list or tuple.
Each group's fields are those of :mod:`.config_schema`. Each value is checked against its field's
type (``int``, ``float``, ``bool``, ``str``, a choice of an enumeration or of an argument's
``choices``, lists and tuples of those, ``Optional``) and copied; a field fairseq evaluates as
Python (:data:`.evaluated_fields.EVALUATED_FIELDS`) must hold plain data wherever it is, inside
lists too, and that is checked first, through the whole config. An unknown field, a value of the
wrong type, a nested container where the schema has none, an interpolation that is not a plain
reference to another field, or code in an evaluated field is one :class:`UnsafeCheckpointError`
naming the file and the field's dotted path (``cfg.model.encoder.xformers_att_config``,
``args.lr[0]``). A value fairseq set from the loader's ``arg_overrides`` (the caller's own) is
kept as it is. fairseq-hydra-train's record of its logging setup (``cfg.job_logging_cfg``) is
plain data with handler classes of the logging package only.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import re
import reprlib
import typing

from .config_bounds import MAX_DEPTH, bound_config
from .config_schema import ANY as _ANY
from .config_schema import _hints, _merge, component_schema, flat_schema, top_schema
from .evaluated_fields import UnsafeCheckpointError, _evaluated, safe_literal

MAX_ITEMS = 100_000
_REFERENCE = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\}$")
_PLAIN = (type(None), bool, int, float, str)
_WHOLE = re.compile(r"^\s*[+-]?\d{1,30}\s*$")
_NUMBER = re.compile(
    r"^\s*[+-]?(\d{1,30}(\.\d*)?|\.\d+)([eE][+-]?\d{1,4})?\s*$|^\s*[+-]?(inf|nan)\s*$"
)
# what a hydra run records of its logging setup (cfg.job_logging_cfg, logging.config.dictConfig's
# schema): plain data, handler classes of the logging package, the two standard streams
_LOGGING_STREAMS = ("ext://sys.stdout", "ext://sys.stderr")


def _refuse(path: str, where: str, why: str):
    raise UnsafeCheckpointError(
        f"{path}: {where} {why}. The checkpoint was not loaded; if you made it yourself, save it "
        "again from a config fairseq wrote (fairseq-train or scripts/convert_hf.py import)"
    )


def _same(value, given) -> bool:
    """Whether ``value`` is the override ``given`` (fairseq wrote it there), not the file's own."""
    try:
        return value is given or (type(value) is type(given) and bool(value == given))
    except Exception:
        return False


# a value shown in an error: its first items only, so showing a shared or huge one costs nothing
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 3, 80, 80, 40
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 8


def _show(value) -> str:
    text = _REPR.repr(value) if not isinstance(value, argparse.Namespace) else "a Namespace"
    return text if len(text) <= 80 else text[:77] + "..."


class _Rebuild:
    def __init__(self, path: str, overrides=None):
        self.path = path
        self.overrides = dict(overrides or {})
        self.task_schema = None  # the task's fields, which a task copies into its model's config
        self.trained_task = None  # cfg.task._name: the task the checkpoint was trained with
        self.evaluated = _evaluated
        self.safe_literal = safe_literal

    def other_task(self, key: str) -> bool:
        """Whether field ``key`` is unknown because the command gives another ``--task`` than
        the checkpoint was trained with (``fairseq-validate --task masked_lm`` on a
        ``batch_masked_lm`` checkpoint): it is a field of the trained task."""
        given = self.overrides.get("task")
        trained = self.trained_task
        if not (isinstance(given, str) and isinstance(trained, str)) or given == trained:
            return False
        schema = component_schema("task", trained)
        return schema is not None and key in schema

    # a value of a field -------------------------------------------------------------------
    def value(self, value, spec, where: str, key: str, depth: int):
        if depth > MAX_DEPTH:
            _refuse(self.path, where, "is nested deeper than any fairseq config")
        if isinstance(value, str):
            if "${" in value:
                _refuse(
                    self.path,
                    where,
                    f"is {_show(value)}, an interpolation fairseq would resolve when it reads the field",
                )
            if self.evaluated(key):
                value = self.safe_literal(value, f"{self.path}: {where}")
        kind, arg = spec
        if kind == "arg":
            return self.argument(value, arg, where, key, depth)
        return self.typed(value, arg, where, key, depth)

    def plain(self, value, where: str, key: str, depth: int):
        """A value of a field whose type says nothing: scalars, lists and tuples of them."""
        if isinstance(value, _PLAIN):
            return value
        if isinstance(value, (list, tuple)):
            self.size(value, where)
            return type(value)(
                self.value(v, ("type", _ANY), f"{where}[{i}]", key, depth + 1)
                for i, v in enumerate(value)
            )
        _refuse(
            self.path,
            where,
            f"is {_show(value)} where fairseq's schema has a plain value (a number, a string, a list of them)",
        )

    def size(self, value, where):
        if len(value) > MAX_ITEMS:
            _refuse(
                self.path, where, f"holds {len(value)} items, more than any fairseq config value"
            )

    def typed(self, value, ann, where: str, key: str, depth: int):
        if ann is typing.Any or ann is None or ann is object:
            return self.plain(value, where, key, depth)
        if value is None or (isinstance(value, str) and value == "???"):
            return value  # unset (a missing value fairseq fills or refuses itself)
        if isinstance(ann, type) and dataclasses.is_dataclass(ann):
            return self.group(value, self.schema_of(ann), where, depth)
        origin, args = typing.get_origin(ann), typing.get_args(ann)
        if origin is typing.Union:
            errors = []
            for option in args:
                if option is type(None):
                    continue
                try:
                    return self.typed(value, option, where, key, depth)
                except UnsafeCheckpointError as e:
                    errors.append(e)
            raise errors[0]
        if origin in (list, tuple, typing.List, typing.Tuple) or ann in (list, tuple):
            if not isinstance(value, (list, tuple)):
                _refuse(self.path, where, f"is {_show(value)}, not a list")
            self.size(value, where)
            items = [a for a in args if a is not Ellipsis] or [_ANY]
            out = [
                self.typed(
                    v,
                    items[min(i, len(items) - 1)]
                    if origin is tuple and Ellipsis not in args
                    else items[0],
                    f"{where}[{i}]",
                    key,
                    depth + 1,
                )
                for i, v in enumerate(value)
            ]
            return type(value)(out)
        if origin in (dict, typing.Dict):
            if not isinstance(value, dict):
                _refuse(self.path, where, f"is {_show(value)}, not a mapping")
            self.size(value, where)
            return {
                str(k): self.plain(v, f"{where}.{k}", str(k), depth + 1) for k, v in value.items()
            }
        if isinstance(ann, type) and issubclass(ann, enum.Enum):
            choices = [e.value if not isinstance(e.value, enum.Enum) else e.name for e in ann] + [
                e.name for e in ann
            ]
            if isinstance(value, enum.Enum):
                value = value.name
            if not isinstance(value, str) or value not in choices:
                _refuse(
                    self.path,
                    where,
                    f"is {_show(value)}, not one of {', '.join(map(str, sorted(set(map(str, choices)))))}",
                )
            return value
        if ann is bool:
            if not isinstance(value, bool):
                _refuse(self.path, where, f"is {_show(value)}, not true or false")
            return value
        if ann is int:
            if isinstance(value, str) and _WHOLE.match(value):
                return value  # as argparse kept it in a legacy namespace: a number, no code
            if isinstance(value, bool) or not isinstance(value, int):
                _refuse(self.path, where, f"is {_show(value)}, not a whole number")
            return value
        if ann is float:
            if isinstance(value, str) and _NUMBER.match(value):
                return value
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                _refuse(self.path, where, f"is {_show(value)}, not a number")
            return value
        if ann is str:
            if not isinstance(value, str):
                _refuse(self.path, where, f"is {_show(value)}, not a string")
            return value
        return self.plain(value, where, key, depth)  # another annotation: plain data only

    def argument(self, value, action, where: str, key: str, depth: int):
        """A value of a legacy component's argument, as argparse would have stored it."""
        if value is None:
            return value
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            return self.typed(value, bool, where, key, depth)
        one = action.type if action.type in (int, float, str) else _ANY
        if isinstance(value, (list, tuple)):
            value = self.typed(
                value,
                typing.List[one] if isinstance(value, list) else typing.Tuple[one, ...],
                where,
                key,
                depth,
            )
            chosen = list(value)
        else:
            value = self.typed(value, one, where, key, depth)
            chosen = [value]
        if action.choices is not None and value != action.default:
            allowed = list(action.choices)
            for item in chosen:
                if item not in allowed:
                    _refuse(
                        self.path,
                        where,
                        f"is {_show(item)}, not one of {', '.join(map(str, allowed))}",
                    )
        return value

    # a group of fields ----------------------------------------------------------------------
    @staticmethod
    def schema_of(dc) -> dict:
        return _merge({k: ("type", t) for k, t in _hints(dc).items()})

    def items(self, value, where: str) -> dict:
        from omegaconf import DictConfig, OmegaConf

        if isinstance(value, argparse.Namespace):
            return dict(vars(value))
        if isinstance(value, DictConfig):
            return OmegaConf.to_container(value, resolve=False)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        if isinstance(value, dict):
            return value
        _refuse(self.path, where, f"is {_show(value)} where fairseq's schema has a group of fields")

    def group(self, value, schema: dict, where: str, depth: int, what: str = "config"):
        """``value`` (any group form) rebuilt field by field from ``schema``: a Namespace stays
        a Namespace, every other form becomes a dict."""
        if depth > MAX_DEPTH:
            _refuse(self.path, where, "is nested deeper than any fairseq config")
        items = self.items(value, where)
        out = {}
        for key, child in items.items():
            dotted = f"{where}.{key}"
            if not isinstance(key, str):
                _refuse(self.path, dotted, "is not a field name")
            if key in self.overrides and depth <= 1 and _same(child, self.overrides[key]):
                out[key] = child
                continue
            specs = schema.get(key)
            if not specs and self.other_task(key):
                raise UnsafeCheckpointError(
                    f"{self.path} was trained with --task {self.trained_task}, and this command "
                    f"gives --task {self.overrides['task']}, whose arguments do not include "
                    f"{dotted} (holding {_show(child)}): give --task {self.trained_task}"
                )
            if not specs:
                _refuse(
                    self.path,
                    dotted,
                    f"is not a field of fairseq's {what} here (an unknown field, holding {_show(child)})",
                )
            error = None
            for spec in specs:
                try:
                    out[key] = self.value(child, spec, dotted, key, depth + 1)
                    break
                except UnsafeCheckpointError as e:
                    error = error or e
            else:
                raise error
        return argparse.Namespace(**out) if isinstance(value, argparse.Namespace) else out

    def named(self, value, kind: str, where: str, depth: int):
        """Named group ``kind`` (``cfg.model``, ``cfg.task``, ...): a flat namespace of a legacy
        component, or a group whose ``_name`` picks its schema."""
        if value is None:
            return None
        if isinstance(value, argparse.Namespace):
            return self.flat(value, where, depth)
        items = self.items(value, where)
        name = items.get("_name") or (items.get("arch") if kind == "model" else None)
        schema = component_schema(kind, name)
        if schema is None:
            _refuse(
                self.path,
                f"{where}._name",
                f"is {_show(name)}, which names no {kind} fairseq knows here",
            )
        if kind == "model" and self.task_schema:  # sentence_prediction sets max_positions there
            schema = _merge(schema, self.task_schema)
        return self.group(items, schema, where, depth, f"{kind} {name!r}")

    def logging_config(self, value, where: str, depth: int):
        """A logging setup as ``logging.config.dictConfig`` reads it: plain data only, no factory
        (``()``), handler classes of the logging package only, streams stdout and stderr."""
        if depth > MAX_DEPTH:
            _refuse(self.path, where, "is nested deeper than any fairseq config")
        if isinstance(value, dict):
            out = {}
            for key, child in value.items():
                dotted = f"{where}.{key}"
                if not isinstance(key, str) or key == "()":
                    _refuse(
                        self.path,
                        dotted,
                        "names a factory, which a logging setup read from a file may not",
                    )
                if key == "class" and not (isinstance(child, str) and child.startswith("logging.")):
                    _refuse(
                        self.path, dotted, f"is {_show(child)}, not a class of the logging package"
                    )
                out[key] = self.logging_config(child, dotted, depth + 1)
            return out
        if isinstance(value, (list, tuple)):
            self.size(value, where)
            return [self.logging_config(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
        if (
            isinstance(value, str)
            and ("://" in value or "${" in value)
            and value not in _LOGGING_STREAMS
        ):
            _refuse(self.path, where, f"is {_show(value)}, which a logging setup would resolve")
        return self.plain(value, where, "", depth)

    def flat(self, value, where: str, depth: int):
        items = self.items(value, where)
        return self.group(value, flat_schema(items), where, depth, "arguments")


def _plain_references_only(cfg, path: str) -> None:
    """Every interpolation in DictConfig ``cfg`` is a plain reference to another field
    (``${common.tpu}``, as fairseq's own ``II`` defaults write them), nothing a resolver runs."""
    from omegaconf import OmegaConf

    def walk(node, where):
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{where}.{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{where}[{i}]")
        elif isinstance(node, str) and "${" in node and not _REFERENCE.match(node):
            _refuse(
                path,
                where,
                f"is {_show(node)}, an interpolation that is not a reference to another field",
            )

    walk(OmegaConf.to_container(cfg, resolve=False), "cfg")


def _code_first(node, path: str, where: str, evaluated: bool = False, depth: int = 0) -> None:
    """Refuse code in any field fairseq evaluates, at any depth, before anything else is said
    about the config (an unknown field next to it would otherwise be named first)."""
    if depth > MAX_DEPTH:
        return  # the rebuild refuses it
    if isinstance(node, argparse.Namespace):
        node = vars(node)
    if isinstance(node, dict):
        for key, value in node.items():
            _code_first(value, path, f"{where}.{key}", evaluated or _evaluated(str(key)), depth + 1)
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node[:MAX_ITEMS]):
            _code_first(value, path, f"{where}[{i}]", evaluated, depth + 1)
    elif evaluated and isinstance(node, str):
        safe_literal(node, f"{path}: {where}")


def rebuild_config(cfg, path: str, overrides=None):
    """The checkpoint config ``cfg`` of file ``path`` (a DictConfig, or the dict a checkpoint
    stores) rebuilt from fairseq's schema (see the module docstring): a new DictConfig of the
    same values, or :class:`UnsafeCheckpointError` naming the first field that does not fit.
    ``overrides``: the loader's ``arg_overrides``, kept as they are."""
    from omegaconf import DictConfig, OmegaConf

    bound_config(cfg, path, "cfg")  # before anything below resolves or walks it
    if isinstance(cfg, DictConfig):
        _plain_references_only(cfg, path)
        cfg = OmegaConf.to_container(cfg, resolve=True)
    _code_first(cfg, path, "cfg")
    rebuild = _Rebuild(path, overrides)
    items = rebuild.items(cfg, "cfg")
    schema = top_schema()
    out = {}
    task = items.get("task")
    task = (vars(task) if isinstance(task, argparse.Namespace) else task) or {}
    rebuild.trained_task = task.get("_name") if isinstance(task, dict) else None
    rebuild.task_schema = component_schema("task", rebuild.trained_task)
    for key, value in items.items():
        if key == "job_logging_cfg":  # fairseq-hydra-train's record of its logging setup
            out[key] = rebuild.logging_config(value, f"cfg.{key}", 1)
            continue
        spec = schema.get(key)
        if spec is None:
            _refuse(
                path,
                f"cfg.{key}",
                f"is not a group of fairseq's config (an unknown field, holding {_show(value)})",
            )
        if spec[0] == "named":
            out[key] = rebuild.named(value, key, f"cfg.{key}", 1)
        else:
            out[key] = rebuild.value(value, spec, f"cfg.{key}", key, 1)
    return OmegaConf.create(out, flags={"allow_objects": True})


def rebuild_args(args, path: str, overrides=None) -> argparse.Namespace:
    """An old-style checkpoint's ``args`` namespace rebuilt from fairseq's schema (see
    :func:`rebuild_config`)."""
    if not isinstance(args, argparse.Namespace):
        _refuse(path, "args", f"is {_show(args)}, not an argument namespace")
    bound_config(args, path, "args", references=False)
    _code_first(args, path, "args")
    return _Rebuild(path, overrides).flat(args, "args", 0)
