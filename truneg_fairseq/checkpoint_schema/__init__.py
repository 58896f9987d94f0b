"""What a checkpoint file may hold, beside the one reader of checkpoints
(:mod:`truneg_fairseq.checkpoints`) and the mend that applies it to everything fairseq loads
(:mod:`truneg_fairseq.compat.checkpoint_configs`):

* :mod:`.config_bounds`: how much a config may hold, counted before anything resolves or copies
  it (values, text, references, depth; each use of a shared object and of a reference counted);
* :mod:`.config_schema`: fairseq's schema of a checkpoint config (its dataclasses and registries);
* :mod:`.config_rebuild`: a whole checkpoint config (``cfg`` or old-style ``args``) rebuilt from
  that schema at every depth, an unknown or code-bearing field refused with its dotted path;
* :mod:`.evaluated_fields`: the config fields fairseq passes to ``eval``, and the literal check;
* :mod:`.encoder_files`: the files each BPE and tokenizer fairseq registers reads, so that none
  built from a file's config fetches anything;
* :mod:`.model_values`: the schema of the model values of the plugin's families (types, ranges,
  sizes against the weights);
* :mod:`.load_errors`: a failed load of a checkpoint file said in words.

Standard library, torch and fairseq's config classes only; nothing here patches fairseq.
"""
