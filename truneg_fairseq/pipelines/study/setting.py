"""What one study runs: its model families (how each is built, its stage-1 criterion and the
criterions continued) and the setting (corpus, sizes, schedule, scoring), kept apart from the
code that acts on them so every step reads the same record."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import List

# the repository root: scripts are run from there and fairseq gets the plugin's directory
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
USER_DIR = os.path.join(REPO, "truneg_fairseq")


@dataclass
class Family:
    """One model family: how it is built, its stage-1 criterion and the criterions continued."""

    name: str  # "roberta" or "electra"
    task: str  # fairseq task
    arch: List[str]  # --arch and size flags
    baseline: str  # the stage-1 criterion (and the continued baseline)
    criteria: List[str]  # criterions continued from stage 1 (the baseline included)


@dataclass
class Setting:
    vocab_size: int = 16000  # words kept
    valid_fraction: float = 0.05
    corpus: str = "entries"  # WordNet: "entries" (headwords: definition, and examples) or "glosses"
    in_vocab_only: bool = True  # leave out lines with a word outside the vocab_size most frequent
    tokens_per_sample: int = 128  # longer lines are left out
    break_mode: str = "eos"  # one line per sample: every context word is of the same sentence
    batch_size: int = 128  # lines per update
    embed_init: bool = True  # RoBERTa's stage 1 starts its embeddings from count-based word vectors
    lr: float = 2e-3  # peak; one polynomial schedule over stage 1 + stage 2
    warmup: int = 100
    stage1_updates: int = 800
    stage2_updates: int = 200
    points: int = 4  # checkpoints per continuation (evenly spaced)
    seed: int = 1
    eval_max_blocks: int = 0  # valid blocks scored (0: all)
    eval_passes: int = 4  # independent mask draws over them (more masked words, less noise)
    families: List[Family] = field(default_factory=list)
    extra_train_args: List[str] = field(default_factory=list)
    max_lines: int = 0  # corpus lines kept (0: all); for tiny test runs
    cpu: bool = True  # --cpu (False: fairseq-train uses the GPU)
    jobs: int = 0  # trainings / scorings side by side (0: one per CPU core; 1 on a GPU)

    def __post_init__(self):
        if self.points < 1 or self.stage2_updates < self.points:
            raise ValueError(
                f"stage 2 needs at least one update per scored point: {self.stage2_updates} updates, "
                f"{self.points} points"
            )
        # checkpoints at exact shares of stage 2 (20/40/.../100% for 5 points)
        self.stage2_updates -= self.stage2_updates % self.points

    def save_interval(self) -> int:
        return self.stage2_updates // self.points


def run_id(family: Family, criterion: str) -> str:
    return f"{family.name}_{criterion}"
