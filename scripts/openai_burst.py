"""Send a burst of completion requests to an OpenAI-compatible server on loopback (standard library only).

    python scripts/openai_burst.py --url http://127.0.0.1:8765 --model smollm2 --requests 64 --out burst.json

Requests go 16 at a time (threads) with varied prompts and ``max_tokens`` (16-256, seeded), temperature 0, and
what real clients do, by request number ``i % 8``: 1 a stop string (vLLM ends it by an abort in the engine core),
2 ``n = 2`` (two child requests, ``0_…`` and ``1_…``), 3 a client that gives up after 0.3 s (the server aborts
the request, waiting or running). Prints and writes: requests ok / given up, output tokens, wall seconds, output
tokens/s, latency p50 / p90.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

TOPICS = ["the tides", "paged attention", "a lighthouse", "continuous batching", "bread", "the moon", "a river"]


def one(url: str, model: str, i: int, rng: random.Random) -> dict:
    body: dict = {
        "model": model,
        "prompt": f"Request {i}. Write a few sentences about {TOPICS[i % len(TOPICS)]}." * (1 + i % 4),
        "max_tokens": rng.randint(16, 256),
        "temperature": 0.0,
    }
    if i % 8 == 1:
        body["stop"] = ["."]
    if i % 8 == 2:
        body["n"] = 2
    gives_up = i % 8 == 3
    req = urllib.request.Request(
        f"{url}/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    t = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=0.3 if gives_up else 300) as resp:
            out = json.loads(resp.read())
    except TimeoutError:  # the client went away: the server aborts the request
        return {"seconds": time.perf_counter() - t, "tokens": 0, "gave_up": True}
    return {"seconds": time.perf_counter() - t, "tokens": out["usage"]["completion_tokens"], "gave_up": False}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    rngs = [random.Random(i) for i in range(args.requests)]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda i: one(args.url, args.model, i, rngs[i]), range(args.requests)))
    wall = time.perf_counter() - t0
    lat = sorted(r["seconds"] for r in results)
    tokens = sum(r["tokens"] for r in results)
    summary = {
        "requests": len(results),
        "gave_up": sum(r["gave_up"] for r in results),
        "output_tokens": tokens,
        "wall_s": round(wall, 2),
        "output_tokens_per_s": round(tokens / wall, 1),
        "latency_p50_s": round(lat[len(lat) // 2], 3),
        "latency_p90_s": round(lat[int(len(lat) * 0.9)], 3),
    }
    print(json.dumps(summary))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(summary, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
