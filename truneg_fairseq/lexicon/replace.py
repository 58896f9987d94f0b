"""WordNet word replacement, shared by the robustness perturbations (``perturb.py``) and CLINE's
example construction (``cline.py``).

* :func:`swap_syn_wordnet`: TextFlint-style synonym swaps in running text (punctuation around a
  word and the case of its first letter kept), with character edits so spans can be moved.
* :func:`alter_word`: a WordNet antonym of a word, else another word of the same part of speech.
* :class:`Lexicon`: cached per-word lookups for CLINE: the part of speech of a word decided from
  WordNet alone (no tagger), its base form, and its single-word synonyms, hypernyms and antonyms
  of that part of speech.

Only single-word lemmas are ever inserted: lemma names with ``_`` (WordNet's multi-word
separator), ``-`` or other non-letters are skipped.
"""

from __future__ import annotations

import os
import random
import re
from typing import Dict, List, Optional, Sequence, Tuple

from truneg_fairseq.lexicon.synonyms import stopwords, wordnet_synonyms

# leading punctuation, an alphabetic core, trailing punctuation
WORD = re.compile(r"^(\W*)([A-Za-z]+)(\W*)$")
POS_TAGS = ("n", "v", "a", "r")  # noun, verb, adjective (satellites folded in), adverb
_SS_TYPE = {"1": "n", "2": "v", "3": "a", "4": "r", "5": "a"}  # sense-key digit -> POS
_POOL: Dict[str, List[str]] = {}  # part of speech -> replacement words (alter_word)


def match_case(src: str, new: str) -> str:
    """``new`` with the first letter upper-cased when ``src`` starts with a capital."""
    return new[0].upper() + new[1:] if src[0].isupper() else new


def split_token(token: str) -> Optional[Tuple[str, str, str]]:
    """(leading punctuation, alphabetic core, trailing punctuation), or None when the
    whitespace-delimited token has no purely alphabetic core (numbers, ``don't``, URLs)."""
    m = WORD.match(token)
    return (m.group(1), m.group(2), m.group(3)) if m else None


def single_word(name: str) -> bool:
    """A lemma name that can replace one word: ASCII letters only, lower case (no proper
    nouns, no ``primary_election``, no ``x-ray``)."""
    return name.isascii() and name.isalpha() and name.islower()


# ---- robustness perturbations -----------------------------------------------------------------


def swap_syn_wordnet(
    text: str,
    wn,
    rng: random.Random,
    prob: float = 0.1,
    max_swaps: int = 10,
    protected: Sequence[Tuple[int, int]] = (),
) -> Tuple[str, List[Tuple[int, int]]]:
    """Returns (new text, edits) with edits = [(char position in the old text, length change)]."""
    stop = stopwords()
    out, edits, pos, swaps = [], [], 0, 0
    for m in re.finditer(r"\S+", text):
        out.append(text[pos : m.start()])
        tok = m.group(0)
        new = tok
        wm = WORD.match(tok)
        inside = any(m.start() < e and m.end() > s for s, e in protected)
        if (
            wm
            and not inside
            and swaps < max_swaps
            and wm.group(2).lower() not in stop
            and rng.random() < prob
        ):
            syns = sorted(wordnet_synonyms(wm.group(2).lower(), wn, stop))
            if syns:
                new = wm.group(1) + match_case(wm.group(2), rng.choice(syns)) + wm.group(3)
                swaps += 1
                edits.append((m.start(), len(new) - len(tok)))
        out.append(new)
        pos = m.end()
    out.append(text[pos:])
    return "".join(out), edits


def shift(offset: int, edits) -> int:
    """Position ``offset`` of the old text in the new text."""
    return offset + sum(d for p, d in edits if p < offset)


def alter_word(word: str, wn, rng: random.Random, stop) -> str:
    """A single-word WordNet antonym of ``word``, else another word of the part of speech of
    its first synset (one of the first single-word lemmas of that part of speech)."""
    lw = word.lower()
    if lw in stop or not word.isalpha():
        return word
    antonyms = sorted(
        {
            a.name()
            for s in wn.synsets(lw)
            for lemma in s.lemmas()
            for a in lemma.antonyms()
            if "_" not in a.name()
        }
    )
    if antonyms:
        return match_case(word, rng.choice(antonyms))
    synsets = wn.synsets(lw)
    pos = synsets[0].pos() if synsets else "n"
    if pos not in _POOL:  # the first single-word lemma of the first synsets of that part of speech
        names = (s.lemmas()[0].name() for s in wn.all_synsets(pos=pos))
        _POOL[pos] = [w for w, _ in zip((n for n in names if n.isalpha()), range(5000))]
    choices = [w for w in _POOL[pos] if w.lower() != lw]
    return match_case(word, rng.choice(choices)) if choices else word


