"""``--task electra``: fairseq's masked-LM data pipeline with ELECTRA's masking defaults.

It reads the same binarized data as ``masked_lm`` (``--tokens-per-sample``,
``--sample-break-mode``), and makes its batches as ``batch_masked_lm`` does: read, padded and
masked a whole batch at a time in the collater (:mod:`truneg_fairseq.data.batch_masking`). Of the 15% of tokens selected, 85% become ``<mask>`` and 15% stay as
they are; none is replaced by a random token (google-research/electra ``pretrain_helpers.mask``).
``--mask-whole-words`` masks all pieces of a word together; the word starts come from the
tokenizer named by ``--electra-tokenizer`` and its file (``--electra-spm-model``,
``--electra-gpt2-encoder-json``/``--electra-gpt2-vocab-bpe``, ``--electra-vocab``), or, without
``--electra-tokenizer``, from the ``tokenizer_fingerprint.json`` that ``prepare_corpus.py`` writes
next to DATA/dict.txt (:mod:`truneg_fairseq.text`).
"""

import logging
from dataclasses import dataclass, field
from typing import Optional

from fairseq.dataclass import ChoiceEnum
from fairseq.tasks import register_task
from fairseq.tasks.masked_lm import MaskedLMConfig
from omegaconf import II

from truneg_fairseq.errors import FlagError
from truneg_fairseq.models.electra import padding_known
from truneg_fairseq.precision import AUTOCAST_ATTR
from truneg_fairseq.tasks.batch_masked_lm import BatchMaskedLMTask
from truneg_fairseq.text import TokenizerSpec, tokenizer_fields, whole_word_args

logger = logging.getLogger(__name__)


@dataclass
class ElectraTaskConfig(
    MaskedLMConfig,
    tokenizer_fields(
        "electra",
        ", for --mask-whole-words (default: the tokenizer recorded in DATA/tokenizer_fingerprint.json)",
    ),
):
    mask_prob: float = field(
        default=0.15, metadata={"help": "share of tokens selected for prediction"}
    )
    leave_unmasked_prob: float = field(
        default=0.15,
        metadata={"help": "share of the selected tokens left unchanged (ELECTRA: 0.15)"},
    )
    random_token_prob: float = field(
        default=0.0,
        metadata={"help": "share of the selected tokens replaced at random (ELECTRA: 0)"},
    )
    electra_bf16_autocast: bool = field(
        default=False,
        metadata={
            "help": "run each forward pass under torch.autocast(bfloat16) with fp32 weights and no "
            "loss scaler (bf16 mixed precision on CUDA GPUs from Ampere on); the same as --bf16 "
            "with the plugin. Follows the device: a CPU run (--cpu, or no CUDA device) runs in "
            "fp32 and says so in its log. Do not combine with --fp16/--amp"
        },
    )
    electra_compile: bool = field(
        default=False,
        metadata={
            "help": "torch.compile the generator and discriminator encoder stacks (fixed shapes: "
            "use with --mlm-prediction-slots static and a fixed --tokens-per-sample)"
        },
    )
    electra_compile_scope: ChoiceEnum(["stacks", "model", "update"]) = field(
        default="stacks",
        metadata={
            "help": "what --electra-compile compiles: the two encoder stacks; the whole model's "
            "forward (embeddings, generator, sampling, discriminator, heads), whose backward is "
            "then compiled with it; or the whole update (forward, backward, clipping, AdamW) as "
            "one graph, CUDA graphs on a GPU (--optimizer fused_adamw, no --fp16/--amp; "
            "otherwise the model's scope; with --update-freq above 1 two graphs: a batch's "
            "forward and backward, then the optimizer). Wider scopes: fewer kernels, a longer "
            "first update"
        },
    )
    # mixed-precision choices of the run (the same flags), checked against --electra-bf16-autocast
    fp16: bool = II("common.fp16")
    amp: bool = II("common.amp")
    # the device of the run: --electra-bf16-autocast follows it (on for a GPU, off on the CPU)
    cpu: bool = II("common.cpu")
    # the split trained on: with --electra-compile its batches all get one shape
    train_subset: str = II("dataset.train_subset")


