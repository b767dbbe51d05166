"""vLLM-style scheduling: the scheduler (continuous and static batching), its queues, the block pool and the KV
block manager (paged KV cache with a prefix cache)."""