# ---- CLINE lookups ----------------------------------------------------------------------------


def sense_counts(wn) -> Dict[str, List[int]]:
    """{lemma: [tagged-sense count as noun, verb, adjective, adverb]} from WordNet's
    ``index.sense`` (the SemCor frequencies nltk's ``Lemma.count()`` reads, summed per part of
    speech in one pass instead of one file search per lemma). Empty when the file is absent."""
    path = os.path.join(wn.root, "index.sense")
    out: Dict[str, List[int]] = {}
    if not os.path.isfile(path):
        return out
    col = {p: i for i, p in enumerate(POS_TAGS)}
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) < 4:
                continue
            lemma, _, rest = parts[0].partition("%")
            pos = _SS_TYPE.get(rest[:1])
            if pos is None:
                continue
            out.setdefault(lemma, [0, 0, 0, 0])[col[pos]] += int(parts[3])
    return out


class Lexicon:
    """Cached WordNet lookups for whole words (lower-case, alphabetic).

    Part of speech (no tagger needed): for each of noun, verb, adjective, adverb the word's base
    form is found with WordNet's morphology (``morphy``: "ran" -> "run" as a verb); the part of
    speech whose base form has the most sense-tagged occurrences in WordNet's ``index.sense``
    wins; when none has any, the part of speech of the word's first synset. A word with no
    synset is not a content word for WordNet and gets None.

    Candidates for a word of part of speech ``pos`` come from its first ``max_senses`` senses
    of that part of speech (WordNet lists senses most frequent first), base form ``base``:
    synonyms = the other single-word lemmas of those synsets; hypernyms = the single-word lemmas
    of their direct hypernyms; antonyms = the single-word antonyms of the lemma ``base`` in
    them. Stopwords, the word and its base form are never candidates.
    """

    def __init__(self, wn, stop: Optional[frozenset] = None, max_senses: int = 3):
        self.wn = wn
        self.stop = stop if stop is not None else stopwords()
        self.max_senses = max_senses
        self.counts = sense_counts(wn)
        self._pos: Dict[str, Optional[Tuple[str, str]]] = {}
        self._cand: Dict[Tuple[str, str, str], List[str]] = {}

    def content_word(self, word: str) -> bool:
        return word.isascii() and word.isalpha() and word not in self.stop

    def pos_and_base(self, word: str) -> Optional[Tuple[str, str]]:
        """(part of speech, base form) of a lower-case word, or None (see the class docstring)."""
        if word in self._pos:
            return self._pos[word]
        best = None
        if self.content_word(word):
            scored = []
            for i, pos in enumerate(POS_TAGS):
                base = self.wn.morphy(word, pos)
                if base is None:
                    continue
                scored.append((self.counts.get(base, (0, 0, 0, 0))[i], -i, pos, base))
            if scored:
                top = max(scored)
                if top[0] > 0:
                    best = (top[2], top[3])
                else:
                    synsets = self.wn.synsets(word)
                    first = (
                        synsets[0].pos().replace("s", "a") if synsets else None
                    )  # satellite -> adj
                    best = next(
                        ((p, b) for _, _, p, b in scored if p == first),
                        (scored[0][2], scored[0][3]),
                    )
        self._pos[word] = best
        return best

    def _synsets(self, base: str, pos: str):
        out = []
        for s in self.wn.synsets(base, pos=pos):
            if base in (lemma.name().lower() for lemma in s.lemmas()):
                out.append(s)
            if len(out) == self.max_senses:
                break
        return out

    def _clean(self, names, word: str, base: str) -> List[str]:
        return sorted(
            {n for n in names if single_word(n) and n not in self.stop and n not in (word, base)}
        )

    def synonyms(self, word: str, pos: str, base: str) -> List[str]:
        key = ("syn", word, pos)
        if key not in self._cand:
            names = [lemma.name() for s in self._synsets(base, pos) for lemma in s.lemmas()]
            self._cand[key] = self._clean(names, word, base)
        return self._cand[key]

    def hypernyms(self, word: str, pos: str, base: str) -> List[str]:
        key = ("hyp", word, pos)
        if key not in self._cand:
            names = [
                lemma.name()
                for s in self._synsets(base, pos)
                for h in s.hypernyms()
                for lemma in h.lemmas()
            ]
            self._cand[key] = self._clean(names, word, base)
        return self._cand[key]

    def antonyms(self, word: str, pos: str, base: str) -> List[str]:
        key = ("ant", word, pos)
        if key not in self._cand:
            names = [
                a.name()
                for s in self._synsets(base, pos)
                for lemma in s.lemmas()
                if lemma.name().lower() == base
                for a in lemma.antonyms()
            ]
            self._cand[key] = self._clean(names, word, base)
        return self._cand[key]
