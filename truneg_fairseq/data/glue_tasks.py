"""GLUE data: read the official task folders, tokenize, binarize for fairseq's sentence_prediction.

Each task folder is read as the GLUE download script leaves it (tab-separated, no quoting: QQP
and MNLI contain stray quotes that a CSV reader would merge across rows). Columns are found by
header name, except CoLA whose train/dev files have no header (source, label, original label,
sentence). Rows with the wrong number of columns, an empty text or a label outside the task's
label set are skipped and counted per reason; the counts are returned and logged, never dropped
silently, and too many of them (``--max-skip-fraction``) are an error.

Output (per task, fairseq's sentence_prediction layout)::

    OUT/TASK/input0/{train,valid[,valid1]}.{bin,idx} + dict.txt (the pre-training dictionary)
    OUT/TASK/input1/...                              (sentence-pair tasks)
    OUT/TASK/label/{train,valid}.{bin,idx} + dict.txt (classification) or *.label (STS-B)
    OUT/TASK/meta.json                               (example counts, skipped rows, metric)
"""

import contextlib
import json
import logging
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from truneg_fairseq.data.corpus_steps import CorpusError, atomic_write_lines, binarize
from truneg_fairseq.data.glue_logs import VALID_LINE, parse_validation_log  # noqa: F401
from truneg_fairseq.outputs import atomic_dir
from truneg_fairseq.text import Tokenizer, read_lines

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
    labels: Tuple[str, ...] = ()  # the label set (classification); empty: a score in score_range
    score_range: Tuple[float, float] = (0.0, 5.0)


BINARY = ("0", "1")
ENTAILMENT = ("entailment", "not_entailment")


TASKS: Dict[str, GlueTask] = {
    t.name: t
    for t in [
        GlueTask(
            "CoLA",
            "CoLA",
            (("train", "train.tsv"), ("valid", "dev.tsv")),
            3,
            None,
            1,
            2,
            "mcc",
            header=False,
            labels=BINARY,
        ),
        GlueTask(
            "SST-2",
            "SST-2",
            (("train", "train.tsv"), ("valid", "dev.tsv")),
            "sentence",
            None,
            "label",
            2,
            "accuracy",
            labels=BINARY,
        ),
        GlueTask(
            "MRPC",
            "MRPC",
            (("train", "train.tsv"), ("valid", "dev.tsv")),
            "#1 String",
            "#2 String",
            "Quality",
            2,
            "acc_and_f1",
            labels=BINARY,
        ),
        GlueTask(
            "STS-B",
            "STS-B",
            (("train", "train.tsv"), ("valid", "dev.tsv")),
            "sentence1",
            "sentence2",
            "score",
            1,
            "pearson_and_spearman",
        ),
        GlueTask(
            "QQP",
            "QQP",
            (("train", "train.tsv"), ("valid", "dev.tsv")),
            "question1",
            "question2",
            "is_duplicate",
            2,
            "acc_and_f1",
            labels=BINARY,
        ),
        GlueTask(
            "MNLI",
            "MNLI",
            (
                ("train", "train.tsv"),
                ("valid", "dev_matched.tsv"),
                ("valid1", "dev_mismatched.tsv"),
            ),
            "sentence1",
            "sentence2",
            "gold_label",
            3,
            "accuracy",
            labels=("entailment", "neutral", "contradiction"),
        ),
        GlueTask(
            "QNLI",
            "QNLI",
            (("train", "train.tsv"), ("valid", "dev.tsv")),
            "question",
            "sentence",
            "label",
            2,
            "accuracy",
            labels=ENTAILMENT,
        ),
        GlueTask(
            "RTE",
            "RTE",
            (("train", "train.tsv"), ("valid", "dev.tsv")),
            "sentence1",
            "sentence2",
            "label",
            2,
            "accuracy",
            labels=ENTAILMENT,
        ),
    ]
}


@dataclass
class Example:
    text1: str
    text2: Optional[str]
    label: str


PROGRESS_EVERY = 100_000  # a progress line per this many rows read or texts tokenized
MAX_SKIP_FRACTION = 0.01  # default share of malformed rows tolerated per file
MAX_SKIP_FLOOR = 10  # a few malformed rows are always tolerated (small files)


