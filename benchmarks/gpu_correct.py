"""Correctness of the GPU check: the same ELECTRA-small and RoBERTa models (same seed, same
batches from the task's own iterator) trained with hard correction through fairseq's Trainer in
fp32, bf16 (the plugin's ``--bf16``: fp32 weights, bf16 autocast), ``--amp`` and ``--fp16``
(``--mlm-loss-divisor`` for ELECTRA, as its recipe). A precision passes when every loss is
finite and the mean loss of its last tenth of updates is within the tolerance of fp32's; a
non-finite loss is reported with the updates where it occurred.

Run as a child of gpu_check.py (one process per model):
  python benchmarks/gpu_correct.py --model electra --precisions fp32,bf16 --updates 30 DATA_BIN TABLE
"""

import argparse
import json
import os
import sys
import time

import numpy as np
from gpu_corpus import _fairseq_cfg
from gpu_sizes import JSON_TAG

PRECISIONS = ["fp32", "bf16", "amp", "fp16"]
CUDA_ONLY = {"amp", "fp16"}
# correctness runs: model -> (fairseq flags, batch, seq); quick ones are tiny
CORRECTNESS = {
    "electra": (
        [
            "--task",
            "electra",
            "--arch",
            "electra_small",
            "--criterion",
            "mlm_hard_correction",
            "--mlm-prediction-slots",
            "static",
            "--optimizer",
            "fused_adamw",
            "--fused-adamw-eps",
            "1e-6",
            "--fused-adamw-weight-decay",
            "0.01",
            "--clip-norm",
            "1.0",
            "--lr",
            "5e-4",
        ],
        128,
        128,
    ),
    "roberta": (
        [
            "--task",
            "masked_lm",
            "--arch",
            "truneg_roberta_base",
            "--criterion",
            "mlm_hard_correction",
            "--optimizer",
            "adam",
            "--adam-betas",
            "(0.9,0.98)",
            "--adam-eps",
            "1e-6",
            "--weight-decay",
            "0.01",
            "--clip-norm",
            "0.0",
            "--lr",
            "1e-4",
        ],
        32,
        128,
    ),
}
# quick runs: the tiny archs (their sizes from the one table, truneg_fairseq/models/sizes.py)
TINY_MODEL = {
    "electra": ["--arch", "electra_tiny"],
    "roberta": ["--arch", "truneg_roberta_tiny"],
}
# the recipes' data-loader workers: examples/electra (NUM_WORKERS, default 1) and examples/mlm


