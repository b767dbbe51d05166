"""Drive vLLM's real V1 scheduler without a model, and compare its steps with a Batchscope trace.

- ``batchscope_vllm.driver``: ``run_vllm(workload)`` runs vLLM 0.33.0's ``Scheduler`` step by step on a workload
  (requests, limits and the tokens Batchscope sampled) and returns one record per step. Needs vLLM installed
  (the ``.venv-vllm`` virtual environment).
- ``batchscope_vllm.compare``: ``workload_from_trace`` and ``compare`` / ``first_difference`` (standard library
  only).

This file imports nothing, so ``import batchscope_vllm.compare`` works without vLLM.
"""
