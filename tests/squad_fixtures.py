"""Tiny SQuAD v1.1 files in the official JSON layout, with answers at their character offsets."""

import json
from pathlib import Path

CONTEXTS = [
    "the farmer will stay at home . the teacher decided to remain in the town . a child wants to stay near the small lake .",
    "the main reason is the big house . my friend chose to remain by the little lake . the pilot had to stay in the big house .",
]
QA = [
    (0, "where will the farmer stay ?", "at home"),
    (0, "who decided to remain in the town ?", "the teacher"),
    (0, "where does a child want to stay ?", "near the small lake"),
    (1, "what is the main reason ?", "the big house"),
    (1, "who chose to remain by the little lake ?", "my friend"),
    (1, "where had the pilot to stay ?", "in the big house"),
]


def squad_json(n_copies=1, broken=False):
    data = []
    for c in range(n_copies):
        paras = []
        for ci, ctx in enumerate(CONTEXTS):
            qas = []
            for qi, (cj, q, a) in enumerate(QA):
                if cj != ci:
                    continue
                start = ctx.rfind(a) if "pilot" in q else ctx.find(a)
                qas.append(
                    {
                        "id": f"c{c}q{qi}",
                        "question": q,
                        "answers": [{"text": a, "answer_start": start}],
                    }
                )
            paras.append({"context": ctx, "qas": qas})
        data.append({"title": f"t{c}", "paragraphs": paras})
    if broken:  # an answer that is nowhere in the context, and one at a wrong offset
        data[0]["paragraphs"][0]["qas"].append(
            {"id": "bad", "question": "?", "answers": [{"text": "zebra", "answer_start": 3}]}
        )
        data[0]["paragraphs"][0]["qas"].append(
            {
                "id": "off",
                "question": "where ?",
                "answers": [{"text": "at home", "answer_start": 0}],
            }
        )
    return {"version": "1.1", "data": data}


def write_squad_dir(root: Path, dict_txt: Path, n_copies=4) -> Path:
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    (root / "dict.txt").write_text(Path(dict_txt).read_text())
    (root / "train.json").write_text(json.dumps(squad_json(n_copies, broken=True)))
    (root / "valid.json").write_text(json.dumps(squad_json(1)))
    return root


def squad_span_text(example, words, feature, start: int, end: int) -> str:
    """The context text that window tokens ``start``..``end`` of ``feature`` cover (through the
    word offsets ``words``): what a decoded span answers."""
    w0 = feature.token_word[start - feature.ctx_offset]
    w1 = feature.token_word[end - feature.ctx_offset]
    return example.context[words[w0][0] : words[w1][1]]
