"""How much a checkpoint config may hold, judged before anything reads it further
(:func:`bound_config`): a config read from a file is counted and bounded before it is resolved,
converted or copied, so that no form of it makes loading it take more than a moment.

A config is small (fairseq's whole ``FairseqConfig`` with a legacy model's namespace is a few
thousand values), but what it stands for can be far larger than the file: a pickle stores an
object once however often it is used (a list holding the same list twice, forty times over, is
2**40 values in a few hundred bytes), and a plain reference (``${common.x}``) stands for a copy
of what it names, which can itself be references (every value doubling the last). omegaconf
copies every use when it builds a ``DictConfig`` and when it resolves one, so both would run
for hours before any check could refuse a field. :func:`bound_config` walks the config once,
each shared object and each reference's target weighed once (remembered by identity and by
path), and refuses it, with the dotted path of the first part found too large, when:

* it is nested deeper than :data:`MAX_DEPTH` (fairseq's deepest is ``cfg.model.encoder.<field>``);
* it stands for more than :data:`MAX_VALUES` values, counting each use of a shared object and
  what each reference stands for;
* its strings, counted the same way, hold more than :data:`MAX_CHARS` characters, or a number
  is larger than any config value (its digits alone would take seconds to print);
* it holds more than :data:`MAX_REFERENCES` references, counted as they are resolved (each use
  of a shared part, and the references inside what a reference names), or one refers through
  more than :data:`MAX_HOPS` others, or to itself;
* an interpolation is anything but a plain reference to another field (``cfg``), or is there at
  all (an old-style ``args``, which fairseq turns into a config by resolving every value).

Every form a config takes is walked the same way: a ``DictConfig`` (read unresolved), a dict, a
list or tuple, an ``argparse.Namespace``, a dataclass instance."""

from __future__ import annotations

import argparse
import dataclasses
import re

from truneg_fairseq.errors import UnsafeCheckpointError

# fairseq's config of a RoBERTa run holds about 500 values and 8 kB of text; an old-style run
# converted keeps its arguments in up to five namespaces (about 2,500 values). omegaconf takes
# about 0.1 ms per value to build and resolve a config, so these bounds keep any file's config
# to about a second of it.
MAX_DEPTH = 16  # fairseq's deepest legitimate nesting is cfg.model.encoder.<field>
MAX_VALUES = 10_000
MAX_CHARS = 1 << 20  # data paths and logging formats: kilobytes
MAX_REFERENCES = 1_000  # fairseq's II() defaults: a few dozen; each use is resolved anew
MAX_HOPS = 16  # fairseq's references name a value, at most through one other reference
MAX_INT_BITS = 256  # seeds, sizes and counts fit in 64 bits
_REFERENCE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\}$")
_CONTAINERS = (dict, list, tuple, argparse.Namespace)


def _refuse(path: str, where: str, why: str):
    raise UnsafeCheckpointError(
        f"{path}: {where} {why}. The checkpoint was not loaded; if you made it yourself, save it "
        "again from a config fairseq wrote (fairseq-train or scripts/convert_hf.py import)"
    )


def _short(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:77] + "...")


def _children(node):
    """(key, child, separator) of container ``node``: ``.key`` of a mapping, ``[i]`` of a list."""
    if isinstance(node, argparse.Namespace):
        node = vars(node)
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        return [(f.name, getattr(node, f.name, None), ".") for f in dataclasses.fields(node)]
    if isinstance(node, dict):
        return [(k, v, ".") for k, v in node.items()]
    return [(i, v, "[") for i, v in enumerate(node)]


def _is_container(node) -> bool:
    return isinstance(node, _CONTAINERS) or (
        dataclasses.is_dataclass(node) and not isinstance(node, type)
    )


