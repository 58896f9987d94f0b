"""The built-in demo: false negatives appear, and the criterions act on them.

1. corpus     WordNet read as a dictionary: one line per entry ("chief , main , primary , principal
              : most important element") and per example sentence, lower-cased, punctuation
              split off; a word-level dictionary of the --vocab-size most frequent words (every
              content word is one entry); lines with a word outside it are left out (counted in
              the log), so <unk> is never an answer to learn
2. table      the WordNet synonym table of that dictionary
3. stage 1    one small pre-LN RoBERTa trained from scratch with mlm_plain (fairseq's masked_lm
              loss, with the false-negative ratios in its log; --stage1-updates, one
              learning-rate schedule over both stages)
4. stage 2    the same checkpoint continued with mlm_plain, mlm_hard_correction and mlm_soft_reg
              (--criteria; mlm_sent_kl is in the study) for --stage2-updates each (same seed, same batches), checkpoints at
              --points evenly spaced updates
5. scores     every checkpoint on the same masked valid blocks: MLM loss and accuracy,
              synonym-aware accuracy (a synonym prediction counted as right), the prediction- and
              iteration-level correction ratios of the paper's Table 2, the share of predictions
              that are content words; 5 Figure-3-style cases (sentence, gold, prediction, the
              gold's WordNet synonyms) from the last checkpoints

The table is printed and written to WORKDIR/results/ (results.json, progress.tsv, the Table-2
views, cases.txt, commands.sh with every command run). Steps made earlier by the same command
from the same inputs are reused; --force redoes everything (it removes only what the demo wrote in WORKDIR). The study
(examples/study/) runs the same pipeline at other sizes, with ELECTRA, and plots the curves.
"""

import argparse
import dataclasses
import os
import time

from truneg_fairseq.cli.args import add_jobs_arg, command_parser
from truneg_fairseq.cli.common import count_arg, fail, interruptible, setup_logging

# The demo's model is the study's CPU_ROBERTA_ARCH (imported in main once the arguments are
# checked: --help and bad flags answer without loading torch): fairseq's RoBERTa with
# pre-LayerNorm (post-LN at this size and budget stays in the unigram plateau, predicting
# separators), 4 layers x 128. Its token embeddings start from count-based word vectors of the
# training text (scripts/word_vectors.py).
# stage 1's criterion: fairseq's masked_lm loss, whose log holds the ratios as the others' do
BASELINE = "mlm_plain"
# sentence-KL (about 2.4x the step time of the others) is in the study, not in the demo's budget
DEMO_CRITERIA = [BASELINE, "mlm_hard_correction", "mlm_soft_reg"]
# the columns of the tables the demo prints (the first look's and the full run's)
COLUMNS = "\n".join(
    (
        "update: stage-2 updates of the run (0: the shared stage-1 checkpoint)",
        "valid loss: the masked-LM loss per masked word, in bits",
        "MLM acc: % of masked words predicted exactly",
        "pred-level: % of mispredicted masked words whose prediction is a WordNet synonym of the "
        "gold word",
        "iter-level: % of masked lines with at least one (512: the lines packed into 512-token "
        "units, the paper's sequence length)",
        "syn-aware acc: a synonym prediction counted as right",
        "content preds: % of predictions that are content words (not stopwords or punctuation)",
    )
)


