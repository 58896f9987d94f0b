"""fairseq's schema of a checkpoint config, read from fairseq's own registries: the fields each
group may hold and their types (:func:`component_schema`, :func:`flat_schema`), which
:mod:`.config_rebuild` rebuilds a checkpoint's config from.

- the top-level groups (``common``, ``dataset``, ``checkpoint``, ...): the dataclasses of
  ``fairseq.dataclass.configs.FairseqConfig``;
- a named group (``model``, ``task``, ``criterion``, ``optimizer``, ``lr_scheduler``, ``bpe``,
  ``tokenizer``, ``scoring``): the dataclass fairseq's registry holds for its ``_name`` (the
  plugin's own are registered there too), or, for a component written with ``add_args``, the
  arguments it declares; a legacy model also gets the defaults its architecture function sets and
  the fields of fairseq's ``TransformerConfig``, which its encoder is built from
  (``TransformerConfig.from_namespace`` reads ``args.encoder``/``args.decoder`` as nested groups);
  a model's config also holds its task's fields (``sentence_prediction`` copies
  ``max_positions`` there);
- a flat argument namespace (an old-style ``args``, a legacy ``cfg.model``): all of these at once,
  for the components it names;
- a dataclass field whose type is itself a dataclass (``TransformerConfig.encoder:
  EncDecBaseConfig``): that dataclass, recursively.

A schema maps each field to the specs it may satisfy: ``("type", annotation)`` (a dataclass
field's type, ``typing.Any`` where nothing is known) or ``("arg", action)`` (a legacy
argument, as argparse stores it).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import typing

# named groups of FairseqConfig and where fairseq registers their components
NAMED_GROUPS = (
    "model",
    "task",
    "criterion",
    "optimizer",
    "lr_scheduler",
    "scoring",
    "bpe",
    "tokenizer",
)
# fields a flat argument namespace holds besides the components' own: the components' names and
# the special symbols' indices fairseq's dictionary options record
_FLAT_EXTRA = {
    "_name": str,
    "arch": str,
    **{k: str for k in NAMED_GROUPS if k != "model"},
    "pad": int,
    "eos": int,
    "unk": int,
    "bos": int,
}
ANY = typing.Any  # a field whose type says nothing: plain values and lists of them


def _hints(dc) -> dict:
    """{field: type} of dataclass ``dc``."""
    try:
        hints = typing.get_type_hints(dc)
    except Exception:  # a forward reference this module cannot resolve: the declared types
        hints = {}
    return {f.name: hints.get(f.name, f.type) for f in dataclasses.fields(dc)}


def _dataclass_of(default) -> typing.Optional[type]:
    """The dataclass a field's default names (the fairseq fork writes ``field(default=Cls)``)."""
    return default if isinstance(default, type) and dataclasses.is_dataclass(default) else None


def _argparse_fields(add_args) -> dict:
    """{dest: action} of the arguments ``add_args(parser)`` declares."""
    parser = argparse.ArgumentParser(add_help=False, conflict_handler="resolve")
    try:
        add_args(parser)
    except Exception:
        return {}
    return {a.dest: a for a in parser._actions if a.dest not in (None, argparse.SUPPRESS)}


def _arch_defaults(arch: str) -> dict:
    """{field: spec} of what architecture ``arch``'s function sets on an empty namespace."""
    from fairseq.models import ARCH_CONFIG_REGISTRY

    fn = ARCH_CONFIG_REGISTRY.get(arch)
    if fn is None:
        return {}
    ns = argparse.Namespace()
    try:
        fn(ns)
    except Exception:
        return {}
    return {k: ("type", ANY) for k in vars(ns)}


