"""A progress bar on stderr for long CLI work (stdout stays for the command's output)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    """An async progress callback `(done, total, message)`, as `Call.report` expects.

    On a terminal the bar redraws in place; elsewhere (logs, CI) it prints a line at most
    every `every_s` seconds."""

    def __init__(
        self, label: str, stream: TextIO | None = None, width: int = 30, every_s: float = 1.0
    ) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.width = width
        self.every_s = every_s
        self.tty = self.stream.isatty()
        self._last = 0.0
        self._drawn = False

    async def __call__(self, done: float, total: float | None, message: str | None = None) -> None:
        self.update(done, total, message)

    def update(self, done: float, total: float | None, message: str | None = None) -> None:
        """Redraw (what `__call__` does, for synchronous work)."""
        now = time.monotonic()
        if not self.tty and now - self._last < self.every_s and (total is None or done < total):
            return
        self._last = now
        if total:
            share = max(0.0, min(1.0, done / total))
            filled = round(share * self.width)
            bar = f"[{'#' * filled}{'.' * (self.width - filled)}] {share:4.0%} {int(done)}/{int(total)}"
        else:
            bar = f"{int(done)}"
        line = f"{self.label} {bar}" + (f"  {message}" if message else "")
        self.stream.write(("\r" + line) if self.tty else line + "\n")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
