"""``--truneg-embed-init FILE`` (the plugin's RoBERTa) and ``--electra-embed-init FILE``
(ELECTRA): token embeddings started from a .npy matrix (one row per
dictionary entry with ``<mask>``; ``scripts/word_vectors.py`` writes one). Read when a model is
first built, then dropped from its config, so checkpoints never point at the file."""

import logging

import torch

from truneg_fairseq.errors import FlagError

logger = logging.getLogger(__name__)

HELP = (
    "start the token embeddings (tied to the output projection) from this .npy matrix, one row per dictionary "
    "entry with <mask> (scripts/word_vectors.py writes one); zero rows keep their random initialisation. Read "
    "when the model is first built: checkpoints do not need the file"
)


def load_rows(weight: torch.Tensor, path: str, flag: str = "--truneg-embed-init") -> int:
    """Copy the non-zero rows of the matrix in ``path`` into ``weight`` (V x C), scaled to the
    mean norm of its current rows; returns how many rows were copied."""
    import numpy as np

    try:
        vec = torch.from_numpy(np.load(path, allow_pickle=False)).float()
    except (OSError, ValueError) as e:
        raise FlagError(
            f"{flag} {path}: cannot read a .npy matrix ({e}); write one with "
            "scripts/word_vectors.py"
        ) from None
    if tuple(vec.shape) != tuple(weight.shape):
        raise FlagError(
            f"{flag} {path}: a {tuple(vec.shape)} matrix, the model's token embedding is "
            f"{tuple(weight.shape)} (dictionary entries with <mask> x embedding size); write it for this "
            "dict.txt and size with scripts/word_vectors.py"
        )
    rows = vec.abs().sum(dim=1) > 0
    with torch.no_grad():
        scale = weight.norm(dim=1).mean() / vec[rows].norm(dim=1).mean().clamp_min(1e-8)
        weight[rows] = vec[rows].to(weight) * scale
    logger.info(f"token embeddings: {int(rows.sum())} of {weight.size(0)} rows from {path}")
    return int(rows.sum())


def forget(cfg, key: str) -> None:
    """Set ``key`` of a model config (DictConfig or Namespace) to None: the checkpoint's config
    then does not name the file."""
    from omegaconf import DictConfig, open_dict

    if isinstance(cfg, DictConfig):
        with open_dict(cfg):
            cfg[key] = None
    elif cfg is not None:
        setattr(cfg, key, None)
