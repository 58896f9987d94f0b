"""Checkpoint configs are data, not code (``safe_checkpoint_configs``): fairseq passes some
config fields to Python's ``eval`` when it builds a model or an optimizer (e.g.
``encoder_xformers_att_config`` in every transformer layer, ``adam_betas``, adaptive-softmax
cutoffs), at any depth (a RoBERTa checkpoint keeps ``cfg.model`` as an argument namespace, and
fairseq's ``TransformerConfig`` reads a dict under ``cfg.model.encoder`` as a nested group). A
checkpoint of plain data passes the weights-only load and would then run whatever such a field
holds. So every config fairseq reads from a checkpoint file
(``checkpoint_utils.load_checkpoint_to_cpu``: fairseq-train's resume and ``--restore-file``,
``load_model_ensemble_and_task`` and fairseq-validate, the hub, every script of the plugin) is
not filtered but rebuilt (:func:`rebuild_checkpoint_configs`, :mod:`.config_rebuild`): a new
config made from fairseq's schema, each known field checked for its type and copied, a field
fairseq evaluates (:data:`EVALUATED_FIELDS`; a test derives the set from fairseq's source) holding
plain data wherever it sits (a literal, or lists joined by ``+`` and repeated by ``*`` an integer,
as fairseq's fconv and wav2vec defaults are written, bounded after every step). Before any of
that, what the file's config holds is counted and bounded (:func:`bound_checkpoint_configs`,
:mod:`truneg_fairseq.checkpoint_schema.config_bounds`) on what ``torch.load`` returns inside
fairseq's loader, before fairseq builds a ``DictConfig`` of it (which copies every use of an
object the file stores once) or converts an old-style ``args`` (which resolves interpolations).
What fairseq's constructors receive is that rebuilt config; an unknown field, a value of the
wrong type or code refuses the file with one error naming the field's dotted path. The plugin's own loaders (``checkpoints.load_for_inference``:
its scripts, evaluation and HuggingFace export) go further and are an allow-list: a checkpoint
must be of the families the plugin trains and converts (fairseq's ``RobertaModel`` and the
plugin's models, read from fairseq's registries) and any other architecture (``cfg.model._name``,
or ``args.arch`` of an old-style checkpoint) is refused before anything is built. fairseq's own
commands under the plugin (``fairseq-train`` resume, ``--restore-file``, fairseq-validate) keep
loading other models, a user's own runs, through the rebuild alone.

Upstream: fairseq 0.12.2 (the last release); no upstream issue is known, and fairseq 0.12 gets no
more releases.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import functools

from truneg_fairseq.checkpoint_schema.config_bounds import bound_config
from truneg_fairseq.checkpoint_schema.config_rebuild import rebuild_args, rebuild_config
from truneg_fairseq.checkpoint_schema.evaluated_fields import (  # noqa: F401  (the names compat exports)
    EVALUATED_FIELDS,
    UnsafeCheckpointError,
    _evaluated,
    safe_literal,
)
from truneg_fairseq.errors import (
    UnknownArchitectureError,  # noqa: F401  (defined in the one place of the errors)
)

from .wrapping import wrap_once


def rebuild_checkpoint_configs(state: dict, path: str, overrides=None) -> None:
    """Replace (in ``state``, a checkpoint's saved state read from ``path``) the ``args`` of an
    old-style checkpoint and the ``cfg`` with configs rebuilt from fairseq's schema
    (:mod:`.config_rebuild`): every field known, of its type, plain data where fairseq evaluates
    it, at every depth; else :class:`UnsafeCheckpointError` naming the field. ``overrides``: the
    loader's ``arg_overrides``, kept."""
    if state.get("args") is not None:
        state["args"] = rebuild_args(state["args"], path, overrides)
    if state.get("cfg") is not None:
        state["cfg"] = rebuild_config(state["cfg"], path, overrides)


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
    out.update(
        {
            arch: ARCH_MODEL_NAME_REGISTRY[arch]
            for arch, cls in ARCH_MODEL_REGISTRY.items()
            if ours(cls)
        }
    )
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
                name = (
                    source[key]
                    if not isinstance(source, argparse.Namespace)
                    else getattr(source, key, None)
                )
            except Exception:
                name = getattr(source, key, None)
            if name:
                return str(name)
    return None


def check_architecture(state: dict, path: str) -> None:
    """Refuse checkpoint ``path`` unless it is of a family in :func:`loadable_architectures`,
    before anything reads its config further or builds it: the field check of
    :func:`sanitise_config` stands on knowing every field a model evaluates, and the plugin's
    loaders then need know only the models they use (see the module docstring)."""
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


def _explain_failed_upgrade(path: str) -> None:
    """fairseq failed while reading or upgrading ``path`` (an old-style ``args`` checkpoint is
    converted to a config before any check can see it, and that conversion fails for some other
    architectures): when the stored file itself is of another family (where only the plugin's are
    loaded) or its config does not rebuild (code, an unknown field), raise that error instead of
    fairseq's."""
    import torch

    try:
        raw = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:
        return  # not readable as plain data either: fairseq's own error stands
    if not isinstance(raw, dict) or (raw.get("cfg") is None and raw.get("args") is None):
        return  # no config to judge: fairseq's own error stands
    if _FAMILIES_ONLY.get():
        check_architecture(raw, path)
    rebuild_checkpoint_configs(raw, path)
    check_plugin_model_values(raw, path)


def check_plugin_model_values(state: dict, path: str) -> None:
    """A checkpoint of the plugin's families: its model config's values against the schema of
    :mod:`.model_values` and the weights saved with it (other families' fields mean other things:
    fconv's ``encoder_layers`` is a string fairseq evaluates, checked above)."""
    from truneg_fairseq.checkpoint_schema.model_values import check_model_values

    if checkpoint_architecture(state) not in loadable_architectures():
        return
    cfg = state.get("cfg")
    model = None
    if cfg is not None and not isinstance(cfg, argparse.Namespace):
        try:
            model = cfg["model"]
        except Exception:
            model = None
    for source in (model, state.get("args")):
        if source is not None:
            check_model_values(source, path, state.get("model"))


def bound_checkpoint_configs(state, path: str) -> None:
    """Refuse checkpoint ``state`` read from ``path`` when its ``cfg`` or old-style ``args``
    stands for more than any fairseq config (:func:`.config_bounds.bound_config`): called on
    what ``torch.load`` returns, before fairseq makes a ``DictConfig`` of the ``cfg`` (which
    copies every use of a shared object) or converts the ``args`` (which resolves them)."""
    if not isinstance(state, dict):
        return
    if state.get("cfg") is not None:
        bound_config(state["cfg"], path, "cfg")
    if state.get("args") is not None:
        bound_config(state["args"], path, "args", references=False)


# the checkpoint fairseq's loader is reading in this context (None: not inside it)
_READING = contextvars.ContextVar("truneg_reading_checkpoint", default=None)


def bounded_torch_load() -> None:
    """``torch.load`` called by fairseq's ``load_checkpoint_to_cpu`` (the one call it makes,
    while :data:`_READING` names the file) gives what it read to :func:`bound_checkpoint_configs`
    before fairseq does anything with it. Every other call is torch's own, unchanged."""
    import torch

    def bound_checkpoints(original):
        @functools.wraps(original)
        def load(*args, **kwargs):
            state = original(*args, **kwargs)
            path = _READING.get()
            if path is not None:
                _READING.set(None)  # the checkpoint itself only, not what a later call reads
                bound_checkpoint_configs(state, path)
            return state

        return load

    wrap_once(torch, "load", bound_checkpoints, marker="truneg_bounded")


def safe_checkpoint_configs() -> None:
    """Rebuild the config of every checkpoint fairseq loads (see the module docstring): the
    architecture is checked first where :func:`plugin_families_only` asks for it, then ``args``
    and ``cfg`` are replaced by configs rebuilt from fairseq's schema.

    The architecture allow-list is not applied to fairseq's own commands run with the plugin
    loaded (``fairseq-train`` resume and ``--restore-file``, ``fairseq-validate``): a user's own
    run of another fairseq model keeps resuming as it did, and what such a file could run is
    closed by the rebuild, which knows every field and every field fairseq evaluates."""
    from fairseq import checkpoint_utils

    def rebuilt_configs(original):
        bounded_torch_load()

        def load_checkpoint_to_cpu(path, arg_overrides=None, load_on_all_ranks=False):
            token = _READING.set(str(path))
            try:
                state = original(
                    path, arg_overrides=arg_overrides, load_on_all_ranks=load_on_all_ranks
                )
            except UnsafeCheckpointError:
                raise  # said already, from what was read
            except Exception:
                _explain_failed_upgrade(str(path))
                raise
            finally:
                _READING.reset(token)
            if _FAMILIES_ONLY.get():
                check_architecture(state, str(path))
            rebuild_checkpoint_configs(state, str(path), arg_overrides)
            check_plugin_model_values(state, str(path))
            return state

        return load_checkpoint_to_cpu

    wrap_once(checkpoint_utils, "load_checkpoint_to_cpu", rebuilt_configs, marker="truneg_safe")
