"""CLINE's Hits (the paper's Table 7) on a model's hidden states.

A triplet (ori, syn, ant) differs in one word: syn swaps it for a WordNet synonym, ant for a
WordNet antonym, both single words of the word's part of speech. Hits = the share of triplets
with sim(ori, syn) > sim(ori, ant), for three sentence similarities on each layer's hidden
states (layer 0 = the embeddings): cosine of the <s> vectors ("cls"), cosine of the mean of the
token vectors ("mean"), and BERTScore F1 (greedy token matching by cosine, "bertscore"). <s>,
</s> and padding are left out of "mean" and "bertscore".

The triplets come from :func:`truneg_fairseq.data.cline_triples.make_hits_triplets`; their sentences are
encoded by :class:`truneg_fairseq.text.pieces.PieceEncoder`.

Why "bertscore" is computed here rather than by the ``bert-score`` package: that package embeds
sentences with a HuggingFace model it loads by name (a download, and not one of this plugin's
fairseq checkpoints, ELECTRA discriminators included), while Hits compares the hidden states of
every layer of the model under test; the matching itself is a few tensor operations. It follows
BERTScore's definition (Zhang et al., 2020): cosine similarity of token vectors, each token of one
sentence matched greedily to its most similar token of the other, precision and recall as the
weighted means of those maxima, F1 their harmonic mean. Two choices, each pinned by tests:

* weights: uniform by default (BERTScore without importance weighting, what CLINE's Hits uses);
  ``idf=True`` weights each token by its inverse document frequency over the original sentences
  (the references), BERTScore's ``idf`` option: ``ln((M + 1) / (df + 1))`` for a piece found in
  ``df`` of the ``M`` references, ``ln(M + 1)`` for one in none; :func:`idf_weights`.
* the sentence-boundary tokens ``<s>``/``</s>`` carry no weight in either package; here they are
  also no match for another token (the reference package lets a token's best match be ``[CLS]``
  or ``[SEP]`` with weight 0 on their own row). Hits measures the words of the sentences; a
  boundary vector, the same in every sentence, would give an identical match in syn and ant.
"""

import math
from collections import Counter
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

if TYPE_CHECKING:
    from truneg_fairseq.text.pieces import PieceEncoder

HITS_METHODS = ("cls", "mean", "bertscore")


def _cos(a, b):
    import torch.nn.functional as F

    return F.cosine_similarity(a.float(), b.float(), dim=-1)


def idf_weights(references: Sequence[Sequence[int]]) -> Dict[int, float]:
    """BERTScore's inverse document frequencies over ``references`` (each a sequence of token
    ids): ``ln((M + 1) / (df + 1))`` for a token found in ``df`` of the ``M`` references; a token
    in none gets ``ln(M + 1)`` (:func:`idf_of`)."""
    df = Counter(t for ref in references for t in set(ref))
    m = len(references)
    return {t: math.log((m + 1) / (c + 1)) for t, c in df.items()}


def idf_of(idf: Dict[int, float], tokens, references: int):
    """B x T weights of the token ids ``tokens`` from ``idf`` (:func:`idf_weights` over
    ``references`` sentences); unseen ids get ``ln(references + 1)``."""
    import torch

    unseen = math.log(references + 1)
    return torch.tensor(
        [[idf.get(t, unseen) for t in row] for row in tokens.tolist()], dtype=torch.float
    )


def sentence_similarities(x, y, mx, my, wx: Optional = None, wy: Optional = None):
    """Similarities of row pairs for one layer. x: B x Tx x C, y: B x Ty x C hidden states;
    mx, my: B x T bool content-token masks; wx, wy: B x T token weights of BERTScore's precision
    (x) and recall (y) (None: uniform; :func:`idf_of` for idf weighting). Returns {method: B
    similarities}."""
    import torch

    def mean(h, m):
        m = m.unsqueeze(-1).float()
        return (h.float() * m).sum(1) / m.sum(1).clamp(min=1)

    xn = torch.nn.functional.normalize(x.float(), dim=-1)
    yn = torch.nn.functional.normalize(y.float(), dim=-1)
    sim = torch.einsum("bic,bjc->bij", xn, yn)  # B x Tx x Ty
    big = torch.finfo(sim.dtype).max
    sim = sim.masked_fill(~my.unsqueeze(1), -big).masked_fill(~mx.unsqueeze(2), -big)
    wx = mx.float() if wx is None else wx.to(x.device).float() * mx
    wy = my.float() if wy is None else wy.to(y.device).float() * my
    # each x token's best match (precision), each y token's (recall), weighted means
    prec = (sim.max(dim=2).values * wx).sum(1) / wx.sum(1).clamp(min=1e-12)
    rec = (sim.max(dim=1).values * wy).sum(1) / wy.sum(1).clamp(min=1e-12)
    f1 = 2 * prec * rec / (prec + rec).clamp(min=1e-12)
    return {"cls": _cos(x[:, 0], y[:, 0]), "mean": _cos(mean(x, mx), mean(y, my)), "bertscore": f1}


