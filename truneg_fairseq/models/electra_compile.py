"""``--electra-compile``: ``torch.compile`` of ELECTRA's encoder stacks
(:meth:`~truneg_fairseq.models.electra.ElectraModel.compile_encoders`), and of the whole model
under ``--batch-mlm-compile``; the report in fairseq's log when dynamo gives up recompiling and
runs a stack eager from then on is :mod:`truneg_fairseq.training.dynamo_fallback`'s."""

import inspect
from typing import Iterable, Optional

import torch

from truneg_fairseq.training.dynamo_fallback import watch_dynamo_fallback

# recompiles allowed per compiled encoder stack (dynamo's default: 8); see compile_stacks
COMPILE_RECOMPILE_LIMIT = 32


def compile_stacks(
    stacks: Iterable[torch.nn.Module],
    mode: Optional[str] = None,
    backend: str = "inductor",
    recompile_limit: int = COMPILE_RECOMPILE_LIMIT,
    fullgraph: bool = False,
) -> None:
    """``torch.compile`` each module in place with fixed shapes (parameter names and checkpoints
    are unchanged); ``recompile_limit`` is raised for these modules only where torch allows it,
    else process-wide (nothing else of the plugin is compiled). ``fullgraph``: a graph break is
    an error, not a split graph (``--batch-mlm-compile``'s model)."""
    kwargs = dict(dynamic=False, mode=mode, backend=backend, fullgraph=fullgraph)
    if "recompile_limit" in inspect.signature(torch.compile).parameters:
        kwargs["recompile_limit"] = recompile_limit  # torch >= 2.13: per compiled region
    elif torch._dynamo.config.recompile_limit < recompile_limit:
        torch._dynamo.config.recompile_limit = recompile_limit
    watch_dynamo_fallback()
    for stack in stacks:
        stack.compile(**kwargs)
