"""Tools beside the engine, reached through the ``batchscope.commands`` entry points: HTML export, frames, the
static site, vllm-diff, the app server for measurements and the trace-load benchmark."""
