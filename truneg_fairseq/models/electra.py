"""ELECTRA (Clark et al., 2020) for fairseq: a small masked-LM generator and a replaced-token
discriminator, built from fairseq's own transformer encoder layers.

* Token and position embeddings (and their LayerNorm) are shared by generator and
  discriminator; each projects them to its own hidden size when the sizes differ.
* The generator's output projection is the token embedding matrix (tied, the same tensor).
* Generator logits are computed only at the masked positions.
* Replacements are sampled from the generator softmax (Gumbel-max, temperature configurable)
  under ``no_grad``: no gradient reaches the generator through the sample.
* ``register_classification_head`` works as in RoBERTa, so fairseq's ``sentence_prediction``
  fine-tunes the discriminator. The model is built as a discriminator; a pre-training task
  (``--task electra``, ``--task cline``) adds the generator with :meth:`ElectraModel.add_generator`.
  Loading a pre-training checkpoint into a discriminator-only model drops the generator's weights.
* Heads are named modules (``discriminator_head.{dense,out_proj}``,
  ``generator_head.{dense,layer_norm}``).

Building blocks: :mod:`.electra_parts`; fields: :mod:`.electra_config`; sizes: :mod:`.sizes`;
checkpoint loading: :mod:`.electra_checkpoint`; ``--electra-compile``: :mod:`.electra_compile`.
"""

import contextlib
import dataclasses
import logging
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from fairseq.models import BaseFairseqModel, register_model, register_model_architecture
from fairseq.models.roberta.model import RobertaClassificationHead
from fairseq.modules.transformer_sentence_encoder import init_bert_params

from truneg_fairseq.core.replaced_tokens import sample_replacements
from truneg_fairseq.errors import FlagError
from truneg_fairseq.models import electra_checkpoint, embed_init
from truneg_fairseq.models.electra_compile import COMPILE_RECOMPILE_LIMIT, compile_stacks
from truneg_fairseq.models.electra_config import ElectraConfig, electra_sizes
from truneg_fairseq.models.electra_parts import (
    ElectraDiscriminatorHead,
    ElectraEmbeddings,
    ElectraGeneratorHead,
    ElectraStack,
)
from truneg_fairseq.models.layernorm import set_layernorm_eps
from truneg_fairseq.models.objectives import ReplacedTokenDetection
from truneg_fairseq.models.sizes import ELECTRA_SIZES
from truneg_fairseq.models.step_config import plain_config
from truneg_fairseq.models.update_hooks import UpdateHooks

logger = logging.getLogger(__name__)


