"""Counter-false-negative masked-LM objectives for any HuggingFace masked-LM model.

:class:`TrueNegativeMLM` wraps an ``AutoModelForMaskedLM`` model; one call of its ``forward``
does the whole step, the loss included, so that torch's DistributedDataParallel (``Trainer``,
``accelerate``, ``torchrun``) or FSDP synchronises everything the objective touches::

    out = objective(**batch)        # the batch of truneg_fairseq.hf.MaskedLMCollator
    (out["loss"] / out["sample_size"]).backward()

It is the HF front end of the step the fairseq criterions run: the model pass on HF parts, then
the one step of :func:`truneg_fairseq.core.step.masked_lm_step` (the objectives' terms, the synonym
lookup, the logged sums), so a model moved between the two worlds with ``truneg-convert-hf`` gets
the same loss, gradients and statistics on the same batch.

``objective``: the name of any registered objective (:mod:`truneg_fairseq.core.objectives`):
``mlm``, ``hard_correction``, ``soft_reg`` (parameter ``sr_weight``), ``sent_kl`` (``kl_weight``;
H_s a fixed target unless ``kl_grad_original``), ``electra`` (with a discriminator:
:class:`~truneg_fairseq.hf.electra_pair.ElectraPretraining`) or one of your own package's; its
parameters are keyword arguments (``TrueNegativeMLM(model, tok, "soft_reg", sr_weight=0.5)``).

``forward`` returns a dict: ``loss`` (nats; the sum over the batch, fairseq's
``reduction="sum"``, to be divided by the masked tokens of the whole update; given
``num_items_in_batch``, as transformers' ``Trainer`` passes it, already divided by it: the mean over
the update's masked tokens that ``Trainer`` expects of a model), ``sample_size`` (masked positions
in the loss) and ``logging`` (summable device tensors under the fairseq criterion's logging-output
names; :mod:`truneg_fairseq.hf.stats` reduces them).

For ``Trainer`` the wrapper stands for the model it wraps: ``config`` (ELECTRA: the
discriminator's), ``state_dict``/``load_state_dict`` keys as the model's own ``save_pretrained``
writes them (ELECTRA: under ``discriminator.`` and ``generator.``, its two directories; tied
copies left out, listed in ``_keys_to_ignore_on_save``), activation (gradient) checkpointing,
``num_parameters`` and ``floating_point_ops``.
"""

from __future__ import annotations

import logging
import os
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn as nn

from truneg_fairseq.core import objectives
from truneg_fairseq.core.model_outputs import MaskedLMOutputs
from truneg_fairseq.core.selection import SlotSelection
from truneg_fairseq.core.step import masked_lm_step, sentence_kl_pass
from truneg_fairseq.hf.collator import IGNORE, check_tokenizer
from truneg_fairseq.hf.heads import MaskedLMParts, ModelError, describe
from truneg_fairseq.hf.tokenizer_tables import synonym_lookup

logger = logging.getLogger(__name__)

# said once by a wrapper that a Trainer other than TrueNegativeTrainer drives (it passes
# num_items_in_batch): what that Trainer's logs hold and what they do not
PLAIN_TRAINER = (
    "{name} under transformers' Trainer: loss and eval_loss are its objective in nats per masked "
    "token; the fairseq statistics (loss_bits, mlm_loss_bits, mlm_acc, syn_acc, pred_corr_ratio, "
    "iter_corr_ratio, ...), new masks every epoch and the order shared by processes are "
    "truneg_fairseq.hf.TrueNegativeTrainer's, and its outputs hold no logits for compute_metrics"
)


