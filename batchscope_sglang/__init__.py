"""SGLang-side code: a model-free driver of SGLang 0.5.23's real scheduler (standard library and SGLang only)."""
