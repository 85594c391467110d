"""Runs a Python snippet in a child process and reports its peak anonymous memory (RssAnon,
sampled from /proc every few milliseconds), optionally under a cgroup v1 memory cap.

File pages of mapped weights belong to the page cache, not the process: RssAnon is what a model
conversion or prediction really costs the machine. Used by the large-model benchmarks and, in a
small form, by the memory tests.

    python3 benchmarks/memwatch.py [--cap-mb N] -c "import milkit; ..."
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
import uuid

__all__ = ["CGROUP_V1", "Watched", "rss_anon_kb", "run"]

CGROUP_V1 = "/sys/fs/cgroup/memory"


def rss_anon_kb(pid: int) -> int:
    """The process's current anonymous resident memory in KiB (0 once it has gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class Watched:
    """The result of `run`: return code, output, peak RssAnon (MiB), wall time (s), whether a
    cgroup capped it and whether the cap killed it."""

    def __init__(self, rc: int, out: str, err: str, peak_mb: float, seconds: float, capped: bool,
                 oom: bool) -> None:
        self.rc, self.out, self.err = rc, out, err
        self.peak_mb, self.seconds, self.capped, self.oom = peak_mb, seconds, capped, oom

    def __repr__(self) -> str:
        return (f"Watched(rc={self.rc}, peak_mb={self.peak_mb:.0f}, seconds={self.seconds:.1f}, "
                f"capped={self.capped}, oom={self.oom})")


def _make_cgroup(cap_mb: int) -> str | None:
    """A fresh cgroup v1 memory group limited to `cap_mb` (None when the controller is not
    writable here)."""
    if not os.access(CGROUP_V1, os.W_OK):
        return None
    path = os.path.join(CGROUP_V1, f"milkit-{uuid.uuid4().hex[:12]}")
    try:
        os.mkdir(path)
        with open(os.path.join(path, "memory.limit_in_bytes"), "w") as f:
            f.write(str(cap_mb << 20))
        try:  # no swap either, where the kernel accounts it
            with open(os.path.join(path, "memory.memsw.limit_in_bytes"), "w") as f:
                f.write(str(cap_mb << 20))
        except OSError:
            pass
        return path
    except OSError:
        try:
            os.rmdir(path)
        except OSError:
            pass
        return None


def _oom_killed(group: str) -> bool:
    try:
        with open(os.path.join(group, "memory.oom_control"), encoding="ascii") as f:
            return any(line.startswith("oom_kill ") and int(line.split()[1]) > 0 for line in f)
    except OSError:
        return False


def run(code: str, cap_mb: int | None = None, env: dict | None = None, interval: float = 0.005,
        timeout: float | None = None) -> Watched:
    """Runs `code` with this Python in a child process (in a memory cgroup of `cap_mb` MiB when
    given and available) and samples its RssAnon until it exits."""
    group = _make_cgroup(cap_mb) if cap_mb else None
    pre = None
    if group:
        procs = os.path.join(group, "cgroup.procs")

        def pre() -> None:  # the child joins the group before it runs anything
            with open(procs, "w") as f:
                f.write(str(os.getpid()))

    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, preexec_fn=pre)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss_anon_kb(proc.pid))
            time.sleep(interval)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        done.set()
        t.join()
    seconds = time.perf_counter() - start
    oom = bool(group) and _oom_killed(group)
    if group:
        try:
            os.rmdir(group)
        except OSError:
            pass
    return Watched(proc.returncode, out, err, peak[0] / 1024, seconds, bool(group), oom)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-c", dest="code", required=True, help="the Python code to run")
    ap.add_argument("--cap-mb", type=int, default=None, help="memory cgroup limit in MiB")
    a = ap.parse_args()
    w = run(a.code, a.cap_mb)
    sys.stdout.write(w.out)
    sys.stderr.write(w.err)
    print(f"peak RssAnon {w.peak_mb:.0f} MiB, {w.seconds:.1f} s, rc {w.rc}"
          + (f", capped at {a.cap_mb} MiB" if w.capped else "") + (" (killed by the cap)" if w.oom else ""))


if __name__ == "__main__":
    main()
