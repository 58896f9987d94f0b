"""Several workers: every objective through one call of the model's forward is synchronised by
each data-parallel backend fairseq offers, and a multi-worker job resumes with the same command.

* Real worker processes, launched as a user launches them on a cluster without fairseq's
  spawner: one ``fairseq-train`` per rank (``tests/cpu_worker.py``: fairseq-train with torch's
  DDP told not to pass GPU ids for a CPU module), gloo, ``--distributed-no-spawn``, a free local
  port, fairseq's default ``--ddp-backend``. After a few updates both ranks hold the same
  parameters, equal to one worker with ``--update-freq 2`` (the same batches).
* The other backends (``c10d``, ``no_c10d``, ``legacy_ddp``) and criterions with fairseq's Trainer
  in 2 spawned processes.
* A 2-worker job killed after a save resumes with the same command; ``--restore-file`` with 2
  workers.

No dropout; ELECTRA samples at temperature ~0 (the argmax): the random draws of 2 workers and of
1 process differ by design."""

import contextlib
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

import pytest
import torch
from fairseq_runs import TINY_ELECTRA, TINY_ROBERTA, TINY_TN_ROBERTA, free_port, train_in_process
from objective_cases import roberta_criteria
from repo_paths import REPO, USER_DIR
from torch.utils._python_dispatch import TorchDispatchMode

WORKER = str(REPO / "tests" / "cpu_worker.py")
NO_DROPOUT = ["--dropout", "0", "--attention-dropout", "0"]
ELECTRA = [
    *TINY_ELECTRA,
    "--electra-dropout",
    "0",
    "--electra-attention-dropout",
    "0",
    "--electra-sample-temperature",
    "1e-8",
]
CASES = {
    # fairseq's own RoBERTa (its masked-LM forward), the plugin's (sentence-KL encodings inside
    # its forward), ELECTRA (sampling, corrupted input and discriminator inside its forward)
    "roberta_hc": (
        "masked_lm",
        [*TINY_ROBERTA, *NO_DROPOUT],
        ["--criterion", "mlm_hard_correction"],
    ),
    "roberta_sent_kl": (
        "masked_lm",
        [*TINY_TN_ROBERTA, *NO_DROPOUT],
        ["--criterion", "mlm_sent_kl"],
    ),
    "electra": ("electra", ELECTRA, ["--criterion", "electra"]),
}


def _train_cmd(data_bin, save_dir, task, arch, crit, updates, extra=()):
    return [
        str(data_bin),
        "--user-dir",
        USER_DIR,
        "--task",
        task,
        "--cpu",
        "--num-workers",
        "0",
        "--save-dir",
        str(save_dir),
        "--optimizer",
        "adam",
        "--lr",
        "1e-3",
        "--batch-size",
        "4",
        "--required-batch-size-multiple",
        "1",
        "--log-format",
        "simple",
        "--log-interval",
        "1",
        "--seed",
        "5",
        "--no-epoch-checkpoints",
        "--disable-validation",
        "--max-update",
        str(updates),
        *arch,
        *crit,
        "--synonym-table",
        "synonyms.npz",
        *extra,
    ]


def launch_workers(args, tmp_path, name, world=2, dump=False):
    """Start ``world`` fairseq-train processes, one per rank; returns the Popen objects."""
    port = free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        if dump:
            env["TRUNEG_DUMP_PARAMS"] = str(tmp_path / f"{name}_rank{rank}.pt")
        log = open(tmp_path / f"{name}_rank{rank}.log", "w")
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    WORKER,
                    *args,
                    "--distributed-world-size",
                    str(world),
                    "--distributed-rank",
                    str(rank),
                    "--distributed-no-spawn",
                    "--distributed-init-method",
                    f"tcp://127.0.0.1:{port}",
                    "--distributed-backend",
                    "gloo",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        )
    return procs


def wait_all(procs, tmp_path, name, timeout=300):
    for rank, p in enumerate(procs):
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                os.killpg(q.pid, signal.SIGKILL)
            raise AssertionError(f"{name}: rank {rank} did not finish in {timeout} s")
        log = (tmp_path / f"{name}_rank{rank}.log").read_text()
        assert rc == 0, f"{name}: rank {rank} exited {rc}:\n{log[-4000:]}"
    return [(tmp_path / f"{name}_rank{r}.log").read_text() for r in range(len(procs))]


