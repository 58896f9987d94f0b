"""HuggingFace checkpoints in and out: published BERT and ELECTRA weights as fairseq checkpoints of
the plugin, and plugin checkpoints back as ``transformers`` directories.

The work is split by job across ``convert/``; this module gathers the names scripts, pipelines
and tests use, so that they import one place and the split stays free to change:

* ``hf_dir``: reading and checking a HuggingFace directory (config, weights, vocabulary);
* ``keys``: the HuggingFace <-> fairseq tensor names, one table per part for both directions;
* ``vocab``: WordPiece and GPT-2 vocabularies between HuggingFace ids and fairseq rows;
* ``build``: fairseq models built, filled and saved from converted tensors;
* ``import_bert``, ``import_electra``: the two importers; ``import_dir``: :func:`import_hf`;
* ``export``: :func:`export_hf` (ELECTRA, BERT and RoBERTa checkpoints out);
* ``errors``: :class:`ConversionError`.
"""

from truneg_fairseq.convert.export import export_hf
from truneg_fairseq.convert.hf_dir import (
    BERT_ARCHS,
    CONFIG_FLOATS,
    CONFIG_INTS,
    CONFIG_REQUIRED,
    ELECTRA_ARCHS,
    GENERATOR_ARCHS,
    SUPPORTED_ARCHS,
    WEIGHT_FILES,
    HFCheckpoint,
    check_config_types,
    load_weights,
    read_hf_dir,
    read_hf_vocab,
)
from truneg_fairseq.convert.import_bert import fresh_mlm_head
from truneg_fairseq.convert.import_dir import TOKENIZER_FILES, import_hf
from truneg_fairseq.convert.import_electra import generator_sizes
from truneg_fairseq.convert.keys import (
    BERT_MLM_HEAD,
    BERT_POOLER,
    DISCRIMINATOR_HEAD,
    ELECTRA_PROJECTION,
    FAIRSEQ_TO_HF_ACT,
    GENERATOR_HEAD,
    HF_TO_FAIRSEQ_ACT,
    LAYER_MAP,
    ROBERTA_MLM_HEAD,
    KeyTable,
)
from truneg_fairseq.convert.vocab import MASK, SPECIALS, hf_vocab_from_dictionary
from truneg_fairseq.errors import ConversionError

__all__ = [
    "BERT_ARCHS",
    "BERT_MLM_HEAD",
    "BERT_POOLER",
    "CONFIG_FLOATS",
    "CONFIG_INTS",
    "CONFIG_REQUIRED",
    "ConversionError",
    "DISCRIMINATOR_HEAD",
    "ELECTRA_ARCHS",
    "ELECTRA_PROJECTION",
    "FAIRSEQ_TO_HF_ACT",
    "GENERATOR_ARCHS",
    "GENERATOR_HEAD",
    "HFCheckpoint",
    "HF_TO_FAIRSEQ_ACT",
    "KeyTable",
    "LAYER_MAP",
    "MASK",
    "ROBERTA_MLM_HEAD",
    "SPECIALS",
    "SUPPORTED_ARCHS",
    "TOKENIZER_FILES",
    "WEIGHT_FILES",
    "check_config_types",
    "export_hf",
    "fresh_mlm_head",
    "generator_sizes",
    "hf_vocab_from_dictionary",
    "import_hf",
    "load_weights",
    "read_hf_dir",
    "read_hf_vocab",
]
