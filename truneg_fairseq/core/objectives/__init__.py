"""The objectives: one class per file, registered in :mod:`.registry` (torch is imported only when
a step runs, so listing them and their flags is instant). Importing this package registers the
built-in ones, in this order: ``mlm``, ``hard_correction``, ``soft_reg``, ``sent_kl`` and
``electra``. docs/objectives.md says how to write one, here or in your own package."""

from truneg_fairseq.core.objectives import (  # noqa: F401  (registration, in this order)
    electra,
    hard_correction,
    masked_lm,
    sentence_kl,
    soft_reg,
)
from truneg_fairseq.core.objectives.registry import (
    MODEL_OUTPUTS,
    Objective,
    ObjectiveError,
    Param,
    Statistic,
    all_params,
    by_criterion,
    entries,
    get,
    names,
    on_register,
    register_objective,
    statistics,
    term_names,
)
from truneg_fairseq.core.objectives.user_dir import import_user_dir

__all__ = [
    "MODEL_OUTPUTS",
    "Objective",
    "ObjectiveError",
    "Param",
    "Statistic",
    "all_params",
    "by_criterion",
    "entries",
    "get",
    "import_user_dir",
    "names",
    "on_register",
    "register_objective",
    "statistics",
    "term_names",
]