def _columns(task: GlueTask, path: Path, lines: List[str]):
    """(data rows, (first text, second text or None, label) column indices, columns per row)."""
    if not task.header:
        return (
            lines,
            (task.sentence1, task.sentence2, task.label),
            4,
        )  # CoLA: source, label, original label, sentence
    if not lines:
        raise CorpusError(f"{path} is empty")
    header = lines[0].split("\t")
    cols = {}
    for key in (task.sentence1, task.sentence2, task.label):
        if key is None:
            continue
        if key not in header:
            raise CorpusError(missing_column(task, path, key, header))
        # MNLI's gold_label is the last column; label1..label5 come before it
        cols[key] = len(header) - 1 - header[::-1].index(key)
    return (
        lines[1:],
        (cols[task.sentence1], cols.get(task.sentence2), cols[task.label]),
        len(header),
    )


def missing_column(task: Optional[GlueTask], path, key, header: List[str]) -> str:
    """The message for a header without column ``key``: its names as they read (invisible
    characters escaped); a byte-order mark, which hides a column that looks present, in words."""
    bom = header[0].startswith("\ufeff")
    names = [h[1:] if bom and i == 0 else h for i, h in enumerate(header)]
    shown = ", ".join(n if n.isprintable() else ascii(n) for n in names)
    if bom and key == names[0]:
        return (
            f"{path}: the file starts with a byte-order mark (BOM), so its first column is not read "
            f"as {key!r} (header: {shown}). Save "
            "the file as UTF-8 without a BOM (e.g. sed -i '1s/^\\xEF\\xBB\\xBF//' FILE)"
        )
    name = f"the {task.name} file" if task is not None else "the file meant"
    return f"{path}: column {key!r} not in the header ({shown}); is this {name}?"


def _read_tsv_lines(path: Path) -> List[str]:
    """The lines of a task file (LF, CRLF or CR-only line endings: :mod:`truneg_fairseq.text.lines`);
    a file that is not UTF-8 is one error naming the line."""
    try:
        return list(read_lines(path))
    except UnicodeDecodeError as e:
        raise CorpusError(
            f"{path}, line {getattr(e, 'lineno', '?')}: not UTF-8 ({e.reason}); the GLUE files are "
            "UTF-8: download them again, or convert the file (e.g. iconv -f latin1 -t utf-8)"
        ) from None


def check_labels_seen_in_train(task: GlueTask, glue_dir: Path, data: Dict[str, List[Example]]):
    """Every label of a dev/test split must occur in train: the label dictionary is built from
    train, so fairseq would read an unseen one as ``<unk>`` and score its rows wrong in silence."""
    if task.num_classes == 1:
        return
    seen = {e.label for e in data["train"]}
    train_file = glue_dir / task.folder / dict(task.splits)["train"]
    for split, fname in task.splits:
        if split == "train":
            continue
        unseen = sorted({e.label for e in data[split]} - seen)
        if unseen:
            count = sum(e.label in unseen for e in data[split])
            raise CorpusError(
                f"{glue_dir / task.folder / fname}: label {unseen[0]!r}"
                f"{f' (and {len(unseen) - 1} more)' if len(unseen) > 1 else ''} of {count} rows never "
                f"occurs in {train_file}, so the label dictionary built from train would map it to "
                "<unk> and score those rows wrong. Use the complete official train file of "
                f"{task.name} (it holds every label of {', '.join(task.labels)})"
            )


