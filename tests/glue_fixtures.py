"""Tiny GLUE task folders in the official file layouts (headers, column orders, quirks)."""

from pathlib import Path

SENTS = [
    "the farmer will stay at home .",
    "the teacher decided to remain in the town .",
    "a child wants to stay near the small lake .",
    "the main reason is the big house .",
    "my friend chose to remain by the little lake .",
    "the primary goal is the large road .",
    "her sister had to stay in the big house .",
    "the chief problem of the pilot is the quick answer .",
]


def _rows(n):
    return [(SENTS[i % len(SENTS)], SENTS[(i + 3) % len(SENTS)], i) for i in range(n)]


def write_glue(root: Path, n_train: int = 24, n_dev: int = 8) -> Path:
    root = Path(root)
    specs = {
        "CoLA": lambda rows, split: [
            f"gj04\t{i % 2}\t{'' if i % 2 else '*'}\t{a}" for a, b, i in rows
        ],
        "SST-2": lambda rows, split: ["sentence\tlabel"] + [f"{a}\t{i % 2}" for a, b, i in rows],
        "MRPC": lambda rows, split: ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        + [f"{i % 2}\t{1000 + i}\t{2000 + i}\t{a}\t{b}" for a, b, i in rows],
        "STS-B": lambda rows, split: [
            "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"
        ]
        + [
            f"{i}\tmain-news\tfile\t2012\t{i}\tnone\tnone\t{a}\t{b}\t{(i % 6) * 1.0:.3f}"
            for a, b, i in rows
        ],
        "QQP": lambda rows, split: ["id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate"]
        + [f"{i}\t{2 * i}\t{2 * i + 1}\t{a}\t{b}\t{i % 2}" for a, b, i in rows]
        + ['99999\t1\t2\t"what is a stray quote ?'],  # a malformed row (too few columns)
        "MNLI": lambda rows, split: [
            "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
            "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label"
        ]
        + [
            f"{i}\t{i}\t{i}e\tfiction\t( x )\t( y )\t(ROOT x)\t(ROOT y)\t{a}\t\"{b}\t"
            f"{['entailment', 'neutral', 'contradiction'][i % 3]}\t{['entailment', 'neutral', 'contradiction'][i % 3]}"
            for a, b, i in rows
        ],
        "QNLI": lambda rows, split: ["index\tquestion\tsentence\tlabel"]
        + [f"{i}\t{a}\t{b}\t{['entailment', 'not_entailment'][i % 2]}" for a, b, i in rows],
        "RTE": lambda rows, split: ["index\tsentence1\tsentence2\tlabel"]
        + [f"{i}\t{a}\t{b}\t{['entailment', 'not_entailment'][i % 2]}" for a, b, i in rows],
    }
    for task, fn in specs.items():
        d = root / task
        d.mkdir(parents=True, exist_ok=True)
        dev_files = ["dev_matched.tsv", "dev_mismatched.tsv"] if task == "MNLI" else ["dev.tsv"]
        (d / "train.tsv").write_text("\n".join(fn(_rows(n_train), "train")) + "\n")
        for f in dev_files:
            (d / f).write_text("\n".join(fn(_rows(n_dev), "dev")) + "\n")
    return root