def _registry(kind: str):
    """(class registry, dataclass registry) fairseq keeps for named group ``kind``."""
    if kind == "task":
        from fairseq.tasks import TASK_DATACLASS_REGISTRY, TASK_REGISTRY

        return TASK_REGISTRY, TASK_DATACLASS_REGISTRY
    if kind == "model":
        from fairseq.models import MODEL_DATACLASS_REGISTRY, MODEL_REGISTRY

        return MODEL_REGISTRY, MODEL_DATACLASS_REGISTRY
    import fairseq.criterions  # noqa: F401  (each fills its registry on import)
    import fairseq.data.encoders  # noqa: F401
    import fairseq.optim  # noqa: F401
    import fairseq.optim.lr_scheduler  # noqa: F401
    import fairseq.scoring  # noqa: F401
    from fairseq.registry import REGISTRIES

    entry = REGISTRIES[kind]
    return entry["registry"], entry["dataclass_registry"]


def _merge(*schemas: dict) -> dict:
    """{field: [spec, ...]}: a field several sources declare may hold what any of them allows."""
    out: dict = {}
    for schema in schemas:
        for key, given in schema.items():
            specs = out.setdefault(key, [])
            for spec in given if isinstance(given, list) else [given]:
                if spec not in specs:
                    specs.append(spec)
    return out


@functools.lru_cache(maxsize=None)
def top_schema() -> dict:
    from fairseq.dataclass.configs import FairseqConfig

    out = {}
    for f in dataclasses.fields(FairseqConfig):
        dc = _dataclass_of(f.default) or (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None
        )
        dc = dc if isinstance(dc, type) else type(dc) if dataclasses.is_dataclass(dc) else None
        out[f.name] = (
            ("named", f.name)
            if f.name in NAMED_GROUPS
            else ("type", dc or _hints(FairseqConfig)[f.name])
        )
    return out


def _group_fields() -> dict:
    """Every field of FairseqConfig's dataclass groups (a flat namespace holds them all)."""
    out = []
    for spec in top_schema().values():
        if spec[0] == "type" and dataclasses.is_dataclass(spec[1]):
            out.append({k: ("type", t) for k, t in _hints(spec[1]).items()})
    return _merge(*out)


def component_schema(kind: str, name) -> typing.Optional[dict]:
    """{field: [spec, ...]} of the component ``name`` of named group ``kind`` (see the module
    docstring), or None when fairseq knows no such component."""
    return _component_schema(kind, str(name)) if isinstance(name, str) and name else None


@functools.lru_cache(maxsize=None)
def _component_schema(kind: str, name: str) -> typing.Optional[dict]:
    classes, dataclass_registry = _registry(kind)
    parts = []
    if kind == "model":
        from fairseq.models import ARCH_MODEL_NAME_REGISTRY

        arch = name if name in ARCH_MODEL_NAME_REGISTRY else None
        name = ARCH_MODEL_NAME_REGISTRY.get(name, name)
        if name not in classes:
            return None
        if arch:
            parts.append(_arch_defaults(arch))
    elif name not in classes and name not in dataclass_registry:
        return None
    dc = dataclass_registry.get(name)
    if dc is not None:
        parts.append({k: ("type", t) for k, t in _hints(dc).items()})
    else:
        cls = classes.get(name)
        parts.append(
            {
                k: ("arg", a)
                for k, a in _argparse_fields(
                    getattr(cls, "add_args", None) or (lambda p: None)
                ).items()
            }
        )
        if kind == "model":  # a legacy model's encoder reads TransformerConfig's fields
            from fairseq.models.transformer import TransformerConfig

            parts.append({k: ("type", t) for k, t in _hints(TransformerConfig).items()})
    parts.append({"_name": ("type", typing.Optional[str])})
    if kind == "model":
        parts.append({"arch": ("type", typing.Optional[str])})
    return _merge(*parts)


def flat_schema(values: dict) -> dict:
    """The schema of a flat argument namespace (an old-style ``args``, a legacy ``cfg.model``):
    every group's fields, the fields of each component it names, and the components' names."""
    parts = [_group_fields(), {k: ("type", typing.Optional[t]) for k, t in _FLAT_EXTRA.items()}]
    for kind in NAMED_GROUPS:
        name = values.get("arch") if kind == "model" else values.get(kind)
        if kind == "model" and not name:
            name = values.get("_name")
        schema = component_schema(kind, name)
        if schema is not None:
            parts.append(schema)
    return _merge(*parts)
