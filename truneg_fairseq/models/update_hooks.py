"""The walks over every module that fairseq makes at each update, made once.

At every update fairseq's task calls ``model.train()`` (``nn.Module.train`` recurses into every
module and sets ``training`` on each, about 5,000 Python calls for ELECTRA-small's ~660
modules) and ``model.set_num_updates(n)`` (``BaseFairseqModel.set_num_updates`` walks every
module asking whether it has the method). The host spends that Python while the device waits.
The plugin's models keep the list of their modules, found again only when the model's top-level
children change (a generator built later, a compiled stack put in place): ``train(mode)`` is a
no-op when every module is already in that mode (checked without a Python call per module), and
``set_num_updates`` goes to the modules that take it (not to those of fairseq's encoders that
only walk their own submodules again).
"""

from operator import attrgetter
from typing import List, Tuple

import torch.nn as nn
from fairseq.models import BaseFairseqModel, FairseqEncoder

_training = attrgetter("training")


def _walks_only(module: nn.Module) -> bool:
    """Whether ``module``'s ``set_num_updates`` only hands the number on to its own submodules
    (fairseq's encoder and model do): those are in the list already."""
    method = type(module).set_num_updates
    return method in (
        BaseFairseqModel.set_num_updates,
        FairseqEncoder.set_num_updates,
        UpdateHooks.set_num_updates,
    )


class UpdateHooks:
    """Mixin for a fairseq model (an ``nn.Module``), before the fairseq base class."""

    def _module_lists(self) -> Tuple[List[nn.Module], List[nn.Module]]:
        """(every module, self first; the modules other than self with set_num_updates)."""
        key = tuple(id(m) for m in self._modules.values())
        cached = self.__dict__.get("_walk_cache")
        if cached is None or cached[0] != key:
            every = list(self.modules())
            hooks = [m for m in every[1:] if hasattr(m, "set_num_updates") and not _walks_only(m)]
            cached = (key, every, hooks)
            self.__dict__["_walk_cache"] = cached  # a plain attribute, not submodules
        return cached[1], cached[2]

    def train(self, mode: bool = True):
        every, _ = self._module_lists()
        settled = all(map(_training, every)) if mode else not any(map(_training, every))
        if settled:
            return self
        return super().train(mode)

    def set_num_updates(self, num_updates):
        for module in self._module_lists()[1]:
            module.set_num_updates(num_updates)
