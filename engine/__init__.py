"""Batchscope's engine: a small, real LLM serving engine (scheduler, paged KV cache, model runner, step log)."""
