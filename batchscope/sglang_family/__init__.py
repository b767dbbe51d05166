"""SGLang's scheduling family: prefill-first batches, admission by estimated output (``PrefillAdder``), retraction,
the radix cache."""
