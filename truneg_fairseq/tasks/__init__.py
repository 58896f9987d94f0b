"""Tasks registered by the plugin: ``electra``. (Masked-LM pre-training of RoBERTa uses
fairseq's own ``masked_lm``; fine-tuning uses fairseq's ``sentence_prediction``.)"""

from . import cline, electra, squad  # noqa: F401  (registration)