def get_parser():
    p = command_parser(__doc__)
    p.add_argument(
        "--workdir",
        required=True,
        metavar="DIR",
        help="where data, checkpoints and results go, created if missing (make demo: "
        "--workdir demo_work); the full run takes about 12 minutes on 2 CPU cores",
    )
    p.add_argument(
        "--criteria", nargs="+", default=DEMO_CRITERIA, help="criterions continued from stage 1"
    )
    p.add_argument(
        "--stage1-updates",
        type=int,
        default=1200,
        help="plain masked-LM (mlm_plain) updates from scratch (default 1200)",
    )
    p.add_argument(
        "--stage2-updates",
        type=int,
        default=400,
        help="updates per continued criterion (default 400)",
    )
    p.add_argument(
        "--points",
        type=int,
        default=4,
        help="checkpoints scored per continuation (default 4: 25/50/75/100%%)",
    )
    p.add_argument(
        "--batch-size",
        type=int,
        default=128,
        help="lines (one sample each) per update (default 128)",
    )
    p.add_argument("--lr", type=float, default=2e-3, help="peak learning rate (default 2e-3)")
    p.add_argument(
        "--warmup", type=int, default=100, help="warm-up updates of stage 1 (default 100)"
    )
    p.add_argument(
        "--vocab-size", type=int, default=16000, help="words in the dictionary (default 16000)"
    )
    add_jobs_arg(p)
    p.add_argument("--cases", type=int, default=5, help="Figure-3-style cases printed (default 5)")
    p.add_argument(
        "--force",
        action="store_true",
        help="redo everything: remove what an earlier demo run wrote in WORKDIR (other files there are kept)",
    )
    p.add_argument(
        "--first-look-updates",
        type=count_arg,
        default=100,
        metavar="N",
        help="stage-1 updates of the first look printed before the full run (default 100; "
        "stage 2: N/3 per criterion; 0: no first look)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="stop after the first look (make demo-quick): a small table in about two minutes",
    )
    # corpus lines kept (0: all): tiny runs in the tests
    p.add_argument("--max-lines", type=count_arg, default=0, help=argparse.SUPPRESS)
    return p


