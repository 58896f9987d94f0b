"""The data of the GPU check: a binarized corpus with a synonym table (WordNet's glosses where
WordNet is installed, generated text elsewhere), fairseq's config from flags, and the rate of
the task's training batch iterator (``loader_rate``)."""

import os
import time

import numpy as np

# ---- corpus --------------------------------------------------------------------------------


def generated_lines(n: int, seed: int = 0):
    """Sentences of made-up words with Zipf-like frequencies and a little structure (a word
    tends to follow its neighbour in the list), so that a masked-LM loss falls with training."""
    rng = np.random.default_rng(seed)
    words = [
        "".join(
            rng.choice(list("bcdfgklmnprstvz")) + rng.choice(list("aeiou"))
            for _ in range(rng.integers(1, 4))
        )
        for _ in range(600)
    ]
    p = 1.0 / np.arange(1, len(words) + 1)
    p /= p.sum()
    lines = []
    for _ in range(n):
        k = int(rng.integers(6, 24))
        idx = rng.choice(len(words), size=k, p=p)
        idx[1::2] = (idx[0::2][: len(idx[1::2])] + 1) % len(words)
        lines.append(" ".join(words[i] for i in idx) + " .")
    return lines


def random_table(data_bin: str) -> str:
    """A synonym table of random pairs for ``data_bin``'s dictionary (precision and speed do not
    depend on which pairs are synonyms)."""
    from fairseq.data import Dictionary

    from truneg_fairseq.lexicon import SynonymTable, dictionary_fingerprint

    d = Dictionary.load(os.path.join(data_bin, "dict.txt"))
    rng = np.random.default_rng(1)
    pairs = np.unique(rng.integers(d.nspecial, len(d), size=(4 * len(d), 2)), axis=0)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]].astype(np.int64)
    path = os.path.join(data_bin, "synonyms.npz")
    SynonymTable(
        pairs,
        np.zeros(0, np.int64),
        len(d),
        dictionary_fingerprint(d.symbols),
        {"source": "random"},
    ).save(path)
    return path


def build_corpus(work: str, quick: bool) -> dict:
    """A binarized corpus with a synonym table in ``work``: the WordNet-gloss corpus and its
    WordNet table (benchmarks/_common.py) for the full check, generated text with a random
    table for the quick one or where WordNet is missing."""
    t0 = time.perf_counter()
    if not quick:
        try:
            from _common import ensure_corpus

            data_bin = ensure_corpus(os.path.join(work, "wordnet"), 8000)
            return {
                "data_bin": data_bin,
                "table": os.path.join(data_bin, "synonyms.npz"),
                "source": "WordNet glosses, sentencepiece 8000, WordNet synonym table",
                "build_s": time.perf_counter() - t0,
            }
        except (
            Exception
        ) as exc:  # no WordNet on this machine: the generated corpus still checks everything
            note = f"WordNet-gloss corpus not built ({type(exc).__name__}); "
    else:
        note = ""
    from truneg_fairseq.data import corpus_steps

    gen = os.path.join(work, "generated")
    train, valid, _, _ = corpus_steps.write_split_corpus(
        generated_lines(3000 if quick else 20000),
        os.path.join(gen, "raw"),
        valid_fraction=0.02,
        seed=1,
    )
    model = corpus_steps.train_sentencepiece(
        train, os.path.join(gen, "spm"), vocab_size=300 if quick else 4000, model_type="bpe"
    )
    for split, path in (("train", train), ("valid", valid)):
        corpus_steps.encode_file(model, path, os.path.join(gen, "tok", f"{split}.txt"))
    data_bin = str(
        corpus_steps.binarize(
            os.path.join(gen, "tok", "train.txt"),
            os.path.join(gen, "tok", "valid.txt"),
            os.path.join(gen, "data-bin"),
        )
    )
    return {
        "data_bin": data_bin,
        "table": random_table(data_bin),
        "source": note + "generated text, sentencepiece BPE, random synonym table",
        "build_s": time.perf_counter() - t0,
    }


def _fairseq_cfg(argv):
    from fairseq import options
    from fairseq.dataclass import (
        utils as dataclass_utils,
    )  # looked up at call time: the plugin's quiet version

    import truneg_fairseq  # noqa: F401

    return dataclass_utils.convert_namespace_to_omegaconf(
        options.parse_args_and_arch(options.get_training_parser(), argv)
    )


def loader_rate(
    data_bin: str, family: str, batch: int, seq: int, workers: int, max_batches: int, max_s: float
) -> dict:
    """Batches/s of the task's training batch iterator (``masked_lm`` for RoBERTa, ``electra``
    for ELECTRA: block building, masking, collating in ``workers`` loader processes), timed
    from the first batch on (the start-up, workers included, is reported apart)."""
    task_flags = (
        ["--task", "electra", "--arch", "electra_small", "--electra-max-positions", str(seq)]
        if family == "electra"
        else ["--task", "masked_lm", "--arch", "truneg_roberta_base", "--max-positions", str(seq)]
    )
    from fairseq import tasks

    cfg = _fairseq_cfg(
        [
            data_bin,
            *task_flags,
            "--tokens-per-sample",
            str(seq),
            "--sample-break-mode",
            "none",
            "--cpu",
            "--seed",
            "1",
        ]
    )
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    dataset = task.dataset("train")
    t0 = time.perf_counter()
    n, epoch, first_s, start = 0, 1, None, None
    while n < max_batches:
        itr = task.get_batch_iterator(
            dataset=dataset,
            max_sentences=batch,
            max_positions=seq,
            seed=1,
            required_batch_size_multiple=1,
            num_workers=workers,
            epoch=epoch,
        )
        for _ in itr.next_epoch_itr(shuffle=True):
            if first_s is None:
                first_s, start = time.perf_counter() - t0, time.perf_counter()
                continue
            n += 1
            if n >= max_batches or time.perf_counter() - start > max_s:
                break
        if start is not None and time.perf_counter() - start > max_s:
            break
        epoch += 1
    elapsed = time.perf_counter() - start
    return {
        "family": family,
        "batch": batch,
        "seq": seq,
        "workers": workers,
        "batches": n,
        "batches_per_s": n / elapsed if elapsed > 0 else None,
        "first_batch_s": first_s,
        "sequences_in_corpus": len(dataset),
    }
