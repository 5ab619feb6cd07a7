"""Where policy work runs: threads until a policy proves fast, inline then, threads again when slow."""

from __future__ import annotations

import asyncio
import threading
import time

from mkpolicy.sidecar.execution import PENALTY, PROBATION, SLOW, Evaluator


def spin(seconds: float) -> str:
    """Burn ``seconds`` of CPU; the thread it ran on."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass
    return threading.current_thread().name


def test_probation_then_inline_then_threads_after_a_slow_evaluation() -> None:
    async def scenario() -> None:
        evaluator = Evaluator(1)
        policy = object()
        try:
            ran = [await evaluator.run(policy, spin, 0) for _ in range(PROBATION)]
            assert all(name.startswith("mkpolicy-transform") for name in ran)
            assert evaluator.inline(policy)
            assert await evaluator.run(policy, spin, 0) == threading.current_thread().name
            await evaluator.run(policy, spin, SLOW * 1.5)  # inline, and found slow
            assert not evaluator.inline(policy)
            assert (await evaluator.run(policy, spin, 0)).startswith("mkpolicy-transform")
            assert evaluator._threaded[id(policy)] == PENALTY - 1
            other = object()  # each policy on its own
            assert not evaluator.inline(other)
        finally:
            evaluator.shutdown()

    asyncio.run(scenario())
