"""TensorRT-LLM's in-flight batching family (``--batching trtllm``)."""
