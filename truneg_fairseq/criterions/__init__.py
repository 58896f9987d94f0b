"""Criterions registered by the plugin: ``mlm_plain`` (the masked-LM baseline with the
false-negative statistics), ``mlm_hard_correction``, ``mlm_soft_reg``, ``mlm_sent_kl`` (one base,
``cfn_base.py``), ``electra`` (generator MLM + replaced-token detection, ``rtd.py``),
``cline`` and ``squad``. All loss math is in ``core/losses.py``; each reads only what one call of the
model's ``forward`` returns."""

from . import (  # noqa: F401  (registration)
    cline,
    electra,
    mlm_hard_correction,
    mlm_plain,
    mlm_sent_kl,
    mlm_soft_reg,
    squad,
)
