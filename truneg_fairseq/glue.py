"""GLUE data: read the official task folders, tokenize, binarize for fairseq's sentence_prediction.

Each task folder is read as the GLUE download script leaves it (tab-separated, no quoting: QQP
and MNLI contain stray quotes that a CSV reader would merge across rows). Columns are found by
header name, except CoLA whose train/dev files have no header (source, label, original label,
sentence). Rows with too few columns or an empty text are skipped and counted; the counts are
returned and logged, never dropped silently.

Output (per task, fairseq's sentence_prediction layout)::

    OUT/TASK/input0/{train,valid[,valid1]}.{bin,idx} + dict.txt (the pre-training dictionary)
    OUT/TASK/input1/...                              (sentence-pair tasks)
    OUT/TASK/label/{train,valid}.{bin,idx} + dict.txt (classification) or *.label (STS-B)
    OUT/TASK/meta.json                               (example counts, skipped rows, metric)
"""

import json
import logging
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from truneg_fairseq.corpus import CorpusError, atomic_write_lines, binarize
from truneg_fairseq.io_utils import atomic_dir

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class GlueTask:
    name: str
    folder: str
    splits: Tuple[Tuple[str, str], ...]  # (fairseq split, file name)
    sentence1: object  # header name, or column index when the file has no header
    sentence2: Optional[object]
    label: object
    num_classes: int  # 1: regression
    metric: str  # fairseq metric to select checkpoints with
    header: bool = True


TASKS: Dict[str, GlueTask] = {
    t.name: t
    for t in [
        GlueTask("CoLA", "CoLA", (("train", "train.tsv"), ("valid", "dev.tsv")), 3, None, 1, 2, "mcc", header=False),
        GlueTask("SST-2", "SST-2", (("train", "train.tsv"), ("valid", "dev.tsv")), "sentence", None, "label", 2, "accuracy"),
        GlueTask("MRPC", "MRPC", (("train", "train.tsv"), ("valid", "dev.tsv")), "#1 String", "#2 String", "Quality", 2, "acc_and_f1"),
        GlueTask("STS-B", "STS-B", (("train", "train.tsv"), ("valid", "dev.tsv")), "sentence1", "sentence2", "score", 1, "pearson_and_spearman"),
        GlueTask("QQP", "QQP", (("train", "train.tsv"), ("valid", "dev.tsv")), "question1", "question2", "is_duplicate", 2, "acc_and_f1"),
        GlueTask("MNLI", "MNLI", (("train", "train.tsv"), ("valid", "dev_matched.tsv"), ("valid1", "dev_mismatched.tsv")),
                 "sentence1", "sentence2", "gold_label", 3, "accuracy"),
        GlueTask("QNLI", "QNLI", (("train", "train.tsv"), ("valid", "dev.tsv")), "question", "sentence", "label", 2, "accuracy"),
        GlueTask("RTE", "RTE", (("train", "train.tsv"), ("valid", "dev.tsv")), "sentence1", "sentence2", "label", 2, "accuracy"),
    ]
}


@dataclass
class Example:
    text1: str
    text2: Optional[str]
    label: str


def read_split(task: GlueTask, path: Path) -> Tuple[List[Example], int]:
    """Read one TSV file; returns (examples, number of rows skipped as malformed)."""
    if not path.is_file():
        raise CorpusError(
            f"{task.name}: {path} not found; --glue-dir must hold the GLUE task folders as the "
            f"official download leaves them ({task.folder}/{', '.join(f for _, f in task.splits)})"
        )
    with open(path, encoding="utf-8", newline="\n") as f:
        lines = [l.rstrip("\r\n") for l in f]
    if task.header:
        if not lines:
            raise CorpusError(f"{path} is empty")
        header = lines[0].split("\t")
        cols = {}
        for key in (task.sentence1, task.sentence2, task.label):
            if key is None:
                continue
            if key not in header:
                raise CorpusError(f"{path}: column {key!r} not in the header ({', '.join(header)}); is this the {task.name} file?")
            # MNLI's gold_label is the last column; label1..label5 come before it
            cols[key] = len(header) - 1 - header[::-1].index(key)
        rows = lines[1:]
        i1, i2, il = cols[task.sentence1], cols.get(task.sentence2), cols[task.label]
    else:
        rows = lines
        i1, i2, il = task.sentence1, task.sentence2, task.label
    need = max(i for i in (i1, i2, il) if i is not None) + 1
    out, skipped = [], 0
    for row in rows:
        parts = row.split("\t")
        if len(parts) < need:
            skipped += 1
            continue
        t1 = parts[i1].strip()
        t2 = parts[i2].strip() if i2 is not None else None
        label = parts[il].strip()
        if not t1 or (i2 is not None and not t2) or not label:
            skipped += 1
            continue
        if task.num_classes == 1:
            try:
                float(label)
            except ValueError:
                skipped += 1
                continue
        out.append(Example(t1, t2, label))
    if not out:
        raise CorpusError(f"{path}: no usable rows ({skipped} malformed)")
    return out, skipped


