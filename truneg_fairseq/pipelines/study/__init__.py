"""Counter-false-negative pre-training measured over training (the paper's Table 2 and Figure 3).

The pipeline that ``scripts/demo.py`` and ``examples/study/run_study.py`` share:

1. corpus   WordNet as a dictionary (or the user's text), lower-cased, punctuation split off,
            one line per entry ("chief , main , primary , principal : most important element")
            and per example sentence; a word-level dictionary of the most frequent words
            (``prepare_corpus.py --tokenizer whitespace --vocab-size N``): every content word is
            one entry, so every mispredicted masked word can be a synonym prediction. Lines with
            a word outside the dictionary are left out (counted in the log): the model never
            learns ``<unk>`` as an answer, which would otherwise be its most frequent prediction;
2. table    the WordNet synonym table of that dictionary (what ``build_synonym_table.py`` builds,
            built in this process: WordNet is loaded here already for the corpus);
3. stage 1  one plain pre-training per model family (``mlm_plain`` for RoBERTa, ``electra``
            for ELECTRA, both given the synonym table: the loss of fairseq's ``masked_lm`` and
            ELECTRA's, with the false-negative ratios in the training log) from scratch: the
            shared start, as the paper continues its base models;
4. stage 2  each criterion continued from that same checkpoint for the same number of updates
            (``--restore-file ... --reset-optimizer --reset-dataloader --reset-meters
            --reset-lr-scheduler``), the learning rate going on from where stage 1 left it and
            decaying to 0, checkpoints at ``--save-interval-updates``;
5. scoring  every checkpoint on the same masked valid blocks
            (:class:`truneg_fairseq.pipelines.scorer.FixedMaskScorer`: the criterions' own
            accounting, :mod:`truneg_fairseq.evaluation.false_negatives`), results as typed
            records (:class:`Scores`).

Independent trainings (the families' stage 1s, then every continuation) and the scorings run
side by side, ``Setting.jobs`` at a time (default: one per usable CPU core, one thread each; one
at a time on a GPU). Every training goes through the real ``fairseq-train`` command line (``python -m
fairseq_cli.train --user-dir truneg_fairseq``); the exact commands are written to
``commands.sh`` in the results folder (the synonym table and the word vectors, built in this
process, as the script commands that build the same files). A step is reused only when its
outputs were made by the same command from the same inputs (``.truneg-stages.json`` in the work
directory records each step's command with its inputs' fingerprints); one made otherwise is
made again, and the log says what differs.

Each step lives in its own module: :mod:`.setting` (families, the setting), :mod:`.run` (the
runner of commands), :mod:`.corpus` (corpus lines, data-bin, synonym table), :mod:`.train`
(training plans and their commands), :mod:`.score` (scoring into :class:`Scores`) and
:mod:`.report` (tables, plots, the summary). The names the scripts use are importable from here.
"""

from dataclasses import asdict

from truneg_fairseq.pipelines.study.report import (
    COLUMNS,
    format_rows,
    machine_description,
    markdown_rows,
    plot,
    progress_table,
    table2,
    write_results,
    write_summary,
)
from truneg_fairseq.pipelines.study.run import Runner, default_jobs, thread_env, usable_cpus
from truneg_fairseq.pipelines.study.score import Scores, score_all
from truneg_fairseq.pipelines.study.setting import REPO, USER_DIR, Family, Setting, run_id
from truneg_fairseq.pipelines.study.study_data import (
    build_synonym_table,
    corpus_lines,
    prepare_data,
    unknown_rates,
    word_tokenize,
)
from truneg_fairseq.pipelines.study.train import (
    embed_init_flag,
    train_all,
    train_command,
    vectors_path,
    write_word_vectors,
)

__all__ = [
    "COLUMNS",
    "REPO",
    "USER_DIR",
    "Family",
    "Runner",
    "Scores",
    "Setting",
    "asdict",
    "build_synonym_table",
    "corpus_lines",
    "default_jobs",
    "embed_init_flag",
    "format_rows",
    "machine_description",
    "markdown_rows",
    "plot",
    "prepare_data",
    "progress_table",
    "run_id",
    "score_all",
    "table2",
    "thread_env",
    "train_all",
    "train_command",
    "unknown_rates",
    "usable_cpus",
    "vectors_path",
    "word_tokenize",
    "write_results",
    "write_summary",
    "write_word_vectors",
]