def first_look(setting, work: str, data_bin: str, table: str, updates: int, log) -> dict:
    """The pipeline at a small size on the same data (stage 1: ``updates``, stage 2: a third of
    that per criterion, scored once, one mask draw), under ``work``/first_look; prints its
    table and returns the reports."""
    from truneg_fairseq.pipelines import study

    quick = dataclasses.replace(
        setting,
        stage1_updates=updates,
        stage2_updates=max(1, updates // 3),
        points=1,
        warmup=min(setting.warmup, max(1, updates // 5)),
        eval_passes=1,
    )
    fl_work = os.path.join(work, "first_look")
    os.makedirs(fl_work, exist_ok=True)
    run = study.Runner(fl_work, log)
    log.info(
        f"first look: stage 1 {quick.stage1_updates} updates, stage 2 {quick.stage2_updates} "
        "updates per criterion, scored on one mask draw of the valid lines"
    )
    study.train_all(quick, fl_work, data_bin, table, run)
    scores = study.score_all(quick, fl_work, data_bin, table, 0, log)
    out = os.path.join(fl_work, "results")
    meta = dict(scores.meta(), setting=study.asdict(quick), train_seconds=run.seconds)
    study.write_results(out, scores.reports, [], meta)
    run.write_commands(os.path.join(out, "commands.sh"))
    print(
        f"\nFirst look: stage 1 {BASELINE} {quick.stage1_updates} updates, then each criterion "
        f"{quick.stage2_updates} updates ({scores.valid_masked} masked valid words, the same "
        f"masks for every checkpoint; results in {out}):\n"
    )
    print(study.format_rows(study.progress_table(scores.reports)), flush=True)
    print(f"\n{COLUMNS}", flush=True)
    note = first_look_note(scores.reports, quick.stage1_updates)
    if note:
        print(f"\n{note}", flush=True)
    return scores.reports


def first_look_note(reports, updates: int) -> str:
    """What a first look without a single synonym prediction shows ('' when it has one): at
    this size the model predicts the most frequent words and punctuation, none of which can be
    a synonym, so every false-negative column is 0 and the criterions have nothing to act on."""
    rows = [r for by_update in reports.values() for r in by_update.values()]
    if any((r.pred_corr_ratio or 0) > 0 for r in rows):
        return ""
    content = max((r.content_pred or 0) for r in rows)
    loss = min(r.mlm_loss for r in rows)
    return (
        f"What this first look shows: after {updates} updates the model is still at the "
        f"frequency stage (valid loss {loss:.2f} bits; at most {content:.1f}% of its "
        "predictions are content words): it predicts frequent words and punctuation, none of "
        "them a WordNet synonym, so the false-negative columns are 0, hard correction has "
        "nothing to correct (its rows equal the baseline) and there are no cases yet. It shows "
        "the pipeline end to end on this machine; false negatives need a model that predicts "
        "content words: the full run (without --quick) shows them, with cases, or give the "
        "first look more updates (--first-look-updates)."
    )


@interruptible
def main(argv=None) -> int:
    args = get_parser().parse_args(argv)
    t_start = time.time()
    if args.quick and not args.first_look_updates:
        fail("--quick runs the first look only: give --first-look-updates N > 0 with it")
    if args.warmup >= args.stage1_updates:
        fail(
            f"--warmup {args.warmup}: the warm-up must end within stage 1 (--stage1-updates "
            f"{args.stage1_updates}): give a smaller --warmup or more --stage1-updates"
        )
    if args.points < 1 or args.stage2_updates < args.points:
        fail(
            f"--stage2-updates {args.stage2_updates}, --points {args.points}: stage 2 needs at "
            "least one update per scored point"
        )
    log = setup_logging("truneg_fairseq.demo")
    work = os.path.abspath(args.workdir)
    from truneg_fairseq.errors import OutputDirError
    from truneg_fairseq.pipelines.study.workdir import claim_workdir

    try:
        claim_workdir(work, "truneg-demo", "--workdir", args.force, log)
    except OutputDirError as e:
        fail(str(e))
    from truneg_fairseq.pipelines import study
    from truneg_fairseq.pipelines.study.presets import CPU_ROBERTA_ARCH

    setting = study.Setting(
        max_lines=args.max_lines,
        vocab_size=args.vocab_size,
        batch_size=args.batch_size,
        lr=args.lr,
        warmup=args.warmup,
        stage1_updates=args.stage1_updates,
        stage2_updates=args.stage2_updates,
        points=args.points,
        jobs=args.jobs,
        families=[
            study.Family(
                "roberta", "masked_lm", list(CPU_ROBERTA_ARCH), BASELINE, list(args.criteria)
            )
        ],
    )
    run = study.Runner(work, log)
    log.info("[1/5] corpus + [2/5] synonym table")
    data_bin, table = study.prepare_data(work, setting, run)
    unk = study.unknown_rates(data_bin)
    if args.first_look_updates:
        study.write_word_vectors(setting, work, data_bin, run)  # shared with the full run
        first_look(setting, work, data_bin, table, args.first_look_updates, log)
        print(f"(first look after {time.time() - t_start:.0f}s)", flush=True)
        if args.quick:
            return 0
        print("\nThe full run goes on (--quick stops after the first look).\n", flush=True)
    log.info("[3/5] stage 1 + [4/5] stage 2")
    study.train_all(setting, work, data_bin, table, run)
    log.info("[5/5] scoring every checkpoint on the same masked valid blocks")
    scores = study.score_all(setting, work, data_bin, table, args.cases, log)
    results, cases, meta = scores.reports, scores.cases, scores.meta()
    out = os.path.join(work, "results")
    meta.update(unk_rate=unk, setting=study.asdict(setting), train_seconds=run.seconds)
    study.write_results(out, results, cases, meta)
    run.write_commands(os.path.join(out, "commands.sh"))

    print()
    print(
        f"Demo on WordNet's entries and examples: word-level dictionary of {args.vocab_size} words (<unk>: "
        f"{unk.get('train', float('nan')):.2f}% of train tokens, {unk.get('valid', float('nan')):.2f}% of valid), "
        f"pre-LN RoBERTa 4 x 128, batches of {args.batch_size} lines; stage 1: {BASELINE} "
        f"{args.stage1_updates} updates; stage 2: each criterion {args.stage2_updates} updates from that checkpoint "
        f"(update 0 = the shared start)."
    )
    print(
        f"Valid split: {meta['valid_masked']} masked words ({setting.eval_passes} mask draws over its lines: "
        f"{meta['valid_blocks']} masked lines), the same masks for every checkpoint.\n"
    )
    print(study.format_rows(study.progress_table(results)))
    print(f"\n{COLUMNS}")
    print(f"\nFigure-3-style cases from the last checkpoints ({len(cases)}):")
    for i, c in enumerate(cases):
        print(f"{c.format(i + 1)}\n  ({os.path.relpath(c.checkpoint, work)})")
    train_s = sum(v for k, v in run.seconds.items() if k.startswith("train_"))
    print(f"\nresults: {out}    tensorboard --logdir {os.path.join(work, 'tb')}")
    print(
        f"total {time.time() - t_start:.0f}s (training {train_s:.0f}s; steps reused from an earlier run not counted)"
    )
    return 0