def one_worker(args, tmp_path, name):
    """The reference: one fairseq-train worker (in this process, one thread)."""
    proc = train_in_process(args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout + proc.stderr


def model_of(checkpoint: Path):
    return torch.load(checkpoint, map_location="cpu")["model"]


def assert_same(a, b, what):
    assert a.keys() == b.keys(), what
    for k in a:
        torch.testing.assert_close(
            a[k].float(), b[k].float(), rtol=1e-5, atol=1e-6, msg=lambda m: f"{what} {k}: {m}"
        )


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_hand_launched_workers_on_the_default_backend_equal_one_worker(
    name, data_bin, synonym_table, tmp_path
):
    task, arch, crit = CASES[name]
    two = launch_workers(
        _train_cmd(data_bin, tmp_path / "two", task, arch, crit, 3), tmp_path, name, dump=True
    )
    logs = wait_all(two, tmp_path, name)
    assert "num_updates 3" in logs[0]
    one_log = one_worker(
        _train_cmd(data_bin, tmp_path / "one", task, arch, crit, 3, ["--update-freq", "2"]),
        tmp_path,
        name,
    )
    assert "num_updates 3" in one_log

    rank0, rank1 = (torch.load(tmp_path / f"{name}_rank{r}.pt") for r in (0, 1))
    assert_same(rank0, rank1, f"{name} rank 0 vs rank 1")
    assert_same(
        model_of(tmp_path / "two" / "checkpoint_last.pt"),
        model_of(tmp_path / "one" / "checkpoint_last.pt"),
        f"{name} 2 workers vs 1 worker --update-freq 2",
    )
    init = _initial_state(data_bin, task, arch, crit, tmp_path / "init")
    moved = sum(not torch.equal(rank0[k], init[k]) for k in init)
    assert moved > len(init) // 2  # the updates did change the weights


def _inner_logs(log: str):
    """The values of each ``train_inner`` line (simple log format), timing fields left out."""
    rows = []
    for line in log.splitlines():
        if "train_inner" in line and "num_updates" in line:
            values = line.split(": ", 1)[1].split(" loss", 1)[1]  # after "epoch 001:  2 / 23"
            fields = dict(
                f.strip().replace(" ", "=", 1).split("=") for f in ("loss" + values).split(",")
            )
            rows.append(
                {k: v for k, v in fields.items() if k not in ("wps", "ups", "wall", "train_wall")}
            )
    return rows


@pytest.mark.slow
def test_two_workers_under_fairseq_train_take_the_fast_update(data_bin, synonym_table, tmp_path):
    """``fairseq-train`` with 2 hand-launched workers and ``--optimizer fused_adamw`` runs the
    update without host-device waits: the log says so, rank 0 saves checkpoints in the middle
    of a log interval without waiting for the other worker, and the logged values and the
    weights are those of one worker with ``--update-freq 2``."""
    task, arch, crit = CASES["electra"]
    fast = ["--optimizer", "fused_adamw", "--log-interval", "2", "--save-interval-updates", "3"]
    fast += ["--clip-norm", "1.0"]
    logs = wait_all(
        launch_workers(
            _train_cmd(data_bin, tmp_path / "two", task, arch, crit, 6, fast), tmp_path, "fast"
        ),
        tmp_path,
        "fast",
    )
    one_log = one_worker(
        _train_cmd(data_bin, tmp_path / "one", task, arch, crit, 6, [*fast, "--update-freq", "2"]),
        tmp_path,
        "fast",
    )
    for log in (logs[0], one_log):  # (fairseq logs warnings only on the other ranks)
        assert "training updates: without host-device synchronisation" in log, log[-3000:]
    two_rows, one_rows = _inner_logs(logs[0]), _inner_logs(one_log)
    assert len(two_rows) == 3 and [r["num_updates"] for r in two_rows] == ["2", "4", "6"]
    assert two_rows == one_rows
    assert_same(
        model_of(tmp_path / "two" / "checkpoint_last.pt"),
        model_of(tmp_path / "one" / "checkpoint_last.pt"),
        "2 workers vs 1 worker --update-freq 2",
    )
    assert (tmp_path / "two" / "checkpoint_1_3.pt").is_file()


@pytest.mark.slow
def test_killed_two_worker_job_resumes_with_the_same_command(data_bin, synonym_table, tmp_path):
    task, arch, crit = CASES["roberta_hc"]
    save = tmp_path / "run"
    args = _train_cmd(data_bin, save, task, arch, crit, 40, ["--save-interval-updates", "10"])
    procs = launch_workers(args, tmp_path, "first")
    deadline = time.time() + 300
    while not (save / "checkpoint_last.pt").is_file():  # preempted right after its first save
        assert time.time() < deadline and all(
            p.poll() is None for p in procs
        ), "no checkpoint was saved"
        time.sleep(0.05)
    for p in procs:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    saved_at = torch.load(save / "checkpoint_last.pt", map_location="cpu")["optimizer_history"][-1][
        "num_updates"
    ]
    assert 10 <= saved_at < 40

    logs = wait_all(launch_workers(args, tmp_path, "again"), tmp_path, "again")  # the same command
    assert (
        f"Loaded checkpoint {save / 'checkpoint_last.pt'} (epoch 1 @ {saved_at} updates)" in logs[0]
    )
    assert "num_updates 40" in logs[0]
    assert (
        torch.load(save / "checkpoint_last.pt", map_location="cpu")["optimizer_history"][-1][
            "num_updates"
        ]
        == 40
    )

    # --restore-file into a fresh directory, with 2 workers
    restore = _train_cmd(
        data_bin,
        tmp_path / "ft",
        task,
        arch,
        crit,
        2,
        [
            "--restore-file",
            str(save / "checkpoint_last.pt"),
            "--reset-optimizer",
            "--reset-dataloader",
            "--reset-meters",
            "--reset-lr-scheduler",
        ],
    )
    logs = wait_all(launch_workers(restore, tmp_path, "restore"), tmp_path, "restore")
    assert "Loaded checkpoint" in logs[0] and "num_updates 2" in logs[0]


def _initial_state(data_bin, task_name, arch, crit, save_dir):
    from fairseq import tasks, utils

    import truneg_fairseq  # noqa: F401

    cfg = _trainer_cfg(data_bin, task_name, arch, crit, 1, 0, "pytorch_ddp", save_dir)
    utils.set_torch_seed(cfg.common.seed)
    model = tasks.setup_task(cfg.task).build_model(cfg.model)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


# ---- the other backends and criterions, with fairseq's Trainer in spawned processes -------------

STEPS, PER_WORKER, WORLD = 3, 4, 2
STATIC = ["--mlm-prediction-slots", "static"]  # the masked positions as fixed slots: no nonzero()
TRAINER_CASES = {
    "soft_reg/c10d": (
        "masked_lm",
        [*TINY_TN_ROBERTA, *NO_DROPOUT],
        ["--criterion", "mlm_soft_reg"],
        "c10d",
    ),
    "hc/no_c10d": (
        "masked_lm",
        [*TINY_ROBERTA, *NO_DROPOUT],
        ["--criterion", "mlm_hard_correction"],
        "no_c10d",
    ),
    "electra_sr/legacy_ddp": ("electra", ELECTRA, ["--criterion", "mlm_soft_reg"], "legacy_ddp"),
    "electra_sent_kl/pytorch_ddp": (
        "electra",
        ELECTRA,
        ["--criterion", "mlm_sent_kl"],
        "pytorch_ddp",
    ),
}


def _trainer_cfg(data_bin, task, arch, crit, world, rank, backend, save_dir, extra=()):
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    argv = [
        str(data_bin),
        "--task",
        task,
        "--cpu",
        "--seed",
        "5",
        *arch,
        *crit,
        "--optimizer",
        "adam",
        "--lr",
        "1e-3",
        "--clip-norm",
        "0",
        "--num-workers",
        "0",
        "--required-batch-size-multiple",
        "1",
        "--save-dir",
        str(save_dir),
        "--synonym-table",
        "synonyms.npz",
        "--ddp-backend",
        backend,
        *extra,
    ]
    if world > 1:
        argv += ["--distributed-world-size", str(world), "--distributed-rank", str(rank)]
    return convert_namespace_to_omegaconf(
        options.parse_args_and_arch(options.get_training_parser(), argv)
    )


# the update with --optimizer fused_adamw (training/fast_update.py): eager, under --bf16 with the
# linear layers on bf16 copies or (compute_copies off) autocast's casts, the whole update compiled
FAST = {
    "eager": [],
    "bf16": ["--bf16"],
    "bf16-autocast": ["--bf16"],
    "compiled": ["--electra-compile", "--electra-compile-scope", "update"],
    "compiled-many": [
        "--electra-compile",
        "--electra-compile-scope",
        "update",
        "--update-freq",
        "2",
    ],
}


def _trainer_worker(rank, world, init_file, data_bin, task_name, arch, crit, backend, out, fast=""):
    import cpu_worker
    import fairseq.models.distributed_fairseq_model as distributed_fairseq_model
    import torch.distributed as dist
    from fairseq import tasks, utils
    from fairseq.trainer import Trainer

    import truneg_fairseq  # noqa: F401  (registration, as --user-dir does)

    torch.set_num_threads(1)
    if world > 1:
        distributed_fairseq_model.DistributedDataParallel = cpu_worker.CpuDistributedDataParallel
        dist.init_process_group(
            "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world
        )
    from truneg_fairseq.training.compiled_update import CompiledUpdate
    from truneg_fairseq.training.fast_update import FastUpdate

    # the graph dynamo captures, run as captured (no AOTAutograd, no code made: seconds, not a
    # minute, for 2 processes on 2 cores; tests/test_compiled_update.py traces with aot_eager)
    CompiledUpdate.backend = "eager"
    FastUpdate.compute_copies = fast != "bf16-autocast"
    extra = (
        ["--optimizer", "fused_adamw", "--clip-norm", "1.0", *STATIC, *FAST[fast]] if fast else []
    )
    cfg = _trainer_cfg(
        data_bin, task_name, arch, crit, world, rank, backend, Path(out).parent / "save", extra
    )
    utils.set_torch_seed(cfg.common.seed)
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    trainer = Trainer(cfg, task, task.build_model(cfg.model), task.build_criterion(cfg.criterion))
    ds = task.dataset("train")
    syncs = []
    if fast:  # the meters of these updates only (the reference runs in the test's process)
        from fairseq.logging import metrics

        metrics.reset()
    for step in range(STEPS):
        batch = list(
            range(step * WORLD * PER_WORKER, (step + 1) * WORLD * PER_WORKER)
        )  # the combined batch
        mine = batch[rank * PER_WORKER : (rank + 1) * PER_WORKER] if world > 1 else batch
        # two sub-batches a worker: the first backward does not all-reduce (the compiled update
        # takes one batch an update)
        if fast and fast != "compiled" and world > 1:  # (compiled-many: two graphs)
            half = len(mine) // 2
            samples = [ds.collater([ds[i] for i in part]) for part in (mine[:half], mine[half:])]
        else:
            samples = [ds.collater([ds[i] for i in mine])]
        # (a dispatch mode and dynamo do not mix: the compiled graph has no sync by its
        # fullgraph=True, what runs around it is the eager update's)
        counting = fast and not fast.startswith("compiled") and step > 0
        with SyncCounter() if counting else contextlib.nullcontext() as counter:
            log = trainer.train_step(samples)
        if counter is not None:
            syncs.extend(counter.sites)
        assert log is not None and trainer.get_num_updates() == step + 1
    state = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    if fast:
        from truneg_fairseq.training.fast_update import fast_update_of

        plan = fast_update_of(trainer)
        assert isinstance(plan, FastUpdate)
        assert (plan.copies is not None) == (fast == "bf16")
        if fast.startswith("compiled"):  # updates 2 and 3 ran compiled
            assert plan.compiled is not None and plan.compiled.compile_seconds is not None
        state["_syncs"] = syncs
        state["_meters"] = {
            k: v
            for k, v in metrics.get_smoothed_values("train").items()
            if k not in ("wps", "ups", "wall", "train_wall")
        }
    torch.save(state, f"{out}.rank{rank}")
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


class SyncCounter(TorchDispatchMode):
    """The places where the update asks for a value on the host (a wait for the device on a GPU)."""

    def __enter__(self):
        self.sites = []
        return super().__enter__()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.__name__.split(".")[0] in ("_local_scalar_dense", "is_nonzero", "item", "nonzero"):
            ours = [
                f"{f.filename}:{f.lineno}"
                for f in traceback.extract_stack()
                if "fairseq" in f.filename and "torch/" not in f.filename
            ]
            self.sites.append(ours[-1] if ours else "elsewhere")
        return func(*args, **(kwargs or {}))


def _spawn(tmp_path, key, world, data_bin, case, fast=""):
    import torch.multiprocessing as mp

    task_name, arch, crit, backend = case
    out = tmp_path / f"{key.replace('/', '_')}_{fast}_{world}.pt"
    args = (
        world,
        str(tmp_path / f"init_{out.name}"),
        str(data_bin),
        task_name,
        arch,
        crit,
        backend,
        str(out),
        fast,
    )
    if world == 1:  # the reference needs no process group: it runs here
        from truneg_fairseq.training.compiled_update import CompiledUpdate
        from truneg_fairseq.training.fast_update import FastUpdate

        threads = torch.get_num_threads()
        backend, copies = CompiledUpdate.backend, FastUpdate.compute_copies
        try:
            _trainer_worker(0, *args)
        finally:
            torch.set_num_threads(threads)
            CompiledUpdate.backend, FastUpdate.compute_copies = backend, copies
    else:
        mp.spawn(_trainer_worker, args=args, nprocs=world, join=True)
    return [torch.load(f"{out}.rank{r}") for r in range(world)]


@pytest.mark.slow
@pytest.mark.parametrize("key", list(TRAINER_CASES))
def test_every_backend_equals_one_process_on_the_combined_batch(
    key, data_bin, synonym_table, tmp_path
):
    case = TRAINER_CASES[key]
    (one,) = _spawn(tmp_path, key, 1, data_bin, case)
    two = _spawn(tmp_path, key, WORLD, data_bin, case)
    assert_same(two[0], two[1], f"{key} rank 0 vs rank 1")
    assert_same(two[0], one, f"{key} 2 workers vs 1 process")


def _objective_case(criterion):
    return ("masked_lm", [*TINY_TN_ROBERTA, *NO_DROPOUT], ["--criterion", criterion], "pytorch_ddp")


def _each_objective_worker(rank, world, init_file, data_bin, out):
    """:func:`_trainer_worker` for every registered objective a RoBERTa trains, in turn: one
    spawn of the workers for them all."""
    for criterion in roberta_criteria():
        case = _objective_case(criterion)
        _trainer_worker(
            rank, world, f"{init_file}.{criterion}", data_bin, *case, f"{out}.{criterion}"
        )


@pytest.mark.slow
def test_every_objective_with_two_workers_equals_one_process(data_bin, synonym_table, tmp_path):
    """Each registered objective's criterion (the plugin's RoBERTa, whose forward serves them
    all) under fairseq's Trainer with 2 workers (pytorch_ddp, gloo): both workers end with the
    weights of one process on the combined batches."""
    import torch.multiprocessing as mp

    out = tmp_path / "each"
    args = (WORLD, str(tmp_path / "init_each"), str(data_bin), str(out))
    mp.spawn(_each_objective_worker, args=args, nprocs=WORLD, join=True)
    for criterion in roberta_criteria():
        (one,) = _spawn(tmp_path, criterion, 1, data_bin, _objective_case(criterion))
        two = [torch.load(f"{out}.{criterion}.rank{r}") for r in range(WORLD)]
        assert_same(two[0], two[1], f"{criterion} rank 0 vs rank 1")
        assert_same(two[0], one, f"{criterion} 2 workers vs 1 process")


@pytest.mark.slow
@pytest.mark.parametrize(
    "key", ["electra_sent_kl/pytorch_ddp", "soft_reg/c10d", "electra_sr/legacy_ddp"]
)
def test_the_fast_update_with_two_workers_equals_one_process_and_waits_for_nothing(
    key, data_bin, synonym_table, tmp_path
):
    """``--optimizer fused_adamw`` with 2 workers takes the update without host-device waits
    (training/fast_update.py): each worker's 2 sub-batches (the first backward without the
    all-reduce) give the weights and the logged meters of one process on the combined batch,
    and after the first update nothing in an update is read on the host."""
    case = TRAINER_CASES[key]
    (one,) = _spawn(tmp_path, key, 1, data_bin, case, fast="eager")
    two = _spawn(tmp_path, key, WORLD, data_bin, case, fast="eager")
    _assert_same_updates(key, one, two)


def _assert_same_updates(key, one, two, rel=1e-4):
    """``two`` workers' weights and meters equal each other and ``one``'s, and nothing in their
    updates after the first was read on the host."""
    for rank in range(WORLD):
        assert two[rank].pop("_syncs") == [], f"rank {rank} waited for the device"
    one.pop("_syncs")
    meters = [s.pop("_meters") for s in (one, *two)]
    assert meters[1] == meters[2]
    assert meters[0].keys() == meters[1].keys() and "loss" in meters[0]
    for name, value in meters[0].items():
        assert meters[1][name] == pytest.approx(value, rel=rel, abs=1e-6), name
    assert_same(two[0], two[1], f"{key} rank 0 vs rank 1")
    assert_same(two[0], one, f"{key} 2 workers vs 1 process")


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["pytorch_ddp", "legacy_ddp"])
def test_bf16_copies_with_two_workers_sum_the_gradients_autocast_would(
    backend, data_bin, synonym_table, tmp_path
):
    """Under ``--bf16`` the linear layers run on bf16 copies with several workers too
    (training/bf16_weights.py): torch's DDP never sees their gradients, so the update sums them
    itself (training/worker_grads.py); the 2 workers end with the weights and meters of 2 workers
    under autocast's casts, where DDP's hooks all-reduced them, and wait for nothing."""
    key = f"electra_sr/{backend}"
    case = ("electra", ELECTRA, ["--criterion", "mlm_soft_reg"], backend)
    autocast = _spawn(tmp_path, key, WORLD, data_bin, case, fast="bf16-autocast")
    copies = _spawn(tmp_path, key, WORLD, data_bin, case, fast="bf16")
    _assert_same_updates(key, autocast[0], copies)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["compiled", "compiled-many"])
