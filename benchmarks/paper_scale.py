"""A rehearsal of the paper's run on one machine: corpus preparation and both front ends on a
generated corpus of ``--size-mb`` MB, each stage's wall time, CPU time, peak memory and disk.

    python benchmarks/paper_scale.py [--workdir DIR] [--size-mb 1024] [--updates 20]
    python benchmarks/paper_scale.py --size-mb 100 --size-mb 1024   # two sizes, one table

Stages, each a command in a process of its own (what a user runs):

1. ``truneg-prepare-corpus --input TEXT`` (sentencepiece trained on a sample, the text
   tokenized and binarized), then ``truneg-build-synonyms`` for its dictionary;
2. ``fairseq-train`` with ``mlm_hard_correction``, ``--updates`` updates of a small RoBERTa
   (a few validation batches at the end): the data-bin opened, indexed and batched at scale;
3. ``truneg-hf-train --objective hard_correction``, ``--updates`` steps of a tiny BERT on the
   raw text (its WordPiece vocabulary trained on a sample of the text), then the same command
   with ``--max-steps`` raised by one: a resume, whose time to its first step is printed (the
   tokenized corpus should be read from its cache, not tokenized again).

The text is ``prepare_corpus_scale.make_text``'s: WordNet's glosses recombined, seeded, written
once into ``--workdir`` and reused. Peak memory is the largest resident set of the stage's
processes (``os.wait4``'s ``ru_maxrss`` of the command, which covers the children it waited
for; it counts the pages of memory-mapped files read, e.g. the data-bin and the tokenized Arrow
cache, which the kernel can drop); peak heap is the anonymous resident memory (``RssAnon``,
sampled every 0.2 s) of the main process and of the largest process: what the processes
themselves hold; disk is what the stage left under its output folder. The model sizes are tiny on purpose:
what is measured is what the corpus size does to each stage, not the training step.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def _bin(name: str) -> str:
    path = Path(sys.executable).with_name(name)
    return str(path) if path.is_file() else name


def disk_mb(path: Path) -> float:
    if not path.exists():
        return 0.0
    if path.is_file():
        return path.stat().st_size / 2**20
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def _anon_mb(pid: int) -> int:
    """The anonymous resident memory of process ``pid`` (its heap: what the process itself
    holds, not the pages of files it maps, which the kernel can drop), MiB; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 0


def _descendants(pid: int) -> list:
    """``pid`` and the processes it started (and theirs), from /proc."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, todo = [pid], [pid]
    while todo:
        here = todo.pop()
        kids = [p for p, parent in parents.items() if parent == here]
        found += kids
        todo += kids
    return found


def _watch_anon(pid: int, peaks: dict, stop: threading.Event) -> None:
    """Sample, every 0.2 s until ``stop``, the peak anonymous memory of the command's main
    process (``main``) and of its largest process (``any``: a worker included)."""
    while not stop.wait(0.2):
        for p in _descendants(pid):
            mb = _anon_mb(p)
            peaks["any"] = max(peaks.get("any", 0), mb)
            if p == pid:
                peaks["main"] = max(peaks.get("main", 0), mb)


def run_stage(name: str, cmd, out: Path, log: Path, env=None) -> dict:
    """Run ``cmd`` (its output to ``log``) and measure it; a failure stops the rehearsal."""
    t0 = time.time()
    peaks: dict = {}
    stop = threading.Event()
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
        watch = threading.Thread(target=_watch_anon, args=(proc.pid, peaks, stop), daemon=True)
        watch.start()
        _, status, usage = os.wait4(proc.pid, 0)
        stop.set()
        watch.join()
    wall = time.time() - t0
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"{name} failed ({code}); its log {log} ends:\n{tail}")
    return {
        "stage": name,
        "wall_s": round(wall, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "peak_rss_mb": round(usage.ru_maxrss / 1024),
        "peak_anon_main_mb": peaks.get("main", 0),
        "peak_anon_any_mb": peaks.get("any", 0),
        "disk_mb": round(disk_mb(out), 2),
        "started": t0,
    }


def first_step_s(log: Path, started: float) -> float:
    """Seconds from ``started`` (the command's start, time.time()) to its first logged training
    step, by the timestamp of the log's first ``num_updates`` line (whole seconds)."""
    import datetime as dt

    for line in log.read_text(errors="replace").splitlines():
        if "num_updates" not in line:
            continue
        try:
            stamp = dt.datetime.strptime(line[:19], "%Y-%m-%d %H:%M:%S").timestamp()
        except ValueError:
            continue
        return round(stamp - started)
    return float("nan")


def tiny_bert(text: Path, out: Path, sample_lines: int = 200_000) -> Path:
    """A tiny BertForMaskedLM with a 8k WordPiece vocabulary trained on the first lines of
    ``text``, saved with its fast tokenizer (what truneg-hf-train continues)."""
    from itertools import islice

    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import BertConfig, BertForMaskedLM, PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=8000, special_tokens=specials)
    with open(text, encoding="utf-8") as f:
        tok.train_from_iterator(islice(f, sample_lines), trainer=trainer)
    from tokenizers import processors

    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        do_lower_case=True,
    )
    config = BertConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=128,
    )
    BertForMaskedLM(config).save_pretrained(out)
    fast.save_pretrained(out)
    return out


