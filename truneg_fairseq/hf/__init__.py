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

from truneg_fairseq.hf.collator import (
    IGNORE,
    MaskedLMCollator,
    TokenizerWithoutMaskError,
    check_tokenizer,
    tokenize_lines,
)
from truneg_fairseq.hf.electra_pair import ElectraPretraining
from truneg_fairseq.hf.heads import ModelError, check_masked_lm
from truneg_fairseq.hf.objective import OBJECTIVES, TrueNegativeMLM
from truneg_fairseq.hf.stats import StatSums
from truneg_fairseq.hf.text_corpus import IndexedRows, tokenized_text
from truneg_fairseq.hf.tokenizer_tables import (
    build_synonym_table,
    hf_vocab_view,
    load_synonym_table,
    synonym_lookup,
)


def __getattr__(name):
    # the trainer imports transformers.Trainer (and accelerate): only when asked for
    if name == "TrueNegativeTrainer":
        from truneg_fairseq.hf.trainer import TrueNegativeTrainer

        return TrueNegativeTrainer
    raise AttributeError(name)


__all__ = [
    "IGNORE",
    "OBJECTIVES",
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