def read_split_counted(
    task: GlueTask, path: Path, max_skip_fraction: float = MAX_SKIP_FRACTION
) -> Tuple[List[Example], Dict[str, int]]:
    """Read one TSV file; returns (examples, {reason: number of rows skipped}).

    A row must have exactly the layout's number of columns (the header's, or 4 for CoLA), no
    empty text or label, and a label from the task's label set (STS-B: a number in its score
    range). Other rows are skipped and counted per reason; a row with an extra tab would shift
    its columns and be mislabelled, so it is never read. When more than ``max_skip_fraction`` of
    the rows (and more than ``MAX_SKIP_FLOOR``) are malformed, the file is not the task's and a
    ``CorpusError`` says so."""
    if not path.is_file():
        raise CorpusError(
            f"{task.name}: {path} not found; --glue-dir must hold the GLUE task folders as the "
            f"official download leaves them ({task.folder}/{', '.join(f for _, f in task.splits)})"
        )
    lines = _read_tsv_lines(path)
    rows, (i1, i2, il), width = _columns(task, path, lines)
    labels = set(task.labels)
    lo, hi = task.score_range
    out = []
    skipped = {"too_few_columns": 0, "too_many_columns": 0, "empty_field": 0, "unknown_label": 0}
    for n, row in enumerate(rows, 1):
        if n % PROGRESS_EVERY == 0:
            logger.info(f"{task.name} {path.name}: {n} of {len(rows)} rows checked")
        parts = row.split("\t")
        if len(parts) != width:
            skipped["too_few_columns" if len(parts) < width else "too_many_columns"] += 1
            continue
        t1 = parts[i1].strip()
        t2 = parts[i2].strip() if i2 is not None else None
        label = parts[il].strip()
        if not t1 or (i2 is not None and not t2) or not label:
            skipped["empty_field"] += 1
            continue
        if labels:
            ok = label in labels
        else:
            try:
                ok = lo <= float(label) <= hi
            except ValueError:
                ok = False
        if not ok:
            skipped["unknown_label"] += 1
            continue
        out.append(Example(t1, t2, label))
    skipped = {k: v for k, v in skipped.items() if v}
    n_bad = sum(skipped.values())
    what = ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in skipped.items())
    if not out:
        raise CorpusError(f"{path}: no usable {task.name} rows ({n_bad} malformed: {what})")
    if n_bad > MAX_SKIP_FLOOR and n_bad > max_skip_fraction * len(rows):
        raise CorpusError(
            f"{path}: {n_bad} of {len(rows)} rows are malformed ({what}), more than "
            f"--max-skip-fraction {max_skip_fraction}; is this the official {task.name} file? "
            f"(labels must be {', '.join(task.labels) or f'scores in [{lo}, {hi}]'}, {width} tab-separated columns)"
        )
    return out, skipped


def _tokenized(tokenizer: Tokenizer, texts: List[str], where: str):
    """``tokenizer(texts)`` in chunks of :data:`PROGRESS_EVERY`, a progress line after each
    chunk of a long input."""
    for start in range(0, len(texts), PROGRESS_EVERY):
        yield from tokenizer(texts[start : start + PROGRESS_EVERY])
        done = min(start + PROGRESS_EVERY, len(texts))
        if len(texts) > PROGRESS_EVERY:
            logger.info(f"{where}: {done} of {len(texts)} texts tokenized")


def select_tasks(glue_dir: Path, requested: Optional[List[str]] = None) -> List[str]:
    """The tasks to prepare: ``requested`` (each must be present: its missing files are an
    error naming them, as :func:`read_split_counted` says), or when none are requested every
    task whose folder ``glue_dir`` holds, the others logged as skipped. A ``glue_dir`` without
    any task folder is one error."""
    glue_dir = Path(glue_dir)
    if not glue_dir.is_dir():
        raise CorpusError(f"--glue-dir {glue_dir} is not a directory (the GLUE download folder)")
    if requested:
        unknown = [t for t in requested if t not in TASKS]
        if unknown:
            raise CorpusError(f"--tasks {' '.join(unknown)}: not a GLUE task ({', '.join(TASKS)})")
        return list(requested)
    present = [n for n, t in TASKS.items() if (glue_dir / t.folder).is_dir()]
    if not present:
        raise CorpusError(
            f"--glue-dir {glue_dir} holds none of the GLUE task folders ({', '.join(TASKS)}); give the "
            "folder the official download script writes"
        )
    missing = [n for n in TASKS if n not in present]
    if missing:
        logger.info(
            f"{glue_dir}: preparing {', '.join(present)}; skipped (no folder there): {', '.join(missing)}"
        )
    return present


