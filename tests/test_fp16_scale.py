"""fp16 with ELECTRA's replaced-token-detection term: summed over every token of a large batch
and weighted by 50, its gradient overflows fp16 even at loss scale 1, so fairseq's dynamic loss
scaler keeps halving the scale. ``--mlm-loss-divisor`` divides the loss and the sample size by
one constant: the update is the same, the fp16 gradient sums stay in range."""

import pytest
import torch
from fairseq.optim.dynamic_loss_scaler import DynamicLossScaler
from fairseq_runs import TINY_ELECTRA, TINY_TN_ROBERTA, build_components

PAD = 1


def big_batch(task, bsz=512, seq=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    tok = torch.randint(
        task.source_dictionary.nspecial, len(task.source_dictionary) - 1, (bsz, seq), generator=g
    )
    sel = torch.rand(bsz, seq, generator=g) < 0.15
    src = torch.where(sel, torch.full_like(tok, task.mask_idx), tok)
    tgt = torch.where(sel, tok, torch.full_like(tok, PAD))
    return {
        "net_input": {"src_tokens": src, "src_lengths": torch.full((bsz,), seq)},
        "target": tgt,
        "ntokens": bsz * seq,
        "nsentences": bsz,
    }


def lowest_scale_reached(data_bin, divisor):
    """Run fairseq's dynamic loss scaler (from scale 4; fairseq-train starts at 128) on one
    fixed batch in fp16 until a backward pass has finite gradients; returns that scale."""
    task, model, crit = build_components(
        data_bin,
        ["--criterion", "electra", "--mlm-loss-divisor", str(divisor)],
        arch_args=TINY_ELECTRA,
        task="electra",
    )
    model.half().train()
    sample = big_batch(task)
    scaler = DynamicLossScaler(init_scale=4.0, scale_window=1000, min_loss_scale=2.0**-8)
    for _ in range(6):
        torch.manual_seed(0)
        model.zero_grad()
        loss, sample_size, _ = crit(model, sample)
        scaler.scale(loss).backward()
        norm = torch.norm(
            torch.stack([p.grad.float().norm() for p in model.parameters() if p.grad is not None])
        )
        try:
            scaler.check_overflow(norm)
            return scaler.loss_scale
        except OverflowError:
            if scaler.loss_scale < 1.0:
                return scaler.loss_scale
        except FloatingPointError:
            return 0.0
    return scaler.loss_scale


@pytest.mark.slow
def test_fp16_loss_scale_stays_above_one_with_the_divisor(data_bin):
    assert lowest_scale_reached(data_bin, 1) < 1.0  # plain sums: the scale collapses
    assert lowest_scale_reached(data_bin, 4096) >= 1.0


def test_divisor_leaves_the_update_unchanged(data_bin):
    """loss / c and sample_size / c: fairseq's gradient (grad(loss) / sample_size) is the same."""
    grads = {}
    for div in (1.0, 256.0):
        task, model, crit = build_components(
            data_bin,
            ["--criterion", "mlm_soft_reg", "--mlm-loss-divisor", str(div)],
            arch_args=TINY_TN_ROBERTA,
        )
        model.eval()
        sample = big_batch(task, bsz=8, seq=32)
        loss, sample_size, log = crit(model, sample)
        (loss / sample_size).backward()
        grads[div] = (
            {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None},
            log,
        )
    (g1, log1), (g2, log2) = grads[1.0], grads[256.0]
    assert float(log1["loss"]) == pytest.approx(float(log2["loss"]), rel=1e-6)  # logs stay sums
    assert int(log1["sample_size"]) == int(log2["sample_size"])
    for n in g1:
        torch.testing.assert_close(g2[n], g1[n], rtol=1e-4, atol=1e-7)
