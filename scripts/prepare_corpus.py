#!/usr/bin/env python
"""Prepare a corpus for pre-training: raw text -> tokenizer -> fairseq data-bin (see
``truneg_fairseq/cli/prepare_corpus.py`` or ``--help``; the work is done by
``truneg_fairseq.pipelines.corpus.prepare_corpus``)."""

import sys

from truneg_fairseq.cli.prepare_corpus import main

if __name__ == "__main__":
    sys.exit(main())
