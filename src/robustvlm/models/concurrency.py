"""Adaptive concurrency for served models (`--concurrency auto`): how many requests to keep in
flight, learnt from the replies, between 1 and a ceiling (`--max-concurrency`).

Additive increase, multiplicative decrease (AIMD), as TCP congestion control and lmms-eval's
adaptive scheduler do. The limit starts at `start` (8, the fixed default). While replies come
back fast and error-free it grows: by one per reply until the first sign of overload (slow
start: it doubles per round trip), then by one per `limit` replies (one per round trip). A
sign of overload (HTTP 429 or 503, a timeout) multiplies it by `decrease` (0.9, the back-off
ratio of Netflix's concurrency-limits AIMD; TCP's 0.5 idles a quarter of a server's capacity
between probes) and ends slow start; the signals of requests sent before that decrease are not counted again (they were sent
under the old limit), so one burst of refusals is one decrease. A reply is slow, and the limit
holds, when the running mean of reply times (weight `smoothing` on the newest) exceeds
`slow_factor` times its lowest value so far: the server queues rather than refuses (in slow
start, where the running mean reacts too late, one reply that slow ends slow start).

With the smaller limit as the back-off, a refused request waits for a free slot rather than
for the exponential back-off of a fixed concurrency; at a limit of 1 the back-off applies again
(`models.endpoint`).

Written here because no well-kept library offers a blocking, thread-safe AIMD limit for plain
threads (the ones that exist are asyncio-bound or parts of service meshes). `AIMD` is pure (no
clock, no threads: the tests drive it with a simulated server); `AdaptiveLimit` makes it a gate
the request threads pass through.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass


class AIMD:
    """The limit on requests in flight (module doc). `allowed` is the whole number in force."""

    def __init__(self, ceiling: int, *, start: int = 8, decrease: float = 0.9, slow_factor: float = 2.0,
                 smoothing: float = 0.1):
        if ceiling < 1 or not 0 < decrease < 1 or slow_factor <= 1 or not 0 < smoothing <= 1:
            raise ValueError("AIMD: ceiling >= 1, 0 < decrease < 1, slow_factor > 1, 0 < smoothing <= 1")
        self.ceiling, self.decrease, self.slow_factor, self.smoothing = ceiling, decrease, slow_factor, smoothing
        self.limit = float(min(start, ceiling))
        self.slow_start = True
        self.epoch = 0  # decreases so far: a request records it when sent
        self.mean_s = math.nan  # running mean of reply times (seconds)
        self.best_mean_s = math.inf
        self.fastest_s = math.inf

    @property
    def allowed(self) -> int:
        """Requests that may be in flight now: the limit rounded down, at least 1."""
        return max(1, int(self.limit))

    @property
    def at_floor(self) -> bool:
        """True when one request at a time is all the limit allows."""
        return self.allowed == 1

    def on_reply(self, seconds: float) -> None:
        """A request answered after `seconds`: grow unless replies have become slow."""
        self.fastest_s = min(self.fastest_s, seconds)
        self.mean_s = seconds if math.isnan(self.mean_s) else (
            self.smoothing * seconds + (1 - self.smoothing) * self.mean_s)
        self.best_mean_s = min(self.best_mean_s, self.mean_s)
        if self.slow_start and seconds > self.slow_factor * self.fastest_s:
            self.slow_start = False  # the running mean reacts too late for doubling
        if self.mean_s > self.slow_factor * self.best_mean_s:
            return
        self.limit = min(float(self.ceiling), self.limit + (1.0 if self.slow_start else 1.0 / self.limit))

    def on_overload(self, epoch: int) -> None:
        """A request sent at `epoch` was refused (429, 503) or timed out: shrink, once per epoch."""
        if epoch < self.epoch:
            return
        self.limit = max(1.0, self.limit * self.decrease)
        self.slow_start = False
        self.epoch += 1


@dataclass
class Attempt:
    """One request in flight: when it was sent (epoch, clock seconds) and how it ended."""

    epoch: int
    sent_s: float
    answered: bool = False
    overloaded: bool = False


class AdaptiveLimit:
    """A gate for request threads: at most `control.allowed` requests pass at once; each
    attempt's outcome (set on the `Attempt` the slot yields) updates the control."""

    def __init__(self, control: AIMD, clock: Callable[[], float] = time.monotonic):
        self.control, self.clock = control, clock
        self.in_flight = 0
        self._changed = threading.Condition()

    @contextmanager
    def slot(self) -> Iterator[Attempt]:
        """Wait for a free slot and hold it for the block; mark the yielded Attempt `answered`
        or `overloaded` (neither: an error that says nothing about load)."""
        with self._changed:
            self._changed.wait_for(lambda: self.in_flight < self.control.allowed)
            self.in_flight += 1
            attempt = Attempt(self.control.epoch, self.clock())
        try:
            yield attempt
        finally:
            with self._changed:
                self.in_flight -= 1
                if attempt.overloaded:
                    self.control.on_overload(attempt.epoch)
                elif attempt.answered:
                    self.control.on_reply(self.clock() - attempt.sent_s)
                self._changed.notify(max(0, self.control.allowed - self.in_flight))  # no stampede
