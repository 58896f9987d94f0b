"""The training steps the GPU benchmarks time: the plugin's model and criterion built from
fairseq flags as ``fairseq-train`` builds them (``plugin_setup``), and the HuggingFace
transformers step of the same network (``hf_setup``)."""

import os

from _common import hf_electra_loss
from gpu_sizes import ROBERTA_SIZES, SIZES, is_roberta, vocab_for


def _model_args(size, criterion, slots, table):
    if is_roberta(size):
        h, layers, heads, f, _, t = ROBERTA_SIZES[size]
        args = [
            "--task",
            "masked_lm",
            "--arch",
            "truneg_roberta_base",
            "--criterion",
            criterion,
            "--encoder-layers",
            str(layers),
            "--encoder-embed-dim",
            str(h),
            "--encoder-ffn-embed-dim",
            str(f),
            "--encoder-attention-heads",
            str(heads),
            "--max-positions",
            str(t),
            "--tokens-per-sample",
            str(t),
        ]
        if criterion == "masked_lm":
            return args  # fairseq's own criterion: no prediction slots, no table
    else:
        e, h, layers, heads, f, gh, gheads, gf, _, t = SIZES[size]
        args = [
            "--task",
            "electra",
            "--arch",
            "electra_small",
            "--criterion",
            criterion,
            "--electra-embed-dim",
            str(e),
            "--electra-hidden-dim",
            str(h),
            "--electra-layers",
            str(layers),
            "--electra-heads",
            str(heads),
            "--electra-ffn-dim",
            str(f),
            "--electra-gen-hidden-dim",
            str(gh),
            "--electra-gen-heads",
            str(gheads),
            "--electra-gen-ffn-dim",
            str(gf),
            "--electra-max-positions",
            str(t),
            "--tokens-per-sample",
            str(t),
        ]
    args += ["--mlm-prediction-slots", slots]
    if criterion not in ("electra", "masked_lm"):
        args += ["--synonym-table", table]
    return args


def compile_model(model, mode, backend="inductor"):
    """torch.compile the encoder stacks: ELECTRA's own ``compile_encoders``, RoBERTa's
    sentence encoder (fairseq's; its ``padding_mask.any()`` splits it into a few graphs);
    ``mode="model"``: the whole forward (with the backward derived from it)."""
    if mode == "model":
        if hasattr(model, "compile_encoders"):
            model.compile_encoders(backend=backend, scope="model")
        else:
            model.compile(dynamic=False, backend=backend)
        return
    if hasattr(model, "compile_encoders"):
        model.compile_encoders(mode=mode, backend=backend)
    else:
        model.encoder.sentence_encoder.compile(dynamic=False, mode=mode, backend=backend)


def plugin_setup(size, criterion, slots, compiled, work, table, device, backend="inductor"):
    import torch
    from fairseq import options, tasks
    from fairseq.dataclass import (
        utils as dataclass_utils,
    )  # looked up at call time: the plugin's quiet version

    import truneg_fairseq  # noqa: F401
    from truneg_fairseq.optim.fused_adamw import FusedAdamW, FusedAdamWConfig

    data = os.path.join(work, "roberta" if is_roberta(size) else "electra")
    args = [data, *_model_args(size, criterion, slots, table)]
    cfg = dataclass_utils.convert_namespace_to_omegaconf(
        options.parse_args_and_arch(options.get_training_parser(), args)
    )
    task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model).to(device).train()
    crit = task.build_criterion(cfg.criterion).to(device)
    if compiled:
        compile_model(model, compiled, backend)
    opt = FusedAdamW(
        FusedAdamWConfig(lr=[1e-4], fused_adamw_eps=1e-6, fused_adamw_weight_decay=0.01),
        list(model.parameters()),
    )

    def step(sample):
        opt.zero_grad()
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            loss, _, _ = crit(model, sample)
        loss.backward()
        opt.clip_grad_norm(1.0)
        opt.step()

    return task, step


def hf_setup(size, pad, device):
    """The HuggingFace transformers step of the same network: ELECTRA generator + discriminator
    (shared embeddings, loss of :func:`hf_electra_loss`) or RobertaForMaskedLM."""
    import torch

    if is_roberta(size):
        from transformers import RobertaConfig, RobertaForMaskedLM

        h, layers, heads, f, _, t = ROBERTA_SIZES[size]
        model = (
            RobertaForMaskedLM(
                RobertaConfig(
                    vocab_size=vocab_for(size),
                    hidden_size=h,
                    num_hidden_layers=layers,
                    num_attention_heads=heads,
                    intermediate_size=f,
                    max_position_embeddings=t + pad + 1,
                    pad_token_id=pad,
                )
            )
            .to(device)
            .train()
        )
        params = list(model.parameters())

        def loss_fn(s):
            src, tgt = s["net_input"]["src_tokens"], s["target"]
            return model(
                input_ids=src,
                attention_mask=src.ne(pad).long(),
                labels=torch.where(tgt.ne(pad), tgt, -100),
            ).loss
    else:
        from transformers import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining

        e, h, layers, heads, f, gh, gheads, gf, b, t = SIZES[size]
        common = dict(
            vocab_size=vocab_for(size),
            embedding_size=e,
            max_position_embeddings=t,
            pad_token_id=pad,
            num_hidden_layers=layers,
        )
        gen = ElectraForMaskedLM(
            ElectraConfig(
                hidden_size=gh, num_attention_heads=gheads, intermediate_size=gf, **common
            )
        )
        disc = ElectraForPreTraining(
            ElectraConfig(hidden_size=h, num_attention_heads=heads, intermediate_size=f, **common)
        )
        disc.electra.embeddings = gen.electra.embeddings
        gen.to(device).train()
        disc.to(device).train()
        params = list({id(p): p for m in (gen, disc) for p in m.parameters()}.values())

        def loss_fn(s):
            return hf_electra_loss(gen, disc, s, pad)

    opt = torch.optim.AdamW(
        params, lr=1e-4, eps=1e-6, weight_decay=0.01, fused=device.type == "cuda"
    )

    def step(s):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            loss = loss_fn(s)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
        opt.step()

    return step
