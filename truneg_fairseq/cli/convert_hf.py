"""Convert between HuggingFace directories and the plugin's fairseq checkpoints.

  import HF_DIR OUT_DIR [--generator GEN_DIR]
      HF_DIR: a local directory (config.json, model.safetensors or pytorch_model.bin, vocab.txt
      or tokenizer.json) of BertForMaskedLM, BertForPreTraining, BertModel or
      ElectraForPreTraining; GEN_DIR: the matching ElectraForMaskedLM generator. Writes
      OUT_DIR/model.pt (fairseq checkpoint: --restore-file for continued pre-training or a
      fine-tuning start), OUT_DIR/dict.txt (binarize data with it: fairseq-preprocess
      --srcdict OUT_DIR/dict.txt) and OUT_DIR/vocab.txt. Never downloads: fetch a hub model
      first (`hf download bert-base-uncased --local-dir bert-base-uncased`).

  export CHECKPOINT HF_DIR [--vocab VOCAB] [--data DIR]
      A plugin ELECTRA checkpoint -> ElectraForPreTraining (+ HF_DIR/generator with
      ElectraForMaskedLM), a bert_hf_* checkpoint -> BertForMaskedLM, a fairseq roberta_*
      checkpoint -> RobertaForMaskedLM; loadable with transformers' from_pretrained. Each gets
      the tokenizer of its data: WordPiece (vocab.txt) for WordPiece data; for sentencepiece
      or GPT-2 BPE data (RoBERTa, ELECTRA) a tokenizer whose ids are dict.txt's rows.

Examples:
  truneg-convert-hf import bert-base-uncased imported/bert-base
  truneg-convert-hf import electra-base-discriminator imported/electra-base \\
      --generator electra-base-generator
  truneg-convert-hf export ckpt/bert_hc/checkpoint_last.pt hf/bert-hc \\
      --vocab imported/bert-base/vocab.txt
"""

import os

from truneg_fairseq.cli.args import command_parser
from truneg_fairseq.cli.common import fail, interruptible, setup_logging


@interruptible
def main(argv=None) -> int:
    p = command_parser(__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    imp = sub.add_parser("import", help="HuggingFace directory -> fairseq checkpoint directory")
    imp.add_argument("hf_dir", help="local HuggingFace model directory")
    imp.add_argument(
        "out_dir", help="output directory (model.pt, dict.txt, vocab.txt); replaced atomically"
    )
    imp.add_argument(
        "--generator",
        help="ElectraForMaskedLM directory paired with an ElectraForPreTraining HF_DIR",
    )
    imp.add_argument(
        "--allow-unshared-embeddings",
        action="store_true",
        help="import a generator whose embedding values differ from the discriminator's (not a "
        "published pair): the model shares the discriminator's; refused without this flag",
    )
    imp.add_argument(
        "--seed",
        type=int,
        default=1,
        help="seed of the fresh masked-LM head of a model published without one (default 1): two "
        "imports give the same head, so runs continued from them start from the same model",
    )
    exp = sub.add_parser("export", help="fairseq checkpoint -> HuggingFace directory")
    exp.add_argument("checkpoint", help="fairseq checkpoint (.pt)")
    exp.add_argument("hf_dir", help="output directory; replaced atomically")
    exp.add_argument(
        "--vocab",
        help="the original vocab.txt (the import's) to restore the published token ids; "
        "default: vocab.txt beside CHECKPOINT, else fairseq's order ([CLS] [PAD] [SEP] [UNK] ... [MASK])",
    )
    exp.add_argument(
        "--data", help="directory holding the checkpoint's dict.txt, if the recorded one moved"
    )
    case = exp.add_mutually_exclusive_group()
    case.add_argument(
        "--lowercase",
        dest="lowercase",
        action="store_true",
        default=None,
        help="tokenizer lower-cases (default: as recorded by the import, else yes)",
    )
    case.add_argument("--cased", dest="lowercase", action="store_false")
    exp.add_argument(
        "--gpt2-encoder-json",
        help="RoBERTa or ELECTRA on GPT-2 BPE: encoder.json, to write vocab.json",
    )
    exp.add_argument(
        "--gpt2-vocab-bpe", help="RoBERTa or ELECTRA on GPT-2 BPE: vocab.bpe, written as merges.txt"
    )
    exp.add_argument(
        "--spm-model",
        help="RoBERTa or ELECTRA on sentencepiece data: the .model that tokenized it (default: "
        "the one the "
        "data directory's tokenizer_fingerprint.json records)",
    )
    exp.add_argument(
        "--no-tokenizer",
        dest="tokenizer",
        action="store_false",
        help="RoBERTa, ELECTRA of sentencepiece/GPT-2 BPE data: write fairseq's dict.txt "
        "instead of a HuggingFace tokenizer (the "
        "directory then loads as a model, but nothing can tokenize text for it)",
    )
    args = p.parse_args(argv)
    setup_logging("truneg_fairseq.convert_hf")
    from truneg_fairseq.checkpoints import CheckpointError
    from truneg_fairseq.convert.hf import ConversionError, export_hf, import_hf
    from truneg_fairseq.outputs import OutputDirError

    try:
        if args.command == "import":
            import_hf(
                args.hf_dir, args.out_dir, args.generator, args.allow_unshared_embeddings, args.seed
            )
        else:
            if bool(args.gpt2_encoder_json) != bool(args.gpt2_vocab_bpe):
                fail("--gpt2-encoder-json and --gpt2-vocab-bpe go together")
            if args.spm_model and args.gpt2_encoder_json:
                fail(
                    "--spm-model (sentencepiece) and --gpt2-encoder-json (GPT-2 BPE) exclude each other"
                )
            for flag, path in (
                ("--vocab", args.vocab),
                ("--gpt2-encoder-json", args.gpt2_encoder_json),
                ("--gpt2-vocab-bpe", args.gpt2_vocab_bpe),
                ("--spm-model", args.spm_model),
            ):
                if path and not os.path.isfile(path):
                    fail(f"{flag} {path} not found")
            gpt2 = (args.gpt2_encoder_json, args.gpt2_vocab_bpe) if args.gpt2_encoder_json else None
            export_hf(
                args.checkpoint,
                args.hf_dir,
                args.vocab,
                args.data,
                args.lowercase,
                gpt2,
                args.spm_model,
                args.tokenizer,
            )
    except (ConversionError, CheckpointError, OutputDirError) as e:
        fail(str(e))
    return 0
