"""The benchmark (``python -m batchscope bench``; package ``bench``, beside the engine): Batchscope against
transformers on one workload, in one process.

Rows (all greedy, the same prompts and ``max_tokens``; output tokens/s and the ratio to row 1):

1. ``hf-sequential``: transformers ``generate``, one request at a time (its own ``DynamicCache``, SDPA).
2. ``hf-static``: transformers ``generate`` on static batches of ``max_num_seqs`` requests in arrival order, left
   padded; a batch runs until its slowest member ends.
3. ``hf-continuous``: transformers' own continuous batching (``model.generate_batch`` with a
   ``ContinuousBatchingConfig``: ``max_requests_per_batch = max_num_seqs``, ``max_batch_tokens`` = Batchscope's
   token budget, and ``num_blocks`` sized for ``max_num_seqs`` requests, so its set-up does not reserve 60 % of the
   RAM as it does by default on CPU).
4. ``batchscope-static`` and 5. ``batchscope-continuous``: this engine, ``num_kv_blocks`` sized so that
   ``max_num_seqs`` requests always fit (no preemption: the rows compare batching, not pool pressure).

Rounds are interleaved (A B C D E, then E D C B A, ...) so that a machine whose speed drifts hurts every row
alike; a row's time is its best round (another process on the machine only ever adds time; every round's time is
kept in the JSON, with the mean). Every row's greedy outputs must be token-identical to row 1's, else
``ParityError`` (``parity="strict"``, the default for float32 and float64). In reduced precision (bfloat16 on CUDA) the
rounding of a matmul depends on the batch shape, so greedy outputs of different batchings legitimately drift apart
after a near-tie; ``parity="auto"`` then only reports the agreement.

Also measured in the same run:

- the median decode step (all rows decoding, ``t_end - t_start`` of Batchscope steps) at batch 1, 4 and 16,
  against the weight-streaming floor: model weight bytes / read bandwidth, the bandwidth being measured by summing
  a buffer as large as the weights (every decode step must read every weight once);
- the share of each step spent outside the model forward (scheduling, building the step's tensors, sampling,
  updating requests, writing the step record): ``1 - forward / step cycle``, with the cycle from one step's start
  to the next's.

Units: seconds (wall clock), tokens, bytes; ``*_ms`` are milliseconds.

Modules: ``workload`` (the requests, and Batchscope's config and run for them), ``rows`` (the engines compared),
``measure`` (parity, decode-step timing, the floor), ``run`` (the interleaved rounds), ``report`` (targets and
Markdown), ``sweep`` (the variance sweep), ``cli`` (the commands). Nothing in the engine or the visuals imports
this package; it reaches the CLI through the ``batchscope.commands`` entry points.
"""