class TrueNegativeMLM(nn.Module):
    """``TrueNegativeMLM(model, tokenizer, objective, synonym_table=...)``; see the module
    docstring. ``model``: a HF masked-LM model (kept as ``self.mlm``); ``tokenizer``: its
    tokenizer (mask and padding tokens, special tokens, the vocabulary the table is checked
    against); ``synonym_table``: a :class:`~truneg_fairseq.lexicon.SynonymTable` built for the
    tokenizer (:func:`truneg_fairseq.hf.build_synonym_table`), needed by ``hard_correction``;
    ``**params``: the objective's parameters (:mod:`truneg_fairseq.core.objectives`)."""

    # Trainer: count the batch's items (labels != -100) over the accumulated micro-batches and
    # the processes, and pass that count to compute_loss
    accepts_loss_kwargs = True
    # a discriminator in the step (ElectraPretraining): what an objective such as ``electra`` needs
    has_discriminator = False

    def __init__(
        self,
        model: nn.Module,
        tokenizer,
        objective: str = "hard_correction",
        synonym_table=None,
        **params,
    ):
        super().__init__()
        entry = objectives.get(objective)  # ObjectiveError (a ValueError) for an unknown name
        self.objective_entry = entry(**params)  # the objective with its parameters' values
        check_tokenizer(tokenizer)
        self.mlm = model
        self.parts = MaskedLMParts(model)
        self.objective = objective
        if entry.needs_discriminator and not self.has_discriminator:
            raise ModelError(
                f"objective {objective} needs a discriminator: "
                "truneg_fairseq.hf.ElectraPretraining(generator, discriminator, tokenizer, "
                f"{objective!r}) (truneg-hf-train: --generator GEN_DIR)"
            )
        rows = model.get_input_embeddings().num_embeddings
        if rows < len(tokenizer):
            raise ModelError(
                f"the model ({describe(model)}) has {rows} token embeddings, fewer than the "
                f"tokenizer's {len(tokenizer)} entries: give the model's own tokenizer, or "
                "model.resize_token_embeddings(len(tokenizer))"
            )
        if entry.needs_table and synonym_table is None:
            raise ValueError(
                f"objective {objective} needs a synonym table built for the tokenizer: "
                "truneg_fairseq.hf.build_synonym_table(tokenizer) (or truneg-hf-train "
                "MODEL_DIR --build-synonyms FILE)"
            )
        if "sentence_kl" in entry.outputs and not self.parts.gives_encodings():
            others = [e.name for e in objectives.entries() if "sentence_kl" not in e.outputs]
            raise ModelError(
                f"objective {objective} needs sentence encodings (B x T x C hidden states) from "
                f"the model; {describe(model)} gives none (its forward returns no hidden_states "
                f"and it has no base model and masked-LM head apart). Use {', '.join(others)}, "
                "or a BERT, RoBERTa, ELECTRA, DistilBERT or ALBERT masked-LM model"
            )
        self.lookup = synonym_lookup(synonym_table, tokenizer) if synonym_table else None
        self.pad = int(tokenizer.pad_token_id)
        ordinary = torch.ones(max(rows, len(tokenizer)), dtype=torch.bool)  # V: not a special
        ordinary[[i for i in tokenizer.all_special_ids if i is not None]] = False
        self.register_buffer("ordinary", ordinary, persistent=False)
        # constant lookup tables: DDP need not broadcast them every step
        self._ddp_params_and_buffers_to_ignore = ["ordinary"] + [
            f"lookup.{name}" for name, _ in (self.lookup.named_buffers() if self.lookup else ())
        ]
        self._told_plain_trainer = False
        self._loading_prefix = ""
        self.register_state_dict_post_hook(_external_keys)
        self.register_load_state_dict_pre_hook(_internal_keys)
        self.register_load_state_dict_post_hook(_tied_not_missing)

    # ---- the pass ----------------------------------------------------------------------------
    def encode(self, input_ids, attention_mask, token_type_ids=None) -> torch.Tensor:
        """B x T -> B x T x C final hidden states of the masked-LM network."""
        if self.parts.split:
            return self.parts.encode(input_ids, attention_mask, token_type_ids)
        return self.parts.whole(input_ids, attention_mask, True, token_type_ids)[1]

    def mlm_pass(
        self, input_ids, attention_mask, target, sel, token_type_ids=None
    ) -> MaskedLMOutputs:
        """What the fairseq models' ``objectives_forward`` returns (models/objectives.py), from
        the HF parts: ``mlm_logits`` S x V, ``mlm_pred`` S, and the objective's extras."""
        if self.parts.split:
            features = self.parts.encode(input_ids, attention_mask, token_type_ids)  # B x T x C
            logits = self.parts.project(sel.gather(features))  # S x V
        else:
            full, _ = self.parts.whole(input_ids, attention_mask, False, token_type_ids)
            logits = sel.gather(full)  # S x V
        pred = logits.detach().argmax(dim=-1)  # S
        gold = sel.take(target)  # S
        valid = gold.ne(self.pad)  # S
        net = MaskedLMOutputs(logits, pred)
        outputs = self.objective_entry.model_outputs()
        if "embeddings" in outputs:
            weight = self.mlm.get_input_embeddings().weight  # V x E
            net.gold_embed, net.pred_embed = weight[gold], weight[pred]  # S x E each
        if "sentence_kl" in outputs:
            b = input_ids.size(0)

            def encode(tokens):  # B or 2B rows (s_p and s batched)
                if tokens.size(0) == b:
                    return self.encode(tokens, attention_mask, token_type_ids)
                tt = None if token_type_ids is None else token_type_ids.repeat(2, 1)
                return self.encode(tokens, torch.cat([attention_mask, attention_mask], dim=0), tt)

            net.kl_h_p, net.kl_h_s = sentence_kl_pass(
                encode, sel, input_ids, target, pred, valid, self.pad,
                "sentence_kl_grad" in outputs,
            )  # B x T x C each  # fmt: skip
        return net

    # ---- the step ----------------------------------------------------------------------------
    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        labels: torch.Tensor,
        mlm_positions: Optional[torch.Tensor] = None,
        token_type_ids: Optional[torch.Tensor] = None,
        num_items_in_batch=None,
        **unused,
    ) -> Dict:
        """input_ids, attention_mask, labels (-100 where nothing is predicted): B x T;
        mlm_positions: B x N prediction slots (:class:`~truneg_fairseq.hf.MaskedLMCollator`);
        without them (another collator, e.g. transformers' ``DataCollatorForLanguageModeling``)
        every position is a slot: the same loss, with the head run at every position.
        num_items_in_batch: the masked tokens of the whole update (``Trainer``'s count of
        ``labels != -100`` over its micro-batches and processes); given, ``loss`` is divided by
        it (nats per masked token), else it is the batch's sum."""
        pad = self.pad
        if mlm_positions is None:
            b, t = input_ids.shape
            mlm_positions = torch.arange(t, device=input_ids.device).expand(b, t)  # B x T
        target = labels.masked_fill(labels.eq(IGNORE), pad)  # B x T: fairseq's target
        sel = SlotSelection(None, mlm_positions.size(1), positions=mlm_positions)
        net = self.mlm_pass(input_ids, attention_mask, target, sel, token_type_ids)
        loss, sample_size, logging, _ = masked_lm_step(
            net,
            sel,
            input_ids,
            target,
            pad,
            self.objective_entry,
            lookup=self.lookup,
            words=self.ordinary.__getitem__,
            nonpad=attention_mask,
            ntokens=attention_mask.sum(),
            nsentences=input_ids.size(0),
            # masked positions beyond the slots: not in the loss (fairseq's slots_dropped)
            dropped=(target.ne(pad).sum(dim=1) - sel.shape[1]).clamp(min=0).sum(),
            rtd=self.rtd_settings(),
        )
        if num_items_in_batch is not None:
            if not self._told_plain_trainer:
                self._told_plain_trainer = True
                logger.warning(PLAIN_TRAINER.format(name=type(self).__name__))
            # an update with nothing masked: a zero loss, not 0 / 0
            n = (
                num_items_in_batch.clamp(min=1)
                if torch.is_tensor(num_items_in_batch)
                else max(num_items_in_batch, 1)
            )
            loss = loss / n
        return {"loss": loss, "sample_size": sample_size, "logging": logging}

    def rtd_settings(self):
        """The discriminator term's settings (:class:`truneg_fairseq.core.replaced_tokens.RTDSettings`);
        None without a discriminator."""
        return None

    # ---- weights ---------------------------------------------------------------------------
    def models(self) -> Dict[str, nn.Module]:
        """{sub-directory: HF model} of what :meth:`save_pretrained` writes ("": the directory
        itself); the first is the model the wrapper stands for (its ``config``)."""
        return {"": self.mlm}

    # ---- what transformers' Trainer asks of a model -------------------------------------------
    main_input_name = "input_ids"

    @property
    def config(self):
        """The configuration of the model the wrapper stands for (the first of :meth:`models`)."""
        return next(iter(self.models().values())).config

    def _layout(self) -> List[Tuple[str, str]]:
        """(attribute of this module, key prefix of its state dict: its sub-directory) of each
        HF model, in :meth:`models` order."""
        children = {id(m): name for name, m in self.named_children()}
        return [(children[id(m)], f"{sub}." if sub else "") for sub, m in self.models().items()]

    def _tied(self) -> List[str]:
        """Internal names of the tensors that repeat an earlier one (tied or shared weights),
        the models taken in :meth:`models` order: left out of the state dict."""
        seen, tied = set(), []
        for attr, _ in self._layout():
            model = getattr(self, attr)
            named = [*model.named_parameters(remove_duplicate=False)]
            named += [*model.named_buffers(remove_duplicate=False)]
            for name, tensor in named:
                if id(tensor) in seen:
                    tied.append(f"{attr}.{name}")
                seen.add(id(tensor))
        return tied

    def _external(self, name: str) -> str:
        for attr, prefix in self._layout():
            if name.startswith(attr + "."):
                return prefix + name[len(attr) + 1 :]
        return name

    def _internal(self, key: str) -> str:
        layout = sorted(self._layout(), key=lambda ap: -len(ap[1]))  # "generator." before ""
        if any(key.startswith(attr + ".") for attr, _ in layout):
            return key  # already this module's own name
        for attr, prefix in layout:
            if key.startswith(prefix):
                return f"{attr}.{key[len(prefix) :]}"
        return key

    @property
    def _keys_to_ignore_on_save(self) -> List[str]:
        """The state-dict keys left out as copies of others (tied weights); loading restores
        them from the key they repeat."""
        return [self._external(name) for name in self._tied()]

    def tie_weights(self, *args, **kwargs) -> None:
        for model in self.models().values():
            if hasattr(model, "tie_weights"):
                model.tie_weights()

    @property
    def supports_gradient_checkpointing(self) -> bool:
        models = self.models().values()
        return all(getattr(m, "supports_gradient_checkpointing", False) for m in models)

    def activation_checkpointing_enable(
        self, activation_checkpointing_kwargs=None, every_n_layers: int = 1, offload: bool = False
    ) -> None:
        """Activation checkpointing in every HF model of the step (``Trainer``'s
        ``gradient_checkpointing=True``)."""
        for model in self.models().values():
            if hasattr(model, "activation_checkpointing_enable"):
                model.activation_checkpointing_enable(
                    activation_checkpointing_kwargs, every_n_layers=every_n_layers, offload=offload
                )
            else:  # transformers before the activation_* names
                model.gradient_checkpointing_enable(activation_checkpointing_kwargs)

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None, **kwargs) -> None:
        self.activation_checkpointing_enable(gradient_checkpointing_kwargs, **kwargs)

    def activation_checkpointing_disable(self) -> None:
        for model in self.models().values():
            if hasattr(model, "activation_checkpointing_disable"):
                model.activation_checkpointing_disable()
            else:
                model.gradient_checkpointing_disable()

    def gradient_checkpointing_disable(self) -> None:
        self.activation_checkpointing_disable()

    @property
    def is_activation_checkpointing(self) -> bool:
        return any(getattr(m, "gradient_checkpointing", False) for m in self.modules())

    is_gradient_checkpointing = is_activation_checkpointing

    def num_parameters(self, only_trainable: bool = False, exclude_embeddings: bool = False) -> int:
        """The parameters of the models of the step, each shared one once (``exclude_embeddings``:
        without the embedding tables, as transformers counts for its FLOP estimate)."""
        embeddings = set()
        if exclude_embeddings:
            for model in self.models().values():
                for m in model.modules():
                    if isinstance(m, nn.Embedding):
                        embeddings.add(id(m.weight))
        unique = {id(p): p for m in self.models().values() for p in m.parameters()}
        return sum(
            p.numel()
            for i, p in unique.items()
            if i not in embeddings and (p.requires_grad or not only_trainable)
        )

    def floating_point_ops(self, inputs: Dict, exclude_embeddings: bool = True) -> int:
        """transformers' estimate of a forward and backward pass: 6 x tokens x parameters."""
        tokens = inputs[self.main_input_name].numel() if self.main_input_name in inputs else 0
        return 6 * tokens * self.num_parameters(exclude_embeddings=exclude_embeddings)

    def save_pretrained(self, out_dir, tokenizer=None) -> None:
        """Each HF model with ``save_pretrained`` (``from_pretrained`` reads them back)."""
        for sub, model in self.models().items():
            path = os.path.join(str(out_dir), sub) if sub else str(out_dir)
            model.save_pretrained(path)
            if tokenizer is not None:
                tokenizer.save_pretrained(path)

    def load_pretrained_weights(self, in_dir) -> None:
        """Load the weights :meth:`save_pretrained` wrote into the models in place."""
        for sub, model in self.models().items():
            path = os.path.join(str(in_dir), sub) if sub else str(in_dir)
            if sub == "discriminator" and not os.path.isdir(path):
                path = str(in_dir)  # a checkpoint of the layout with the discriminator on top
            loaded = type(model).from_pretrained(path)
            model.load_state_dict(loaded.state_dict())


