"""CLINE end to end: the training triples' data-bin from raw sentences
(``truneg-make-cline-data``) and the Hits evaluation of checkpoints on (ori, syn, ant) triplets
(``truneg-cline-hits``). Bad input raises :class:`~truneg_fairseq.errors.ClineDataError` or
:class:`~truneg_fairseq.errors.CorpusError` naming the file or flag and the fix."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from truneg_fairseq.errors import ClineDataError
from truneg_fairseq.text import TokenizerSpec

logger = logging.getLogger(__name__)


# ---- the training triples ------------------------------------------------------------------------
@dataclass
class ClineDataConfig:
    """Where the sentences come from (exactly one of ``train``, ``input``, ``wordnet_glosses``)
    and how the triples are made."""

    output_dir: str
    tokenizer: TokenizerSpec
    train: Optional[str] = None  # training sentences (with an optional ``valid``)
    valid: Optional[str] = None
    input: List[str] = field(default_factory=list)  # split (seeded) into train/valid
    wordnet_glosses: bool = False  # WordNet's glosses and examples as the corpus
    valid_fraction: float = 0.01
    max_lines: int = 0  # of ``input`` / the glosses (0: all)
    dict: Optional[str] = None  # the dict.txt of the model continued (default: built)
    syn_rate: float = 0.4
    ant_rate: float = 0.2
    seed: int = 1
    workers: int = 1
    log_every: int = 100000

    def inputs(self) -> Dict[str, str]:
        """``{flag: path}`` of every input file of the run."""
        t = self.tokenizer
        named = [
            ("--train", self.train),
            ("--valid", self.valid),
            ("--dict", self.dict),
            ("--spm-model", t.spm_model),
            ("--gpt2-encoder-json", t.gpt2_encoder_json),
            ("--gpt2-vocab-bpe", t.gpt2_vocab_bpe),
            ("--vocab", t.vocab),
        ]
        many = len(self.input) > 1
        named += [(f"--input[{i}]" if many else "--input", p) for i, p in enumerate(self.input, 1)]
        return {flag: p for flag, p in named if p}


def _files_written(cfg: ClineDataConfig, splits: Sequence[str]) -> List[Path]:
    """The files a run writes: the split text, the tokenized triples, the summary and the
    data-bin."""
    out = Path(cfg.output_dir)
    files = [out / "cline_summary.json"]
    if not cfg.train:
        files += [out / "raw" / f"{s}.txt" for s in ("train", "valid")]
    data_bin = out / "data-bin"
    files += [data_bin / "dict.txt", data_bin / "cline_meta.json"]
    for s in splits:
        for part in ("ori", "syn", "ant", "syn_label", "ant_label"):
            files.append(out / "tok" / f"{s}.{part}")
            files += [data_bin / f"{s}.{part}.{ext}" for ext in ("bin", "idx")]
    return files


def check_inputs_kept(cfg: ClineDataConfig, splits: Sequence[str]) -> None:
    """An input is never replaced by an output of the run: one error naming its flag, before
    anything is written (the data-bin's writer checks its files again when it swaps them in)."""
    ins = [(flag, os.path.realpath(p)) for flag, p in cfg.inputs().items()]
    for target in _files_written(cfg, splits):
        real = os.path.realpath(target)
        for flag, p in ins:
            if real == p or real.startswith(p.rstrip(os.sep) + os.sep):
                raise ClineDataError(
                    f"{flag} {p} would be overwritten by this run's {target}: copy it out of "
                    f"{cfg.output_dir} and give the copy, or choose another --output-dir"
                )


def build_cline_data(cfg: ClineDataConfig) -> dict:
    """Split the sentences when asked, then build the aligned (x_ori, x_syn, x_ant) triples and
    their data-bin under ``cfg.output_dir``; returns the summary per split."""
    from truneg_fairseq.data import cline_data as cline
    from truneg_fairseq.data import corpus_steps

    if cfg.valid and not cfg.train:
        raise ClineDataError(
            "--valid goes with --train (with --input the valid split is drawn by --valid-fraction)"
        )
    if sum(map(bool, (cfg.train, cfg.input, cfg.wordnet_glosses))) != 1:
        raise ClineDataError("give exactly one of --train, --input and --wordnet-glosses")
    splits = ["train", "valid"] if (cfg.valid or not cfg.train) else ["train"]
    check_inputs_kept(cfg, splits)
    if cfg.train:
        paths = {"train": cfg.train, **({"valid": cfg.valid} if cfg.valid else {})}
    else:
        if cfg.wordnet_glosses:
            lines = list(corpus_steps.wordnet_gloss_lines())
        else:
            lines = []
            for path in cfg.input:
                lines += [" ".join(line.split()) for line in corpus_steps.read_text_lines(path)]
        if cfg.max_lines:
            lines = lines[: cfg.max_lines]
        if not any(lines):
            raise ClineDataError(
                f"--input {' '.join(cfg.input)}: no text (all lines empty); give one sentence "
                "per line"
            )
        raw = os.path.join(cfg.output_dir, "raw")
        _, _, n_train, n_valid = corpus_steps.write_split_corpus(
            lines, raw, cfg.valid_fraction, cfg.seed
        )
        logger.info(f"split: {n_train} train, {n_valid} valid sentences")
        paths = {s: os.path.join(raw, f"{s}.txt") for s in ("train", "valid")}
    settings = cline.Settings(
        seed=cfg.seed, syn_rate=cfg.syn_rate, ant_rate=cfg.ant_rate, tokenizer=cfg.tokenizer
    )
    return cline.make_cline_data(
        paths,
        cfg.output_dir,
        settings,
        srcdict=cfg.dict,
        workers=max(1, cfg.workers),
        log_every=cfg.log_every,
        inputs=cfg.inputs(),
    )


# ---- Hits -----------------------------------------------------------------------------------------
@dataclass
class HitsConfig:
    """Checkpoints scored on the same triplets, read from ``triplets`` (TSV) or made from
    ``sentences``."""

    checkpoints: List[str]
    data: str  # directory with the checkpoints' dict.txt
    tokenizer: TokenizerSpec
    triplets: Optional[str] = None
    sentences: Optional[str] = None
    save_triplets: Optional[str] = None  # TSV of the triplets made from ``sentences``
    max_triplets: int = 0
    batch_size: int = 32
    seed: int = 1


def read_triplets(path: str) -> List[Tuple[str, str, str]]:
    """ori<TAB>syn<TAB>ant per line (blank lines skipped)."""
    out = []
    try:
        f = open(path, encoding="utf-8")
    except OSError as e:
        raise ClineDataError(f"--triplets {path}: cannot read it ({e.strerror or e})") from None
    with f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            parts = line.rstrip("\r\n").split("\t")
            if len(parts) != 3 or not all(p.strip() for p in parts):
                raise ClineDataError(
                    f"{path}, line {i}: expected 3 tab-separated sentences (ori, syn, ant), got "
                    f"{len(parts)} fields"
                )
            out.append(tuple(parts))
    if not out:
        raise ClineDataError(f"{path}: no triplets")
    return out


def hits_triplets(cfg: HitsConfig) -> List[Tuple[str, str, str]]:
    """The triplets of the run: read, or made from the sentences (and saved when asked)."""
    if cfg.triplets:
        triplets = read_triplets(cfg.triplets)
    else:
        from truneg_fairseq.data import cline_data as cline
        from truneg_fairseq.lexicon import load_wordnet
        from truneg_fairseq.lexicon.replace import Lexicon
        from truneg_fairseq.outputs import atomic_open, write_errors

        lines, _ = cline.read_sentences(cfg.sentences)
        triplets, skipped = cline.make_hits_triplets(lines, Lexicon(load_wordnet()), seed=cfg.seed)
        logger.info(
            f"{len(triplets)} triplets from {len(lines)} sentences ({skipped} skipped: no word "
            "with both a synonym and an antonym)"
        )
        if not triplets:
            raise ClineDataError(
                f"--sentences {cfg.sentences}: no sentence has a word with both a WordNet "
                "synonym and antonym"
            )
        if cfg.save_triplets:
            out = cfg.save_triplets
            with write_errors(out), atomic_open(out, "w", encoding="utf-8") as f:
                f.writelines("\t".join(t) + "\n" for t in triplets)
    return triplets[: cfg.max_triplets] if cfg.max_triplets else triplets


def cline_hits(cfg: HitsConfig) -> Tuple[int, Dict[str, dict]]:
    """(number of triplets, {checkpoint: {method: Hits % per layer}}). Raises
    :class:`~truneg_fairseq.checkpoints.CheckpointError` for a checkpoint that cannot be used
    (checked before the triplets are built) and ``ValueError`` naming the checkpoint."""
    from truneg_fairseq.checkpoints import CheckpointError, data_dir_for, load_for_inference
    from truneg_fairseq.evaluation import hits as hits_eval
    from truneg_fairseq.text import PieceEncoder

    for ck in cfg.checkpoints:
        if not os.path.isfile(ck):
            raise CheckpointError(f"checkpoint {ck} not found")
    data_dir_for(cfg.checkpoints[0], None, cfg.data)
    encoder = PieceEncoder(cfg.tokenizer)
    triplets = hits_triplets(cfg)

    import truneg_fairseq

    truneg_fairseq.register()
    results = {}
    for ck in cfg.checkpoints:
        models, _, task = load_for_inference(ck, cfg.data)
        model = models[0]
        try:
            results[ck] = hits_eval.hits(
                model,
                task.source_dictionary,
                encoder,
                triplets,
                cfg.batch_size,
                max_positions=model.max_positions() or 512,
            )
        except ValueError as e:
            raise ValueError(f"{ck}: {e}") from None
    return len(triplets), results
