"""A component's config as plain Python values, read at build time.

fairseq hands models and criterions omegaconf ``DictConfig`` nodes. Every attribute read of
such a node runs omegaconf's Python machinery (interpolation, validation, node wrappers); inside
a training step that costs host time on every update, and torch.compile cannot trace it (each
read breaks the graph). Components keep :func:`plain_config` of their config instead: the same
field names, plain ``int``/``float``/``str``/``bool`` values, attributes that can still be set
(tests and tools adjust a temperature or a weight after building), and nothing left for dynamo
to break on. A choice field (fairseq's ``ChoiceEnum``, an ``Enum`` whose members equal their
strings) becomes its string: torch.compile in some PyTorch releases (2.11) compares such a member
with a string as unequal while Python says equal, so a traced step would take the other branch.
"""

from enum import Enum
from types import SimpleNamespace
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError, MissingMandatoryValue


class PlainConfig(SimpleNamespace):
    """Field values of a config node, resolved once; ``cfg.get(name, default)`` as on a DictConfig."""

    def get(self, name: str, default: Any = None) -> Any:
        return getattr(self, name, default)

    def __contains__(self, name: str) -> bool:
        return name in self.__dict__

    def __getitem__(self, name: str) -> Any:
        return getattr(self, name)

    def __iter__(self):
        return iter(self.__dict__)


_UNSET = object()


def _value(node: DictConfig, key: str) -> Any:
    try:
        value = node[key]
    except MissingMandatoryValue:  # a mandatory value nobody set: absent
        return _UNSET
    except InterpolationResolutionError:
        # an interpolation into a group this node was built without (a config made in code):
        # kept as written ("${task.mask_prob}"), as the components test for
        return OmegaConf.to_container(node, resolve=False)[key]
    if isinstance(value, DictConfig):
        return plain_config(value)
    if OmegaConf.is_config(value):  # a ListConfig
        return OmegaConf.to_container(value, resolve=True)
    if isinstance(value, Enum):  # a choice: its string (module docstring)
        return value.value
    return value


def plain_config(cfg: Any) -> Any:
    """``cfg`` with every field resolved to a plain value; anything not a DictConfig unchanged."""
    if not isinstance(cfg, DictConfig):
        return cfg
    values = {}
    for key in cfg.keys():
        value = _value(cfg, key)
        if value is not _UNSET:
            values[str(key)] = value
    return PlainConfig(**values)
