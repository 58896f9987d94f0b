"""Compatibility shims for fairseq 0.12, installed when the plugin is imported.

1. Checkpoint loading under current torch (``allow_fairseq_checkpoints``): torch >= 2.6 loads
   checkpoints with ``weights_only=True`` by default, and fairseq's
   ``checkpoint_utils.load_checkpoint_to_cpu`` calls ``torch.load`` without the argument, so
   resuming ``fairseq-train`` or ``--restore-file`` fails with ``Unsupported global:
   argparse.Namespace``. The plugin allow-lists exactly the plain-data globals fairseq
   checkpoints hold, instead of turning the weights-only protection off
   (``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1``).
2. Atomic checkpoint copies (``atomic_checkpoint_copies``): fairseq writes the first checkpoint
   of a save atomically (a ``.tmp`` file, then a rename) but copies it to the others
   (``checkpoint_last.pt``, ``checkpoint_best.pt``) with a plain ``PathManager.copy``; a job
   killed during that copy (SIGTERM on preemption) leaves a truncated ``checkpoint_last.pt`` and
   the resume fails (``PytorchStreamReader failed reading zip archive``). The shim makes local
   copies atomic: copy to ``<dst>.tmp`` in the same directory, fsync, ``os.replace``, so
   ``checkpoint_last.pt`` is always the old or the new checkpoint, whole. Remote (iopath) paths
   keep fairseq's copy.
3. Objects sent between the workers of one job (``trusted_worker_broadcast``): with several
   workers, fairseq loads a checkpoint on rank 0 only (through the allow-list of 1.) and sends
   it to the others with ``distributed_utils.broadcast_object``, whose receiving side calls
   ``torch.load`` on the bytes. Under weights-only loading that refuses the checkpoint's
   ``omegaconf.DictConfig`` (fairseq converts the saved ``args`` to one after loading), so every
   rank but 0 dies on resume and on ``--restore-file``. These bytes are not a file from outside:
   rank 0 of the same job pickled them from objects it holds, so the shim sends them with
   ``torch.distributed.broadcast_object_list`` (plain pickle both ways). Files on disk keep the
   weights-only load and its allow-list.
4. Checkpoint configs are data, not code (``safe_checkpoint_configs``): fairseq passes some
   config fields to Python's ``eval`` when it builds a model or an optimizer (e.g.
   ``encoder_xformers_att_config`` in every transformer layer, ``adam_betas``, adaptive-softmax
   cutoffs). A checkpoint of plain data passes the weights-only load and would then run whatever
   such a field holds. Every config fairseq reads from a checkpoint file
   (``checkpoint_utils.load_checkpoint_to_cpu``: fairseq-train's resume and ``--restore-file``,
   ``load_model_ensemble_and_task``, the hub, every script of the plugin) is checked first: each
   of those fields must be empty or plain data (a literal, or lists joined by ``+`` and repeated
   by ``*`` an integer, as fairseq's fconv and wav2vec defaults are written); anything else
   refuses the file with one error naming the field. The field set covers every field fairseq
   evaluates anywhere (a test derives it from fairseq's source), since fairseq builds whatever
   model a file names. The plugin's own loaders (``checkpoints.load_for_inference``: its scripts,
   evaluation and HuggingFace export) go further and are an allow-list: a checkpoint must be of
   the families the plugin trains and converts (fairseq's ``RobertaModel`` and the plugin's
   models, read from fairseq's registries) and any other architecture (``cfg.model._name``, or
   ``args.arch`` of an old-style checkpoint) is refused before anything is built. fairseq's own
   commands under the plugin (``fairseq-train`` resume, ``--restore-file``) keep loading other
   models, a user's own runs, with the field check alone.
5. ``numpy.compat.long`` under NumPy 2 (``numpy_compat_long``): fairseq's ``TokenBlockDataset``
   with ``--sample-break-mode eos`` names it, and NumPy 2 removed ``numpy.compat``.
6. fairseq's prefetching threads stop before the interpreter exits (``stop_prefetch_at_exit``):
   a thread still filling its queue at exit (fairseq-train stopping at ``--max-update`` mid-epoch)
   aborted the interpreter (exit status 134).
7. hydra's notices about fairseq's use of its compose API are not printed
   (``quiet_config_composition``).
8. ``--amp`` updates by the gradient, not the gradient divided by the loss scale
   (``amp_unscales_once``): fairseq 0.12's ``AMPOptimizer.clip_grad_norm`` unscales the gradients
   through the inner torch optimizer (``scaler.unscale_(self.optimizer)``) and ``step`` then hands
   a different object, the fairseq optimizer around it (``scaler.step(self.fp32_optimizer)``), to
   the ``GradScaler``, which keeps its "already unscaled" state per object and so divides the same
   gradients by the scale a second time: every update is 1/scale of what it should be (1/128 at
   fairseq's initial scale, smaller as the scale grows), for every optimizer. The shim unscales
   through the object that ``step`` passes, so the scaler unscales once, reuses the overflow check
   of that unscale (an overflowing step is skipped and the scale backs off) and ``step`` (with
   anything an optimizer does in it) is fairseq's own. It is installed only when a one-parameter
   probe of the installed ``AMPOptimizer`` shows the short update, so a fairseq that has fixed it
   is left alone.
9. ``--bf16`` means bf16 autocast with fp32 weights (``bf16_means_autocast``): fairseq 0.12's
   ``--bf16`` is its TPU mode (``options.parse_args_and_arch`` turns on ``--tpu``, and the trainer
   then asks torch_xla for its device and fails on a GPU or CPU), and its non-TPU bf16 casts the
   model's weights to bf16. What a user of ``--bf16`` on a GPU means is what
   :mod:`truneg_fairseq.precision` does: fp32 weights and optimizer, the forward pass and loss
   under ``torch.autocast(bfloat16)``, no loss scaler. Without torch_xla installed the shim undoes
   the implied ``--tpu`` when fairseq converts its arguments (before any worker starts), and when
   fairseq builds its ``Trainer`` with ``common.bf16`` and no TPU it sets ``common.bf16`` (and
   ``memory_efficient_bf16``) to false, so the trainer keeps fp32 weights, fp32 batches and a
   plain fp32 optimizer, and marks the task to autocast. fairseq's ``FairseqTask.train_step`` and
   ``valid_step`` (the steps of ``masked_lm``, ``sentence_prediction`` and the plugin's tasks)
   call the criterion under bf16 autocast on a task so marked. ``--bf16`` with ``--fp16`` or
   ``--amp`` is refused with one error. The saved config records ``bf16: false``: weights in the
   checkpoint are fp32 and load as any fp32 checkpoint; a resumed run is bf16 when ``--bf16`` is
   given again.
10. Every sequence is batched (``keep_remainder_batch``): fairseq 0.12's
    ``data_utils.batch_by_size`` drops the last batch when its size is not a multiple of
    ``--required-batch-size-multiple`` (default 8), so up to 7 sequences of every split were
    never seen: never scored by validation (``fairseq-train``'s valid steps, ``fairseq-validate``;
    the dataset's sequences are sorted by length there, so the dropped ones are the longest) and
    never trained on in an epoch (the same function batches ``--train-subset``). The shim gives
    those sequences their own final, smaller batch, for every split: the batch fairseq's batching
    had already built within ``--max-tokens``/``--batch-size`` before dropping it. Fixed-shape
    batching (TPU) is left as it is.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import contextvars
import logging
import os
import shutil
import sys

import numpy as np
import torch


def fairseq_checkpoint_globals() -> list:
    """Globals found in fairseq checkpoints: the legacy ``args`` namespace and numpy scalars and
    arrays (best validation scores kept in ``extra_state``), all plain data.

    numpy 2 moved ``numpy.core`` to ``numpy._core``: a checkpoint written under numpy 1.x names
    ``numpy.core.multiarray.scalar``, one written under numpy 2 ``numpy._core.multiarray.scalar``.
    Both names are registered for the same objects (``(object, "name")`` entries), so old
    checkpoints load under either numpy; nothing else is added."""
    out = [argparse.Namespace, np.dtype, np.ndarray]
    core = getattr(np, "_core", None) or np.core  # numpy >= 2 / numpy < 2
    for name in ("scalar", "_reconstruct"):
        obj = getattr(core.multiarray, name, None)
        if obj is not None:
            out += [(obj, f"{prefix}.multiarray.{name}") for prefix in ("numpy.core", "numpy._core")]
    dtypes = getattr(np, "dtypes", None)  # numpy >= 1.25: one class per dtype, named in pickles
    if dtypes is not None:
        out += [c for c in vars(dtypes).values() if isinstance(c, type) and issubclass(c, np.dtype)]
    return out


def allow_fairseq_checkpoints() -> None:
    """Allow-list :func:`fairseq_checkpoint_globals` for ``torch.load``'s weights-only mode."""
    # weights_only=True is torch.load's default from torch 2.6 on (earlier ones load everything,
    # and before 2.5 add_safe_globals takes no (object, name) entries)
    if torch.__version__ >= (2, 6):
        torch.serialization.add_safe_globals(fairseq_checkpoint_globals())


