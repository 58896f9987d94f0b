"""Counter-false-negative pre-training on HuggingFace ``transformers``: the path for researchers
who continue a published BERT, RoBERTa or ELECTRA with ``Trainer``, ``accelerate`` or
``torchrun``, with the same numbers as the fairseq criterions (docs/hf.md).

* :class:`MaskedLMCollator`: whole-batch masking (the plugin's batch masking, 80/10/10) and
  static prediction slots for any HF tokenizer with a mask token;
* :func:`build_synonym_table` / :func:`load_synonym_table`: synonym tables for the tokenizer's
  vocabulary (WordPiece, byte-level BPE, sentencepiece);
* :class:`TrueNegativeMLM`: masked-LM with hard correction, soft regularization or sentence-level
  KL on any ``AutoModelForMaskedLM`` model, the whole step in one ``forward``;
* :class:`ElectraPretraining`: ELECTRA from a generator + discriminator pair, synonym-aware labels;
* :class:`TrueNegativeTrainer`: a ``Trainer`` that logs the fairseq statistics and evaluates them;
* :func:`tokenized_text`: text files, a saved or given ``datasets.Dataset``, tokenized once into
  memory-mapped Arrow (a cache every later run and process reads) as :class:`IndexedRows`.

``transformers`` is needed here only (the ``[hf]`` extra); ``import truneg_fairseq`` does not
import it. The trainer needs ``accelerate`` too, as ``transformers.Trainer`` does.
"""

import importlib

# each public name -> the module that defines it, imported at the first use of the name: importing
# a submodule (``truneg_fairseq.hf.model_dir``, checked before anything heavy is loaded) does not
# import torch or transformers through this package
_EXPORTS = {
    "IGNORE": "collator",
    "MaskedLMCollator": "collator",
    "TokenizerWithoutMaskError": "collator",
    "check_tokenizer": "collator",
    "tokenize_lines": "collator",
    "ElectraPretraining": "electra_pair",
    "ModelError": "heads",
    "check_masked_lm": "heads",
    "TrueNegativeMLM": "objective",
    "StatSums": "stats",
    "IndexedRows": "text_corpus",
    "tokenized_text": "text_corpus",
    "build_synonym_table": "tokenizer_tables",
    "hf_vocab_view": "tokenizer_tables",
    "load_synonym_table": "tokenizer_tables",
    "synonym_lookup": "tokenizer_tables",
    "TrueNegativeTrainer": "trainer",
}


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "IGNORE",
    "ElectraPretraining",
    "IndexedRows",
    "MaskedLMCollator",
    "ModelError",
    "StatSums",
    "TokenizerWithoutMaskError",
    "TrueNegativeMLM",
    "TrueNegativeTrainer",
    "build_synonym_table",
    "check_masked_lm",
    "check_tokenizer",
    "hf_vocab_view",
    "load_synonym_table",
    "synonym_lookup",
    "tokenize_lines",
    "tokenized_text",
]