class Tokenizer:
    """sentencepiece pieces or GPT-2 BPE ids, as the pre-training data was tokenized."""

    def __init__(self, kind: str, spm_model=None, gpt2_encoder_json=None, gpt2_vocab_bpe=None):
        self.kind = kind
        if kind == "sentencepiece":
            import sentencepiece as spm

            if not spm_model or not os.path.isfile(spm_model):
                raise CorpusError(f"--spm-model {spm_model} not found (the model that tokenized the pre-training data)")
            self.sp = spm.SentencePieceProcessor(model_file=str(spm_model))
        elif kind == "gpt2":
            from fairseq.data.encoders.gpt2_bpe_utils import get_encoder

            for flag, p in (("--gpt2-encoder-json", gpt2_encoder_json), ("--gpt2-vocab-bpe", gpt2_vocab_bpe)):
                if not p or not os.path.isfile(p):
                    raise CorpusError(f"{flag} {p} not found (GPT-2 BPE files of the pre-training data)")
            self.bpe = get_encoder(str(gpt2_encoder_json), str(gpt2_vocab_bpe))
        else:
            raise CorpusError(f"--tokenizer {kind!r}: use sentencepiece or gpt2")

    def __call__(self, texts: Sequence[str]) -> List[str]:
        if self.kind == "sentencepiece":
            return [" ".join(p) for p in self.sp.encode(list(texts), out_type=str)]
        return [" ".join(map(str, self.bpe.encode(t))) for t in texts]


def prepare_task(task: GlueTask, glue_dir: Path, out_dir: Path, tokenizer: Tokenizer, srcdict: Path) -> Dict[str, int]:
    """Prepare one task into ``out_dir/TASK`` (atomically); returns skipped-row counts per split."""
    glue_dir, out_dir = Path(glue_dir), Path(out_dir)
    data = {}
    skipped = {}
    for split, fname in task.splits:
        data[split], skipped[split] = read_split(task, glue_dir / task.folder / fname)
        if skipped[split]:
            logger.warning(f"{task.name} {fname}: skipped {skipped[split]} malformed rows (too few columns or empty fields)")
        logger.info(f"{task.name} {fname}: {len(data[split])} examples")
    with atomic_dir(out_dir / task.name) as work:
        raw = work / "raw"
        for split, exs in data.items():
            atomic_write_lines(raw / f"{split}.input0", tokenizer([e.text1 for e in exs]))
            if task.sentence2 is not None:
                atomic_write_lines(raw / f"{split}.input1", tokenizer([e.text2 for e in exs]))
            atomic_write_lines(raw / f"{split}.label", [e.label for e in exs])
        valid_prefs = [raw / s for s, _ in task.splits if s != "train"]
        inputs = ["input0"] + (["input1"] if task.sentence2 is not None else [])
        for name in inputs:
            binarize(f"{raw / 'train'}.{name}", ",".join(f"{p}.{name}" for p in valid_prefs), work / name, srcdict=srcdict)
        if task.num_classes == 1:  # regression: fairseq reads label/<split>.label as floats
            (work / "label").mkdir()
            for split, _ in task.splits:
                shutil.copyfile(raw / f"{split}.label", work / "label" / f"{split}.label")
        else:
            binarize(f"{raw / 'train'}.label", ",".join(f"{p}.label" for p in valid_prefs), work / "label")
        shutil.rmtree(raw)
        meta = {"task": task.name, "num_classes": task.num_classes, "metric": task.metric,
                "examples": {s: len(e) for s, e in data.items()}, "skipped": skipped}
        (work / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return skipped


VALID_LINE = re.compile(r"valid on '(\w+)' subset \| (.*)$")


def parse_validation_log(path):
    """Validation lines of a fairseq log: list of (subset, {metric: value})."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = VALID_LINE.search(line.rstrip())
            if not m:
                continue
            vals = {}
            for item in m.group(2).split(" | "):
                parts = item.rsplit(" ", 1)
                if len(parts) == 2:
                    try:
                        vals[parts[0]] = float(parts[1])
                    except ValueError:
                        pass
            out.append((m.group(1), vals))
    return out
