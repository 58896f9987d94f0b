"""What loading a checkpoint into an ELECTRA model checks and adapts
(:meth:`~truneg_fairseq.models.electra.ElectraModel.upgrade_state_dict_named` calls
:func:`upgrade_state`): the checkpoint is ELECTRA's, its LayerNorm epsilon is the model's, the
generator is dropped (discriminator-only model) or started fresh (a discriminator published
without one), CLINE's task weights are dropped outside CLINE, and classification heads are
dropped or added as fairseq's RoBERTa does."""

import logging
import math

from truneg_fairseq.errors import FlagError

logger = logging.getLogger(__name__)

GENERATOR_PREFIXES = ("generator.", "generator_head.", "generator_bias")


def upgrade_state(model, state_dict: dict, prefix: str) -> None:
    """Check and adapt the tensors of ``state_dict`` under ``prefix`` for ``model``."""
    keys = [k for k in state_dict if k.startswith(prefix)]
    if keys and not any(k.startswith(prefix + "discriminator.") for k in keys):
        raise FlagError(
            "the checkpoint being loaded is not an ELECTRA checkpoint (no discriminator weights; "
            f"first keys: {', '.join(keys[:3])}). Restore from a checkpoint pre-trained with "
            "--task electra --arch electra_*, or import a published one with scripts/convert_hf.py"
        )
    _check_layernorm_eps(model, state_dict, prefix)
    if (
        not hasattr(model, "cline_log_vars")
        and state_dict.pop(prefix + "cline_log_vars", None) is not None
    ):
        logger.info("dropped the CLINE task weights (cline_log_vars) of the checkpoint")
    _match_generator(model, state_dict, prefix)
    _upgrade_classification_heads(model, state_dict, prefix)


def _check_layernorm_eps(model, state_dict: dict, prefix: str) -> None:
    eps_key = prefix + "layernorm_eps"
    if eps_key not in state_dict:
        return  # strict loading names the missing tensor
    saved, own = float(state_dict[eps_key]), float(model.cfg.electra_layernorm_eps)
    if not math.isclose(saved, own, rel_tol=1e-6):
        raise FlagError(
            f"the checkpoint was made with LayerNorm epsilon {saved:g}, this model is built with "
            f"{own:g}: add --electra-layernorm-eps {saved:g} (models imported from HuggingFace "
            "use 1e-12)"
        )


def _match_generator(model, state_dict: dict, prefix: str) -> None:
    keys = [k for k in state_dict if k.startswith(prefix)]
    if model.generator is None:
        dropped = [k for k in keys if k[len(prefix) :].startswith(GENERATOR_PREFIXES)]
        for k in dropped:
            del state_dict[k]
        if dropped:
            logger.info(f"loading the discriminator only: dropped {len(dropped)} generator tensors")
    elif not any(k[len(prefix) :].startswith(GENERATOR_PREFIXES) for k in keys):
        # a discriminator published (or imported) without its generator: pre-training goes on
        # with the generator this model was built with (initialised from --seed)
        fresh = {
            prefix + k: v.detach().clone()
            for k, v in model.state_dict().items()
            if k.startswith(GENERATOR_PREFIXES)
        }
        state_dict.update(fresh)
        cfg = model.cfg
        logger.warning(
            f"the checkpoint has no generator: a fresh one ({cfg.electra_gen_layers} x "
            f"{cfg.electra_gen_hidden_dim}, {len(fresh)} tensors, initialised from --seed) "
            "starts; warm it up with the discriminator frozen (--electra-freeze-discriminator; "
            "examples/electra/pretrain.sh does it) before continued pre-training"
        )


def _upgrade_classification_heads(model, state_dict: dict, prefix: str) -> None:
    """As fairseq's RoBERTa: heads in the checkpoint that this model did not register, or
    registered with another shape, are dropped with a warning; heads registered here and
    missing from the checkpoint start from their fresh weights."""
    head_prefix = prefix + "classification_heads."
    in_ckpt = {
        k[len(head_prefix) :].split(".", 1)[0] for k in state_dict if k.startswith(head_prefix)
    }
    heads = model.classification_heads
    for hname in sorted(in_ckpt):
        own = heads[hname].state_dict() if hname in heads else None
        start = f"{head_prefix}{hname}."
        keys = [k for k in state_dict if k.startswith(start)]
        mismatch = own is not None and any(
            k[len(start) :] not in own or own[k[len(start) :]].shape != state_dict[k].shape
            for k in keys
        )
        if own is None or mismatch:
            why = (
                "not registered in this model"
                if own is None
                else "registered here with another shape"
            )
            logger.warning(f"dropping classification head '{hname}' from the checkpoint: {why}")
            for k in keys:
                del state_dict[k]
    for hname, head in heads.items():
        for pname, p in head.state_dict().items():
            key = f"{head_prefix}{hname}.{pname}"
            if key not in state_dict:
                state_dict[key] = p
