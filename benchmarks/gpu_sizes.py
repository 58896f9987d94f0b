"""The sizes, batch shapes, analytic FLOPs and device peaks the GPU benchmarks share
(``gpu_step.py``, ``gpu_check.py``), and the dictionary + random synonym table a size needs."""

import math
import os
import platform
import time

import numpy as np

from truneg_fairseq.models.sizes import BERT_SIZES, ELECTRA_SIZES

VOCAB = 30522  # ELECTRA (BERT's WordPiece vocabulary)
ROBERTA_VOCAB = 50265  # RoBERTa (GPT-2 byte-level BPE)
TINY_VOCAB = 1000  # the tiny smoke-test sizes


def _electra(arch: str, batch: int, seq: int) -> tuple:
    z = ELECTRA_SIZES[arch]
    return (
        z.embed,
        z.hidden,
        z.layers,
        z.heads,
        z.ffn,
        z.gen_hidden,
        z.gen_heads,
        z.gen_ffn,
        batch,
        seq,
    )


def _roberta(name: str, batch: int, seq: int) -> tuple:
    z = BERT_SIZES[name]
    return (z.dim, z.layers, z.heads, z.ffn, batch, seq)


# name: (embed, hidden, layers, heads, ffn, gen hidden, gen heads, gen ffn, batch, seq): the
# registered architectures' sizes (the one table, models/sizes.py) with the benchmark's batch shape
SIZES = {
    "small": _electra("electra_small", 128, 128),
    "base": _electra("electra_base", 32, 512),
    "tiny": _electra("electra_tiny", 8, 64),
}
# name: (hidden, layers, heads, ffn, batch, seq)
ROBERTA_SIZES = {
    "roberta-base": _roberta("base", 16, 512),
    "roberta-tiny": _roberta("tiny", 4, 64),
}
# dense bf16 peak TFLOP/s (no sparsity), by a substring of torch.cuda.get_device_name()
# dense bf16 peak TFLOP/s (no sparsity), by a substring of torch.cuda.get_device_name(); the more
# specific names first (an "H100 PCIe" is not an SXM H100)
PEAK_TFLOPS = {
    "H100 PCIe": 756.0,
    "H100 NVL": 835.0,
    "H200": 989.0,
    "H100": 989.0,
    "GH200": 989.0,
    "A100": 312.0,
    "L40S": 362.0,
    "A10": 125.0,
    "4090": 165.0,
    "V100": 125.0,
}
CRITERIA = ["electra", "mlm_hard_correction", "mlm_soft_reg", "mlm_sent_kl"]
ROBERTA_CRITERIA = ["masked_lm", "mlm_hard_correction", "mlm_soft_reg", "mlm_sent_kl"]
MODES = ["dynamic", "static", "compiled", "graphs", "model"]
JSON_TAG = "GPU_STEP_JSON "  # the line of a --json child that carries its result


def is_roberta(size: str) -> bool:
    return size in ROBERTA_SIZES


def batch_shape(size: str):
    """(batch, sequence length) of a size."""
    return ROBERTA_SIZES[size][4:6] if is_roberta(size) else SIZES[size][8:10]


def criteria_for(size: str):
    """The criteria of a model family, baseline first."""
    return ROBERTA_CRITERIA if is_roberta(size) else CRITERIA


def vocab_for(size: str) -> int:
    if size.endswith("tiny"):
        return TINY_VOCAB
    return ROBERTA_VOCAB if is_roberta(size) else VOCAB


def step_flops(size: str, mask_prob: float = 0.15) -> float:
    """Analytic FLOPs of one training step (forward + backward = 3x forward): the encoder
    stacks over every token, attention, the embedding projections, the (generator's) MLM head at
    the predicted positions only and, for ELECTRA, the discriminator head everywhere."""
    if is_roberta(size):
        h, layers, _, f, b, t = ROBERTA_SIZES[size]
        tokens, predicted = b * t, b * math.ceil((mask_prob + 0.005) * t)
        stack = 2 * tokens * layers * (4 * h * h + 2 * h * f + 2 * t * h)
        return 3.0 * (stack + 2 * predicted * (h * h + h * vocab_for(size)))
    e, h, layers, _, f, gh, _, gf, b, t = SIZES[size]
    tokens = b * t

    def stack(hidden, ffn):
        dense = layers * (4 * hidden * hidden + 2 * hidden * ffn) + (
            e * hidden if e != hidden else 0
        )
        attn = layers * 2 * t * hidden  # QK^T and AV per token
        return 2 * tokens * (dense + attn)

    predicted = b * math.ceil((mask_prob + 0.005) * t)
    gen_head = 2 * predicted * (gh * e + e * vocab_for(size))
    disc_head = 2 * tokens * (h * h + h)
    return 3.0 * (stack(h, f) + stack(gh, gf) + gen_head + disc_head)


def write_table(work, table_path, vocab=VOCAB):
    """A dictionary of ``vocab`` symbols in ``work`` and a random synonym table for it (the speed
    of a step does not depend on which pairs are synonyms, only on how many)."""
    from fairseq.data import Dictionary

    from truneg_fairseq.lexicon import SynonymTable, dictionary_fingerprint

    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "dict.txt"), "w") as f:
        for i in range(vocab - 5):
            f.write(f"w{i} 1\n")
    d = Dictionary.load(os.path.join(work, "dict.txt"))
    rng = np.random.default_rng(1)
    pairs = np.unique(rng.integers(d.nspecial, len(d), size=(35000, 2)), axis=0)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]].astype(np.int64)
    SynonymTable(
        pairs,
        np.zeros(0, np.int64),
        len(d),
        dictionary_fingerprint(d.symbols),
        {"source": "random"},
    ).save(table_path)
    return d


def prepare_work(size, work):
    """The dictionary and synonym table a size needs under ``work``; returns the table's path."""
    sub = os.path.join(work, "roberta" if is_roberta(size) else "electra")
    table = os.path.join(sub, "synonyms.npz")
    if not os.path.isfile(table):
        write_table(sub, table, vocab_for(size))
    return table


def device_name(device) -> str:
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU ({platform.processor() or platform.machine()})"


def measured_matmul_tflops(device, n: int = 8192, reps: int = 20) -> float:
    """bf16 TFLOP/s of a large square matmul on ``device``: the peak where the table has no entry
    for the GPU (a lower bound of the true dense peak)."""
    import torch

    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    torch.cuda.synchronize(device)
    return 2.0 * n**3 * reps / (time.perf_counter() - t0) / 1e12


def peak_source(device, override=0.0):
    """(dense bf16 peak TFLOP/s, where it comes from): ``override``, the table by device name,
    else a measured matmul; 0 on a CPU."""
    if override:
        return override, "given"
    if device.type != "cuda":
        return 0.0, "none (CPU)"
    name = device_name(device)
    for key, value in PEAK_TFLOPS.items():
        if key in name:
            return value, f"table ({key})"
    return round(measured_matmul_tflops(device), 1), "measured bf16 matmul"


def peak_tflops(device, override=0.0) -> float:
    return peak_source(device, override)[0]
