"""The plugin's one checkpoint loader for inference (:func:`load_for_inference`) and its
errors, said in words: a truncated file, a model trained with another dictionary, a model of
another shape. Scripts turn them into one line naming the file."""

import os
from typing import Optional

# the errors live with the mends that raise them too (compat imports nothing of this module)
from truneg_fairseq.checkpoint_schema.load_errors import (  # noqa: F401
    CheckpointError,
    checkpoint_write_errors,
    describe_load_error,
)
from truneg_fairseq.outputs import reading


def data_dir_for(
    checkpoint,
    recorded: Optional[str],
    data: Optional[str] = None,
    flag: str = "--data",
    needs: str = "dict.txt",
    dictionary: Optional[dict] = None,
) -> str:
    """The data directory to load ``checkpoint`` with: ``data`` when given (it must hold
    ``needs``: the error names ``flag`` and that directory), else the one ``recorded`` in the
    checkpoint, else the checkpoint's own directory (an import keeps dict.txt beside model.pt).
    ``dictionary``: the training dictionary the checkpoint records
    (:mod:`truneg_fairseq.compat.dictionary_record`); the directory's ``needs`` must be that
    dictionary. Without it, a ``data`` given while the recorded directory still holds its
    ``needs`` must list the same symbols as that one."""
    first = str(recorded).split(os.pathsep)[0] if recorded else None
    if first:  # the training data's dictionary: an input, whether it is compared or not
        reading(
            os.path.join(first, needs), f"dictionary of the data directory {checkpoint} records"
        )
    found = _data_dir(checkpoint, recorded, data, flag, needs, dictionary is None)
    given = f"{flag} dictionary" if data else f"dictionary found for {checkpoint}"
    reading(os.path.join(found, needs), given)
    if dictionary is not None:
        from truneg_fairseq.compat.dictionary_record import check_dictionary_file

        path = os.path.join(found, needs)
        if data:
            named = f"{flag} {data}: its {needs}"
            recorded_ok = first and os.path.isfile(os.path.join(first, needs))
            fix = (
                f"Leave {flag} out (the data directory it records, {first}, is in place), or give "
                f"{flag} a directory with that same {needs}"
                if recorded_ok
                else f"Give {flag} the data directory it was trained on (or one with that same {needs})"
            )
        else:
            where = "recorded in" if found == first else "beside"
            named = f"{path} (the data directory {where} {checkpoint})"
            fix = f"Pass the data directory it was trained on with {flag}"
        check_dictionary_file(checkpoint, dictionary, path, named, fix)
    return found


def _data_dir(checkpoint, recorded, data, flag, needs, compare_recorded: bool) -> str:
    if data:
        if not os.path.isdir(data):
            raise CheckpointError(
                f"{flag} {data}: no such directory; give the data directory {checkpoint} was "
                f"trained on (the one holding {needs})"
            )
        if not os.path.isfile(os.path.join(data, needs)):
            raise CheckpointError(
                f"{flag} {data} has no {needs}; give the data directory {checkpoint} was trained "
                f"on (the one holding {needs})"
            )
        if compare_recorded:
            _check_same_dictionary(checkpoint, recorded, data, flag, needs)
        return data
    first = str(recorded).split(os.pathsep)[0] if recorded else None
    for cand in (first, os.path.dirname(os.path.abspath(str(checkpoint)))):
        if cand and os.path.isfile(os.path.join(cand, needs)):
            return cand
    raise CheckpointError(
        f"no {needs} for {checkpoint}: the directory recorded in it ({recorded}) is gone or moved; "
        f"pass the data directory (the one holding {needs}) with {flag}"
    )


def _symbols(path) -> list:
    with open(path, encoding="utf-8", errors="replace") as f:
        return [line.split(" ", 1)[0].rstrip("\r\n") for line in f]


def _check_same_dictionary(checkpoint, recorded, data, flag, needs) -> None:
    """``data`` given while the directory the checkpoint records still holds its ``needs``: both
    must list the same symbols, else the model's rows would be read as other words (a dictionary
    of another size fails to load; one of the same size would give wrong results in silence)."""
    first = str(recorded).split(os.pathsep)[0] if recorded else None
    if not first or os.path.realpath(first) == os.path.realpath(data):
        return
    theirs, ours = os.path.join(first, needs), os.path.join(data, needs)
    if not os.path.isfile(theirs):
        return
    a, b = _symbols(theirs), _symbols(ours)
    if a != b:
        differ = sum(x != y for x, y in zip(a, b)) + abs(len(a) - len(b))
        raise CheckpointError(
            f"{flag} {data}: its {needs} is not the dictionary {checkpoint} was trained with "
            f"({theirs}, still in place: {differ} of {len(a)} entries differ), so every word would be "
            f"read as another. Leave {flag} out, or give a directory with that same {needs}"
        )


def discriminator_only(cfg) -> bool:
    """Whether ``cfg`` describes an ELECTRA discriminator saved without its generator (an
    import of a discriminator published alone): its task cannot build it, see :func:`build_model`."""
    return bool(getattr(cfg.model, "electra_discriminator_only", False))


