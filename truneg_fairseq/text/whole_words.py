"""Whole-word masking on fairseq's ``masked_lm``: the data directory's recorded tokenizer as the
BPE description fairseq builds its word-start test from."""

import argparse
from typing import Optional

from truneg_fairseq.text.record import RECORD_NAME, spec_from_record
from truneg_fairseq.text.spec import TokenizerError, TokenizerSpec
from truneg_fairseq.text.tokenizers import build_tokenizer


def whole_word_args(data: str, spec: Optional[TokenizerSpec], what: str) -> argparse.Namespace:
    """The ``build_bpe`` description for ``--mask-whole-words`` on ``data``: ``spec`` when given,
    else the tokenizer recorded in ``DATA/tokenizer_fingerprint.json``."""
    if spec is None:
        from fairseq import utils

        first = utils.split_paths(data)[0] if data else ""
        spec = spec_from_record(first) if first else None
        if spec is None:
            raise TokenizerError(
                f"--mask-whole-words needs the tokenizer of the data: {what}, or a {RECORD_NAME} in the data "
                "directory (prepare_corpus.py writes one)"
            )
    return build_tokenizer(spec).bpe_args()


def give_masked_lm_whole_words() -> None:
    """fairseq 0.12's ``masked_lm`` reads ``self.args`` for ``--mask-whole-words`` but no longer
    has it (AttributeError, fairseq issue #3924): give it the data directory's recorded
    tokenizer. A fairseq that has ``args`` again is left alone."""
    from fairseq.tasks.masked_lm import MaskedLMTask

    if hasattr(MaskedLMTask, "args"):
        return

    def args(self):
        return whole_word_args(self.cfg.data, None, "the masked_lm task has no tokenizer flags")

    MaskedLMTask.args = property(args)