def precision_flags(model: str, precision: str, batch: int, seq: int):
    """The flags of one precision, as the recipes give them."""
    if (
        precision == "bf16"
    ):  # the plugin's --bf16: fp32 weights, bf16 autocast (compat/bf16_autocast.py)
        return ["--bf16"]
    if precision == "amp":
        return ["--amp"]
    if precision == "fp16":
        return (
            ["--fp16", "--mlm-loss-divisor", str(batch * seq * 15 // 100)]
            if model == "electra"
            else ["--fp16"]
        )
    return []


def train_one(
    model: str, precision: str, updates: int, data_bin: str, table: str, quick: bool, device: str
) -> dict:
    """Train ``model`` with hard correction for ``updates`` updates in ``precision`` through
    fairseq's Trainer; returns the loss of every update. The seed, the initial weights and the
    batches (the task's iterator, epochs repeated as needed) are the same for every precision."""
    import torch
    from fairseq import tasks, utils
    from fairseq.trainer import Trainer

    flags, batch, seq = CORRECTNESS[model]
    if quick:
        batch, seq = 8, 64
        flags = flags + TINY_MODEL[model]
    warmup = max(1, updates // 10)
    argv = [
        data_bin,
        *flags,
        "--synonym-table",
        table,
        "--tokens-per-sample",
        str(seq),
        "--sample-break-mode",
        "none",
        "--batch-size",
        str(batch),
        "--required-batch-size-multiple",
        "1",
        "--seed",
        "1",
        "--num-workers",
        "0",
        "--lr-scheduler",
        "polynomial_decay",
        "--warmup-updates",
        str(warmup),
        "--total-num-update",
        str(updates),
        "--max-update",
        str(updates),
        "--no-save",
        "--save-dir",
        os.path.join(os.path.dirname(data_bin), "save"),
        *precision_flags(model, precision, batch, seq),
    ]
    argv += (
        ["--electra-max-positions", str(seq)]
        if model == "electra"
        else ["--max-positions", str(seq)]
    )
    if device == "cpu":
        argv.append("--cpu")
    cfg = _fairseq_cfg(argv)
    utils.set_torch_seed(1)
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    net = task.build_model(cfg.model)
    crit = task.build_criterion(cfg.criterion)
    trainer = Trainer(cfg, task, net, crit)
    losses, t0, epoch = [], time.perf_counter(), 1
    # the criterion's own loss of every forward: tells a loss that overflowed in the forward
    # from an update fairseq's loss scaler skipped for overflowing gradients (log None)
    forward_finite = []
    trainer.criterion.register_forward_hook(
        lambda _m, _i, out: forward_finite.append(bool(torch.isfinite(out[0].detach()).all()))
    )
    while len(losses) < updates:
        itr = task.get_batch_iterator(
            dataset=task.dataset("train"),
            max_sentences=batch,
            max_positions=seq,
            required_batch_size_multiple=1,
            seed=1,
            num_workers=0,
            epoch=epoch,
        )
        for sample in itr.next_epoch_itr(shuffle=True):
            if len(losses) >= updates:
                break
            if (
                sample["nsentences"] < batch
            ):  # the short last batch of an epoch: the same shape every update
                continue
            log = trainer.train_step([sample])
            losses.append(float(log["loss"]) if log is not None and "loss" in log else float("nan"))
            if len(forward_finite) < len(losses):  # no forward seen: count it as finite
                forward_finite.append(True)
            del forward_finite[len(losses) :]
        epoch += 1
    if device == "cuda":
        torch.cuda.synchronize()
    return {
        "model": model,
        "precision": precision,
        "batch": batch,
        "seq": seq,
        "losses": losses,
        "forward_nonfinite_updates": [i + 1 for i, ok in enumerate(forward_finite) if not ok],
        "seconds": time.perf_counter() - t0,
    }


def _shown(updates: list) -> str:
    return ", ".join(map(str, updates[:8])) + (" ..." if len(updates) > 8 else "")


def judge(runs: dict, tolerance: float) -> dict:
    """Status per precision of one model: ``PASS``/``FAIL`` with the reason (non-finite losses
    and at which updates; the final mean's distance from fp32's), against the fp32 run."""
    ref = runs.get("fp32", {}).get("losses")
    for precision, run in runs.items():
        losses = run.get("losses")
        if not losses:
            run.setdefault("status", "not run")
            continue
        if not ref:
            run.update(status="FAIL", reason="no fp32 reference run")
            continue
        k = max(2, len(losses) // 10)
        arr, ref_arr = np.asarray(losses, float), np.asarray(ref, float)
        bad = [i + 1 for i in np.flatnonzero(~np.isfinite(arr))]
        final, ref_final = float(np.nanmean(arr[-k:])), float(np.nanmean(ref_arr[-k:]))
        rel = abs(final - ref_final) / max(abs(ref_final), 1e-12)
        reasons, notes = [], []
        forward_bad = run.get("forward_nonfinite_updates", bad)
        skipped = [i for i in bad if i not in forward_bad]
        if forward_bad:
            reasons.append(
                f"loss not finite in the forward at update(s) {_shown(forward_bad)} "
                f"({len(forward_bad)} of {len(arr)})"
            )
        if len(skipped) > len(arr) // 5:
            reasons.append(f"{len(skipped)} of {len(arr)} updates skipped for gradient overflow")
        elif skipped:
            notes.append(
                f"update(s) {_shown(skipped)} skipped by the loss scaler (gradient overflow; "
                "the forward's loss was finite)"
            )
        if not rel <= tolerance:
            reasons.append(
                f"final mean {100 * rel:.2f}% from fp32's (tolerance {100 * tolerance:g}%)"
            )
        run.update(final_window=k, final_mean=final, rel_diff_vs_fp32=rel, nonfinite_updates=bad)
        run["status"] = "FAIL" if reasons else "PASS"
        run["reason"] = "; ".join(reasons or [f"final mean {100 * rel:.2f}% from fp32's", *notes])
    return runs


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("data_bin")
    p.add_argument("table")
    p.add_argument("--model", choices=sorted(CORRECTNESS), required=True)
    p.add_argument("--precisions", default=",".join(PRECISIONS))
    p.add_argument("--updates", type=int, default=30)
    p.add_argument("--quick", action="store_true", help="the tiny architecture, batch 8 x 64")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    args = p.parse_args(argv)
    runs = {}
    for precision in args.precisions.split(","):
        try:
            runs[precision] = train_one(
                args.model,
                precision,
                args.updates,
                args.data_bin,
                args.table,
                args.quick,
                args.device,
            )
        except Exception as exc:  # reported in its row: the other precisions still run
            runs[precision] = {"status": "FAIL", "reason": f"{type(exc).__name__}: {exc}"[:400]}
        print(
            JSON_TAG + json.dumps({args.model: runs}), flush=True
        )  # partial results survive a kill
    return 0


if __name__ == "__main__":
    sys.exit(main())
