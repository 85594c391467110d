"""Progress bars for long steps: conversions (one tick per pass), loads and saves.

    milkit.set_progress(False)          # never draw a bar (or MILKIT_PROGRESS=0 in the environment)
    milkit.set_progress(True)           # the default: bars in terminals and notebooks only
    milkit.set_progress(force=True)     # draw even when stderr is not a terminal (logs, tests)

A bar appears only once a step has run longer than ``delay`` seconds (1 s by default), so quick
work prints nothing, and only when the output (stderr) is a terminal or the code runs in a Jupyter
notebook: non-interactive runs (pipes, CI logs) get no bar. A background timer starts the bar
and keeps its clock moving while one long C++ call (a load, a save) runs; the bar is erased when
the step ends. ``MILKIT_PROGRESS=0`` (or ``false``, ``off``, ``no``) turns bars off and
``MILKIT_PROGRESS=force`` draws them everywhere, unless ``set_progress`` was called. tqdm is
imported only when a bar is actually drawn. Steps nested in a step that shows progress (a save
inside a conversion) draw no bar of their own.
"""

from __future__ import annotations

import io
import os
import sys
import threading
import time
from typing import IO, Any, Dict, Optional

__all__ = ["set_progress", "progress_enabled", "Progress", "progress"]

_DEFAULT_DELAY = 1.0
_REFRESH = 0.5  # seconds between redraws while a long call runs

_setting: Optional[str] = None  # "off" / "auto" / "force"; None: MILKIT_PROGRESS decides
_delay = _DEFAULT_DELAY
_local = threading.local()


def set_progress(enabled: bool = True, *, force: bool = False, delay: Optional[float] = None) -> None:
    """Turns progress bars on (``True``, the default: only in terminals and notebooks) or off
    (``False``). ``force=True`` draws bars even when stderr is not interactive. ``delay`` is how
    long (seconds) a step must run before its bar appears (default 1.0). The setting overrides
    the ``MILKIT_PROGRESS`` environment variable."""
    global _setting, _delay
    if not isinstance(enabled, bool):
        raise TypeError(f"set_progress expects a bool, got {enabled!r}")
    if delay is not None:
        if isinstance(delay, bool) or not isinstance(delay, (int, float)) or delay < 0:
            raise ValueError(f"delay must be a non-negative number of seconds, got {delay!r}")
        _delay = float(delay)
    _setting = "off" if not enabled else "force" if force else "auto"


def _mode() -> str:
    if _setting is not None:
        return _setting
    env = os.environ.get("MILKIT_PROGRESS", "").strip().lower()
    if env in ("0", "false", "off", "no"):
        return "off"
    if env in ("force", "always"):
        return "force"
    return "auto"


def _in_notebook() -> bool:
    ipython = sys.modules.get("IPython")  # never imported here: only a running kernel has it loaded
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:  # noqa: BLE001 - any failure means "not a notebook"
        return False
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # closed or not a file
        return False


def _has_size(stream: Any) -> bool:
    """Whether the stream is a terminal that reports its size."""
    try:
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
        return False
    return size.columns > 0 and size.lines > 0


def progress_enabled(file: Optional[IO[str]] = None) -> bool:
    """Whether a long step would draw a bar on `file` (default: stderr) now."""
    mode = _mode()
    if mode == "off":
        return False
    if mode == "force":
        return True
    stream = sys.stderr if file is None else file
    return stream is not None and (_isatty(stream) or _in_notebook())


class Progress:
    """A progress bar for one step, drawn only once the step runs longer than the delay.

        with Progress("convert", total=len(passes), unit="pass") as p:
            for name in passes:
                run(name)
                p.update(1, name)

    ``total=None`` shows a counter and the elapsed time (one long call). Thread-safe."""

    def __init__(self, desc: str, total: Optional[float] = None, unit: str = "step", unit_scale: bool = False,
                 file: Optional[IO[str]] = None, delay: Optional[float] = None) -> None:
        self.desc = desc
        self.total = total
        self.unit = unit
        self.unit_scale = unit_scale
        self.file = file
        self.delay = _delay if delay is None else float(delay)
        self.n: float = 0
        self.postfix = ""
        self.bar: Any = None
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._active = False
        self._t0 = 0.0

    def __enter__(self) -> "Progress":
        self._t0 = time.time()
        depth = getattr(_local, "depth", 0)
        _local.depth = depth + 1
        if depth == 0 and progress_enabled(self.file):
            self._active = True
            self._thread = threading.Thread(target=self._watch, name="milkit-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        _local.depth = getattr(_local, "depth", 1) - 1
        if not self._active:
            return
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            if self.bar is not None:
                self.bar.close()
                self.bar = None

    def update(self, n: float = 1, postfix: Optional[str] = None) -> None:
        """Advances by `n` units; `postfix` (e.g. the pass just run) is shown after the bar."""
        if not self._active:
            return
        with self._lock:
            self.n += n
            if postfix is not None:
                self.postfix = postfix
            if self.bar is not None:
                if postfix is not None:
                    self.bar.set_postfix_str(postfix, refresh=False)
                self.bar.update(n)

    def _watch(self) -> None:
        try:
            self._draw()
        except Exception:  # noqa: BLE001 - a bar must never break the work (no tqdm, a closed stream)
            self._done.set()

    def _draw(self) -> None:
        if self._done.wait(self.delay):
            return
        from tqdm import tqdm

        with self._lock:
            if self._done.is_set():
                return
            stream = self.file if self.file is not None else sys.stderr
            # tqdm hides the bar on a terminal that reports no size (a pty without a window size)
            size: Dict[str, Any] = {"dynamic_ncols": True} if _has_size(stream) else {"ncols": 80, "nrows": 24}
            self.bar = tqdm(total=self.total, desc=self.desc, unit=self.unit, unit_scale=self.unit_scale,
                            initial=self.n, file=stream, leave=False, mininterval=0.2, **size)
            self.bar.start_t = self._t0  # the elapsed time counts from the step's start
            if self.postfix:
                self.bar.set_postfix_str(self.postfix, refresh=False)
            self.bar.refresh()
        while not self._done.wait(_REFRESH):
            with self._lock:
                if self.bar is not None:
                    self.bar.refresh()  # keeps the elapsed time moving during one long call


def progress(desc: str, total: Optional[float] = None, unit: str = "step", unit_scale: bool = False) -> Progress:
    """``Progress(desc, total, unit, unit_scale)``: the bar of one step (a context manager)."""
    return Progress(desc, total=total, unit=unit, unit_scale=unit_scale)