@contextlib.contextmanager
def _raw_dir(work: Path):
    """Where the tokenized text goes before binarization: ``work/raw``, or a temporary
    directory when ``work``'s path holds a comma (fairseq-preprocess splits ``--validpref`` at
    commas, so the dev files would be read from paths that do not exist)."""
    if "," not in str(work):
        (work / "raw").mkdir()
        try:
            yield work / "raw"
        finally:
            shutil.rmtree(work / "raw", ignore_errors=True)
        return
    with tempfile.TemporaryDirectory(prefix="truneg-glue-") as tmp:
        if "," in tmp:
            raise CorpusError(
                f"--output-dir {work.parent}: its path holds a comma, where fairseq-preprocess splits "
                f"file lists, and so does the temporary directory {tmp}; set TMPDIR to a directory "
                "without a comma, or choose an output directory without one"
            )
        yield Path(tmp)


def read_task(task: GlueTask, glue_dir: Path, max_skip_fraction: float = MAX_SKIP_FRACTION):
    """Read and check every split of ``task`` (nothing written): (examples, skipped rows,
    skip reasons), each per split."""
    data, skipped, reasons = {}, {}, {}
    for split, fname in task.splits:
        data[split], reasons[split] = read_split_counted(
            task, glue_dir / task.folder / fname, max_skip_fraction
        )
        skipped[split] = sum(reasons[split].values())
        if skipped[split]:
            what = ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in reasons[split].items())
            logger.warning(f"{task.name} {fname}: skipped {skipped[split]} malformed rows ({what})")
        logger.info(f"{task.name} {fname}: {len(data[split])} examples")
    check_labels_seen_in_train(task, glue_dir, data)
    return data, skipped, reasons


def prepare_task(
    task: GlueTask,
    glue_dir: Path,
    out_dir: Path,
    tokenizer: Tokenizer,
    srcdict: Path,
    max_skip_fraction: float = MAX_SKIP_FRACTION,
    inputs: Optional[Dict[str, str]] = None,
    read: Optional[tuple] = None,
) -> Dict[str, int]:
    """Prepare one task into ``out_dir/TASK`` (atomically; ``inputs``, ``{flag: path}``, are never
    replaced: see :func:`~truneg_fairseq.outputs.atomic_dir`) from its files, or from what
    :func:`read_task` returned (``read``); returns skipped-row counts per split."""
    glue_dir, out_dir = Path(glue_dir), Path(out_dir)
    data, skipped, reasons = read or read_task(task, glue_dir, max_skip_fraction)
    with (
        atomic_dir(out_dir / task.name, "prepare_glue.py", inputs=inputs) as work,
        _raw_dir(work) as raw,
    ):
        for split, exs in data.items():
            where = f"{task.name} {split}"
            atomic_write_lines(
                raw / f"{split}.input0", _tokenized(tokenizer, [e.text1 for e in exs], where)
            )
            if task.sentence2 is not None:
                atomic_write_lines(
                    raw / f"{split}.input1", _tokenized(tokenizer, [e.text2 for e in exs], where)
                )
            atomic_write_lines(raw / f"{split}.label", [e.label for e in exs])
        valid_prefs = [raw / s for s, _ in task.splits if s != "train"]
        inputs = ["input0"] + (["input1"] if task.sentence2 is not None else [])
        for name in inputs:
            binarize(
                f"{raw / 'train'}.{name}",
                ",".join(f"{p}.{name}" for p in valid_prefs),
                work / name,
                srcdict=srcdict,
                name_as=out_dir / task.name / name,  # the log names the final folder
            )
        if task.num_classes == 1:  # regression: fairseq reads label/<split>.label as floats
            (work / "label").mkdir()
            for split, _ in task.splits:
                shutil.copyfile(raw / f"{split}.label", work / "label" / f"{split}.label")
        else:
            binarize(
                f"{raw / 'train'}.label",
                ",".join(f"{p}.label" for p in valid_prefs),
                work / "label",
                name_as=out_dir / task.name / "label",
            )
        meta = {
            "task": task.name,
            "num_classes": task.num_classes,
            "metric": task.metric,
            "examples": {s: len(e) for s, e in data.items()},
            "skipped": skipped,
            "skipped_reasons": reasons,
        }
        (work / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return skipped
