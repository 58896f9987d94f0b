"""The registered objectives as test cases (truneg_fairseq.core.objectives): every test that runs
"each criterion" or "each objective" takes its list from here, so a newly registered objective is
covered by them without an edit."""

import sys
from contextlib import contextmanager
from typing import List, Tuple

from truneg_fairseq.core import objectives
from truneg_fairseq.core.objectives import registry


def _distinct(entries):
    """One entry per distinct step: entries sharing their terms and model outputs (``electra``
    is ``mlm_plain``'s step on an ELECTRA model) count once, the first with a discriminator
    preferred."""
    seen, out = {}, []
    for e in sorted(entries, key=lambda e: not e.needs_discriminator):
        key = (e.loss_terms, e.outputs)
        if key not in seen:
            seen[key] = e
            out.append(e)
    return [e for e in entries if e in out]


def roberta_criteria() -> List[str]:
    """The criteria a model without a discriminator trains (fairseq's or the plugin's RoBERTa)."""
    return [e.criterion for e in objectives.entries() if not e.needs_discriminator]


def criteria_with_terms() -> List[str]:
    """The criteria of the objectives that add a term to the masked-LM loss (those that add none
    train as fairseq's ``masked_lm``), on a model without a discriminator."""
    base = objectives.Objective.loss_terms
    return [
        e.criterion
        for e in objectives.entries()
        if not e.needs_discriminator and (e.loss_terms is not base or e.outputs)
    ]


def electra_criteria() -> List[str]:
    """The criteria an ELECTRA model trains, one per distinct step."""
    return [e.criterion for e in _distinct(objectives.entries())]


def hf_objectives() -> List[str]:
    """The objectives ``TrueNegativeMLM`` takes on a masked-LM model alone."""
    return [e.name for e in objectives.entries() if not e.needs_discriminator]


def objective_cases(
    discriminator: bool = False, moved: bool = False
) -> List[Tuple[str, str, dict]]:
    """(id, objective, parameters): each objective with its defaults (``moved``: its float
    parameters at 0.7 x their default, so that a weight not passed on shows) and once more with
    each bool parameter flipped (``sent_kl`` with ``kl_grad_original``). Without
    ``discriminator``, those a model alone trains; with it, one per distinct step."""
    entries = objectives.entries()
    chosen = (
        _distinct(entries) if discriminator else [e for e in entries if not e.needs_discriminator]
    )
    out = []
    for e in chosen:
        floats = {p.name: 0.7 * p.default or 0.7 for p in e.params if p.type is float}
        out.append((e.name, e.name, floats if moved else {}))
        for p in e.params:
            if p.type is bool:
                out.append((f"{e.name}-{p.name}", e.name, {p.name: not p.default}))
    return out


def fairseq_fields(name: str, params: dict) -> dict:
    """The fairseq config fields of an objective's parameters (owner's prefix added)."""
    entry = objectives.get(name)
    return {entry.prefix + k: v for k, v in params.items()}


@contextmanager
def registry_kept():
    """What is registered inside (a user dir's objectives, their fairseq criteria and modules)
    is taken out again on leaving: a test that imports a package of objectives leaves the
    registry of its worker as it found it."""
    before, modules = set(objectives.names()), set(sys.modules)
    try:
        yield
    finally:
        for name in set(objectives.names()) - before:
            criterion = registry._ENTRIES.pop(name).criterion
            if "fairseq.criterions" in sys.modules:
                from fairseq.criterions import CRITERION_DATACLASS_REGISTRY, CRITERION_REGISTRY

                CRITERION_REGISTRY.pop(criterion, None)
                CRITERION_DATACLASS_REGISTRY.pop(criterion, None)
        for module in set(sys.modules) - modules:
            if not module.startswith(("truneg_fairseq", "fairseq", "torch", "transformers")):
                if "objectives" in str(getattr(sys.modules[module], "__file__", "")):
                    sys.modules.pop(module)
