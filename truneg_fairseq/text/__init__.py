"""Text -> ``dict.txt`` symbols: the one tokenizer layer (sentencepiece, GPT-2 byte-level BPE,
WordPiece, whitespace).

Every task and script that turns text into ``dict.txt`` symbols, or asks which symbols start a
word, goes through :func:`build_tokenizer` (``tokenizers.py``). A :class:`Tokenizer` offers

* ``pieces(text)`` / ``encode_lines(texts)``: text -> symbols as they appear in ``dict.txt``
  (sentencepiece pieces, GPT-2 BPE ids as decimal strings, WordPiece entries with BERT's
  ``[CLS] [SEP] [PAD] [UNK] [MASK]`` written as fairseq's ``<s> </s> <pad> <unk> <mask>``,
  whitespace-separated words); ``encode_ids(text, dictionary)``: the same as fairseq ids;
* ``classify(symbol)``: whether a ``dict.txt`` symbol starts a word (sentencepiece ``▁``,
  GPT-2 ``Ġ``, WordPiece: anything but ``##``), continues one, or is a control entry, and the
  surface word of a word-start; :meth:`Tokenizer.vocab_view` applies it to a whole dictionary
  (what the synonym tables need);
* ``words(text)``: the words of a text with their character spans and pieces (SQuAD offsets);
* ``fingerprint()``: sha256 over the tokenizer's kind and files, recorded next to ``dict.txt``
  by ``prepare_corpus.py`` (``record.py``) and checked by ``build_synonym_table.py``;
* ``bpe_args()``: the description fairseq's BPE registry builds a word-start test from
  (``get_whole_word_mask``: fairseq's ``sentencepiece`` and ``gpt2`` BPEs, and the ``wordpiece``
  BPE registered in ``fairseq_bpe.py``), for ``--mask-whole-words`` (``whole_words.py``).

Nothing here imports fairseq but ``fairseq_bpe.py``, which the package root imports when it
registers the plugin: the commands build their tokenizer flags without fairseq.

One flag set names a tokenizer (``spec.py``): scripts add ``--tokenizer``, ``--spm-model``,
``--gpt2-encoder-json``, ``--gpt2-vocab-bpe``, ``--vocab``, ``--lowercase`` with
:func:`add_tokenizer_args`; fairseq configs inherit the same fields under their owner's prefix
from :func:`tokenizer_fields` (``squad_tokenizer``, ``electra_spm_model``, ...); both are read
into a :class:`TokenizerSpec`.

:func:`word_marks` (``marks.py``) reads which family a bare list of entries belongs to from the
marks they carry (``##``, ``Ġ``, ``▁``), for a vocabulary whose tokenizer is not at hand.

:class:`PieceEncoder` (``pieces.py``) tokenizes whitespace words with each piece's span inside its
word: what CLINE's replaced-piece labels and the Hits evaluation need.
"""

from truneg_fairseq.text.lines import binary_lines, read_lines  # noqa: F401
from truneg_fairseq.text.marks import MARKS, marked_word, word_marks  # noqa: F401
from truneg_fairseq.text.pieces import PIECE_KINDS, PieceEncoder  # noqa: F401
from truneg_fairseq.text.record import (  # noqa: F401
    check_record,
    content_digest,
    read_record,
    spec_from_record,
    write_record,
)
from truneg_fairseq.text.spec import (  # noqa: F401
    BERT_MASK,
    BERT_SPECIALS,
    FILES,
    FROM_FAIRSEQ,
    GPT2_SPACE,
    KINDS,
    RECORD_NAME,
    RECORD_VERSION,
    SP_SPACE,
    TO_FAIRSEQ,
    VIEW_FILES,
    WORDPIECE_CONT,
    TokenizerError,
    TokenizerSpec,
    add_tokenizer_args,
    tokenizer_fields,
)
from truneg_fairseq.text.tokenizers import (  # noqa: F401
    CLASSES,
    CONTINUATION,
    CONTROL,
    START,
    UNKNOWN,
    GPT2Tokenizer,
    SentencePieceTokenizer,
    Tokenizer,
    VocabView,
    WhitespaceTokenizer,
    WordPieceTokenizer,
    build_tokenizer,
    is_word,
    load_dictionary_view,
    split_words,
    tokenizer_from_args,
)
from truneg_fairseq.text.whole_words import (  # noqa: F401
    give_masked_lm_whole_words,
    whole_word_args,
)
from truneg_fairseq.text.wordpiece import (  # noqa: F401
    dict_lines_of,
    join_wordpieces,
    read_wordpiece_vocab,
    uncased,
    wordpiece_dict_lines,
    wordpiece_row_order,
)
