"""The ELECTRA encoders run attention without a padding mask on a batch without padding (so SDPA
may pick FlashAttention), with the same outputs, and keep the mask where a batch is padded."""

import pytest
import torch
from fairseq_runs import TINY_ELECTRA, build_components


@pytest.fixture(scope="module")
def electra(data_bin):
    task, model, criterion = build_components(
        data_bin, ["--criterion", "electra"], arch_args=TINY_ELECTRA, task="electra"
    )
    task.load_dataset("train")
    model.eval()
    return task, model, criterion


def samples(task, n=6):
    """A batch of full-length blocks (no padding) and one with a short block in it (padded)."""
    ds = task.dataset("train")
    sizes = ds.dataset.sizes
    full = [int(i) for i in (sizes == sizes.max()).nonzero()[0][:n]]
    short = int(sizes.argmin())
    assert sizes[short] < sizes.max()
    return ds.collater(full), ds.collater(full[:-1] + [short])


def record_masks(model):
    """(padding mask, the model's no-padding flag) of every call of the first encoder layer."""
    seen = []

    def hook(module, args):
        seen.append((args[1], model._batch_unpadded))  # (x, padding_mask, sdpa_mask)

    handle = model.discriminator.layers[0].register_forward_pre_hook(hook)
    return seen, handle


def test_same_outputs_with_and_without_the_mask(electra):
    _, model, _ = electra
    unpadded, _ = samples(electra[0])
    tokens = unpadded["net_input"]["src_tokens"]
    pad = tokens.eq(model.padding_idx)
    assert not bool(pad.any())
    with torch.no_grad():
        for stack in (model.discriminator, model.generator):
            x = model.embeddings(tokens)
            assert torch.allclose(stack(x, pad), stack(x, None), atol=1e-6)
        with model.without_padding():
            free = model.discriminator_logits(tokens)
    assert torch.allclose(
        free,
        model.discriminator_head(model.discriminator(model.embeddings(tokens), pad)),
        atol=1e-6,
    )


def test_the_task_drops_the_mask_only_without_padding(electra):
    """--task electra decides from the sample on the host (ntokens against the shape): no mask
    for the full batch; the padded batch's mask reaches attention, and its real tokens get the
    outputs they get without the padded rows' company."""
    task, model, criterion = electra
    unpadded, padded = samples(task)
    seen, handle = record_masks(model)
    try:
        task.valid_step(unpadded, model, criterion)
        assert seen and all(mask is None and flag for mask, flag in seen)
        seen.clear()
        task.valid_step(padded, model, criterion)
        tokens = padded["net_input"]["src_tokens"]
        pad = tokens.eq(model.padding_idx)
        # every padded position is masked (the discriminator's input may hold more: a sampled <pad>)
        assert seen and all(
            not flag and mask is not None and bool(mask[pad].all()) for mask, flag in seen
        )
    finally:
        handle.remove()
    assert not model._batch_unpadded  # the flag lasts one step
    tokens = padded["net_input"]["src_tokens"]
    n = int(padded["net_input"]["src_lengths"][-1])
    with torch.no_grad():
        together = model.discriminator_features(tokens)[-1, :n]
        alone = model.discriminator_features(tokens[-1:, :n])[0]
    assert torch.allclose(together, alone, atol=1e-5)
