"""Robustness perturbations in the style of TextFlint, keeping the original file formats.

* ``swap_syn_wordnet``: each eligible word (alphabetic core, not a stopword, with single-word
  WordNet synonyms) is replaced by one of its synonyms with probability ``prob``, at most
  ``max_swaps`` per text; punctuation around the word and the capitalisation of its first letter
  are kept. In SQuAD contexts, words inside an answer are never swapped and every
  ``answer_start`` is moved with the text, so each answer still equals its span.
* ``add_sentence_diverse`` (SQuAD): a distractor sentence built from the question, its content
  words altered (WordNet antonyms where they exist, else other words of the same part of
  speech) and a fake answer of the same kind as the gold one (number, capitalised name, or
  word), inserted at a sentence boundary of the context; original answers are untouched and
  their offsets shifted when the sentence goes before them.

Everything is seeded (``random.Random(seed)``).
"""

import copy
import random
import re
from typing import List, Optional, Sequence, Tuple

from truneg_fairseq.lexicon.replace import alter_word as _alter  # noqa: F401  (shared with CLINE)
from truneg_fairseq.lexicon.replace import shift, swap_syn_wordnet  # noqa: F401
from truneg_fairseq.lexicon.synonyms import stopwords


def fake_answer(answer: str, context: str, rng: random.Random, wn) -> str:
    nums = re.findall(r"\d+", answer)
    if nums:
        return re.sub(r"\d+", lambda m: str(int(m.group(0)) + rng.randint(1, 9)), answer)
    if answer[:1].isupper():
        names = sorted({w for w in re.findall(r"\b[A-Z][a-z]+\b", context) if w not in answer})
        return rng.choice(names) if names else "Kettering"
    words = [w for w in answer.split() if w.isalpha()]
    return _alter(words[-1], wn, rng, stopwords()) if words else answer


def distractor(question: str, answer: str, context: str, wn, rng: random.Random) -> str:
    stop = stopwords()
    words = [w.strip("?") for w in question.split() if w.strip("?")]
    wh = {"what", "who", "whom", "whose", "where", "when", "which", "why", "how"}
    body = [_alter(w, wn, rng, stop) for w in words if w.lower() not in wh]
    sentence = " ".join(body + [fake_answer(answer, context, rng, wn)]).strip()
    sentence = sentence[:1].upper() + sentence[1:]
    return sentence if sentence.endswith(".") else sentence + "."


def add_sentence_diverse(
    context: str, question: str, answer: str, answer_starts: List[int], wn, rng: random.Random
) -> Tuple[str, List[int]]:
    """Insert a distractor at a sentence boundary; returns (new context, shifted answer starts)."""
    sent = distractor(question, answer, context, wn, rng)
    bounds = [0] + [m.end() for m in re.finditer(r"[.!?]\s+", context)] + [len(context)]
    at = rng.choice(bounds)
    if at == len(context):
        insert = (" " if context and not context.endswith(" ") else "") + sent
    else:
        insert = sent + " "
    new = context[:at] + insert + context[at:]
    return new, [s + len(insert) if s >= at else s for s in answer_starts]


def perturb_squad(
    data: dict, method: str, wn, seed: int = 1, prob: float = 0.1, max_swaps: int = 10
) -> Tuple[dict, dict]:
    """Perturb a SQuAD v1.1 JSON object; returns (new object, counts)."""
    rng = random.Random(seed)
    out = copy.deepcopy(data)
    counts = {"paragraphs": 0, "changed": 0}
    for article in out["data"]:
        for para in article["paragraphs"]:
            counts["paragraphs"] += 1
            ctx = para["context"]
            answers = [a for qa in para["qas"] for a in qa["answers"]]
            if method == "swap_syn_wordnet":
                spans = [(a["answer_start"], a["answer_start"] + len(a["text"])) for a in answers]
                new, edits = swap_syn_wordnet(ctx, wn, rng, prob, max_swaps, protected=spans)
                for a in answers:
                    a["answer_start"] = shift(a["answer_start"], edits)
            elif method == "add_sentence_diverse":
                qa = para["qas"][0] if para["qas"] else None
                if qa is None or not qa["answers"]:
                    continue
                starts = [a["answer_start"] for a in answers]
                new, starts = add_sentence_diverse(
                    ctx, qa["question"], qa["answers"][0]["text"], starts, wn, rng
                )
                for a, s in zip(answers, starts):
                    a["answer_start"] = s
            else:
                raise ValueError(
                    f"unknown perturbation {method!r} (swap_syn_wordnet, add_sentence_diverse)"
                )
            counts["changed"] += int(new != ctx)
            para["context"] = new
            for a in answers:
                assert new[a["answer_start"] : a["answer_start"] + len(a["text"])] == a["text"], a
    return out, counts


def perturb_glue_tsv(
    lines: List[str],
    text_columns: Sequence[int],
    wn,
    seed: int = 1,
    prob: float = 0.1,
    max_swaps: int = 10,
    header: bool = True,
) -> Tuple[List[str], int]:
    """swap_syn_wordnet on the text columns of a GLUE TSV (other columns and the header kept)."""
    rng = random.Random(seed)
    out, changed = [], 0
    for i, line in enumerate(lines):
        if header and i == 0:
            out.append(line)
            continue
        parts = line.split("\t")
        for c in text_columns:
            if c < len(parts):
                new, _ = swap_syn_wordnet(parts[c], wn, rng, prob, max_swaps)
                changed += int(new != parts[c])
                parts[c] = new
        out.append("\t".join(parts))
    return out, changed


def column_index(header_line: Optional[str], key, path="<tsv>", task=None) -> int:
    """The index of column ``key`` (the last of that name) in the header; a name the header
    lacks is a :class:`~truneg_fairseq.errors.CorpusError` naming ``path`` (and a byte-order
    mark, when one hides the first name)."""
    if isinstance(key, int):
        return key
    cols = header_line.split("\t")
    if key not in cols:
        from truneg_fairseq.data.glue_tasks import missing_column
        from truneg_fairseq.errors import CorpusError

        raise CorpusError(missing_column(task, path, key, cols))
    return len(cols) - 1 - cols[::-1].index(key)