def atomic_copy_file(src: str, dst: str) -> None:
    """Copy ``src`` to ``dst`` so that ``dst`` is never seen half-written, even if the process is
    killed: the data go to ``<dst>.tmp`` beside it (overwritten by the next copy, so a killed copy
    leaves no growing litter), are fsynced, then renamed over ``dst``."""
    tmp = f"{dst}.tmp"
    with open(src, "rb") as fin, open(tmp, "wb") as fout:
        shutil.copyfileobj(fin, fout, 16 * 1024 * 1024)
        fout.flush()
        os.fsync(fout.fileno())
    os.replace(tmp, dst)
    try:  # make the rename itself durable (a crash of the machine, not only of the process)
        fd = os.open(os.path.dirname(os.path.abspath(dst)), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_checkpoint_copies() -> None:
    """Make fairseq's ``PathManager.copy`` atomic for local paths (see the module docstring)."""
    from fairseq.file_io import PathManager

    original = PathManager.copy
    if getattr(original, "truneg_atomic", False):  # installed already
        return

    def copy(src_path: str, dst_path: str, overwrite: bool = False) -> bool:
        if PathManager.path_requires_pathmanager(src_path) or PathManager.path_requires_pathmanager(dst_path):
            return original(src_path, dst_path, overwrite=overwrite)
        if os.path.exists(dst_path) and not overwrite:
            return False  # as iopath does
        atomic_copy_file(src_path, dst_path)
        return True  # fairseq asserts the result

    copy.truneg_atomic = True
    PathManager.copy = staticmethod(copy)


def trusted_worker_broadcast() -> None:
    """Send fairseq's inter-worker objects with torch's own object broadcast (see the module
    docstring, 3.). fairseq looks ``_broadcast_object_slow`` up at each call, so replacing the
    module attribute is enough; the tensors of the object still go through fairseq's tensor
    broadcast."""
    from fairseq.distributed import utils as distributed_utils

    if getattr(distributed_utils._broadcast_object_slow, "truneg_trusted", False):  # installed already
        return

    def broadcast_object_slow(obj, src_rank: int, group, dist_device):
        box = [obj]
        torch.distributed.broadcast_object_list(box, src=src_rank, group=group, device=dist_device)
        return box[0]

    broadcast_object_slow.truneg_trusted = True
    distributed_utils._broadcast_object_slow = broadcast_object_slow


# config fields (any group, any prefix such as encoder_/decoder_) whose string value fairseq 0.12
# evaluates with eval(), utils.eval_str_dict / eval_str_list / eval_bool anywhere in its source
# (models of every family, optimizers, tasks, criterions, examples). tests/test_untrusted_files.py
# derives the set from the installed fairseq and fails when a call site reads a field missing here:
# a deny-list kept by hand missed fconv's decoder_layers and wav2vec's conv_feature_layers.
EVALUATED_FIELDS = (
    "xformers_att_config", "adaptive_softmax_cutoff", "adaptive_input_cutoff", "kernel_size_list",
    "left_pad_source", "left_pad_target", "pipeline_balance", "pipeline_devices", "decoder_attention",
    "adam_betas", "adamax_betas", "lamb_betas", "adafactor_eps", "wer_args",
    # fconv, fconv_lm, fconv_self_att
    "encoder_layers", "decoder_layers", "encoder_attention", "self_attention", "project_input",
    "gated_attention", "downsample", "pretrained",
    # transformer_lm, lightconv_lm; wav2vec, wav2vec2, hubert, speech_to_text, data2vec
    "character_filters", "conv_feature_layers", "conv_aggregator_layers", "feature_encoder_spec",
    # pipeline-parallel transformer; examples (laser, speech_recognition, scripts)
    "pipeline_encoder_balance", "pipeline_encoder_devices", "pipeline_decoder_balance",
    "pipeline_decoder_devices", "decoder_zero_init", "conv_enc_config", "conv_dec_config",
    "vggblock_enc_config", "transformer_enc_config", "transformer_dec_config", "transformer_context",
    "transformer_sampling", "model_overrides",
)


class UnsafeCheckpointError(ValueError):
    """A checkpoint's config holds code where fairseq expects a value."""


class UnknownArchitectureError(UnsafeCheckpointError):
    """A checkpoint of a model family the plugin does not load."""


def _evaluated(key: str) -> bool:
    return key.endswith(EVALUATED_FIELDS)  # the field itself or a prefixed one (encoder_..., decoder_...)


_MAX_ITEMS = 100_000  # a value fairseq evaluates is a short layer list, never this long


def _data_value(node):
    """The value of expression ``node`` when it is plain data: a literal (``ast.literal_eval``'s
    grammar) or lists/tuples/strings/numbers joined by ``+`` and repeated by ``*`` an integer,
    the form fairseq's own defaults take (``"[(512, 3)] * 20"`` in fconv,
    ``"[(512, 10, 5)] + [(512, 3, 2)] * 4"`` in wav2vec2). Anything else (a name, a call, an
    attribute, a comprehension) raises ValueError: it is code. Sizes are bounded, so a
    repetition cannot exhaust memory here."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        left, right = _data_value(node.left), _data_value(node.right)
        if isinstance(node.op, ast.Mult):
            count = right if isinstance(right, int) and not isinstance(right, bool) else left
            other = left if count is right else right
            if isinstance(other, (list, tuple, str)) and isinstance(count, int) and not isinstance(count, bool):
                if len(other) * max(count, 0) > _MAX_ITEMS:
                    raise ValueError("too long")
            elif not (isinstance(left, (int, float)) and isinstance(right, (int, float))):
                raise ValueError("not data")
        elif not (type(left) is type(right) and isinstance(left, (list, tuple, str))
                  or isinstance(left, (int, float, complex)) and isinstance(right, (int, float, complex))):
            raise ValueError("not data")
        value = left * right if isinstance(node.op, ast.Mult) else left + right
        if isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) > 1e18:
            raise ValueError("too large")
        return value
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_data_value(e) for e in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    return ast.literal_eval(node)


def safe_literal(value, where: str):
    """``value`` itself when it is not a string; a string fairseq would ``eval``: the same text
    without surrounding blanks (evaluating it builds the plain value :func:`_data_value` reads,
    and a field fairseq also splits, ``encoder_layers_to_keep``, keeps its form), or
    :class:`UnsafeCheckpointError` when it is anything but plain data."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    try:
        if text:
            _data_value(ast.parse(text, mode="eval").body)
        return text
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError, OverflowError):
        raise UnsafeCheckpointError(
            f"{where} is {value[:80]!r}: fairseq evaluates this field as Python, and it is not a plain "
            "value (numbers, strings, lists, dicts) but code. The checkpoint was not loaded; if you made "
            "it yourself, set the field to null (or a literal) and save it again"
        ) from None