def _on_cpu(cfg) -> bool:
    """Whether the run's steps run on the CPU: ``--cpu``, or no CUDA device to run on."""
    import torch

    return _flag(cfg, "cpu") or not torch.cuda.is_available()


@register_task("electra", dataclass=ElectraTaskConfig)
class ElectraTask(BatchMaskedLMTask):
    cfg: ElectraTaskConfig

    def __init__(self, cfg: ElectraTaskConfig, dictionary=None):
        super().__init__(cfg, dictionary)
        if cfg.electra_bf16_autocast and (_flag(cfg, "fp16") or _flag(cfg, "amp")):
            raise FlagError(
                "--electra-bf16-autocast is a mixed-precision mode of its own: drop --fp16/--amp "
                "(or drop --electra-bf16-autocast to use fairseq's fp16 loss scaling)"
            )
        if cfg.electra_bf16_autocast and _on_cpu(cfg):
            logger.info(
                "--electra-bf16-autocast (task.electra_bf16_autocast): this run is on the CPU "
                "(--cpu, or no CUDA device), so its steps run in fp32 without autocast; on a GPU "
                "the same flag turns bf16 autocast on"
            )
        elif cfg.electra_bf16_autocast:  # fairseq's train_step/valid_step autocast (precision.py)
            setattr(self, AUTOCAST_ATTR, True)
        if cfg.mask_whole_words:
            self.args  # the tokenizer is checked here, not at the first load_dataset

    @property
    def args(self):
        """The tokenizer description fairseq's masked-LM pipeline reads for whole-word masking."""
        spec = TokenizerSpec.from_config(self.cfg, "electra")
        return whole_word_args(self.cfg.data, spec, "--electra-tokenizer with its file")

    # bf16 autocast (--electra-bf16-autocast or --bf16) is fairseq's base train_step/valid_step's
    # (truneg_fairseq.precision); here the encoders learn whether the batch has padding; the
    # first update's time under --electra-compile is logged by BatchMaskedLMTask.train_step
    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        with padding_known(model, sample):
            return super().train_step(sample, model, criterion, optimizer, update_num, ignore_grad)

    def step_context(self, model, sample):
        """What a training or validation step of ``sample`` runs in (the model told whether the
        batch has padding)."""
        return padding_known(model, sample)

    def valid_step(self, sample, model, criterion):
        with padding_known(model, sample):
            return super().valid_step(sample, model, criterion)

    # --electra-compile: the methods BatchMaskedLMTask's steps and training/fast_update.py call
    compile_flag = "--electra-compile"
    compile_scope_flag = "--electra-compile-scope"

    def compile_scope(self) -> Optional[str]:
        """What the training step compiles: "stacks", "model", "update" or None (eager)."""
        return str(self.cfg.electra_compile_scope) if self.cfg.electra_compile else None

    def compile_model(self, model, scope: str = "model", backend: Optional[str] = None) -> None:
        """``torch.compile`` of the encoder stacks or (``scope="model"``) of the whole forward,
        in place."""
        while not hasattr(model, "compile_encoders") and hasattr(model, "module"):
            model = model.module  # DDP and fairseq's wrappers
        model.compile_encoders(scope=scope, backend=backend or self.compile_backend)

    def build_model(self, cfg, from_checkpoint=False):
        from truneg_fairseq.models.objectives import ReplacedTokenDetection

        model = super().build_model(cfg, from_checkpoint)
        if callable(getattr(model, "add_generator", None)):
            model.add_generator()  # ELECTRA is built as a discriminator; pre-training adds the generator
        if (
            not isinstance(model, ReplacedTokenDetection)
            or getattr(model, "generator", None) is None
        ):
            raise FlagError(
                f"--task electra needs an ELECTRA model (--arch electra_small, electra_base, electra_large); "
                f"got {type(model).__name__}. For RoBERTa use --task masked_lm"
            )
        if self.cfg.electra_compile and self.cfg.electra_compile_scope != "update":
            self.compile_model(model, scope=self.cfg.electra_compile_scope)
        # scope "update": the trainer's update compiles it all (training/compiled_update.py), or,
        # where that update does not apply, compiles the model at its first update
        return model


def _flag(cfg, name) -> bool:
    value = getattr(cfg, name, False)
    return bool(value) and not (isinstance(value, str) and value.startswith("${"))
