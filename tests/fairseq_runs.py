"""Tiny fairseq models and runs: the flags of the tiny RoBERTa and ELECTRA, their task, model and
criterion built in-process, fairseq-train (in this process or as the command),
fairseq-hydra-train and fairseq-validate with the plugin, and reading a run's log."""

import logging
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import List, Sequence

from command_runs import as_a_process
from repo_paths import REPO, USER_DIR

from truneg_fairseq.core import objectives

TINY_ROBERTA = [
    "--arch",
    "roberta_base",
    "--encoder-layers",
    "2",
    "--encoder-embed-dim",
    "32",
    "--encoder-ffn-embed-dim",
    "64",
    "--encoder-attention-heads",
    "2",
    "--max-positions",
    "64",
    "--tokens-per-sample",
    "64",
]


# the same model as the plugin's RoBERTa, whose forward serves every masked-LM objective
TINY_TN_ROBERTA = ["--arch", "truneg_roberta_base", *TINY_ROBERTA[2:]]


def arch_for(criterion: str) -> List[str]:
    """fairseq's RoBERTa for the objectives that need its logits only (no model outputs
    besides), the plugin's otherwise."""
    entry = objectives.by_criterion(criterion)
    logits_only = criterion == "masked_lm" or (entry is not None and not entry.outputs)
    return TINY_ROBERTA if logits_only else TINY_TN_ROBERTA


def build_components(
    data_bin: Path,
    criterion_args: Sequence[str],
    arch_args: Sequence[str] = TINY_ROBERTA,
    seed: int = 3,
    task: str = "masked_lm",
):
    """Build (task, model, criterion) in-process, as fairseq-train would."""
    import torch
    from fairseq import options, tasks, utils
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    import truneg_fairseq  # noqa: F401  (registration)

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(
        parser,
        [str(data_bin), "--task", task, "--cpu", "--seed", str(seed), *arch_args, *criterion_args],
    )
    cfg = convert_namespace_to_omegaconf(args)
    utils.set_torch_seed(seed)
    task_obj = tasks.setup_task(cfg.task)
    model = task_obj.build_model(cfg.model)
    criterion = task_obj.build_criterion(cfg.criterion)
    torch.manual_seed(seed)
    return task_obj, model, criterion


def valid_batch(task, n: int = 8):
    task.load_dataset("valid")
    ds = task.dataset("valid")
    return ds.collater([ds[i] for i in range(min(n, len(ds)))])


def train_argv(
    data_bin: Path, save_dir: Path, args: Sequence[str], user_dir: str = USER_DIR
) -> List[str]:
    return [
        str(data_bin),
        "--user-dir",
        user_dir,
        "--task",
        "masked_lm",
        "--cpu",
        "--num-workers",
        "0",
        "--save-dir",
        str(save_dir),
        "--optimizer",
        "adam",
        "--lr",
        "5e-4",
        "--batch-size",
        "8",
        "--log-format",
        "simple",
        "--log-interval",
        "1",
        "--seed",
        "1",
        "--no-epoch-checkpoints",
        *args,
    ]


def fairseq_train(
    data_bin: Path,
    save_dir: Path,
    args: Sequence[str],
    check: bool = True,
    cli: bool = False,
    user_dir: str = USER_DIR,
) -> subprocess.CompletedProcess:
    """Run fairseq-train with the plugin: fairseq's own training entry point (parse, convert,
    ``fairseq_cli.train.main``) in this process, or with ``cli=True`` the ``fairseq-train``
    command in a subprocess, for tests about the command itself (its exit, its stderr, signals).
    Both give a CompletedProcess: the log in ``stdout`` (fairseq logs to stdout), warnings and
    errors in ``stderr``, exit status 1 for an exception, argparse's status for a bad flag.
    ``user_dir``: the ``--user-dir`` (the plugin's by default)."""
    argv = train_argv(data_bin, save_dir, args, user_dir)
    if cli:
        cmd = [sys.executable, "-m", "fairseq_cli.train", *argv]
        env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=env, cwd=str(save_dir.parent)
        )
    else:
        proc = train_in_process(argv, cwd=save_dir.parent)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"fairseq-train failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
        )
    return proc


FAIRSEQ_LOG_FORMAT = "%(asctime)s | %(levelname)s | %(name)s | %(message)s"


def train_in_process(argv: Sequence[str], cwd: Path) -> subprocess.CompletedProcess:
    """``fairseq-train ARGV`` run by fairseq's own entry point (parse, convert,
    ``fairseq_cli.train.main``) in this process, as the command runs it in ``cwd`` (logging to
    stdout at INFO in fairseq's format). fairseq keeps a few values across runs in function
    attributes (the best validation loss, early-stopping counts); they are cleared first, as a new
    process would have them."""
    from fairseq import checkpoint_utils, options
    from fairseq.dataclass import utils as dataclass_utils
    from fairseq.distributed import utils as distributed_utils
    from fairseq.logging import progress_bar
    from fairseq_cli import train as fairseq_train_cli

    from truneg_fairseq.compat import _stop_prefetch_threads

    for fn, attrs in (
        (checkpoint_utils.save_checkpoint, ("best",)),
        (fairseq_train_cli.should_stop_early, ("best", "num_runs")),
    ):
        for attr in attrs:
            if hasattr(fn, attr):
                delattr(fn, attr)
    try:
        with as_a_process(["fairseq-train", *argv], cwd, logging.INFO, FAIRSEQ_LOG_FORMAT) as (
            out,
            err,
            status,
        ):
            args = options.parse_args_and_arch(options.get_training_parser(), input_args=list(argv))
            cfg = dataclass_utils.convert_namespace_to_omegaconf(
                args
            )  # the plugin's (quiet) conversion
            distributed_utils.call_main(cfg, fairseq_train_cli.main)
    finally:
        # what the end of the process does: fairseq's tensorboard writers (one per split name for
        # the whole process) closed and forgotten, its prefetching threads stopped
        progress_bar._close_writers()
        progress_bar._tensorboard_writers.clear()
        _stop_prefetch_threads()
    return subprocess.CompletedProcess(
        ["fairseq-train", *argv], status.code, out.getvalue(), err.getvalue()
    )


