"""Counter-false-negative pre-training over training: the paper's Table 2 (correction ratios at
20/40/60/80/100% of training), the MLM-side effects and Figure-3 cases, from one command.

For each model family (RoBERTa with fairseq's masked_lm task, the plugin's ELECTRA), one plain
first stage from scratch (mlm_plain: fairseq's masked_lm loss / electra, both logging the
false-negative ratios), then the baseline, mlm_hard_correction (HC),
mlm_soft_reg (SR) and mlm_sent_kl (sentence-level KL) each continued from that same checkpoint
for the same number of updates, with checkpoints at 20/40/60/80/100% of the continuation. Every
checkpoint is scored on the same masked valid blocks (for ELECTRA: its generator).

Writes to --out (default WORKDIR/results):
  table2_pred_level.tsv, table2_iter_level.tsv   the paper's Table 2 layout
  progress.tsv                                   every scored checkpoint: valid loss, MLM acc,
                                                 synonym-aware acc, both ratios, content predictions
  ratios.png, losses.png                         the curves over updates (matplotlib)
  cases.txt                                      Figure-3-style cases from the last checkpoints
  results.json                                   all numbers, the setting and the timings
  commands.sh                                    every command run, in order
  summary.md                                     the tables in Markdown, with the machine

Scales (--scale):
  tiny   a few updates of a 2 x 32 model on 2,000 lines (the test suite runs it)
  cpu    4 x 128 RoBERTa (the demo's model, embeddings started from count-based word vectors)
         and ELECTRA (generator 1/2 width) on WordNet's entries and examples, batches of 128
         lines, 1,200 + 500 updates, for 2 CPU cores
  gpu    ELECTRA-small sizes (12 x 256, generator 1/4 width; RoBERTa 12 x 256) with batches of
         512 lines, 20k + 10k updates: for one CUDA GPU (--cpu is dropped)

Example:
  truneg-study --scale cpu --workdir study_work
  truneg-study --scale gpu --workdir study_gpu --input corpus/*.txt
"""

import os
import sys

from truneg_fairseq.cli.args import add_jobs_arg, command_parser
from truneg_fairseq.cli.common import fail, interruptible, setup_logging
from truneg_fairseq.pipelines.study.presets import ELECTRA_CRITERIA, ROBERTA_CRITERIA, SCALES


def get_parser():
    p = command_parser(__doc__)
    p.add_argument(
        "--scale",
        choices=sorted(SCALES),
        default="cpu",
        help="preset sizes and budgets (default cpu)",
    )
    p.add_argument(
        "--workdir",
        required=True,
        metavar="DIR",
        help="where data, checkpoints and logs go, created if missing (make study: "
        "--workdir study_work)",
    )
    p.add_argument("--out", help="results folder (default WORKDIR/results)")
    p.add_argument(
        "--input", nargs="+", help="your own text files instead of WordNet's entries and examples"
    )
    p.add_argument(
        "--no-embed-init",
        action="store_true",
        help="RoBERTa's stage 1 from random embeddings (default: from count-based word vectors)",
    )
    p.add_argument(
        "--families", nargs="+", choices=["roberta", "electra"], default=["roberta", "electra"]
    )
    p.add_argument("--roberta-criteria", nargs="+", default=ROBERTA_CRITERIA)
    p.add_argument("--electra-criteria", nargs="+", default=ELECTRA_CRITERIA)
    p.add_argument("--stage1-updates", type=int, help="override the scale's stage-1 updates")
    p.add_argument(
        "--stage2-updates", type=int, help="override the scale's updates per continuation"
    )
    p.add_argument(
        "--batch-size", type=int, help="override the scale's batch size (lines, one sample each)"
    )
    p.add_argument("--lr", type=float, help="override the scale's peak learning rate")
    p.add_argument("--vocab-size", type=int, help="override the scale's dictionary size (words)")
    p.add_argument(
        "--points",
        type=int,
        default=5,
        help="checkpoints per continuation (default 5: 20/40/60/80/100%%)",
    )
    add_jobs_arg(p)
    p.add_argument("--cases", type=int, default=5, help="Figure-3-style cases kept (default 5)")
    p.add_argument(
        "--no-plots", action="store_true", help="skip the PNG plots (no matplotlib needed)"
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="redo everything: remove what an earlier run wrote in WORKDIR (other files there are kept)",
    )
    p.add_argument(
        "--train-args", default="", help="extra fairseq-train flags for every run, e.g. '--amp'"
    )
    return p


@interruptible
def main(argv=None) -> int:
    args = get_parser().parse_args(argv)
    log = setup_logging("truneg_fairseq.pipelines.study")
    from truneg_fairseq.errors import CorpusError, OutputDirError
    from truneg_fairseq.pipelines import study
    from truneg_fairseq.pipelines.study.pipeline import StudyConfig, run_study

    cfg = StudyConfig(
        scale=args.scale,
        workdir=args.workdir,
        out=args.out,
        inputs=list(args.input or []),
        embed_init=not args.no_embed_init,
        families=list(args.families),
        roberta_criteria=list(args.roberta_criteria),
        electra_criteria=list(args.electra_criteria),
        stage1_updates=args.stage1_updates,
        stage2_updates=args.stage2_updates,
        batch_size=args.batch_size,
        lr=args.lr,
        vocab_size=args.vocab_size,
        points=args.points,
        jobs=args.jobs,
        cases=args.cases,
        plots=not args.no_plots,
        force=args.force,
        train_args=args.train_args.split(),
        command=" ".join(sys.argv if argv is None else ["truneg-study", *argv]),
    )
    try:
        res = run_study(cfg, log)
    except (CorpusError, OutputDirError) as e:
        fail(str(e))
    results = res.results
    print(study.format_rows(study.table2(results, "pred_corr_ratio", "pred-level % at")))
    print()
    print(study.format_rows(study.table2(results, "iter_corr_ratio", "iter-level % at")))
    print()
    print(study.format_rows(study.progress_table(results)))
    plots = ", ".join(os.path.basename(p) for p in res.plots) or "no plots"
    print(f"\nresults in {res.out} ({plots}); machine: {res.machine}; {res.seconds:.0f}s")
    return 0