@register_model("electra", dataclass=ElectraConfig)
class ElectraModel(UpdateHooks, ReplacedTokenDetection, BaseFairseqModel):
    def __init__(self, cfg: ElectraConfig, dictionary):
        super().__init__()
        self.cfg = plain_config(cfg)  # read inside every step: plain values
        self.padding_idx = dictionary.pad()
        vocab = len(dictionary)
        self.embeddings = ElectraEmbeddings(
            vocab,
            cfg.electra_embed_dim,
            self.padding_idx,
            cfg.electra_max_positions,
            cfg.electra_dropout,
        )
        act = cfg.electra_activation_fn
        self.discriminator = ElectraStack(
            cfg.electra_embed_dim,
            cfg.electra_hidden_dim,
            cfg.electra_layers,
            cfg.electra_heads,
            cfg.electra_ffn_dim,
            cfg,
        )
        self.discriminator_head = ElectraDiscriminatorHead(cfg.electra_hidden_dim, act)
        self.generator = None
        self.classification_heads = nn.ModuleDict()
        self.apply(init_bert_params)
        set_layernorm_eps(self, cfg.electra_layernorm_eps)
        # saved with the weights: fairseq builds the model from the command line, so a checkpoint
        # restored with another epsilon (1e-12 for imported published models) is caught on load
        self.register_buffer(
            "layernorm_eps", torch.tensor(float(cfg.electra_layernorm_eps), dtype=torch.float64)
        )
        self._batch_unpadded = False  # set for one step by without_padding()

    @contextlib.contextmanager
    def without_padding(self, unpadded: bool = True):
        """Within this block the caller vouches that the batch has no padding, so the encoders
        pass attention no mask. The caller decides on the host (``--task electra``: the sample's
        ``ntokens`` against its shape); the model cannot ask a device tensor without a sync."""
        saved, self._batch_unpadded = self._batch_unpadded, bool(unpadded)
        try:
            yield self
        finally:
            self._batch_unpadded = saved

    def padding_mask(self, tokens):
        """B x T bool mask of the padding of ``tokens``, or None when the caller has said there
        is none (:meth:`without_padding`). A mask, even all False, rules out SDPA's
        FlashAttention kernel; but asking the tokens whether they hold padding (``.any()``) would
        make the host wait for the device every step. So without the caller's word the mask is
        kept: right in every case, only not the fastest kernel."""
        if self._batch_unpadded:
            return None
        return tokens.eq(self.padding_idx)

    def add_generator(self) -> None:
        """Build the generator (stack, head, output bias) for pre-training; the pre-training tasks
        call this (unless ``--electra-discriminator-only``). A model already holding one is left
        as it is."""
        cfg = self.cfg
        if self.generator is not None or cfg.electra_discriminator_only:
            return
        ref = self.embed_tokens.weight
        self.generator = ElectraStack(
            cfg.electra_embed_dim,
            cfg.electra_gen_hidden_dim,
            cfg.electra_gen_layers,
            cfg.electra_gen_heads,
            cfg.electra_gen_ffn_dim,
            cfg,
        )
        self.generator_head = ElectraGeneratorHead(
            cfg.electra_gen_hidden_dim, cfg.electra_embed_dim, cfg.electra_activation_fn
        )
        self.generator_bias = nn.Parameter(torch.zeros(ref.size(0)))
        for module in (self.generator, self.generator_head):
            module.apply(init_bert_params)
            set_layernorm_eps(module, cfg.electra_layernorm_eps)
            module.to(device=ref.device, dtype=ref.dtype)
        self.generator_bias.data = self.generator_bias.data.to(device=ref.device, dtype=ref.dtype)
        if getattr(cfg, "electra_freeze_discriminator", False):
            self._freeze_discriminator()

    def _freeze_discriminator(self) -> None:
        """Only the generator (stack, head, output bias) trains; the embeddings it shares with
        the discriminator stay as they are."""
        frozen = 0
        for module in (self.embeddings, self.discriminator, self.discriminator_head):
            for p in module.parameters():
                p.requires_grad_(False)
                frozen += p.numel()
        trained = sum(p.numel() for p in self.parameters() if p.requires_grad)
        logger.info(
            f"--electra-freeze-discriminator: {frozen} discriminator and embedding parameters fixed, "
            f"{trained} of the generator trained"
        )

    def _apply(self, fn, *args, **kwargs):
        # .half()/.bfloat16() (fairseq's --fp16/--bf16) would cast the epsilon buffer too, and
        # 1e-12 is 0 in fp16: keep it float64 with its exact value, on the model's device
        super()._apply(fn, *args, **kwargs)
        eps = self._buffers.get("layernorm_eps")
        if eps is not None and eps.dtype != torch.float64:
            self._buffers["layernorm_eps"] = torch.tensor(
                float(self.cfg.electra_layernorm_eps), dtype=torch.float64, device=eps.device
            )
        return self

    # ---- construction ------------------------------------------------------------------
    @classmethod
    def build_model(cls, cfg: ElectraConfig, task):
        from omegaconf import DictConfig, OmegaConf

        given_cfg, init_path = cfg, getattr(cfg, "electra_embed_init", None)
        if isinstance(cfg, DictConfig):
            # fairseq-hydra-train with an arch name (model._name: electra_small) fills only the
            # sizes set by the arch function, and tasks such as sentence_prediction add keys of
            # their own (max_positions): keep the model's fields, defaults for the rest
            names = {f.name for f in dataclasses.fields(ElectraConfig)}
            given = {k: cfg[k] for k in cfg if k in names}
            cfg = OmegaConf.merge(OmegaConf.structured(ElectraConfig()), given)
        # sizes no arch function set (--arch electra, or a config naming the model): ELECTRA-base's
        electra_base_architecture(cfg)

        if (
            cfg.electra_gen_hidden_dim > cfg.electra_hidden_dim
            or cfg.electra_gen_layers > cfg.electra_layers
        ):
            raise FlagError(
                f"the ELECTRA generator ({cfg.electra_gen_layers} layers x {cfg.electra_gen_hidden_dim}) must not be "
                f"larger than the discriminator ({cfg.electra_layers} x {cfg.electra_hidden_dim}); "
                "lower --electra-gen-hidden-dim / --electra-gen-layers (the paper uses 1/4 to 1/3 of the width)"
            )
        for hidden, heads, flag in (
            (cfg.electra_hidden_dim, cfg.electra_heads, "--electra-heads"),
            (cfg.electra_gen_hidden_dim, cfg.electra_gen_heads, "--electra-gen-heads"),
        ):
            if hidden % heads:
                raise FlagError(f"{flag} {heads} does not divide the hidden size {hidden}")
        model = cls(cfg, task.source_dictionary)
        if init_path:  # the shared token embeddings of generator and discriminator
            embed_init.load_rows(model.embed_tokens.weight, init_path, "--electra-embed-init")
            embed_init.forget(given_cfg, "electra_embed_init")
            embed_init.forget(model.cfg, "electra_embed_init")
        return model

    def max_positions(self):
        return self.cfg.electra_max_positions

    def compile_encoders(
        self,
        mode: Optional[str] = None,
        backend: str = "inductor",
        recompile_limit: int = COMPILE_RECOMPILE_LIMIT,
        scope: str = "stacks",
    ) -> None:
        """``torch.compile`` the encoder stacks in place (parameter names and checkpoints are
        unchanged); with ``scope="model"`` the whole forward instead (embeddings, generator, its
        sampling, discriminator and heads: one graph, and with the backward AOTAutograd derives
        from it, a step's forward and backward compiled together). Shapes should stay fixed
        from step to step, or each new one recompiles.
        ``mode="reduce-overhead"`` also replays each stack as a CUDA graph on a GPU; ``backend``
        other than inductor (e.g. ``aot_eager``) traces the same graphs without generating code,
        for checks on machines where code generation would take minutes.

        Each stack is compiled in a few legitimate variants (training and evaluation, with or
        without every layer's states for sentence-level KL, the validation batch's shape), more
        than dynamo's default of 8 recompiles for one function may allow once several criteria's
        passes share it; ``recompile_limit`` raises the limit for these two stacks only. Past
        it, dynamo runs the stack eager for the rest of the process without failing: that is
        reported in fairseq's log (:mod:`.electra_compile`)."""
        if scope == "model":
            compile_stacks([self], mode, backend, recompile_limit)
            return
        if scope != "stacks":
            raise ValueError(f"compile scope {scope!r}: choose stacks or model")
        stacks = [self.discriminator] + ([self.generator] if self.generator is not None else [])
        compile_stacks(stacks, mode, backend, recompile_limit)

    @property
    def embed_tokens(self) -> nn.Embedding:
        return self.embeddings.embed_tokens

    # ---- the objectives' pass (models/objectives.py): only called from forward -------------
    def mlm_encode(self, tokens):
        """The masked-LM network is the generator: B x T -> B x T x H_gen."""
        return self.generator_features(tokens)

    def mlm_project(self, features):
        """... x H_gen -> ... x V (output projection tied to the token embedding)."""
        return F.linear(
            self.generator_head(features), self.embed_tokens.weight, self.generator_bias
        )

    def mlm_embedding_matrix(self):
        """V x E token embedding matrix, shared by generator and discriminator."""
        return self.embed_tokens.weight

    def mlm_padding_idx(self):
        return self.padding_idx

    # ---- generator ------------------------------------------------------------------------
    def generator_features(self, tokens):
        """B x T tokens -> B x T x H_gen."""
        self._need_generator()
        return self.generator(self.embeddings(tokens), self.padding_mask(tokens))

    def generator_logits(self, tokens, masked_tokens=None):
        """Logits over the vocabulary at the masked positions: M x V (B x T x V without a mask)."""
        x = self.generator_features(tokens)  # B x T x H_gen
        if masked_tokens is not None:
            x = x[masked_tokens]  # M x H_gen
        return self.mlm_project(x)  # M x V (tied)

    def sample_replacements(self, gen_logits):
        """Sample one token per row of M x V logits (Gumbel-max; no gradient; never <pad>): M ids."""
        return sample_replacements(
            gen_logits, self.cfg.electra_sample_temperature, self.padding_idx
        )

    # ---- discriminator ----------------------------------------------------------------------
    def discriminator_features(self, tokens):
        """B x T tokens -> B x T x H."""
        return self.discriminator(self.embeddings(tokens), self.padding_mask(tokens))

    def discriminator_hidden_states(self, tokens):
        """Every discriminator layer's output: a list of L + 1 tensors B x T x H, the (projected)
        embeddings first (the layers Hits compares)."""
        return self.discriminator(
            self.embeddings(tokens), self.padding_mask(tokens), return_all_hiddens=True
        )

    def discriminator_logits(self, tokens):
        """Replaced-token-detection logits, B x T (> 0: replaced)."""
        return self.discriminator_head(self.discriminator_features(tokens))  # B x T

    # ---- fairseq interface ----------------------------------------------------------------------
    def forward(
        self,
        src_tokens,
        masked_tokens=None,
        features_only=False,
        classification_head_name=None,
        mlm_targets=None,
        mlm_positions=None,
        mlm_outputs=(),
        **kwargs,
    ):
        """With ``mlm_targets``: the objectives' pass of the plugin's pre-training criterions, a
        dict (:mod:`truneg_fairseq.models.objectives`): generator logits and argmax at the
        selected positions, replacements sampled from it, the corrupted input and the
        discriminator's logits, all in this one call. Otherwise, pre-training (a generator, no
        head asked for): (generator logits M x V, {}), the interface of fairseq's masked-LM
        criterions; and else discriminator features B x T x H, or classification-head logits, as
        RoBERTa returns them."""
        if mlm_targets is not None:
            self._need_generator()
            return self.objectives_forward(
                src_tokens, mlm_targets, masked_tokens, mlm_positions, mlm_outputs
            )
        if masked_tokens is not None and classification_head_name is None and not features_only:
            self._need_generator()
        if classification_head_name is not None or features_only or self.generator is None:
            x = self.discriminator_features(src_tokens)
            if classification_head_name is not None:
                x = self.classification_heads[classification_head_name](x)
            return x, {}
        return self.generator_logits(src_tokens, masked_tokens), {}

    def get_normalized_probs(self, net_output, log_probs, sample=None):
        logits = net_output[0].float()
        return F.log_softmax(logits, dim=-1) if log_probs else F.softmax(logits, dim=-1)

    def get_targets(self, sample, net_output):
        return sample["target"]

    def register_classification_head(self, name, num_classes=None, inner_dim=None, **kwargs):
        hidden = self.cfg.electra_hidden_dim
        self.classification_heads[name] = RobertaClassificationHead(
            input_dim=hidden,
            inner_dim=inner_dim or hidden,
            num_classes=num_classes,
            activation_fn=self.cfg.electra_pooler_activation_fn,
            pooler_dropout=self.cfg.electra_pooler_dropout,
        )

    def _need_generator(self):
        if self.generator is None:
            raise FlagError(
                "this ELECTRA model has no generator: --arch electra_* pre-trains with --task electra (generator + "
                "discriminator), not --task masked_lm (use --arch roberta_* there); a discriminator-only model "
                "(--electra-discriminator-only, or built for fine-tuning) does not predict masked tokens"
            )

    def upgrade_state_dict_named(self, state_dict, name):
        electra_checkpoint.upgrade_state(self, state_dict, name + "." if name else "")
        super().upgrade_state_dict_named(state_dict, name)


