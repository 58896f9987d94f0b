"""Models registered by the plugin: ``electra`` with archs electra_small/base/large, and ``bert``
(fairseq's RoBERTa with BERT's LayerNorm epsilon) with archs bert_hf_base/large/tiny."""

from . import bert, cline, electra  # noqa: F401  (registration)
