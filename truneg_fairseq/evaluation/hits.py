"""CLINE's Hits (the paper's Table 7) on a model's hidden states.

A triplet (ori, syn, ant) differs in one word: syn swaps it for a WordNet synonym, ant for a
WordNet antonym, both single words of the word's part of speech. Hits = the share of triplets
with sim(ori, syn) > sim(ori, ant), for three sentence similarities on each layer's hidden
states (layer 0 = the embeddings): cosine of the <s> vectors ("cls"), cosine of the mean of the
token vectors ("mean"), and BERTScore F1 (greedy token matching by cosine, "bertscore"). <s>,
</s> and padding are left out of "mean" and "bertscore".

The triplets come from :func:`truneg_fairseq.data.cline_triples.make_hits_triplets`; their sentences are
encoded by :class:`truneg_fairseq.text.pieces.PieceEncoder`.
"""

from typing import TYPE_CHECKING, Dict, List, Sequence, Tuple

if TYPE_CHECKING:
    from truneg_fairseq.text.pieces import PieceEncoder

HITS_METHODS = ("cls", "mean", "bertscore")


def _cos(a, b):
    import torch.nn.functional as F

    return F.cosine_similarity(a.float(), b.float(), dim=-1)


def sentence_similarities(x, y, mx, my):
    """Similarities of row pairs for one layer. x: B x Tx x C, y: B x Ty x C hidden states;
    mx, my: B x T bool content-token masks. Returns {method: B similarities}."""
    import torch

    def mean(h, m):
        m = m.unsqueeze(-1).float()
        return (h.float() * m).sum(1) / m.sum(1).clamp(min=1)

    xn = torch.nn.functional.normalize(x.float(), dim=-1)
    yn = torch.nn.functional.normalize(y.float(), dim=-1)
    sim = torch.einsum("bic,bjc->bij", xn, yn)  # B x Tx x Ty
    big = torch.finfo(sim.dtype).max
    sim = sim.masked_fill(~my.unsqueeze(1), -big).masked_fill(~mx.unsqueeze(2), -big)
    prec = (sim.max(dim=2).values * mx).sum(1) / mx.sum(1).clamp(min=1)  # each x token's best match
    rec = (sim.max(dim=1).values * my).sum(1) / my.sum(1).clamp(min=1)
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
) -> Dict[str, List[float]]:
    """{method: [Hits % per layer]} of ``model`` (eval mode, no gradient) on ``triplets``."""
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
    wins = None
    with torch.no_grad():
        for s in range(0, len(triplets), batch_size):
            chunk = triplets[s : s + batch_size]
            layers, masks = [], []
            for k in range(3):
                toks, content = encode([t[k] for t in chunk])
                layers.append(hidden_layers(model, toks.to(device)))
                masks.append(content.to(device))
            if wins is None:
                wins = {m: [0] * len(layers[0]) for m in HITS_METHODS}
            for li in range(len(layers[0])):
                syn = sentence_similarities(layers[0][li], layers[1][li], masks[0], masks[1])
                ant = sentence_similarities(layers[0][li], layers[2][li], masks[0], masks[2])
                for m in HITS_METHODS:
                    wins[m][li] += int((syn[m] > ant[m]).sum())
    n = max(len(triplets), 1)
    return {
        m: [100.0 * w / n for w in ws] for m, ws in (wins or {m: [] for m in HITS_METHODS}).items()
    }