def _arch(args, name: str) -> None:
    """Size ``args`` from the one table (:data:`~truneg_fairseq.models.sizes.ELECTRA_SIZES`)."""
    electra_sizes(args, ELECTRA_SIZES[name])


@register_model_architecture("electra", "electra_tiny")
def electra_tiny_architecture(args):
    """2 layers of 32 (generator 2 x 16): for tests and smoke runs."""
    _arch(args, "electra_tiny")


@register_model_architecture("electra", "electra_small")
def electra_small_architecture(args):
    _arch(args, "electra_small")


@register_model_architecture("electra", "electra_base")
def electra_base_architecture(args):
    _arch(args, "electra_base")


@register_model_architecture("electra", "electra_large")
def electra_large_architecture(args):
    _arch(args, "electra_large")


def padding_known(model, sample):
    """Tell the model when the batch has no padding, decided on the host: ``ntokens`` (a Python
    int, the batch's non-padding tokens) equals the size of ``src_tokens`` (its shape is host
    data) only then. The model can then run attention without a mask (FlashAttention) with no
    device sync to find out."""
    while not hasattr(model, "without_padding") and hasattr(model, "module"):
        model = model.module  # DDP and fairseq's wrappers
    tokens = (
        (sample or {}).get("net_input", {}).get("src_tokens") if isinstance(sample, dict) else None
    )
    if (
        not hasattr(model, "without_padding")
        or tokens is None
        or not isinstance(sample.get("ntokens"), int)
    ):
        return contextlib.nullcontext()
    return model.without_padding(sample["ntokens"] == tokens.numel())