def sanitise_config(cfg, path: str) -> None:
    """Check (in place) every field of ``cfg`` (an omegaconf config or an argparse namespace from
    checkpoint ``path``) that fairseq evaluates; see :func:`safe_literal`."""
    from omegaconf import DictConfig, OmegaConf, open_dict

    if isinstance(cfg, argparse.Namespace):
        for key, value in vars(cfg).items():
            if _evaluated(key):
                setattr(cfg, key, safe_literal(value, f"{path}: args.{key}"))
        return
    if not isinstance(cfg, DictConfig):
        return

    def walk(node, prefix):
        for key in list(node.keys()):
            child = node._get_node(key)
            if isinstance(child, DictConfig):
                walk(child, f"{prefix}{key}.")
                continue
            raw = child._value()
            if isinstance(raw, argparse.Namespace):  # fairseq keeps a legacy model's args as an object
                for name, value in vars(raw).items():
                    if _evaluated(name):
                        setattr(raw, name, safe_literal(value, f"{path}: cfg.{prefix}{key}.{name}"))
                continue
            if not _evaluated(str(key)) or OmegaConf.is_missing(node, key):
                continue
            try:
                value = node[key]  # an interpolation is checked for what it resolves to
            except Exception:  # unresolvable here: fairseq cannot use it either
                continue
            if isinstance(value, str):
                with open_dict(node):
                    node[key] = safe_literal(value, f"{path}: cfg.{prefix}{key}")

    walk(cfg, "")


