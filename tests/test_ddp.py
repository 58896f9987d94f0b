"""Multi-worker training: the plugin's real training step (fairseq's Trainer, its data-parallel
wrapper ``--ddp-backend legacy_ddp`` and gradient all-reduce over torch.distributed gloo) in 2
CPU processes gives the same parameters, after a few updates, as one process on the combined
batches; for ``mlm_hard_correction`` on RoBERTa and ``electra`` on ELECTRA.

fairseq's launcher needs CUDA for more than one worker, so the test starts the workers itself
(torch.multiprocessing) and builds the Trainer as fairseq-train does."""

from pathlib import Path

import pytest
import torch

from utils import TINY_ELECTRA, TINY_ROBERTA

STEPS = 3
PER_WORKER = 4  # sequences per worker and step
WORLD = 2


def _cfg(data_bin, task, arch, crit, world, rank, save_dir):
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    argv = [str(data_bin), "--task", task, "--cpu", "--seed", "5", *arch, *crit, "--optimizer", "adam",
            "--lr", "1e-3", "--clip-norm", "0", "--num-workers", "0", "--required-batch-size-multiple", "1",
            "--save-dir", str(save_dir)]  # where a crash.pt would go
    if world > 1:
        argv += ["--distributed-world-size", str(world), "--distributed-rank", str(rank), "--ddp-backend", "legacy_ddp"]
    args = options.parse_args_and_arch(options.get_training_parser(), argv)
    return convert_namespace_to_omegaconf(args)


def _worker(rank, world, init_file, data_bin, task_name, arch, crit, out):
    import torch.distributed as dist
    from fairseq import tasks, utils
    from fairseq.trainer import Trainer

    import truneg_fairseq  # noqa: F401  (registration, as --user-dir does)

    torch.set_num_threads(1)
    if world > 1:
        dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    cfg = _cfg(data_bin, task_name, arch, crit, world, rank, Path(out).parent / "save")
    utils.set_torch_seed(cfg.common.seed)
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    trainer = Trainer(cfg, task, model, criterion)
    ds = task.dataset("train")
    for step in range(STEPS):
        batch = list(range(step * WORLD * PER_WORKER, (step + 1) * WORLD * PER_WORKER))  # the combined batch
        mine = batch[rank * PER_WORKER: (rank + 1) * PER_WORKER] if world > 1 else batch
        sample = ds.collater([ds[i] for i in mine])
        log = trainer.train_step([sample])
        assert log is not None and trainer.get_num_updates() == step + 1
    if rank == 0:
        torch.save({k: v.detach().clone() for k, v in trainer.model.state_dict().items()}, out)
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


def _run(tmp_path, name, world, data_bin, task_name, arch, crit):
    import torch.multiprocessing as mp

    out = tmp_path / f"{name}_{world}.pt"
    mp.spawn(_worker, args=(world, str(tmp_path / f"init_{name}_{world}"), str(data_bin), task_name, arch, crit, str(out)),
             nprocs=world, join=True)
    return torch.load(out, weights_only=True)


CASES = {
    # no dropout; ELECTRA samples its replacements at temperature ~0 (argmax of the generator):
    # the random draws of 2 workers and of 1 process on the combined batch differ by design
    "roberta_hc": ("masked_lm", [*TINY_ROBERTA, "--dropout", "0", "--attention-dropout", "0"], ["--criterion", "mlm_hard_correction"]),
    "electra": ("electra", [*TINY_ELECTRA, "--electra-dropout", "0", "--electra-attention-dropout", "0",
                            "--electra-sample-temperature", "1e-8"], ["--criterion", "electra"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_two_workers_equal_one_process_on_the_combined_batch(name, data_bin, synonym_table, tmp_path):
    task_name, arch, crit = CASES[name]
    crit = [*crit, "--synonym-table", str(synonym_table)]
    one = _run(tmp_path, name, 1, data_bin, task_name, arch, crit)
    two = _run(tmp_path, name, WORLD, data_bin, task_name, arch, crit)
    init = _run_init(data_bin, task_name, arch, crit, tmp_path / "save")
    assert one.keys() == two.keys()
    moved = 0
    for k in one:
        torch.testing.assert_close(two[k], one[k], rtol=1e-5, atol=1e-6, msg=lambda m: f"{name} {k}: {m}")
        moved += int(not torch.equal(one[k], init[k]))
    assert moved > len(one) // 2  # the updates did change the weights


def _run_init(data_bin, task_name, arch, crit, save_dir):
    from fairseq import tasks, utils

    import truneg_fairseq  # noqa: F401

    cfg = _cfg(data_bin, task_name, arch, crit, 1, 0, save_dir)
    utils.set_torch_seed(cfg.common.seed)
    task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _torch_ddp_worker(rank, init_file, data_bin, synonym_table, out):
    import torch.distributed as dist
    from fairseq.distributed import ModuleProxyWrapper
    from torch.nn.parallel import DistributedDataParallel

    from utils import build_components

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    task, model, crit = build_components(data_bin, ["--criterion", "mlm_hard_correction", "--synonym-table", synonym_table])
    task.load_dataset("valid")
    ds = task.dataset("valid")
    wrapped = ModuleProxyWrapper(DistributedDataParallel(model))  # what --ddp-backend pytorch_ddp gives
    try:
        crit(wrapped, ds.collater([ds[i] for i in range(2)]))
        msg = "no error"
    except ValueError as e:
        msg = str(e)
    if rank == 0:
        Path(out).write_text(msg)
    dist.destroy_process_group()


@pytest.mark.slow
def test_torch_ddp_wrapper_is_refused_with_the_backend_to_use(data_bin, synonym_table, tmp_path):
    import torch.multiprocessing as mp

    out = tmp_path / "msg.txt"
    mp.spawn(_torch_ddp_worker, args=(str(tmp_path / "init"), str(data_bin), str(synonym_table), str(out)), nprocs=WORLD)
    assert "would not sum the gradients over workers" in out.read_text()
    assert "--ddp-backend legacy_ddp" in out.read_text()