TINY_ELECTRA_MODEL = [
    "--arch",
    "electra_small",
    "--electra-embed-dim",
    "16",
    "--electra-hidden-dim",
    "32",
    "--electra-layers",
    "2",
    "--electra-heads",
    "2",
    "--electra-ffn-dim",
    "64",
    "--electra-gen-hidden-dim",
    "16",
    "--electra-gen-layers",
    "2",
    "--electra-gen-heads",
    "1",
    "--electra-gen-ffn-dim",
    "32",
    "--electra-max-positions",
    "64",
]


TINY_ELECTRA = [*TINY_ELECTRA_MODEL, "--tokens-per-sample", "64"]


def hydra_train(
    config_dir: Path, config_name: str, overrides: Sequence[str], run_dir: Path
) -> subprocess.CompletedProcess:
    """Run fairseq-hydra-train with a recipe config, on the CPU, with the plugin."""
    cmd = [
        sys.executable,
        "-m",
        "fairseq_cli.hydra_train",
        "--config-dir",
        str(config_dir),
        "--config-name",
        config_name,
        f"common.user_dir={USER_DIR}",
        "common.fp16=false",
        "common.cpu=true",
        "dataset.num_workers=0",
        "common.log_interval=1",
        "lr_scheduler.warmup_updates=1",
        f"hydra.run.dir={run_dir}",
        *overrides,
    ]
    return subprocess.run(
        cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1")
    )


def force_prediction(checkpoint: Path, data_bin: Path, word: str, out: Path) -> Path:
    """``out``: ``checkpoint`` with a masked-LM output bias that makes the head predict ``word``
    everywhere (1000 on its row dominates W.h, |W.h| < 10 in the tiny models)."""
    import torch
    from fairseq.data import Dictionary

    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    bias = state["model"]["encoder.lm_head.bias"]
    bias.zero_()
    bias[Dictionary.load(str(data_bin / "dict.txt")).index(word)] = 1000.0
    torch.save(state, out)
    return out


def updates(log: str) -> int:
    """The last update number a fairseq-train log names (``num_updates``)."""
    return max(int(m) for m in re.findall(r"num_updates[= ](\d+)", log))


def free_port() -> int:
    """A TCP port free on this machine now: the rendezvous of a run of several processes."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def model_state(checkpoint) -> dict:
    """The model weights a fairseq checkpoint file holds (``state["model"]``)."""
    import torch

    return torch.load(checkpoint, map_location="cpu", weights_only=False)["model"]


# fairseq's defaults on the validation command line: a batch is a multiple of 8 sequences
BATCH = ["--batch-size", "8", "--required-batch-size-multiple", "8"]


def fairseq_validate(data_bin: Path, checkpoint: Path, args) -> subprocess.CompletedProcess:
    """The ``fairseq-validate`` command of this environment, with the plugin, on the CPU."""
    script = Path(sys.executable).with_name("fairseq-validate")
    cmd = [str(script)] if script.is_file() else [sys.executable, "-m", "fairseq_cli.validate"]
    cmd += [
        str(data_bin),
        "--user-dir",
        USER_DIR,
        "--path",
        str(checkpoint),
        "--cpu",
        "--num-workers",
        "0",
        "--log-format",
        "simple",
        *BATCH,
        *args,
    ]
    env = dict(
        os.environ,
        OMP_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    )
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(checkpoint.parent))


def summary(proc: subprocess.CompletedProcess) -> dict:
    """The metrics of fairseq-validate's summary line for the valid subset."""
    assert (
        proc.returncode == 0
    ), f"fairseq-validate failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    lines = [line for line in proc.stdout.splitlines() if "valid on 'valid' subset" in line]
    assert len(lines) == 1, proc.stdout[-3000:]
    return {
        k: float(v)
        for k, v in re.findall(
            r"\| (\w+) ([-\d.e]+)", lines[0].split("valid on 'valid' subset", 1)[1]
        )
    }


def valid_blocks(data_bin: Path, task: str, extra=()) -> int:
    """The number of sequences in the valid split, from the dataset the task builds."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    import truneg_fairseq  # noqa: F401  (registration)

    args = options.parse_args_and_arch(
        options.get_training_parser(),
        [
            str(data_bin),
            "--task",
            task,
            "--tokens-per-sample",
            "64",
            "--arch",
            "roberta_base",
            *extra,
        ],
    )
    t = tasks.setup_task(convert_namespace_to_omegaconf(args).task)
    t.load_dataset("valid")
    return len(t.dataset("valid"))