def loadable_architectures() -> dict:
    """{name: model name} of every architecture and model name the plugin's inference loader
    builds: the families the plugin trains and converts, read from fairseq's registries by model
    class (fairseq's own ``RobertaModel``, and every model class the plugin defines), so an
    architecture added to one of those models is loadable without a list kept by hand, and
    fairseq's other models (fconv, wav2vec, speech, translation, ...) are not."""
    from fairseq.models import ARCH_MODEL_NAME_REGISTRY, ARCH_MODEL_REGISTRY, MODEL_REGISTRY
    from fairseq.models.roberta import RobertaModel

    def ours(cls) -> bool:
        return cls is RobertaModel or cls.__module__.split(".")[0] == __name__.split(".")[0]

    out = {name: name for name, cls in MODEL_REGISTRY.items() if ours(cls)}
    out.update({arch: ARCH_MODEL_NAME_REGISTRY[arch] for arch, cls in ARCH_MODEL_REGISTRY.items() if ours(cls)})
    return out


def checkpoint_architecture(state: dict):
    """The architecture fairseq would build from checkpoint ``state`` (as ``models.build_model``
    picks it: the model config's ``_name``, else its ``arch``; an old-style checkpoint's
    ``args.arch``), or None when it names none."""
    cfg = state.get("cfg")
    model = None
    if cfg is not None:
        try:
            model = cfg["model"] if not isinstance(cfg, argparse.Namespace) else None
        except Exception:
            model = None
    for source in (model, state.get("args")):
        if source is None:
            continue
        for key in ("_name", "arch"):
            try:
                name = source[key] if not isinstance(source, argparse.Namespace) else getattr(source, key, None)
            except Exception:
                name = getattr(source, key, None)
            if name:
                return str(name)
    return None