class _Weigh:
    """One walk of a config: (values, characters, references) each part stands for."""

    def __init__(self, root, path: str, where: str, references: bool):
        from omegaconf import DictConfig, ListConfig

        self.omegaconf = (DictConfig, ListConfig)
        self.root, self.path, self.where, self.references = root, path, where, references
        self.by_id = {}  # id(container) -> weight (its objects stay alive: root holds them)
        self.by_target = {}  # dotted target of a reference -> weight
        self.open = set()  # ids and targets being weighed: met again, the config contains itself
        self.kept = []  # containers copied from omegaconf nodes: alive while their ids are keys

    def check(self, weight, where: str):
        values, chars, refs = weight
        if values > MAX_VALUES:
            _refuse(
                self.path,
                where,
                f"stands for more than {MAX_VALUES} values (each use of a shared part and what "
                "each reference names counted), more than any fairseq config holds",
            )
        if chars > MAX_CHARS:
            _refuse(
                self.path,
                where,
                f"stands for more than {MAX_CHARS} characters of text, more than any fairseq "
                "config holds",
            )
        if refs > MAX_REFERENCES:
            _refuse(
                self.path,
                where,
                f"holds more than {MAX_REFERENCES} references to other fields, more than any "
                "fairseq config",
            )

    def node(self, node, where: str, depth: int, hops: int):
        if depth > MAX_DEPTH:
            _refuse(self.path, where, "is nested deeper than any fairseq config")
        if isinstance(node, str):
            return self.string(node, where, depth, hops)
        if isinstance(node, (bytes, bytearray)):
            return 1, len(node), 0
        if isinstance(node, int) and not isinstance(node, bool):
            if node.bit_length() > MAX_INT_BITS:
                _refuse(self.path, where, "is a number larger than any fairseq config value")
            return 1, 0, 0
        if isinstance(node, self.omegaconf):
            from omegaconf import OmegaConf

            node = OmegaConf.to_container(node, resolve=False)
            self.kept.append(node)
        if not _is_container(node):
            return 1, 0, 0
        key = id(node)
        if key in self.by_id:
            return self.by_id[key]
        if key in self.open:
            _refuse(self.path, where, "contains itself")
        self.open.add(key)
        values, chars, refs = 1, 0, 0
        for name, child, sep in _children(node):
            if isinstance(name, str):
                chars += len(name)
                at = f"{where}.{name}" if sep == "." else f"{where}[{name!r}]"
            else:
                at = f"{where}[{name}]" if sep == "[" else f"{where}.{name}"
            v, c, r = self.node(child, at, depth + 1, hops)
            values, chars, refs = values + v, chars + c, refs + r
            self.check((values, chars, refs), where)
        self.open.discard(key)
        self.by_id[key] = (values, chars, refs)
        return self.by_id[key]

    def string(self, text: str, where: str, depth: int, hops: int):
        if len(text) > MAX_CHARS:
            self.check((1, len(text), 0), where)
        if "${" not in text:
            return 1, len(text), 0
        if not self.references:
            _refuse(
                self.path,
                where,
                f"is {_short(text)}, an interpolation fairseq would resolve when it converts "
                "these arguments to a config",
            )
        match = _REFERENCE.match(text)
        if not match:
            _refuse(
                self.path,
                where,
                f"is {_short(text)}, an interpolation that is not a reference to another field",
            )
        target = match.group(1)
        if target in self.by_target:
            return self.by_target[target]
        if hops >= MAX_HOPS:
            _refuse(self.path, where, f"refers through more than {MAX_HOPS} references to {target}")
        if target in self.open:
            _refuse(self.path, where, f"refers to {target}, which refers back to it")
        found, node = self.find(target)
        if not found:
            return 1, len(text), 1  # omegaconf says a missing target itself when resolving
        self.open.add(target)
        weight = self.node(node, f"{self.where}.{target}", 1 + target.count("."), hops + 1)
        self.open.discard(target)
        # what the target stands for, with its own references: omegaconf resolves each again
        self.by_target[target] = (weight[0], weight[1], weight[2] + 1)
        return self.by_target[target]

    def find(self, target: str):
        """(found, node) of dotted ``target`` from the config's top, as omegaconf looks it up
        (mappings and dataclasses; a namespace's attributes are opaque to it)."""
        node = self.root
        for part in target.split("."):
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif (
                dataclasses.is_dataclass(node)
                and not isinstance(node, type)
                and part in {f.name for f in dataclasses.fields(node)}
            ):
                node = getattr(node, part)
            else:
                return False, None
        return True, node


def bound_config(cfg, path: str, where: str = "cfg", references: bool = True) -> None:
    """Refuse (:class:`UnsafeCheckpointError` naming file ``path`` and the dotted path, from
    ``where``) a config ``cfg`` that stands for more than this module's bounds, before anything
    resolves, converts or copies it (see the module docstring). ``references``: plain references
    to other fields may stand in values (a ``cfg``); False for an old-style ``args`` namespace,
    where any interpolation is refused."""
    from omegaconf import OmegaConf

    if cfg is None:
        return
    if OmegaConf.is_config(cfg):
        # a DictConfig was built already, so copying it unresolved costs what building it did
        cfg = OmegaConf.to_container(cfg, resolve=False)
    weigh = _Weigh(cfg, path, where, references)
    weigh.check(weigh.node(cfg, where, 0, 0), where)
