"""Models registered by the plugin: ``truneg_roberta`` (fairseq's RoBERTa with the objectives'
pass; archs truneg_roberta_base/large/tiny), ``bert`` (the same with BERT's LayerNorm epsilon;
archs bert_hf_base/large/tiny), ``electra`` (archs electra_small/base/large) and the CLINE
models. What each serves is declared by its class (:mod:`.objectives`)."""

from . import bert, cline, electra, roberta  # noqa: F401  (registration)