def check_architecture(state: dict, path: str) -> None:
    """Refuse checkpoint ``path`` unless it is of a family in :func:`loadable_architectures`,
    before anything reads its config further or builds it: the field check of
    :func:`sanitise_config` stands on knowing every field a model evaluates, and the plugin's
    loaders then need know only the models they use (see the module docstring, 4.)."""
    arch = checkpoint_architecture(state)
    allowed = loadable_architectures()
    if arch in allowed:
        return
    families = ", ".join(sorted(set(allowed.values())))
    said = f"architecture {arch!r}" if arch else "no architecture"
    raise UnknownArchitectureError(
        f"{path} is a checkpoint of {said}, which the plugin does not load: it loads the model families it "
        f"trains and converts ({families}, with their architectures such as roberta_base, electra_small, "
        "bert_hf_base). Nothing was built; load this file with the tools of the project that made it"
    )


_FAMILIES_ONLY = contextvars.ContextVar("truneg_families_only", default=False)


@contextlib.contextmanager
def plugin_families_only():
    """Within the block, every checkpoint fairseq reads must pass :func:`check_architecture`
    (the plugin's inference loader and converters run inside one)."""
    token = _FAMILIES_ONLY.set(True)
    try:
        yield
    finally:
        _FAMILIES_ONLY.reset(token)


def safe_checkpoint_configs() -> None:
    """Check the config of every checkpoint fairseq loads (see the module docstring, 4.): the
    architecture first where :func:`plugin_families_only` asks for it, then every evaluated field.

    The architecture allow-list is not applied to fairseq's own commands run with the plugin
    loaded (``fairseq-train`` resume and ``--restore-file``, ``fairseq-validate``): a user's own
    run of another fairseq model keeps resuming as it did, and what such a file could run is
    closed by the field check, which covers every field fairseq evaluates."""
    from fairseq import checkpoint_utils

    original = checkpoint_utils.load_checkpoint_to_cpu
    if getattr(original, "truneg_safe", False):  # installed already
        return

    def load_checkpoint_to_cpu(path, arg_overrides=None, load_on_all_ranks=False):
        state = original(path, arg_overrides=arg_overrides, load_on_all_ranks=load_on_all_ranks)
        if _FAMILIES_ONLY.get():
            check_architecture(state, str(path))
        for key in ("cfg", "args"):
            if state.get(key) is not None:
                sanitise_config(state[key], str(path))
        return state

    load_checkpoint_to_cpu.truneg_safe = True
    checkpoint_utils.load_checkpoint_to_cpu = load_checkpoint_to_cpu


