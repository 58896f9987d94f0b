"""Registered criterions: mlm_hard_correction, mlm_soft_reg, mlm_sent_kl, electra."""

from . import cline, electra, mlm_hard_correction, mlm_sent_kl, mlm_soft_reg, squad  # noqa: F401  (registration)
