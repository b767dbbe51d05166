"""The step log: what a run of the engine did, step by step, as plain data (JSON Lines).

Everything here is torch-free and transformers-free, so the visuals, the app and notebooks can read, check and
measure a trace without the engine: ``batchscope.steplog.trace`` (read / write / validate against
``trace.schema.json``), ``batchscope.steplog.records`` (the record types), ``batchscope.steplog.view`` (a read-only view
for the visuals) and ``batchscope.steplog.metrics`` (latency and throughput with vLLM's definitions). Importing this
package imports nothing.
"""