def numpy_compat_long() -> None:
    """``numpy.compat.long`` for fairseq's eos-mode ``TokenBlockDataset`` under NumPy 2 (5.)."""
    import types

    if getattr(np, "compat", None) is None:  # NumPy 1 has it (imported lazily on access)
        np.compat = types.SimpleNamespace(long=np.int64)


def _stop_prefetch_threads(timeout: float = 10.0) -> int:
    """Stop fairseq's live ``BackgroundConsumer`` threads after the batch each has in hand;
    returns how many were stopped."""
    import queue
    import threading
    import time

    from fairseq.data.iterators import BackgroundConsumer

    stopped = 0
    for t in threading.enumerate():
        if not isinstance(t, BackgroundConsumer) or not t.is_alive():
            continue
        t._max_len = 0  # its loop breaks after the next put
        deadline = time.monotonic() + timeout
        while t.is_alive() and time.monotonic() < deadline:
            try:
                while True:
                    t._queue.get_nowait()  # room for its put and its end marker
            except queue.Empty:
                pass
            t.join(0.05)
        stopped += not t.is_alive()
    return stopped


def stop_prefetch_at_exit() -> None:
    """Run :func:`_stop_prefetch_threads` at interpreter exit (6.)."""
    import atexit

    atexit.register(_stop_prefetch_threads)


# hydra 1.3's notices for the calls fairseq 0.12 makes when it composes a config from command-line
# arguments (hydra.experimental's initialize/compose, no version_base, the "_group_" package
# header of fairseq's config files, schema matching by name, compose's strict flag): about fifteen
# lines on stderr per process that nothing here can act on
HYDRA_NOTICES = (
    r"\s*hydra\.experimental\.(initialize|compose)\(\) is no longer experimental",
    r"\s*The version_base parameter is not specified",
    r"\s*In '[^']*': Usage of deprecated keyword in package header",
    r"\s*'[^']*' is validated against ConfigStore schema with the same name",
    r"\s*The strict flag in the compose API is deprecated",
)


def quiet_config_composition() -> None:
    """Run fairseq's ``convert_namespace_to_omegaconf`` (the one place where fairseq 0.12 calls
    hydra's compose API: the plugin's scripts building a model from arguments, fairseq loading a
    checkpoint saved with ``args``) with exactly :data:`HYDRA_NOTICES` ignored, and only during
    that call; every other warning, there and elsewhere, is shown as before."""
    import functools
    import warnings

    from fairseq import checkpoint_utils  # noqa: F401  (imported, so that it is in sys.modules)
    from fairseq.dataclass import utils as dataclass_utils

    original = dataclass_utils.convert_namespace_to_omegaconf
    if getattr(original, "truneg_quiet", False):  # installed already
        return

    @functools.wraps(original)
    def convert_namespace_to_omegaconf(args):
        with warnings.catch_warnings():
            for message in HYDRA_NOTICES:
                warnings.filterwarnings("ignore", message=message, category=UserWarning)
            return original(args)

    convert_namespace_to_omegaconf.truneg_quiet = True
    _rebind_conversion(original, convert_namespace_to_omegaconf)


