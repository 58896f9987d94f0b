"""Offline WordNet provisioning for nltk.

Library code never calls ``nltk.download``. :func:`load_wordnet` finds WordNet in this order:

1. an nltk data directory that already holds ``corpora/wordnet`` (``NLTK_DATA``, nltk's defaults);
2. a Princeton-format ``dict`` directory (``$WNHOME``, ``$WNHOME/dict`` or Debian's
   ``/usr/share/wordnet`` from the ``wordnet-base`` + ``wordnet-sense-index`` packages), which is
   assembled once into an nltk-readable ``corpora/wordnet`` under a cache directory: nltk refuses
   symlinks and unregistered roots, and needs the ``lexnames`` file Debian does not ship;
3. otherwise one :class:`WordNetNotFoundError` that lists these options.

``TRUNEG_WORDNET_SYSTEM=0`` leaves out the places nobody named: Debian's ``/usr/share/wordnet``
and nltk's built-in data directories; only ``NLTK_DATA``, ``$WNHOME`` and the cache are searched
(to test the no-WordNet path, or to pin one WordNet copy). A ``$WNHOME`` that holds no WordNet
gets a warning naming it. A cache left incomplete (an interrupted copy) is rebuilt.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import List, Optional

from truneg_fairseq.errors import (
    WordNetNotFoundError,  # noqa: F401  (defined in the one place of the errors)
)

# The 45 lexicographer files of WordNet 3.0, in file-number order (the ``lexnames`` file).
_LEXNAMES = (
    "adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute "
    "noun.body noun.cognition noun.communication noun.event noun.feeling noun.food noun.group "
    "noun.location noun.motive noun.object noun.person noun.phenomenon noun.plant "
    "noun.possession noun.process noun.quantity noun.relation noun.shape noun.state "
    "noun.substance noun.time verb.body verb.change verb.cognition verb.communication "
    "verb.competition verb.consumption verb.contact verb.creation verb.emotion verb.motion "
    "verb.perception verb.possession verb.social verb.stative verb.weather adj.ppl"
).split()
_POS_NUMBER = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}

# Files nltk's WordNetCorpusReader opens.
_REQUIRED = [
    f"{kind}.{pos}" for kind in ("data", "index") for pos in ("noun", "verb", "adj", "adv")
]
_OPTIONAL = ["adj.exc", "adv.exc", "noun.exc", "verb.exc", "index.sense", "cntlist.rev", "lexnames"]

DEFAULT_DICT_DIRS = ("/usr/share/wordnet",)

logger = logging.getLogger(__name__)


def _use_system_dirs() -> bool:
    """False when ``TRUNEG_WORDNET_SYSTEM=0``: search only the places the user named."""
    return os.environ.get("TRUNEG_WORDNET_SYSTEM", "1").strip().lower() not in (
        "0",
        "false",
        "no",
        "off",
    )


def lexnames_text() -> str:
    """The WordNet 3.0 ``lexnames`` file: ``NN<TAB>name<TAB>pos-number`` per line."""
    lines = []
    for i, name in enumerate(_LEXNAMES):
        lines.append(f"{i:02d}\t{name}\t{_POS_NUMBER[name.split('.')[0]]}")
    return "\n".join(lines) + "\n"


def default_cache_dir() -> Path:
    base = os.environ.get("TRUNEG_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "truneg_fairseq"
    )
    return Path(base) / "nltk_data"


def _is_dict_dir(path: Path) -> bool:
    return all((path / name).is_file() for name in _REQUIRED)


def candidate_dict_dirs() -> List[Path]:
    """Princeton-format WordNet ``dict`` directories to try, most specific first."""
    out: List[Path] = []
    wnhome = os.environ.get("WNHOME")
    if wnhome:
        out += [Path(wnhome) / "dict", Path(wnhome)]
        if not any(_is_dict_dir(p) for p in out):
            logger.warning(
                f"WNHOME={wnhome} holds no WordNet dict directory (neither it nor {out[0]} has "
                f"{', '.join(_REQUIRED[:2])}, ...); it is ignored"
            )
    if _use_system_dirs():
        out += [Path(p) for p in DEFAULT_DICT_DIRS]
    return out


def _is_complete_copy(dict_dir: Path, target: Path) -> bool:
    """``target`` holds every file of ``dict_dir`` nltk reads, at the same size, and lexnames."""
    for name in _REQUIRED + _OPTIONAL:
        src, dst = dict_dir / name, target / name
        if src.is_file() and (not dst.is_file() or dst.stat().st_size != src.stat().st_size):
            return False
    return _is_dict_dir(target) and (target / "lexnames").is_file()


def _check_cache_dir(cache: Path, origin: str) -> None:
    """One clear error when the cache (or a parent of it) is a file, not a directory."""
    for p in [cache, *cache.parents]:
        if p.exists():
            if not p.is_dir():
                raise WordNetNotFoundError(
                    f"{origin}: {p} is a file, not a directory; WordNet is copied to {cache}. Set "
                    f"TRUNEG_CACHE to a directory (unset: ~/.cache/truneg_fairseq)"
                )
            return


def assemble_nltk_wordnet(dict_dir: Path, nltk_data_dir: Path) -> Path:
    """Copy a Princeton ``dict`` directory into ``nltk_data_dir/corpora/wordnet``.

    Files are copied (nltk rejects symlinks that leave its root), ``lexnames`` is written when
    missing, and the directory appears atomically (built beside, then renamed).
    Returns the ``corpora/wordnet`` path.
    """
    dict_dir = Path(dict_dir)
    if not _is_dict_dir(dict_dir):
        missing = [n for n in _REQUIRED if not (dict_dir / n).is_file()]
        raise WordNetNotFoundError(
            f"{dict_dir} is not a WordNet dict directory (missing {', '.join(missing)})"
        )
    target = Path(nltk_data_dir) / "corpora" / "wordnet"
    if _is_complete_copy(dict_dir, target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".wordnet-", dir=target.parent))
    try:
        for name in _REQUIRED + _OPTIONAL:
            src = dict_dir / name
            if src.is_file():
                shutil.copyfile(src.resolve(), tmp / name)
        if not (tmp / "lexnames").is_file():
            (tmp / "lexnames").write_text(lexnames_text())
        if target.exists():  # an incomplete copy (an interrupted run): replace it
            logger.warning(f"rebuilding the incomplete WordNet copy {target} from {dict_dir}")
            shutil.rmtree(target, ignore_errors=True)
        try:
            os.rename(tmp, target)
        except OSError:
            # Another process won the race; keep its copy.
            if not _is_complete_copy(dict_dir, target):
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _nltk_has_wordnet() -> bool:
    import nltk

    # with TRUNEG_WORDNET_SYSTEM=0 only NLTK_DATA counts, not nltk's built-in directories
    paths = (
        None
        if _use_system_dirs()
        else [p for p in os.environ.get("NLTK_DATA", "").split(os.pathsep) if p]
    )
    for name in ("corpora/wordnet", "corpora/wordnet.zip"):
        try:
            nltk.data.find(name, paths=paths)
            return True
        except LookupError:
            pass
    return False


_WORDNET = None


def load_wordnet(cache_dir: Optional[os.PathLike] = None):
    """Return nltk's WordNet reader, provisioning it offline if needed (see module docstring)."""
    global _WORDNET
    if _WORDNET is not None:
        return _WORDNET
    import nltk

    if not _nltk_has_wordnet():
        cache = Path(cache_dir) if cache_dir else default_cache_dir()
        env = os.environ.get("TRUNEG_CACHE")
        _check_cache_dir(
            cache, f"TRUNEG_CACHE={env}" if env and not cache_dir else f"WordNet cache {cache}"
        )
        tried = []
        for cand in candidate_dict_dirs():
            tried.append(str(cand))
            if _is_dict_dir(cand):
                assemble_nltk_wordnet(cand, cache)
                if str(cache) not in nltk.data.path:
                    nltk.data.path.insert(0, str(cache))
                break
        else:
            raise WordNetNotFoundError(
                "WordNet 3.0 not found. Tried nltk data dirs "
                f"({', '.join(map(str, nltk.data.path[:4]))}, ...) and WordNet dict dirs "
                f"({', '.join(tried)}). Fix one of: `sudo apt-get install wordnet-base "
                "wordnet-sense-index` (Debian/Ubuntu; `make install` does this), set WNHOME to a "
                "Princeton WordNet 3.0 directory holding data.noun/index.noun, or set NLTK_DATA "
                "to an nltk data directory that holds corpora/wordnet."
            )
    from nltk.corpus import wordnet as wn

    wn.ensure_loaded()
    _WORDNET = wn
    return wn
