"""One fairseq criterion per registered objective (:mod:`truneg_fairseq.core.objectives`), made
here rather than written: ``mlm_plain``, ``mlm_hard_correction``, ``mlm_soft_reg``,
``mlm_sent_kl``, ``electra`` and any objective registered later (a researcher's own package,
imported by ``--user-dir``, registers its objective and gets its criterion at once).

Each criterion is a subclass of :class:`~truneg_fairseq.criterions.cfn_base.CounterFalseNegativeLoss`
named after the objective's class (``HardCorrection`` -> ``HardCorrectionLoss``: fairseq records
the criterion's class name in a checkpoint and refuses a resume under another), with a config
dataclass of :class:`~truneg_fairseq.criterions.cfn_base.SynonymCriterionConfig`'s fields plus the
objective's parameters, each under its owner's prefix (``sr_weight`` -> ``--synonym-sr-weight``)."""

from dataclasses import make_dataclass
from typing import Optional, Type

from fairseq.criterions import CRITERION_REGISTRY, register_criterion

from truneg_fairseq.core.objectives import Objective, on_register
from truneg_fairseq.criterions.cfn_base import CounterFalseNegativeLoss, SynonymCriterionConfig
from truneg_fairseq.criterions.rtd import dataclass_field


def criterion_class(entry: Type[Objective]) -> Optional[type]:
    """The criterion registered for ``entry`` (None before :func:`register`)."""
    cls = CRITERION_REGISTRY.get(entry.criterion)
    return cls if getattr(cls, "entry", None) is entry else None


def register(entry: Type[Objective]) -> type:
    """Register ``entry``'s criterion with fairseq (once) and return its class."""
    made = criterion_class(entry)
    if made is not None:
        return made
    config = make_dataclass(
        f"{entry.__name__}Config",
        [dataclass_field(p, entry.prefix) for p in entry.params],
        bases=(SynonymCriterionConfig,),
        namespace={"__module__": __name__},
    )
    doc = f"``--criterion {entry.criterion}`` (objective ``{entry.name}``). {entry.__doc__ or ''}"
    crit = type(
        f"{entry.__name__}Loss",
        (CounterFalseNegativeLoss,),
        {
            "entry": entry,
            "_registered_name": entry.criterion,
            "__doc__": doc,
            "__module__": __name__,
        },
    )
    globals()[crit.__name__], globals()[config.__name__] = crit, config
    return register_criterion(entry.criterion, dataclass=config)(crit)


on_register(register)
