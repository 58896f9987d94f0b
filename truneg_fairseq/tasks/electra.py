"""``--task electra``: fairseq's masked-LM data pipeline with ELECTRA's masking defaults.

It reads the same binarized data as ``masked_lm`` (``--tokens-per-sample``,
``--sample-break-mode``). Of the 15% of tokens selected, 85% become ``<mask>`` and 15% stay as
they are; none is replaced by a random token (google-research/electra ``pretrain_helpers.mask``).
``--mask-whole-words`` masks all pieces of a word together; the word starts come from the
tokenizer named by ``--electra-word-bpe`` and its model file.
"""

import argparse
import os
from dataclasses import dataclass, field
from typing import Optional

from fairseq.dataclass import ChoiceEnum

from fairseq.tasks import register_task
from fairseq.tasks.masked_lm import MaskedLMConfig, MaskedLMTask


@dataclass
class ElectraTaskConfig(MaskedLMConfig):
    mask_prob: float = field(default=0.15, metadata={"help": "share of tokens selected for prediction"})
    leave_unmasked_prob: float = field(
        default=0.15, metadata={"help": "share of the selected tokens left unchanged (ELECTRA: 0.15)"}
    )
    random_token_prob: float = field(
        default=0.0, metadata={"help": "share of the selected tokens replaced at random (ELECTRA: 0)"}
    )
    electra_word_bpe: ChoiceEnum(["sentencepiece", "gpt2"]) = field(
        default="sentencepiece", metadata={"help": "tokenizer of the data, for --mask-whole-words"}
    )
    electra_sentencepiece_model: Optional[str] = field(
        default=None, metadata={"help": "sentencepiece .model, for --mask-whole-words"}
    )
    electra_gpt2_encoder_json: Optional[str] = field(
        default=None, metadata={"help": "GPT-2 encoder.json, for --mask-whole-words --electra-word-bpe gpt2"}
    )
    electra_gpt2_vocab_bpe: Optional[str] = field(
        default=None, metadata={"help": "GPT-2 vocab.bpe, for --mask-whole-words --electra-word-bpe gpt2"}
    )


@register_task("electra", dataclass=ElectraTaskConfig)
class ElectraTask(MaskedLMTask):
    cfg: ElectraTaskConfig
    # models read this to decide whether to build a generator next to the discriminator
    pretrains_generator = True

    def __init__(self, cfg: ElectraTaskConfig, dictionary=None):
        super().__init__(cfg, dictionary)
        if cfg.mask_whole_words:
            self._check_word_bpe(cfg)

    @staticmethod
    def _check_word_bpe(cfg):
        files = (
            {"--electra-sentencepiece-model": cfg.electra_sentencepiece_model}
            if cfg.electra_word_bpe == "sentencepiece"
            else {"--electra-gpt2-encoder-json": cfg.electra_gpt2_encoder_json,
                  "--electra-gpt2-vocab-bpe": cfg.electra_gpt2_vocab_bpe}
        )
        for flag, path in files.items():
            if not path or not os.path.isfile(path):
                raise ValueError(
                    f"--mask-whole-words with --electra-word-bpe {cfg.electra_word_bpe} needs {flag} "
                    f"FILE (the tokenizer that produced dict.txt); got {path!r}"
                )

    @property
    def args(self):
        """The tokenizer description fairseq's masked-LM pipeline reads for whole-word masking."""
        cfg = self.cfg
        if cfg.electra_word_bpe == "sentencepiece":
            return argparse.Namespace(bpe="sentencepiece", sentencepiece_model=cfg.electra_sentencepiece_model,
                                      sentencepiece_enable_sampling=False, sentencepiece_alpha=None)
        return argparse.Namespace(bpe="gpt2", gpt2_encoder_json=cfg.electra_gpt2_encoder_json,
                                  gpt2_vocab_bpe=cfg.electra_gpt2_vocab_bpe)

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        if not getattr(model, "has_discriminator", False):
            raise ValueError(
                f"--task electra needs an ELECTRA model (--arch electra_small, electra_base, electra_large); "
                f"got {type(model).__name__}. For RoBERTa use --task masked_lm"
            )
        return model