def _amp_update_is_short() -> bool:
    """Whether the installed fairseq's ``AMPOptimizer`` divides the update by the loss scale
    (see the module docstring, 8.): one parameter, SGD with learning rate 1, gradient 1, a CPU
    ``GradScaler`` at scale 4, the trainer's calls (``backward``, ``clip_grad_norm``, ``step``).
    The parameter should move by 1; fairseq 0.12 moves it by 1/4. Anything that stops the probe
    (an ``AMPOptimizer`` built differently) counts as fixed: the shim is for the code it knows."""
    import warnings

    from omegaconf import OmegaConf

    try:
        from fairseq.optim.amp_optimizer import AMPOptimizer

        cfg = OmegaConf.create({
            "optimizer": {"_name": "sgd", "lr": [1.0], "momentum": 0.0, "weight_decay": 0.0},
            "common": {"fp16_init_scale": 4, "amp_init_scale": 4, "amp_scale_window": None,
                       "min_loss_scale": 1e-4},
        })
        param = torch.nn.Parameter(torch.zeros(1))
        with warnings.catch_warnings():  # fairseq builds torch.cuda.amp.GradScaler (deprecated; no CUDA here)
            warnings.simplefilter("ignore")
            amp = AMPOptimizer.build_optimizer(cfg, [param])
            amp._grad_scaler = torch.amp.GradScaler("cpu", init_scale=4.0)
            amp.backward(param.sum())
            amp.clip_grad_norm(0.0)
            amp.step()
        moved = -float(param.detach()[0])
    except Exception:
        return False
    return abs(moved - 0.25) < 1e-6


def amp_unscales_once() -> None:
    """Unscale ``--amp`` gradients once (see the module docstring, 8.): ``clip_grad_norm``
    unscales through the fairseq optimizer that ``step`` hands to the ``GradScaler``."""
    import logging

    from fairseq.optim.amp_optimizer import AMPOptimizer

    if getattr(AMPOptimizer.clip_grad_norm, "truneg_unscale_once", False):  # installed already
        return
    if not _amp_update_is_short():
        return
    log = logging.getLogger("fairseq.optim.amp_optimizer")

    def clip_grad_norm(self, max_norm, aggregate_norm_fn=None):
        # the scaler remembers per object that it has unscaled (and whether it found inf/nan):
        # unscaling through the object step() passes makes step() apply these gradients as they are
        self.scaler.unscale_(self.fp32_optimizer)
        grad_norm = self.fp32_optimizer.clip_grad_norm(max_norm, aggregate_norm_fn)
        if not torch.isfinite(grad_norm).all():  # step() skips the update, update() backs off the scale
            next_scale = self.next_loss_scale
            if next_scale <= self.min_loss_scale:
                raise FloatingPointError(
                    f"AMP: the loss scale would fall to {next_scale}, at or below --min-loss-scale "
                    f"{self.min_loss_scale}: the loss is probably diverging. Restart from an earlier "
                    "checkpoint (a lower --lr or a longer warm-up) or train in fp32"
                )
            log.info("AMP: gradients overflowed; skipping the update, loss scale goes to %s", next_scale)
        return grad_norm

    clip_grad_norm.truneg_unscale_once = True
    clip_grad_norm.__doc__ = AMPOptimizer.clip_grad_norm.__doc__
    AMPOptimizer.clip_grad_norm = clip_grad_norm


def _rebind_conversion(original, replacement) -> None:
    """Put ``replacement`` where fairseq's ``convert_namespace_to_omegaconf`` (``original``) is
    called: the module attribute and the modules that bound it by name at import (fairseq's
    checkpoint loading, and the command line that imported the plugin: ``fairseq_cli.train`` run
    as fairseq-train or as ``python -m fairseq_cli.train``, i.e. ``__main__``), which converts its
    arguments after importing the --user-dir."""
    from fairseq.dataclass import utils as dataclass_utils

    dataclass_utils.convert_namespace_to_omegaconf = replacement
    for name in ("fairseq.checkpoint_utils", "fairseq_cli.train", "fairseq_cli.validate", "__main__"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "convert_namespace_to_omegaconf", None) is original:
            module.convert_namespace_to_omegaconf = replacement


def _xla_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch_xla") is not None


class PrecisionFlagError(ValueError):
    """Two mixed-precision modes asked for at once."""


