"""Test helpers: a tiny real corpus (sentencepiece + fairseq-preprocess), tiny fairseq models,
and fairseq-train runs in subprocesses."""

import contextlib
import io
import logging
import os
import random
import re
import runpy
import subprocess
import sys
import traceback
import warnings
from pathlib import Path
from typing import List, Optional, Sequence

REPO = Path(__file__).resolve().parents[1]
USER_DIR = str(REPO / "truneg_fairseq")

# Sentences rich in WordNet synonym pairs (primary/main/chief, stay/remain, big/large, ...).
_SUBJ = [
    "the farmer",
    "the teacher",
    "a child",
    "my friend",
    "the old man",
    "the doctor",
    "her sister",
    "the pilot",
]
_VERB = [
    "will stay",
    "will remain",
    "wants to stay",
    "decided to remain",
    "had to stay",
    "chose to remain",
]
_PLACE = [
    "at home",
    "in the big house",
    "in the large house",
    "near the small lake",
    "by the little lake",
    "in the town",
]
_ADJ = ["primary", "main", "chief", "principal", "big", "large", "quick", "fast", "small", "little"]
_NOUN = ["reason", "problem", "goal", "road", "question", "idea", "answer", "river"]


def tiny_corpus_lines(n: int = 1500, seed: int = 0) -> List[str]:
    rng = random.Random(seed)
    lines = []
    letters = "bcdfgklmnprstvz"
    for _ in range(n):
        if rng.random() < 0.1:  # rare made-up words: split into continuation pieces
            rare = "".join(rng.choice(letters) + rng.choice("aeiou") for _ in range(4))
            lines.append(f"the {rare} is {rng.choice(_ADJ)} .")
        elif rng.random() < 0.5:
            lines.append(f"{rng.choice(_SUBJ)} {rng.choice(_VERB)} {rng.choice(_PLACE)} .")
        else:
            lines.append(
                f"the {rng.choice(_ADJ)} {rng.choice(_NOUN)} of {rng.choice(_SUBJ)} is the "
                f"{rng.choice(_ADJ)} {rng.choice(_NOUN)} ."
            )
    return lines


def make_corpus(workdir: Path, lines: Sequence[str] = None, vocab_size: int = 200) -> Path:
    """raw text -> sentencepiece -> fairseq-preprocess; returns the data-bin directory."""
    from truneg_fairseq.data import corpus_steps

    workdir = Path(workdir)
    lines = list(lines) if lines is not None else tiny_corpus_lines()
    train, valid, _, _ = corpus_steps.write_split_corpus(
        lines, workdir / "raw", valid_fraction=0.1, seed=1
    )
    model = corpus_steps.train_sentencepiece(
        train, workdir / "spm", vocab_size=vocab_size, model_type="bpe"
    )
    for split, path in (("train", train), ("valid", valid)):
        corpus_steps.encode_file(model, path, workdir / "tok" / f"{split}.txt")
    return corpus_steps.binarize(
        workdir / "tok" / "train.txt", workdir / "tok" / "valid.txt", workdir / "data-bin"
    )


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
    """fairseq's RoBERTa for the objectives that need its logits only, the plugin's otherwise."""
    return TINY_ROBERTA if criterion in ("masked_lm", "mlm_hard_correction") else TINY_TN_ROBERTA


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


def _train_argv(data_bin: Path, save_dir: Path, args: Sequence[str]) -> List[str]:
    return [
        str(data_bin),
        "--user-dir",
        USER_DIR,
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
    data_bin: Path, save_dir: Path, args: Sequence[str], check: bool = True, cli: bool = False
) -> subprocess.CompletedProcess:
    """Run fairseq-train with the plugin: fairseq's own training entry point (parse, convert,
    ``fairseq_cli.train.main``) in this process, or with ``cli=True`` the ``fairseq-train``
    command in a subprocess, for tests about the command itself (its exit, its stderr, signals).
    Both give a CompletedProcess: the log in ``stdout`` (fairseq logs to stdout), warnings and
    errors in ``stderr``, exit status 1 for an exception, argparse's status for a bad flag."""
    argv = _train_argv(data_bin, save_dir, args)
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


