"""An objective written outside truneg-fairseq: label smoothing over the gold word's WordNet
synonyms. One file, registered when imported; train it with

    fairseq-train DATA --user-dir examples/objectives/synonym_smoothing \\
        --criterion mlm_synonym_smoothing --synonym-table synonyms.npz --smoothing-eps 0.1 ...
    truneg-hf-train MODEL_DIR --user-dir examples/objectives/synonym_smoothing \\
        --objective synonym_smoothing --eps 0.1 ...

or, in Python, ``TrueNegativeMLM(model, tokenizer, "synonym_smoothing", table, eps=0.1)`` once
this module is imported. docs/objectives.md walks through it."""

import truneg_fairseq  # noqa: F401  (registers the plugin with fairseq where fairseq is used)
from truneg_fairseq.core.objectives import Objective, Param, Statistic, register_objective

MAX_SYNONYMS = 8  # synonyms of a gold word that share the smoothed mass (the first, in id order)


@register_objective
class SynonymSmoothing(Objective):
    """At a masked position whose gold word has synonyms in the table, move ``eps`` of the target
    mass from the gold token to its synonyms, shared evenly:
    ``loss_k = (1 - eps) * nll(gold) + eps * mean_j nll(syn_j)``. Written as a term added to the
    masked-LM loss: ``eps * sum_k (mean_j nll(syn_j) - nll(gold))`` over those positions.
    Logged: ``smooth_loss`` (that sum, per masked token in bits) and ``smoothed`` (% of the
    masked positions that had synonyms to smooth toward)."""

    name = "synonym_smoothing"
    criterion = "mlm_synonym_smoothing"
    prefix = "smoothing_"  # the fairseq flag: --smoothing-eps
    needs_table = True
    params = (Param("eps", 0.1, "target mass moved from the gold token to its synonyms"),)
    logged_terms = ("smooth_loss",)
    statistics = (Statistic("smoothed", "smoothed_sum", decimals=2),)

    def loss_terms(self, step):
        logp = step.net.mlm_logits.float().log_softmax(dim=-1)  # S x V
        ids, there = step.lookup.synonyms(step.gold, MAX_SYNONYMS)  # S x K each
        there = there & (step.valid & step.whole).unsqueeze(-1)  # whole words only
        n = there.sum(dim=-1)  # S
        has = n.gt(0)  # S
        syn_nll = -(logp.gather(-1, ids) * there).sum(dim=-1) / n.clamp(min=1)  # S
        term = ((syn_nll - step.nll) * has).sum()
        # a percentage of the masked positions: 100 x count / sample_size
        return [("smooth_loss", self.eps, term)], {"smoothed_sum": 100.0 * has.sum()}
