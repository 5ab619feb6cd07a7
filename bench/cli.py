"""CLI start-up: wall time of ``mkpolicy --help`` and ``mkpolicy lint policies/``.

Each command runs as a fresh process (interpreter start included, as CI pays it), after
one warm-up run (which fills the OS page cache, Python's bytecode caches and lark's
parser-table cache). The children run with bytecode caching on, as an installed package
does (pip compiles it at install time), even if PYTHONDONTWRITEBYTECODE is set here. Rounds
are interleaved with a bare ``python -c pass`` for reference; the best and the median of
each are printed next to the goals (--help <= 0.3 s, lint of the shipped policies <= 1 s)
with the ratio measured/goal.

    python bench/cli.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def mkpolicy_command() -> list[str]:
    """The installed console script next to this interpreter, else ``python -m mkpolicy``."""
    script = shutil.which("mkpolicy", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "mkpolicy"]


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def wall(argv: list[str]) -> float:
    """Seconds one run of ``argv`` takes (its output is discarded; exit codes 0 and 1 are fine)."""
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} failed with exit code {proc.returncode}:\n{proc.stderr}")
    return elapsed


def main() -> None:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    cmd = mkpolicy_command()
    benches = [
        ("python -c pass (reference)", [sys.executable, "-c", "pass"], None),
        ("mkpolicy --help", [*cmd, "--help"], 0.3),
        ("mkpolicy lint policies/", [*cmd, "lint", "policies/"], 1.0),
        ("mkpolicy test policies/", [*cmd, "test", "policies/"], None),
    ]
    for _, argv, _ in benches:
        wall(argv)  # warm-up
    times: dict[str, list[float]] = {name: [] for name, _, _ in benches}
    for _ in range(args.rounds):
        for name, argv, _ in benches:
            times[name].append(wall(argv))
    policies = sum(1 for p in (ROOT / "policies").rglob("*.yaml") if not p.name.endswith(".test.yaml"))
    print(f"{os.cpu_count()} CPUs, {args.rounds} rounds, {policies} policy files, {' '.join(cmd)}")
    print(f"{'command':<30} {'best':>8} {'median':>8} {'goal':>6} {'best/goal':>10}")
    for name, _, goal in benches:
        best, median = min(times[name]), statistics.median(times[name])
        ratio = f"{best / goal:.2f}x" if goal else "-"
        goal_text = f"{goal:.1f}s" if goal else "-"
        print(f"{name:<30} {best:>7.3f}s {median:>7.3f}s {goal_text:>6} {ratio:>10}")


if __name__ == "__main__":
    main()
