"""A sampling profiler of every Python thread of this process, for the stretch of code it is started around.

A profiler of the event loop's thread alone (pyinstrument's async mode) shows a model run in a worker thread
(`asyncio.to_thread`) only as the await.
py-spy sees every thread but attaches with ptrace, which a container or a hardened kernel often refuses. This
reads `sys._current_frames()` every `interval` seconds from a thread of its own: no privilege, no dependency, and
only what runs between `start()` and `stop()` is counted. A thread blocked in a C call (ONNX Runtime, a numpy
product) shows the Python frame that made the call, which is what names the work. Idle threads (an event loop in
`select`, a pool worker waiting for work) are not counted.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

Frame = tuple[str, str]  # (file name without .py, qualified function name)
# Where an idle thread waits, as its innermost Python frame.
IDLE: frozenset[Frame] = frozenset({("selectors", "EpollSelector.select"), ("selectors", "SelectSelector.select"),
                                    ("thread", "_worker"), ("threading", "Condition.wait"),
                                    ("threading", "Event.wait"), ("threading", "Thread._wait_for_tstate_lock"),
                                    ("queue", "Queue.get")})


def _stack(frame) -> list[Frame]:
    """Outermost first."""
    stack: list[Frame] = []
    while frame is not None:
        code = frame.f_code
        stack.append((Path(code.co_filename).stem, getattr(code, "co_qualname", code.co_name)))
        frame = frame.f_back
    stack.reverse()
    return stack


class ThreadSampler:
    """`components` names kinds of work by a function in the stack: (label, (qualname substrings, …)); a sample goes
    to the first component any of whose names is in its stack (innermost frames checked first), else to `other`."""

    def __init__(self, components: Sequence[tuple[str, Sequence[str]]], *, interval: float = 0.005,
                 other: str = "other") -> None:
        self.components = components
        self.interval = interval
        self.other = other
        self.by_component: Counter[str] = Counter()
        self.self_time: Counter[str] = Counter()
        self.samples = 0  # thread samples counted (busy threads only)
        self.ticks = 0  # rounds of sampling
        self.seconds = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = 0.0

    def component_of(self, stack: list[Frame]) -> str:
        for _, function in reversed(stack):
            for label, names in self.components:
                if any(name in function for name in names):
                    return label
        return self.other

    def _run(self) -> None:
        own = threading.get_ident()
        while not self._stop.wait(self.interval):
            self.ticks += 1
            for ident, frame in sys._current_frames().items():
                if ident == own:
                    continue
                stack = _stack(frame)
                if not stack or stack[-1] in IDLE:
                    continue
                self.samples += 1
                self.by_component[self.component_of(stack)] += 1
                self.self_time[":".join(stack[-1])] += 1

    def start(self) -> None:
        self._stop.clear()
        self._started = time.perf_counter()
        self._thread = threading.Thread(target=self._run, name="thread-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.seconds += time.perf_counter() - self._started

    def busy_seconds(self, count: int) -> float:
        """Thread samples as thread-seconds: each round stands for the time the sampler ran over its rounds (a
        round waits for the GIL, so there are fewer rounds than `interval` alone would give)."""
        return count * self.seconds / max(1, self.ticks)