def build_model(cfg, task):
    """The model ``cfg`` describes, untrained. An ELECTRA discriminator alone is built directly
    (the model without :meth:`~truneg_fairseq.models.electra.ElectraModel.add_generator`):
    ``--task electra`` pre-trains a generator and refuses a model without one, while the
    fine-tuning tasks that build it need their own data directories. Its class is the one
    fairseq registered for the config's architecture (this leaf module imports no model)."""
    if discriminator_only(cfg):
        from fairseq.models import ARCH_MODEL_REGISTRY

        return ARCH_MODEL_REGISTRY[cfg.model._name](cfg.model, task.source_dictionary)
    return task.build_model(cfg.model)


def read_checkpoint(checkpoint, data: Optional[str] = None) -> dict:
    """The saved state of fairseq checkpoint ``checkpoint`` (model weights, ``cfg``), read with
    the plugin's checks: its model must be of a family the plugin trains and converts (RoBERTa,
    BERT, ELECTRA, CLINE) and its config is the one rebuilt from fairseq's schema (known fields
    of their types, no code where fairseq evaluates a value, at any depth:
    :mod:`truneg_fairseq.checkpoint_schema.config_rebuild`). A missing file, a file that is not a fairseq
    checkpoint, a truncated one or one that fails those checks is one :class:`CheckpointError`
    naming it (``data``: the data directory it is to be evaluated on, for the messages)."""
    from fairseq import checkpoint_utils

    from truneg_fairseq.checkpoint_schema.model_values import ModelValueError

    # the plugin's names are registered and the loading shims installed before fairseq reads the
    # checkpoint: by the package root where it was imported, by a command once its line is parsed
    # (truneg_fairseq/__init__.py; this leaf module cannot import the root, which imports it)
    from truneg_fairseq.compat.checkpoint_configs import (
        UnsafeCheckpointError,
        plugin_families_only,
    )

    if not os.path.isfile(str(checkpoint)):
        raise CheckpointError(f"checkpoint {checkpoint} not found")
    reading(checkpoint, "checkpoint")
    try:
        with plugin_families_only():  # only the plugin's families are built here
            state = checkpoint_utils.load_checkpoint_to_cpu(str(checkpoint))
    except (UnsafeCheckpointError, ModelValueError) as e:
        raise CheckpointError(str(e)) from None
    except Exception as e:
        raise CheckpointError(
            describe_load_error(checkpoint, e, data)
            or f"{checkpoint} is not a fairseq checkpoint ({type(e).__name__}: {e}): give a "
            "checkpoint saved by fairseq-train or scripts/convert_hf.py import"
        ) from None
    if not isinstance(state, dict):
        raise CheckpointError(
            f"{checkpoint} is not a fairseq checkpoint (it holds a {type(state).__name__}): give "
            "a checkpoint saved by fairseq-train or scripts/convert_hf.py import"
        )
    return state


def load_for_inference(
    checkpoint,
    data: Optional[str] = None,
    overrides: Optional[dict] = None,
    flag: str = "--data",
    needs: str = "dict.txt",
    check=None,
):
    """(models, cfg, task) of a fairseq checkpoint, the plugin's one loading path for inference
    (scripts, evaluation, HuggingFace export), so that every reader gets the same checks and the
    same errors: the checkpoint must be of a family the plugin trains and converts (RoBERTa, BERT,
    ELECTRA, CLINE: :func:`~truneg_fairseq.compat.check_architecture`, before anything is built)
    and its config rebuilt from fairseq's schema (:func:`read_checkpoint`), the data
    directory resolved by :func:`data_dir_for`, an
    ELECTRA discriminator saved alone built by :func:`build_model` (fairseq's loader would hand
    it to ``--task electra``, which refuses it), the models returned in eval mode (dropout off:
    the caller predicts, it does not train) and every loading problem raised as one
    :class:`CheckpointError` naming the file. ``check(state, data)``: the caller's own check of
    the saved state against the data directory, before anything is built."""
    from fairseq import checkpoint_utils

    state = read_checkpoint(checkpoint, data)
    cfg = state.get("cfg")
    if cfg is None or getattr(cfg, "task", None) is None:
        raise CheckpointError(
            f"{checkpoint} has no fairseq config (cfg): not a fairseq checkpoint of this kind"
        )
    from truneg_fairseq.compat import RECORDS
    from truneg_fairseq.compat.dictionary_record import recorded_dictionary

    recorded = cfg.task.get("data", None)
    data = data_dir_for(
        checkpoint, recorded, data, flag, needs, recorded_dictionary(state, RECORDS)
    )
    if check is not None:
        check(state, data)
    from fairseq.dataclass.utils import overwrite_args_by_name

    overwrite_args_by_name(
        cfg, {"data": data, **(overrides or {})}
    )  # as fairseq's loader applies arg_overrides
    if state.get("args") is not None:
        # an old-style checkpoint: fairseq's loader would rebuild the config from its ``args``
        # (the recorded data directory, overrides dropped); the config converted from them at
        # load time, with the overrides applied, is the one used
        state["args"] = None
    try:
        if discriminator_only(cfg):
            from fairseq import tasks

            task = tasks.setup_task(cfg.task)
            model = build_model(cfg, task)
            model.load_state_dict(state["model"], strict=True, model_cfg=cfg.model)
            models = [model]
        else:
            models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(
                [str(checkpoint)], state=state
            )
    except Exception as e:
        msg = describe_load_error(checkpoint, e, data)
        if msg is None:
            raise
        raise CheckpointError(msg) from None
    return [m.eval() for m in models], cfg, task