class _Exit:
    code = 0


def _loggers() -> List[logging.Logger]:
    return [logging.getLogger()] + [
        lg for lg in logging.Logger.manager.loggerDict.values() if isinstance(lg, logging.Logger)
    ]


@contextlib.contextmanager
def as_a_process(
    argv: Sequence[str],
    cwd: Optional[Path] = None,
    log_level: int = logging.WARNING,
    log_format: Optional[str] = None,
):
    """Run a command's ``main`` in this process the way a new interpreter would run it: in
    ``cwd``, with ``sys.argv`` = ``argv``, one torch thread (``OMP_NUM_THREADS=1``), nothing in the
    root logger but a handler to the command's stdout (``log_format``; none: the logging
    configuration the command makes itself), every warning shown on its stderr. Yields
    ``(stdout, stderr, exit)`` (``io.StringIO``, ``io.StringIO``, an object whose ``code`` is
    the exit status): ``SystemExit`` gives its status, any other exception status 1 and its
    traceback on stderr, as the interpreter would. Everything is put back afterwards, the
    handlers a command added to its loggers closed."""
    import torch

    out, err, status = io.StringIO(), io.StringIO(), _Exit()
    root = logging.getLogger()
    saved_handlers = {lg: list(lg.handlers) for lg in _loggers()}
    saved = root.level, sys.argv, torch.get_num_threads(), os.getcwd()
    saved_path = list(sys.path)  # fairseq's --user-dir import inserts into it
    root.handlers = []
    if log_format:
        handler = logging.StreamHandler(out)
        handler.setFormatter(logging.Formatter(log_format, "%Y-%m-%d %H:%M:%S"))
        root.handlers = [handler]
    root.setLevel(log_level)
    sys.argv = list(argv)
    torch.set_num_threads(1)
    if cwd is not None:
        os.makedirs(cwd, exist_ok=True)
        os.chdir(cwd)
    try:
        with (
            warnings.catch_warnings(),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            warnings.simplefilter("default")
            warnings.showwarning = lambda m, c, f, n, file=None, line=None: err.write(
                warnings.formatwarning(m, c, f, n, line)
            )
            try:
                yield out, err, status
            except SystemExit as e:
                if e.code is None or isinstance(e.code, int):
                    status.code = e.code or 0
                else:
                    status.code = 1
                    err.write(f"{e.code}\n")
            except Exception:
                status.code = 1
                err.write(traceback.format_exc())
    finally:
        os.chdir(saved[3])
        torch.set_num_threads(saved[2])
        sys.argv = saved[1]
        sys.path[:] = saved_path
        for lg in _loggers():
            before = saved_handlers.get(lg, [])
            for h in lg.handlers:
                if h not in before:
                    h.close()
            lg.handlers = before
        root.setLevel(saved[0])


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


def run_script(
    name: str, args: Sequence[str], cli: bool = False, **kw
) -> subprocess.CompletedProcess:
    """``python scripts/NAME ARGS``: the script's ``main(ARGS)`` in this process (see
    :func:`as_a_process`; ``cwd=`` is honoured), or a real subprocess with ``cli=True`` or any
    other ``subprocess.run`` keyword (``env``, ``preexec_fn``): a test about the process itself
    (environment variables read at import, resource limits, the interpreter's exit)."""
    path = REPO / "scripts" / name
    if cli or set(kw) - {"cwd"}:
        env = dict(os.environ, **kw.pop("env", {}))
        return subprocess.run(
            [sys.executable, str(path), *args], capture_output=True, text=True, env=env, **kw
        )
    cwd = kw.get("cwd")
    with as_a_process([str(path), *args], Path(cwd) if cwd else None) as (out, err, status):
        status.code = runpy.run_path(str(path), run_name="__script__")["main"](list(args)) or 0
    return subprocess.CompletedProcess(
        [str(path), *args], status.code, out.getvalue(), err.getvalue()
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


def make_classification_data(corpus_dir: Path, out_dir: Path) -> Path:
    """A two-class sentence_prediction data set (input0/, label/) binarized with the
    pre-training dictionary: label 1 for sentences about staying/remaining."""
    from truneg_fairseq.data import corpus_steps

    corpus_dir, out_dir = Path(corpus_dir), Path(out_dir)
    lines = tiny_corpus_lines(240, seed=7)
    labels = ["1" if (" stay " in line or " remain " in line) else "0" for line in lines]
    raw = out_dir / "raw"
    for split, sl in (("train", slice(0, 200)), ("valid", slice(200, 240))):
        corpus_steps.atomic_write_lines(raw / f"{split}.txt", lines[sl])
        corpus_steps.atomic_write_lines(raw / f"{split}.label", labels[sl])
        corpus_steps.encode_file(
            corpus_dir / "spm.model", raw / f"{split}.txt", raw / f"{split}.tok"
        )
    corpus_steps.binarize(
        raw / "train.tok",
        raw / "valid.tok",
        out_dir / "input0",
        srcdict=corpus_dir / "data-bin" / "dict.txt",
    )
    corpus_steps.binarize(raw / "train.label", raw / "valid.label", out_dir / "label")
    return out_dir


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


def run_recipe(script: str, args: Sequence[str], cwd: Path, **env) -> subprocess.CompletedProcess:
    """Run a shell recipe from examples/ with the virtualenv's fairseq-train on PATH, in fp32."""
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    full_env = dict(os.environ, PATH=path, FP16="", NUM_WORKERS="0", OMP_NUM_THREADS="1", **env)
    return subprocess.run(
        ["bash", str(REPO / "examples" / script), *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=str(cwd),
    )


def write_toy_gpt2_bpe(
    out_dir: Path,
    merges=(("\u0120", "t"), ("\u0120t", "h"), ("\u0120th", "e"), ("t", "h"), ("th", "e")),
):
    """A tiny byte-level GPT-2 BPE (encoder.json + vocab.bpe in the real formats) and a fairseq
    dict.txt over its ids, for tests of the GPT-2 code paths."""
    import json as _json

    from fairseq.data.encoders.gpt2_bpe_utils import bytes_to_unicode

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    vocab = list(bytes_to_unicode().values()) + ["".join(m) for m in merges]
    encoder = {tok: i for i, tok in enumerate(vocab)}
    (out_dir / "encoder.json").write_text(_json.dumps(encoder))
    (out_dir / "vocab.bpe").write_text(
        "#version: 0.2\n" + "\n".join(" ".join(m) for m in merges) + "\n"
    )
    (out_dir / "dict.txt").write_text("".join(f"{i} 1\n" for i in range(len(vocab))))
    return out_dir


def word_level_data(work: Path, train: Sequence[str], valid: Sequence[str], wn) -> Path:
    """A whitespace-word data-bin of ``train``/``valid`` lines, with the WordNet synonym table of
    its dictionary saved inside (``synonyms.npz``)."""
    from truneg_fairseq.data import corpus_steps
    from truneg_fairseq.lexicon import build_table, vocab_view

    corpus_steps.atomic_write_lines(work / "train.txt", train)
    corpus_steps.atomic_write_lines(work / "valid.txt", valid)
    data_bin = corpus_steps.binarize(work / "train.txt", work / "valid.txt", work / "data-bin")
    table, _ = build_table(vocab_view(data_bin / "dict.txt", "whitespace"), source="wordnet", wn=wn)
    table.save(data_bin / "synonyms.npz")
    return data_bin


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


def squad_span_text(example, words, feature, start: int, end: int) -> str:
    """The context text that window tokens ``start``..``end`` of ``feature`` cover (through the
    word offsets ``words``): what a decoded span answers."""
    w0 = feature.token_word[start - feature.ctx_offset]
    w1 = feature.token_word[end - feature.ctx_offset]
    return example.context[words[w0][0] : words[w1][1]]


def recording_aot_eager(graphs: list):
    import torch

    """torch.compile's ``aot_eager`` backend (AOTAutograd's graph run as traced, no code made)
    that appends each graph it is given to ``graphs``: the aten operators inductor would compile
    and, on a GPU under ``mode="reduce-overhead"``, record as CUDA graphs. A forward graph
    carries the names of the inputs it writes to that are not static addresses
    (``truneg_mutated_inputs``)."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def keep_forward(gm, example_inputs):
        meta = torch._guards.TracingContext.get().fw_metadata
        names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        static = set(meta.static_input_indices)
        gm.truneg_mutated_inputs = [
            names[i] for i in meta.mutated_inp_runtime_indices if i not in static
        ]
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    def keep_backward(gm, example_inputs):
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    return aot_autograd(fw_compiler=keep_forward, bw_compiler=keep_backward)


def cuda_graph_refusals(graphs) -> List[str]:
    """What in ``graphs`` would keep inductor from recording them as CUDA graphs: an operator
    CUDA graphs refuse (a host read such as ``aten._local_scalar_dense``, a data-dependent
    shape, an operator tagged unsafe; inductor's own test, which runs on any device), an
    input written in place that is not a static address (a parameter, a buffer or a tensor
    marked with ``torch._dynamo.mark_static_address``), or an integer input (a number of the
    batch that dynamo made symbolic: inductor records one CUDA graph per value it takes)."""
    import torch
    from torch._inductor.utils import get_first_incompatible_cudagraph_node

    found = []
    for gm in graphs:
        node = get_first_incompatible_cudagraph_node(gm)
        if node is not None:
            where = (node.meta.get("stack_trace") or "").strip().splitlines()[-2:]
            found.append(f"{node.target}: {' / '.join(line.strip() for line in where)}")
        mutated = getattr(gm, "truneg_mutated_inputs", [])
        if mutated:
            found.append(f"{len(mutated)} mutated inputs not static, e.g. {mutated[:3]}")
        ints = [
            n.name
            for n in gm.graph.nodes
            if n.op == "placeholder" and isinstance(n.meta.get("val"), (int, torch.SymInt))
        ]
        if ints:
            found.append(f"integer inputs (a CUDA graph recorded per value): {ints[:3]}")
    return found


def assert_trained_alike(a: dict, b: dict, bf16: bool) -> None:
    """Two checkpoints of one run, one with a compiled update and one eager: the same weights and
    AdamW moments to rounding (under bf16 a product rounded on the other side of a bf16 step
    moves an Adam update by ~1e-5)."""
    import torch

    tol = dict(rtol=1e-3, atol=1e-4) if bf16 else dict(rtol=1e-4, atol=1e-5)
    assert a["model"].keys() == b["model"].keys()
    for key, value in b["model"].items():
        torch.testing.assert_close(a["model"][key], value, **tol, msg=key)
    moment_tol = dict(rtol=1e-2, atol=1e-5) if bf16 else dict(rtol=1e-4, atol=1e-7)
    moments_a = a["last_optimizer_state"]["state"]
    moments_b = b["last_optimizer_state"]["state"]
    assert moments_a.keys() == moments_b.keys()
    for i in moments_b:
        for key in ("exp_avg", "exp_avg_sq", "step"):
            torch.testing.assert_close(moments_a[i][key], moments_b[i][key], **moment_tol)


def updates(log: str) -> int:
    """The last update number a fairseq-train log names (``num_updates``)."""
    return max(int(m) for m in re.findall(r"num_updates[= ](\d+)", log))


def snapshot(root) -> dict:
    """{path relative to ``root`` (posix): bytes} of every file below ``root``: what a test
    compares before and after a command that must leave them alone."""
    root = Path(root)
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }
