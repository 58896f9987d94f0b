"""The study's data: the word-level corpus (WordNet or the user's text, lower-cased, punctuation
split off, lines with a word outside the dictionary left out), its data-bin and the WordNet
synonym table of its dictionary. A step is reused only when made by the
same command from the same inputs (:meth:`Runner.reuse`)."""

from __future__ import annotations

import logging
import os
import re
from collections import Counter
from typing import Dict, List, Optional, Sequence, Tuple

from truneg_fairseq.outputs import atomic_open
from truneg_fairseq.pipelines.study.run import Runner
from truneg_fairseq.pipelines.study.setting import Setting

# lower-cased words (with an inner apostrophe), numbers, and every other character on its own
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?|[0-9]+|[^\sa-z0-9]")


def word_tokenize(line: str) -> str:
    """Lower-case ``line`` and split punctuation off the words ("Main, primary." -> "main ,
    primary .")."""
    return " ".join(_WORD.findall(line.lower()))


def prepare_data(
    work: str, setting: Setting, run: Runner, inputs: Optional[Sequence[str]] = None
) -> Tuple[str, str]:
    """Word-level corpus, data-bin and synonym table under ``work``; returns (data_bin, table)."""
    data_bin = os.path.join(work, "data-bin")
    table = os.path.join(data_bin, "synonyms.npz")
    text = os.path.join(work, "corpus.txt")
    sources = list(inputs) if inputs else [f"wordnet-glosses:{setting.corpus}"]
    made = ["corpus", *sources, f"max_lines={setting.max_lines}", f"vocab={setting.vocab_size}"]
    made += [f"tokens={setting.tokens_per_sample}", f"in_vocab_only={setting.in_vocab_only}"]
    desc = run.reuse("corpus", made, [text], f"{text} (the corpus)")
    if desc is not None:
        from truneg_fairseq.data.corpus_steps import read_text_lines, wordnet_gloss_lines

        raw = (
            (line for p in inputs for line in read_text_lines(p))
            if inputs
            else wordnet_gloss_lines(headwords=setting.corpus == "entries")
        )
        lines = corpus_lines(raw, setting, run.log)
        with atomic_open(text, "w", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in lines)
        run.log.info(f"{text}: {len(lines)} lines, lower-cased, punctuation split off")
        run.made("corpus", desc)
    from truneg_fairseq.errors import TrunegError
    from truneg_fairseq.pipelines.corpus import CorpusConfig, command_line, prepare_corpus
    from truneg_fairseq.text import TokenizerSpec

    def prepare(cfg):
        try:
            prepare_corpus(cfg, run.log)
        except TrunegError as e:  # the corpus, the tokenizer, the output directory
            raise SystemExit(f"error: prepare_corpus failed: {e}") from None

    cfg = CorpusConfig(
        output_dir=work,
        inputs=[text],
        tokenizer=TokenizerSpec("whitespace"),
        vocab_size=setting.vocab_size,
        valid_fraction=setting.valid_fraction,
        seed=setting.seed,
        keep_intermediates=True,  # raw/train.txt: the text the word vectors are counted on
    )
    cmd = command_line(cfg)
    outputs = [os.path.join(work, d) for d in ("data-bin", "raw", "tok")]
    what = f"{data_bin} (scripts/prepare_corpus.py --tokenizer whitespace)"
    desc = run.reuse("prepare_corpus", cmd, outputs, what, remove=False)  # it replaces its own
    if desc is not None:
        run.here(lambda: prepare(cfg), cmd, "prepare_corpus")
        run.made("prepare_corpus", desc)
    from truneg_fairseq.pipelines.build_synonym_table import command_line

    cmd = command_line(_table_config(data_bin, table))
    desc = run.reuse("synonym_table", cmd, [table], f"{table} (truneg-build-synonyms)")
    if desc is not None:
        run.here(lambda: build_synonym_table(data_bin, table, run.log), cmd, "synonym_table")
        run.made("synonym_table", desc)
    return data_bin, table


def _table_config(data_bin: str, table: str):
    from truneg_fairseq.pipelines.build_synonym_table import SynonymTableConfig
    from truneg_fairseq.text import TokenizerSpec

    dict_txt = os.path.join(data_bin, "dict.txt")
    return SynonymTableConfig(dict=dict_txt, output=table, tokenizer=TokenizerSpec("whitespace"))


def build_synonym_table(data_bin: str, table: str, log: logging.Logger) -> None:
    """The WordNet synonym table of the word-level dictionary (what ``truneg-build-synonyms
    --tokenizer whitespace`` writes), built by the command's library function."""
    from truneg_fairseq.pipelines import build_synonym_table as command

    report, view = command.build_synonym_table(_table_config(data_bin, table))
    log.info(f"{table}: {report.num_pairs} synonym pairs; {report.describe(len(view.symbols))}")


def corpus_lines(raw, setting: Setting, log: logging.Logger) -> List[str]:
    """Tokenized lines (:func:`word_tokenize`) of ``raw`` for the setting: at most
    ``max_lines``; lines longer than a sample left out; with ``in_vocab_only`` also the lines
    holding a word outside the ``vocab_size`` most frequent ones (each count logged)."""
    lines, too_long = [], 0
    for line in raw:
        words = word_tokenize(line)
        if not words:
            continue
        if len(words.split()) > setting.tokens_per_sample - 2:  # <s> and </s> take two positions
            too_long += 1
            continue
        lines.append(words)
        if setting.max_lines and len(lines) >= setting.max_lines:
            break
    if too_long:
        log.info(f"left out {too_long} lines longer than {setting.tokens_per_sample - 2} words")
    if setting.in_vocab_only:
        counts = Counter(w for line in lines for w in line.split())
        keep = {w for w, _ in counts.most_common(setting.vocab_size)}
        kept = [line for line in lines if all(w in keep for w in line.split())]
        log.info(
            f"kept {len(kept)} of {len(lines)} lines: {len(lines) - len(kept)} hold a word outside the "
            f"{len(keep)} most frequent (the dictionary), so no <unk> is left to predict"
        )
        lines = kept
    return lines


def unknown_rates(data_bin: str) -> Dict[str, float]:
    """% of the tokens of each split that are <unk> (fairseq-preprocess's preprocess.log)."""
    out = {}
    path = os.path.join(data_bin, "preprocess.log")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                m = re.search(r"/(\w+)\.txt: .*?([0-9.]+)% replaced", line)
                if m:
                    out[m.group(1)] = float(m.group(2))
    return out