def bf16_means_autocast() -> None:
    """``--bf16``: fp32 weights, bf16 autocast, no loss scaler (see the module docstring, 9.)."""
    import functools

    from fairseq import checkpoint_utils  # noqa: F401  (imported, so that it is in sys.modules)
    from fairseq.dataclass import utils as dataclass_utils
    from fairseq.tasks import FairseqTask
    from fairseq.trainer import Trainer
    from omegaconf import DictConfig, open_dict

    from .precision import AUTOCAST_ATTR, autocast_criterion

    log = logging.getLogger("truneg_fairseq.precision")

    convert = dataclass_utils.convert_namespace_to_omegaconf
    if not getattr(convert, "truneg_bf16", False):
        @functools.wraps(convert)
        def convert_namespace_to_omegaconf(args):
            if getattr(args, "bf16", False) and getattr(args, "tpu", False) and not _xla_installed():
                args.tpu = False  # fairseq's "--bf16 implies --tpu": there is no TPU runtime here
            return convert(args)

        convert_namespace_to_omegaconf.truneg_bf16 = True
        convert_namespace_to_omegaconf.truneg_quiet = getattr(convert, "truneg_quiet", False)
        _rebind_conversion(convert, convert_namespace_to_omegaconf)

    init = Trainer.__init__
    if not getattr(init, "truneg_bf16", False):
        @functools.wraps(init)
        def __init__(self, cfg, task, model, criterion, *args, **kwargs):
            if isinstance(cfg, argparse.Namespace):
                cfg = dataclass_utils.convert_namespace_to_omegaconf(cfg)
            common = cfg.common if isinstance(cfg, DictConfig) else None
            if common is not None and common.get("bf16", False) and not common.get("tpu", False):
                other = [f"--{f}" for f in ("fp16", "amp") if common.get(f, False)]
                if other:
                    raise PrecisionFlagError(
                        f"--bf16 and {' and '.join(other)} are two mixed-precision modes: give one of them "
                        "(--bf16 on GPUs with bf16, A100/H100 and later; --fp16 on V100/T4)"
                    )
                with open_dict(common):
                    common.bf16 = False  # fp32 weights, batches and optimizer in fairseq's trainer
                    common.memory_efficient_bf16 = False
                setattr(task, AUTOCAST_ATTR, True)
                log.info("--bf16: fp32 weights and optimizer, forward pass and loss under "
                         "torch.autocast(bfloat16), no loss scaler")
            init(self, cfg, task, model, criterion, *args, **kwargs)

        __init__.truneg_bf16 = True
        Trainer.__init__ = __init__

    train_step = FairseqTask.train_step
    if not getattr(train_step, "truneg_bf16", False):
        @functools.wraps(train_step)
        def task_train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
            # only the forward pass and loss run under autocast; fairseq's step does the backward
            return train_step(self, sample, model, autocast_criterion(self, criterion), optimizer, update_num,
                              ignore_grad)

        @functools.wraps(FairseqTask.valid_step)
        def task_valid_step(self, sample, model, criterion):
            return valid_step(self, sample, model, autocast_criterion(self, criterion))

        valid_step = FairseqTask.valid_step
        task_train_step.truneg_bf16 = task_valid_step.truneg_bf16 = True
        FairseqTask.train_step, FairseqTask.valid_step = task_train_step, task_valid_step


def keep_remainder_batch() -> None:
    """Keep the last, partial batch that ``data_utils.batch_by_size`` drops (see the module
    docstring, 10.). fairseq's batching builds batches as consecutive runs of ``indices`` (each
    a multiple of the required size but the last); the indices after the batches it returns are
    exactly the dropped batch, so they are appended as one. fairseq's datasets look the function
    up in the module at each call (``FairseqDataset.batch_by_size``), so replacing the module
    attribute covers every task."""
    from fairseq.data import data_utils

    original = data_utils.batch_by_size
    if getattr(original, "truneg_keeps_remainder", False):  # installed already
        return

    def batch_by_size(indices, num_tokens_fn, num_tokens_vec=None, max_tokens=None, max_sentences=None,
                      required_batch_size_multiple=1, fixed_shapes=None):
        if not isinstance(indices, np.ndarray):  # an iterator can be read once: as fairseq reads it
            indices = np.fromiter(indices, dtype=np.int64, count=-1)
        batches = original(indices, num_tokens_fn, num_tokens_vec=num_tokens_vec, max_tokens=max_tokens,
                           max_sentences=max_sentences, required_batch_size_multiple=required_batch_size_multiple,
                           fixed_shapes=fixed_shapes)
        if fixed_shapes is not None or required_batch_size_multiple <= 1:
            return batches  # nothing is dropped there
        batched = sum(len(b) for b in batches)
        rest = indices[batched:]
        if len(rest) and (not batches or np.array_equal(np.concatenate(batches), indices[:batched])):
            batches = list(batches) + [rest]
        return batches

    batch_by_size.truneg_keeps_remainder = True
    batch_by_size.__wrapped__ = original
    data_utils.batch_by_size = batch_by_size
