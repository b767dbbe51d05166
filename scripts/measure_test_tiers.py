"""Time the test tiers and print the figures docs/testing.md quotes (issue 33's goals: `make test-fast` under 60 s,
`make test` on a fresh clone at most 12 minutes on a 2-core machine, installs included).

    python scripts/measure_test_tiers.py fast          # `make test-fast` in this checkout
    python scripts/measure_test_tiers.py full          # `make test` in a fresh clone of HEAD (venvs built anew)
    python scripts/measure_test_tiers.py full --keep   # ... and keep the clone (its path is printed)

Prints the wall time of each tier, its exit code, the load average before and after (a busy machine reads slower:
compare runs of one day), and for `full` the time to the end of the installs, read from make's own output. The
clone is made with `git clone` of this repository's HEAD into a temporary folder beside it; nothing here changes
the checkout. Exits with the tier's exit code.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _run(command: list[str], cwd: Path, log: Path) -> tuple[int, float, float | None]:
    """Run ``command`` in ``cwd``, its output to ``log``; returns (exit code, wall seconds, seconds to the end of
    the installs, where make printed it)."""
    t0 = time.monotonic()
    installs = None
    with log.open("w") as out:
        proc = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            if installs is None and line.startswith("make -j4 --output-sync=target"):
                installs = time.monotonic() - t0
        code = proc.wait()
    return code, time.monotonic() - t0, installs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tier", choices=("fast", "full"))
    parser.add_argument("--keep", action="store_true", help="keep the fresh clone of `full`")
    args = parser.parse_args(argv)
    print(f"{time.strftime('%Y-%m-%d %H:%M')} · {os.cpu_count()} cores · load {_load()}")
    if args.tier == "fast":
        code, wall, _ = _run(["make", "test-fast"], ROOT, Path(tempfile.gettempdir()) / "test-fast.log")
        print(f"make test-fast: {wall:.0f} s, exit {code} · load after {_load()}")
        return code
    where = Path(tempfile.mkdtemp(prefix="batchscope-clone-", dir=ROOT.parent))
    clone = where / "batchscope"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    log = Path(tempfile.gettempdir()) / "make-test.log"
    code, wall, installs = _run(["make", "test"], clone, log)
    spent = f", installs {installs / 60:.1f} min" if installs is not None else ""
    print(f"make test on a fresh clone: {wall / 60:.1f} min{spent}, exit {code} · load after {_load()}")
    print(f"log: {log}")
    if args.keep:
        print(f"clone kept: {clone}")
    else:
        shutil.rmtree(where, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
