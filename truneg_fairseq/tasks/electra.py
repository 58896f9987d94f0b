"""``--task electra``: fairseq's masked-LM data pipeline with ELECTRA's masking defaults.

It reads the same binarized data as ``masked_lm`` (``--tokens-per-sample``,
``--sample-break-mode``, ``--mask-whole-words`` with ``--bpe`` as there). Of the 15% of tokens
selected, 85% become ``<mask>`` and 15% stay as they are; none is replaced by a random token
(google-research/electra ``pretrain_helpers.mask``).
"""

from dataclasses import dataclass, field

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


@register_task("electra", dataclass=ElectraTaskConfig)
class ElectraTask(MaskedLMTask):
    cfg: ElectraTaskConfig

    def build_model(self, cfg, from_checkpoint=False):
        from truneg_fairseq.models.electra import ElectraModel

        model = super().build_model(cfg, from_checkpoint)
        if not isinstance(model, ElectraModel):
            raise ValueError(
                f"--task electra needs an ELECTRA model (--arch electra_small, electra_base, electra_large); "
                f"got {type(model).__name__}. For RoBERTa use --task masked_lm"
            )
        return model
