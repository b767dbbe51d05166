"""The model side: loading a causal LM, the model runner (one forward for a mixed batch over paged K/V), sampling,
incremental detokenization."""