# ---- the state dict under the models' own keys (module-level: torch's hooks take the module) ---
def _external_keys(module: TrueNegativeMLM, state_dict, prefix: str, local_metadata) -> None:
    """After ``state_dict``: this module's keys renamed to the models' own, copies dropped."""
    tied = set(module._tied())
    for key in [k for k in state_dict if k.startswith(prefix)]:
        value = state_dict.pop(key)
        name = key[len(prefix) :]
        if name not in tied:
            state_dict[prefix + module._external(name)] = value


def _internal_keys(module: TrueNegativeMLM, state_dict, prefix: str, *args) -> None:
    """Before ``load_state_dict``: the models' own keys renamed to this module's."""
    module._loading_prefix = prefix
    for key in [k for k in state_dict if k.startswith(prefix)]:
        state_dict[prefix + module._internal(key[len(prefix) :])] = state_dict.pop(key)


def _tied_not_missing(module: TrueNegativeMLM, incompatible) -> None:
    """After ``load_state_dict``: the copies are loaded through the key they repeat, not missing;
    what is missing or unexpected is named with the models' own keys."""
    prefix = module._loading_prefix
    tied = {prefix + name for name in module._tied()}
    missing = [k for k in incompatible.missing_keys if k not in tied]
    for keys, now in ((incompatible.missing_keys, missing), (incompatible.unexpected_keys, None)):
        now = list(keys) if now is None else now
        keys[:] = [
            prefix + module._external(k[len(prefix) :]) if k.startswith(prefix) else k for k in now
        ]
