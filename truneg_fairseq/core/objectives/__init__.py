"""The objectives: one class per file, registered in :mod:`.registry` (torch is imported only when
a step runs, so listing them and their flags is instant). Importing this package registers the
built-in ones, in this order: ``mlm``, ``hard_correction``, ``soft_reg``, ``sent_kl`` and
``electra``, then every other module of this folder in name order (a new objective is one file
here). docs/objectives.md says how to write one, here or in your own package."""

import importlib
import pkgutil

# isort: off
# registration, in this order (the order of --objective's choices and of the logged terms)
from truneg_fairseq.core.objectives import masked_lm  # noqa: F401
from truneg_fairseq.core.objectives import hard_correction  # noqa: F401
from truneg_fairseq.core.objectives import soft_reg  # noqa: F401
from truneg_fairseq.core.objectives import sentence_kl  # noqa: F401
from truneg_fairseq.core.objectives import electra_rtd  # noqa: F401

# isort: on
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

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")

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
