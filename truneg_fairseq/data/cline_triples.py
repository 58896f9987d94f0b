"""CLINE's perturbed versions of one sentence (Wang et al., ACL 2021): x_syn and x_ant built
from WordNet (:func:`build_triple`), the training text's vocabulary they draw from
(:func:`collect_vocabulary`), and the Hits triplets (:func:`make_hits_triplets`). Kept apart
from the dataset builder (:mod:`truneg_fairseq.data.cline_data`) because it is pure word-level logic:
no tokenizer, no files, one seeded ``random.Random`` per sentence.

See :mod:`truneg_fairseq.data.cline_data` for the rules (which words are eligible, how many are
replaced, by what).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

from truneg_fairseq.lexicon.replace import Lexicon, match_case, single_word, split_token

SYN_RATE = 0.4
ANT_RATE = 0.2


# ---- vocabulary of the training text ----------------------------------------------------------


@dataclass
class CorpusVocabulary:
    """Content words of the training text: ``pools[pos]`` (sorted) are the random replacements
    of x_ant; ``forms[(pos, base)]`` (sorted) are the morphological variants of x_syn."""

    pools: Dict[str, List[str]] = field(default_factory=dict)
    forms: Dict[Tuple[str, str], List[str]] = field(default_factory=dict)


def collect_vocabulary(lines: Iterable[str], lex: Lexicon) -> CorpusVocabulary:
    types = Counter()
    for line in lines:
        for tok in line.split():
            parts = split_token(tok)
            if parts and parts[1].islower():
                types[parts[1]] += 1
    pools: Dict[str, set] = {}
    forms: Dict[Tuple[str, str], set] = {}
    for word in types:
        pb = lex.pos_and_base(word)
        if pb is None:
            continue
        pos, base = pb
        pools.setdefault(pos, set()).add(word)
        forms.setdefault((pos, base), set()).add(word)
    return CorpusVocabulary(
        pools={p: sorted(ws) for p, ws in pools.items()},
        forms={k: sorted(ws) for k, ws in forms.items() if len(ws) > 1 or k[1] not in ws},
    )


# ---- one sentence -----------------------------------------------------------------------------


@dataclass
class Triple:
    """Three whitespace-word versions of a sentence. ``*_cores[i]`` is the (start, end) span of
    the replaced alphabetic core inside word i, or None when word i is unchanged."""

    ori: List[str]
    syn: List[str]
    ant: List[str]
    syn_cores: List[Optional[Tuple[int, int]]]
    ant_cores: List[Optional[Tuple[int, int]]]
    eligible: int = 0
    ant_antonyms: int = 0
    ant_random: int = 0
    syn_kinds: Dict[str, int] = field(default_factory=dict)
    # (index, original core, new core, kind) for inspection and tests
    syn_edits: List[Tuple[int, str, str, str]] = field(default_factory=list)
    ant_edits: List[Tuple[int, str, str, str]] = field(default_factory=list)


def _fallback_pool(lex: Lexicon, pos: str) -> List[str]:
    """Single-word WordNet lemmas of ``pos`` (the first 5,000 in WordNet's order), for a corpus
    too small to have content words of that part of speech."""
    key = "_pool_" + pos
    if key not in lex.__dict__:
        names = (lemma.name() for s in lex.wn.all_synsets(pos=pos) for lemma in s.lemmas())
        pool = sorted(
            {
                n
                for n, _ in zip(
                    (n for n in names if single_word(n) and n not in lex.stop), range(5000)
                )
            }
        )
        lex.__dict__[key] = pool
    return lex.__dict__[key]


def _syn_candidates(
    lex: Lexicon, vocab: CorpusVocabulary, core: str, pos: str, base: str
) -> Dict[str, List[str]]:
    """{kind: replacements} for x_syn: an inflected word gets other forms of its base found in
    the training text (``variant``); a base form also its WordNet synonyms and hypernyms."""
    low = core.lower()
    variants = [w for w in vocab.forms.get((pos, base), ()) if w != low]
    if base not in variants and base != low:
        variants.append(base)
    if low != base:
        return {"variant": sorted(variants)} if variants else {}
    kinds = {
        "synonym": lex.synonyms(low, pos, base),
        "hypernym": lex.hypernyms(low, pos, base),
        "variant": sorted(variants),
    }
    return {k: v for k, v in kinds.items() if v}


def _random_word(
    lex: Lexicon, vocab: CorpusVocabulary, rng: random.Random, low: str, pos: str, base: str
) -> str:
    """x_ant's replacement for a word without an antonym: a training-text word of the same part
    of speech that is neither the word nor one of its synonyms."""
    avoid = {low, base, *lex.synonyms(low, pos, base)}
    pool = vocab.pools.get(pos) or _fallback_pool(lex, pos)
    for _ in range(8):
        cand = rng.choice(pool)
        if cand not in avoid:
            return cand
    rest = [w for w in pool if w not in avoid] or [
        w for w in _fallback_pool(lex, pos) if w not in avoid
    ]
    return rng.choice(rest)


def build_triple(
    line: str,
    lex: Lexicon,
    vocab: CorpusVocabulary,
    rng: random.Random,
    syn_rate: float = SYN_RATE,
    ant_rate: float = ANT_RATE,
) -> Triple:
    words = line.split()
    eligible = []  # (word index, pre, core, pos, base)
    for i, tok in enumerate(words):
        parts = split_token(tok)
        if parts is None:
            continue
        pb = lex.pos_and_base(parts[1].lower())
        if pb is not None:
            eligible.append((i, parts[0], parts[1], pb[0], pb[1]))
    t = Triple(
        list(words),
        list(words),
        list(words),
        [None] * len(words),
        [None] * len(words),
        eligible=len(eligible),
    )
    if not eligible:
        return t

    def replace(target, cores, i, pre, core, new):
        new = match_case(core, new)
        target[i] = pre + new + words[i][len(pre) + len(core) :]
        cores[i] = (len(pre), len(pre) + len(new))
        return new

    order = list(range(len(eligible)))
    rng.shuffle(order)
    k_syn = max(1, round(syn_rate * len(eligible)))
    done = 0
    for j in order:
        if done == k_syn:
            break
        i, pre, core, pos, base = eligible[j]
        cands = _syn_candidates(lex, vocab, core, pos, base)
        if not cands:
            continue
        kind = rng.choice(sorted(cands))
        new = replace(t.syn, t.syn_cores, i, pre, core, rng.choice(cands[kind]))
        t.syn_kinds[kind] = t.syn_kinds.get(kind, 0) + 1
        t.syn_edits.append((i, core, new, kind))
        done += 1

    rng.shuffle(order)
    k_ant = max(1, round(ant_rate * len(eligible)))
    for j in order[:k_ant]:
        i, pre, core, pos, base = eligible[j]
        low = core.lower()
        ants = lex.antonyms(low, pos, base)
        if ants:
            new, kind = rng.choice(ants), "antonym"
            t.ant_antonyms += 1
        else:
            new, kind = _random_word(lex, vocab, rng, low, pos, base), "random"
            t.ant_random += 1
        new = replace(t.ant, t.ant_cores, i, pre, core, new)
        t.ant_edits.append((i, core, new, kind))
    return t


# ---- Hits triplets (the paper's Table 7; scored by truneg_fairseq.evaluation.hits) ------------


def make_hits_triplets(
    lines: Iterable[str], lex: Lexicon, seed: int = 1
) -> Tuple[List[Tuple[str, str, str]], int]:
    """One triplet per sentence that has a word with both a synonym and an antonym (a base form,
    so the swaps keep its inflection); returns (triplets, sentences skipped for lack of one)."""
    out, skipped = [], 0
    for n, line in enumerate(lines):
        words = line.split()
        cands = []
        for i, tok in enumerate(words):
            parts = split_token(tok)
            if parts is None:
                continue
            low = parts[1].lower()
            pb = lex.pos_and_base(low)
            if pb is None or pb[1] != low:
                continue
            syns, ants = lex.synonyms(low, *pb), lex.antonyms(low, *pb)
            if syns and ants:
                cands.append((i, parts, syns, ants))
        if not cands:
            skipped += 1
            continue
        rng = random.Random(f"{seed}:hits:{n}")
        i, (pre, core, post), syns, ants = rng.choice(cands)
        versions = []
        for new in (rng.choice(syns), rng.choice(ants)):
            w = list(words)
            w[i] = pre + match_case(core, new) + post
            versions.append(" ".join(w))
        out.append((" ".join(words), versions[0], versions[1]))
    return out, skipped
