"""ELECTRA checkpoint keys: named heads, the LayerNorm epsilon saved and checked, and
classification heads handled on load as fairseq's RoBERTa handles them."""

import logging

import torch
from fairseq_runs import TINY_ELECTRA, build_components

NEW_TO_OLD = {
    "discriminator_head.dense.": "discriminator_head.0.",
    "discriminator_head.out_proj.": "discriminator_head.2.",
    "generator_head.dense.": "generator_head.0.",
    "generator_head.layer_norm.": "generator_head.2.",
}


def electra(data_bin):
    return build_components(
        data_bin, ["--criterion", "electra"], arch_args=TINY_ELECTRA, task="electra"
    )


def test_heads_have_named_keys(data_bin):
    _, model, _ = electra(data_bin)
    keys = set(model.state_dict())
    for new in NEW_TO_OLD:
        assert any(k.startswith(new) for k in keys), new
    assert not any(k.startswith(tuple(NEW_TO_OLD.values())) for k in keys)


def test_a_state_without_the_named_heads_is_refused(data_bin):
    """Positional head keys (``.0``/``.2``) are not a format the plugin writes: strict loading
    names the tensors it misses instead of guessing."""
    import pytest

    _, model, _ = electra(data_bin)
    old = {}
    for k, v in model.state_dict().items():
        for new, legacy in NEW_TO_OLD.items():
            if k.startswith(new):
                k = legacy + k[len(new) :]
        old[k] = v
    _, fresh, _ = electra(data_bin)
    with pytest.raises(RuntimeError, match="discriminator_head.dense.weight"):
        fresh.load_state_dict(old, strict=True)


def test_classification_heads_dropped_or_added_like_roberta(data_bin, caplog):
    _, model, _ = electra(data_bin)
    model.register_classification_head("sst2", num_classes=2)
    model.register_classification_head("mnli", num_classes=3)
    state = {k: v.clone() for k, v in model.state_dict().items()}

    _, other, _ = electra(data_bin)
    other.register_classification_head("mnli", num_classes=5)  # another shape
    other.register_classification_head("rte", num_classes=2)  # not in the checkpoint
    fresh_rte = {k: v.clone() for k, v in other.classification_heads["rte"].state_dict().items()}
    with caplog.at_level(logging.WARNING):
        other.load_state_dict(state, strict=True)
    assert "dropping classification head 'sst2'" in caplog.text
    assert "dropping classification head 'mnli'" in caplog.text
    assert other.classification_heads["mnli"].out_proj.weight.shape[0] == 5
    for k, v in other.classification_heads["rte"].state_dict().items():
        assert torch.equal(v, fresh_rte[k])
    # the encoder itself came from the checkpoint
    assert torch.equal(other.embed_tokens.weight, state["embeddings.embed_tokens.weight"])


def test_layernorm_eps_reaches_every_layernorm(data_bin):
    _, model, _ = build_components(
        data_bin,
        ["--criterion", "electra", "--electra-layernorm-eps", "1e-12"],
        arch_args=TINY_ELECTRA,
        task="electra",
    )
    eps = [m.eps for m in model.modules() if "LayerNorm" in type(m).__name__]
    assert len(eps) >= 1 + 2 * 2 * 2 + 1  # embeddings, 2 x 2 layers x 2, generator head
    assert set(eps) == {1e-12}


def test_restoring_with_another_layernorm_eps_is_refused(data_bin):
    _, imported, _ = build_components(
        data_bin,
        ["--criterion", "electra", "--electra-layernorm-eps", "1e-12"],
        arch_args=TINY_ELECTRA,
        task="electra",
    )
    _, default, _ = electra(data_bin)
    import pytest

    with pytest.raises(ValueError, match="add --electra-layernorm-eps 1e-12"):
        default.load_state_dict(imported.state_dict(), strict=True)
    # the epsilon is part of every checkpoint: one without it is refused by name
    old = {k: v for k, v in default.state_dict().items() if k != "layernorm_eps"}
    with pytest.raises(RuntimeError, match="layernorm_eps"):
        default.load_state_dict(old, strict=True)


def test_layernorm_eps_survives_half_precision(data_bin):
    """fairseq's --fp16/--bf16 cast the model: the saved epsilon stays exact (1e-12 is 0 in
    fp16), so a half-precision checkpoint restores into a model built with the same flag."""
    import torch

    for eps, cast in (("1e-12", "half"), ("1e-5", "half"), ("1e-12", "bfloat16")):
        _, model, _ = build_components(
            data_bin,
            ["--criterion", "electra", "--electra-layernorm-eps", eps],
            arch_args=TINY_ELECTRA,
            task="electra",
        )
        getattr(model, cast)()
        assert next(model.parameters()).dtype != torch.float32
        saved = model.state_dict()["layernorm_eps"]
        assert saved.dtype == torch.float64 and float(saved) == float(eps)
        _, fresh, _ = build_components(
            data_bin,
            ["--criterion", "electra", "--electra-layernorm-eps", eps],
            arch_args=TINY_ELECTRA,
            task="electra",
        )
        getattr(fresh, cast)().load_state_dict(model.state_dict(), strict=True)
        assert float(fresh.layernorm_eps) == float(eps)