def rehearse(workdir: Path, size_mb: int, updates: int, workers, shards: int = 1) -> dict:
    from prepare_corpus_scale import make_text

    workdir.mkdir(parents=True, exist_ok=True)
    text = workdir / f"english-{size_mb}mb.txt"
    if not text.is_file():
        t0 = time.time()
        make_text(str(text), size_mb)
        print(f"generated {text} in {time.time() - t0:.0f} s", flush=True)
    run = workdir / f"run-{size_mb}mb"
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    rows = []
    prepared = run / "prepared"
    cmd = [_bin("truneg-prepare-corpus"), "--input", str(text), "--output-dir", str(prepared)]
    cmd += ["--vocab-size", "8000"] + (["--workers", str(workers)] if workers else [])
    cmd += ["--shards", str(shards)]
    rows.append(run_stage("prepare corpus", cmd, prepared, run / "prepare.log", env))
    data_bin = prepared / "data-bin"
    table = data_bin / "synonyms.npz"
    cmd = [_bin("truneg-build-synonyms"), "--dict", str(data_bin / "dict.txt")]
    cmd += ["--tokenizer", "sentencepiece", "--spm-model", str(prepared / "spm.model")]
    cmd += ["--output", str(table)]
    rows.append(run_stage("synonym table", cmd, table, run / "table.log", env))

    save = run / "fairseq"
    data = ":".join([str(data_bin)] + [str(data_bin / f"shard{k}") for k in range(1, shards)])
    cmd = [_bin("fairseq-train"), data, "--user-dir", str(REPO / "truneg_fairseq")]
    cmd += ["--task", "batch_masked_lm", "--criterion", "mlm_hard_correction"]  # the recipes'
    cmd += ["--sample-break-mode", "complete", "--skip-invalid-size-inputs-valid-test"]
    cmd += ["--synonym-table", str(table), "--arch", "truneg_roberta_base"]
    cmd += ["--encoder-layers", "2", "--encoder-embed-dim", "64", "--encoder-ffn-embed-dim"]
    cmd += ["128", "--encoder-attention-heads", "2", "--tokens-per-sample", "128"]
    cmd += ["--batch-size", "16", "--optimizer", "adam", "--lr", "1e-4", "--cpu"]
    cmd += ["--max-update", str(updates), "--log-interval", "5", "--max-valid-steps", "5"]
    cmd += ["--save-dir", str(save), "--no-epoch-checkpoints", "--log-format", "simple"]
    cmd += ["--num-workers", "1"]
    rows.append(run_stage("fairseq-train", cmd, save, run / "fairseq.log", env))

    model = tiny_bert(text, run / "tiny-bert")
    out = run / "hf"
    hf = [_bin("truneg-hf-train"), str(model), "--train", str(text), "--output-dir", str(out)]
    hf_table = run / "hf-synonyms.npz"
    cmd = [_bin("truneg-hf-train"), str(model), "--build-synonyms", str(hf_table)]
    rows.append(
        run_stage("truneg-hf-train synonym table", cmd, hf_table, run / "hf-table.log", env)
    )
    hf += ["--objective", "hard_correction", "--synonym-table", str(hf_table)]
    hf += ["--seq-len", "128", "--batch-size", "16", "--cpu", "--log-steps", "5"]
    hf += ["--save-steps", str(updates), "--cache-dir", str(run / "hf-cache")]
    rows.append(
        run_stage("truneg-hf-train", [*hf, "--max-steps", str(updates)], out, run / "hf.log", env)
    )
    rows[-1]["first_step_s"] = first_step_s(run / "hf.log", rows[-1]["started"])
    again = [*hf, "--max-steps", str(updates + 1)]
    rows.append(run_stage("truneg-hf-train resume", again, out, run / "hf-resume.log", env))
    rows[-1]["first_step_s"] = first_step_s(run / "hf-resume.log", rows[-1]["started"])
    return {"text_mb": round(disk_mb(text), 1), "stages": rows}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "paper-scale"))
    p.add_argument("--size-mb", type=int, action="append", help="default: 1024 (repeatable)")
    p.add_argument("--updates", type=int, default=20)
    p.add_argument("--workers", type=int, default=None, help="default: every core")
    p.add_argument("--json", help="also write the numbers here")
    p.add_argument(
        "--shards",
        type=int,
        default=1,
        help="truneg-prepare-corpus --shards: fairseq-train then holds one shard's index",
    )
    args = p.parse_args(argv)
    results = [
        rehearse(Path(args.workdir), size, args.updates, args.workers, args.shards)
        for size in (args.size_mb or [1024])
    ]
    print(f"\n{os.cpu_count()} cores; load average now {os.getloadavg()}")
    print(
        "| text MB | stage | wall s | CPU s | peak RSS MB | peak heap MB (main / largest) | "
        "disk MB | to first step s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        for s in r["stages"]:
            first = s.get("first_step_s", "")
            print(
                f"| {r['text_mb']} | {s['stage']} | {s['wall_s']} | {s['cpu_s']} | "
                f"{s['peak_rss_mb']} | {s['peak_anon_main_mb']} / {s['peak_anon_any_mb']} | "
                f"{s['disk_mb']} | {first} |"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
