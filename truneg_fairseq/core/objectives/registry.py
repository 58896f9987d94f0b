"""The objective registry: what an objective is, and the one list of them that every front end,
flag and statistic is made from. Imports neither torch nor a framework, so a command's
``--help`` can list the objectives and their flags at once.

An objective is a subclass of :class:`Objective` decorated with :func:`register_objective`::

    @register_objective
    class HardCorrection(Objective):
        name = "hard_correction"          # truneg-hf-train --objective, TrueNegativeMLM(objective=)
        criterion = "mlm_hard_correction" # fairseq-train --criterion
        needs_table = True
        logged_terms = ("corrected_loss",)

        def loss_terms(self, step):
            return [("corrected_loss", -1.0, ...)], {}

Its parameters (:class:`Param`: one name, a type, a default, a help) become the fields of the
fairseq criterion's dataclass, prefixed by the objective's owner (``prefix``: ``synonym_`` for
this package's, as fairseq needs plugin fields prefixed), the keyword arguments of the HF
objective and the flags of ``truneg-hf-train`` (``--sr-weight``; the same name without the
prefix). The step (:func:`truneg_fairseq.core.step.masked_lm_step`) adds every objective's terms to
the masked-LM term, and the statistics (:mod:`truneg_fairseq.core.statistics`) log the terms and
values the registered objectives declare. docs/objectives.md is the guide.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Dict, List, Optional, Tuple, Type

from truneg_fairseq.errors import ObjectiveError

# what a model pass can give besides the masked-LM logits and their argmax
# (truneg_fairseq.models.objectives, truneg_fairseq.hf.objective): the input-embedding rows of the
# gold and predicted tokens; the sentence-KL encodings (with gradient through the original too)
MODEL_OUTPUTS = ("embeddings", "sentence_kl", "sentence_kl_grad")

# the term every objective's loss starts from (Eq. 1) and the discriminator's (ELECTRA)
MLM_TERM = "mlm_loss"
DISC_TERM = "disc_loss"


@dataclass(frozen=True)
class Param:
    """One parameter of an objective: ``name`` (a Python identifier; the HF keyword and, with
    dashes, the ``truneg-hf-train`` flag; the fairseq field is the objective's prefix + name),
    ``default``, ``help``, ``type`` (float, int, bool or str) and, for a str, its ``choices``."""

    name: str
    default: Any
    help: str
    type: type = float
    choices: Optional[Tuple[str, ...]] = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def value(self, given, owner: str):
        """``given`` as this parameter's type; :class:`ObjectiveError` naming ``owner`` else."""
        if self.type is bool:
            if isinstance(given, bool):
                return given
            raise ObjectiveError(f"{owner}: {self.name} takes True or False, got {given!r}")
        try:
            value = self.type(given)
        except (TypeError, ValueError):
            raise ObjectiveError(
                f"{owner}: {self.name} takes a {self.type.__name__}, got {given!r}"
            ) from None
        if self.choices is not None and value not in self.choices:
            raise ObjectiveError(
                f"{owner}: {self.name} is one of {', '.join(self.choices)}, got {given!r}"
            )
        return value


@dataclass(frozen=True)
class Statistic:
    """A value an objective logs besides its terms: the summed logging entry ``total`` over the
    summed ``per`` (``sample_size``: per masked position), shown with ``decimals``."""

    name: str
    total: str
    per: str = "sample_size"
    decimals: int = 4


class Objective:
    """One objective. Class attributes declare it; an instance holds its parameters' values
    (``Objective(sr_weight=0.5)``; unknown names, wrong types and choices are
    :class:`ObjectiveError`) and computes its terms (:meth:`loss_terms`)."""

    name: ClassVar[str] = ""
    criterion: ClassVar[str] = ""  # the fairseq criterion it gives
    prefix: ClassVar[str] = "synonym_"  # its owner's prefix of the fairseq config fields
    needs_table: ClassVar[bool] = False  # refuses to run without a synonym table
    needs_discriminator: ClassVar[bool] = False  # an ELECTRA model only
    outputs: ClassVar[Tuple[str, ...]] = ()  # what the model pass gives it (MODEL_OUTPUTS)
    params: ClassVar[Tuple[Param, ...]] = ()
    logged_terms: ClassVar[Tuple[str, ...]] = ()  # the names of the terms loss_terms returns
    statistics: ClassVar[Tuple[Statistic, ...]] = ()

    def __init__(self, **values):
        known = {p.name: p for p in self.params}
        unknown = sorted(set(values) - set(known))
        if unknown:
            has = ", ".join(known) or "no parameters"
            raise ObjectiveError(
                f"objective {self.name}: unknown parameter {', '.join(unknown)} (it has {has})"
            )
        for p in self.params:
            given = values.get(p.name, p.default)
            setattr(self, p.name, p.value(given, f"objective {self.name}"))

    def values(self) -> Dict[str, Any]:
        """The parameters' values by name."""
        return {p.name: getattr(self, p.name) for p in self.params}

    def model_outputs(self) -> Tuple[str, ...]:
        """What the model pass gives this instance (may depend on the parameters)."""
        return self.outputs

    def loss_terms(self, step) -> Tuple[List[tuple], Dict[str, Any]]:
        """The terms added to the masked-LM term, each ``(logged name, weight, summed value)``
        (the loss is the weighted sum), and the summable values logged besides (the ``total``
        entries of :attr:`statistics`). ``step``: a
        :class:`~truneg_fairseq.core.step.MaskedLMStep`. Sums over the batch, never means."""
        return [], {}

    def __repr__(self) -> str:
        values = ", ".join(f"{k}={v!r}" for k, v in self.values().items())
        return f"{type(self).__name__}({values})"


# ---- the registry ----------------------------------------------------------------------------
_ENTRIES: Dict[str, Type[Objective]] = {}
_LISTENERS: List[Callable[[Type[Objective]], None]] = []


def _check(cls: Type[Objective]) -> None:
    where = f"{cls.__module__}.{cls.__qualname__}"
    if not (isinstance(cls, type) and issubclass(cls, Objective)):
        raise ObjectiveError(
            f"{where}: an objective subclasses truneg_fairseq.core.objectives.Objective"
        )
    if not cls.name.isidentifier() or not cls.criterion:
        raise ObjectiveError(f"{where}: give it a name (an identifier) and a criterion name")
    old = _ENTRIES.get(cls.name)
    if old is not None and old is not cls:
        raise ObjectiveError(
            f"{where}: objective {cls.name!r} is registered already by "
            f"{old.__module__}.{old.__qualname__}: give it another name"
        )
    for other in _ENTRIES.values():
        if other is not cls and other.criterion == cls.criterion:
            raise ObjectiveError(f"{where}: criterion {cls.criterion!r} is {other.name}'s")
    bad = sorted(set(cls.outputs) - set(MODEL_OUTPUTS))
    if bad:
        raise ObjectiveError(f"{where}: unknown outputs {bad}; known: {', '.join(MODEL_OUTPUTS)}")
    taken = {p.name: o.name for o in _ENTRIES.values() if o is not cls for p in o.params}
    for p in cls.params:
        if not p.name.isidentifier():
            raise ObjectiveError(f"{where}: parameter {p.name!r} is not an identifier")
        if p.name in taken:
            raise ObjectiveError(
                f"{where}: parameter {p.name!r} is objective {taken[p.name]}'s already (one flag "
                "each): give it another name"
            )
        if p.type not in (float, int, bool, str) or (p.choices and p.type is not str):
            raise ObjectiveError(f"{where}: parameter {p.name} is a float, int, bool or str")
        p.value(p.default, where)  # the default itself must pass


def register_objective(cls: Type[Objective]) -> Type[Objective]:
    """Class decorator: register ``cls`` (checked: a unique name, criterion and parameter names,
    known outputs). Front ends loaded now or later are told (:func:`on_register`)."""
    _check(cls)
    if _ENTRIES.get(cls.name) is cls:
        return cls
    _ENTRIES[cls.name] = cls
    for listener in list(_LISTENERS):
        listener(cls)
    return cls


def on_register(listener: Callable[[Type[Objective]], None]) -> None:
    """Call ``listener`` with every objective registered so far and with each one registered
    later (the fairseq front end registers a criterion for each)."""
    _LISTENERS.append(listener)
    for cls in list(_ENTRIES.values()):
        listener(cls)


def names() -> Tuple[str, ...]:
    """The registered objectives' names, in the order they were registered."""
    return tuple(_ENTRIES)


def entries() -> Tuple[Type[Objective], ...]:
    return tuple(_ENTRIES.values())


def get(name: str) -> Type[Objective]:
    """The objective ``name``; :class:`ObjectiveError` naming the known ones else."""
    cls = _ENTRIES.get(name)
    if cls is None:
        raise ObjectiveError(
            f"objective {name!r} is not one of {', '.join(_ENTRIES)} (an objective of your own "
            "package is registered when its module is imported: truneg-hf-train --user-dir DIR, "
            "fairseq-train --user-dir DIR)"
        )
    return cls


def by_criterion(criterion: str) -> Optional[Type[Objective]]:
    """The objective whose fairseq criterion is ``criterion``, or None."""
    return next((c for c in _ENTRIES.values() if c.criterion == criterion), None)


def all_params() -> Tuple[Tuple[Type[Objective], Param], ...]:
    """(objective, parameter) of every registered objective, in registration order."""
    return tuple((cls, p) for cls in _ENTRIES.values() for p in cls.params)


def term_names() -> Tuple[str, ...]:
    """Every loss term a registered objective can log, in the order of fairseq's log line:
    ``mlm_loss``, the objectives' own, then the discriminator's ``disc_loss``."""
    own = [t for cls in _ENTRIES.values() for t in cls.logged_terms]
    return (MLM_TERM, *dict.fromkeys(own), DISC_TERM)


def statistics() -> Tuple[Statistic, ...]:
    """Every value a registered objective logs besides its terms (one per logged name)."""
    seen: Dict[str, Statistic] = {}
    for cls in _ENTRIES.values():
        for s in cls.statistics:
            seen.setdefault(s.name, s)
    return tuple(seen.values())