def test_the_compiled_update_with_two_workers_equals_one_process(
    mode, data_bin, synonym_table, tmp_path
):
    """``--electra-compile-scope update`` with 2 workers (torch's DDP): the gradients and the
    statistics are summed inside the graph (functional all-reduces); after the eager first
    update, two compiled ones give the weights and meters of one process's eager update on
    the combined batch (the compiled AdamW equals the fused kernel to rounding).
    ``compiled-many``: two batches a worker and update (``--update-freq 2``), each a replay of
    the forward-and-backward graph, then the optimizer's graph."""
    key = "electra/pytorch_ddp"
    case = ("electra", ELECTRA, ["--criterion", "electra"], "pytorch_ddp")
    (one,) = _spawn(tmp_path, key, 1, data_bin, case, fast="eager")
    two = _spawn(tmp_path, key, WORLD, data_bin, case, fast=mode)
    _assert_same_updates(key, one, two)


@pytest.mark.slow
def test_fully_sharded_without_fairscale_is_one_clear_error(data_bin, synonym_table, tmp_path):
    """fairscale is not a dependency: fairseq's own error names it, before any plugin message."""
    task, arch, crit = CASES["roberta_hc"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fairseq_cli.train",
            *_train_cmd(
                data_bin, tmp_path / "fs", task, arch, crit, 1, ["--ddp-backend", "fully_sharded"]
            ),
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode != 0
    assert "pip install fairscale" in proc.stderr
    assert "masked-LM model" not in proc.stderr