def hidden_layers(model, tokens):
    """Hidden states of every layer of a RoBERTa-family model (fairseq's roberta, the plugin's
    bert and cline) or of the plugin's ELECTRA discriminator: a list of L + 1 tensors B x T x C,
    the embeddings first."""
    from fairseq.models.roberta import RobertaModel

    if callable(getattr(model, "discriminator_hidden_states", None)):  # electra_*, cline_electra_*
        return model.discriminator_hidden_states(tokens)
    if not isinstance(model, RobertaModel):
        raise ValueError(
            f"Hits reads the layers of RoBERTa-family checkpoints (roberta_*, bert_hf_*, cline_roberta_*) "
            f"and of ELECTRA discriminators (electra_*, cline_electra_*); got {type(model).__name__}"
        )
    _, extra = model.encoder.extract_features(tokens, return_all_hiddens=True)
    return [h.transpose(0, 1) for h in extra["inner_states"]]  # each T x B x C -> B x T x C


def hits(
    model,
    dictionary,
    encoder: "PieceEncoder",
    triplets: Sequence[Tuple[str, str, str]],
    batch_size: int = 32,
    max_positions: int = 512,
    idf: bool = False,
) -> Dict[str, List[float]]:
    """{method: [Hits % per layer]} of ``model`` (eval mode, no gradient) on ``triplets``.
    ``idf``: "bertscore" with BERTScore's idf weights over the original sentences (the
    references, :func:`idf_weights`) instead of uniform ones."""
    import torch
    from fairseq.data import data_utils

    def encode(texts):
        rows = []
        for t in texts:
            symbols = [s for spans in encoder.encode_words(t.split()) for s, _, _ in spans]
            ids = dictionary.encode_line(
                " ".join(symbols), add_if_not_exist=False, append_eos=True
            ).long()
            rows.append(torch.cat([ids.new([dictionary.bos()]), ids])[:max_positions])
        toks = data_utils.collate_tokens(rows, dictionary.pad())
        content = toks.ne(dictionary.pad()) & toks.ne(dictionary.bos()) & toks.ne(dictionary.eos())
        return toks, content

    model.eval()
    device = next(model.parameters()).device
    weights = None
    if idf:
        refs = []
        for s in range(0, len(triplets), batch_size):
            toks, content = encode([t[0] for t in triplets[s : s + batch_size]])
            refs += [row[m].tolist() for row, m in zip(toks, content)]
        table = idf_weights(refs)
        weights = lambda toks: idf_of(table, toks, len(refs))  # noqa: E731
    wins = None
    with torch.no_grad():
        for s in range(0, len(triplets), batch_size):
            chunk = triplets[s : s + batch_size]
            layers, masks, ws = [], [], []
            for k in range(3):
                toks, content = encode([t[k] for t in chunk])
                layers.append(hidden_layers(model, toks.to(device)))
                masks.append(content.to(device))
                ws.append(None if weights is None else weights(toks).to(device))
            if wins is None:
                wins = {m: [0] * len(layers[0]) for m in HITS_METHODS}
            for li in range(len(layers[0])):
                # BERTScore's candidate (precision side) is the changed sentence, the reference
                # the original one
                syn = sentence_similarities(
                    layers[1][li], layers[0][li], masks[1], masks[0], ws[1], ws[0]
                )
                ant = sentence_similarities(
                    layers[2][li], layers[0][li], masks[2], masks[0], ws[2], ws[0]
                )
                for m in HITS_METHODS:
                    wins[m][li] += int((syn[m] > ant[m]).sum())
    n = max(len(triplets), 1)
    return {
        m: [100.0 * w / n for w in ws] for m, ws in (wins or {m: [] for m in HITS_METHODS}).items()
    }
