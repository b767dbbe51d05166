"""The engine: the step loop (``engine``), requests, configs and their checks, speculative decoding, the step log's
writer. Schedulers live in ``batchscope.scheduling`` and ``batchscope.sglang_family``."""
