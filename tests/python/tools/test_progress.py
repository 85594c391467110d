"""Progress bars (milkit.progress): drawn only for steps longer than the delay, only when stderr is
interactive (or forced), off with set_progress(False) or MILKIT_PROGRESS=0; hooked into convert
(a tick per pass), milkit.load / milkit.save and MLModel.save / predict's first load."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import time
import warnings

import milkit
import numpy as np
import pytest
from milkit import Builder as mb
from milkit import progress


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture(autouse=True)
def reset_progress(monkeypatch):
    """Each test starts from the defaults: no set_progress call, no MILKIT_PROGRESS."""
    monkeypatch.setattr(progress, "_setting", None)
    monkeypatch.setattr(progress, "_delay", progress._DEFAULT_DELAY)
    monkeypatch.delenv("MILKIT_PROGRESS", raising=False)


def _slow_step(stream, seconds=0.3, delay=0.02, total=3):
    with progress.Progress("slow step", total=total, file=stream, delay=delay) as p:
        for i in range(total):
            time.sleep(seconds / total)
            p.update(1, f"part{i}")


def test_bar_drawn_on_a_tty_after_the_delay_and_erased():
    s = FakeTTY()
    _slow_step(s)
    text = s.getvalue()
    assert "slow step" in text and "/3" in text and "|" in text
    assert text.endswith("\r") or text.rstrip(" ").endswith("\r")  # leave=False: the line is cleared


def test_no_bar_for_quick_steps():
    s = FakeTTY()
    _slow_step(s, seconds=0.0, delay=5.0)
    assert s.getvalue() == ""


def test_no_bar_when_not_interactive():
    s = io.StringIO()  # a pipe / a log file
    _slow_step(s)
    assert s.getvalue() == ""
    assert not progress.progress_enabled(s)
    assert progress.progress_enabled(FakeTTY())


def test_set_progress_off_and_force():
    s = FakeTTY()
    milkit.set_progress(False)
    _slow_step(s)
    assert s.getvalue() == "" and not progress.progress_enabled(s)
    milkit.set_progress(True, force=True)
    plain = io.StringIO()
    _slow_step(plain)
    assert "slow step" in plain.getvalue()
    milkit.set_progress(True)  # back to the default: interactive only
    plain = io.StringIO()
    _slow_step(plain)
    assert plain.getvalue() == ""
    with pytest.raises(TypeError):
        milkit.set_progress("yes")
    with pytest.raises(ValueError):
        milkit.set_progress(True, delay=-1)


@pytest.mark.parametrize("value", ["0", "false", "off", "no", " OFF "])
def test_env_var_turns_bars_off(monkeypatch, value):
    monkeypatch.setenv("MILKIT_PROGRESS", value)
    s = FakeTTY()
    _slow_step(s)
    assert s.getvalue() == ""
    assert not progress.progress_enabled(s)


def test_env_var_force_and_set_progress_wins(monkeypatch):
    monkeypatch.setenv("MILKIT_PROGRESS", "force")
    plain = io.StringIO()
    _slow_step(plain)
    assert "slow step" in plain.getvalue()
    milkit.set_progress(False)  # the explicit call overrides the environment
    plain = io.StringIO()
    _slow_step(plain)
    assert plain.getvalue() == ""


def test_nested_steps_draw_one_bar():
    s = FakeTTY()
    with progress.Progress("outer", total=1, file=s, delay=0.01) as p:
        with progress.Progress("inner", total=1, file=s, delay=0.01) as q:
            time.sleep(0.15)
            q.update(1)
        p.update(1)
    assert "outer" in s.getvalue() and "inner" not in s.getvalue()


def test_tqdm_is_imported_lazily():
    code = ("import sys, milkit; from milkit import progress\n"
            "with progress.Progress('x', total=1, delay=60) as p: p.update(1)\n"
            "print('tqdm' in sys.modules)")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(milkit.__file__)), MILKIT_PROGRESS="force")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"  # a quick step never imports it, even when forced


# ---- hooks -------------------------------------------------------------------------------------
def _prog():
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 4))], opset_version=milkit.target.iOS17)
    def prog(x):
        return mb.relu(x=mb.matmul(x=x, y=np.ones((4, 16), np.float32), name="mm"), name="out")

    return prog


def _slow_first_call(monkeypatch, module, name, seconds=0.3):
    real = getattr(module, name)
    calls = []

    def slow(*a, **k):
        if not calls:
            time.sleep(seconds)
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(module, name, slow)
    return calls


def test_convert_ticks_per_pass(monkeypatch, capsys):
    conv = sys.modules["milkit.convert"]
    calls = _slow_first_call(monkeypatch, conv._core, "run_passes")
    monkeypatch.setattr(sys, "stderr", FakeTTY())
    milkit.set_progress(True, delay=0.05)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        milkit.convert(_prog(), minimum_deployment_target=milkit.target.iOS17)
    text = sys.stderr.getvalue()
    n = len(milkit.PassPipeline.DEFAULT.passes) + len(milkit.pipeline.BACKEND_MLPROGRAM_PASSES) + 1
    assert len(calls) == n - 1  # one run_passes call per pass
    assert "convert" in text and f"/{n}" in text and "pass" in text
    # not interactive: nothing
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    calls.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        milkit.convert(_prog(), minimum_deployment_target=milkit.target.iOS17)
    assert sys.stderr.getvalue() == ""


def test_convert_with_progress_matches_without():
    """Running the passes one by one (for the ticks) gives the program one run of the whole list
    gives."""
    from milkit import _core
    from milkit.pipeline import BACKEND_MLPROGRAM_PASSES

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = milkit.convert(_prog(), minimum_deployment_target=milkit.target.iOS17)
    p = _prog()
    _core.run_passes(p, milkit.PassPipeline.DEFAULT.passes + BACKEND_MLPROGRAM_PASSES, {}, False, True)
    assert milkit.to_text(model.get_program(), consts=True) == milkit.to_text(p, consts=True)
    assert "cast" in {o.op_type for o in p.find_ops()}


def test_load_and_save_show_a_bar(monkeypatch, tmp_path):
    path = tmp_path / "m.mlpackage"
    milkit.set_progress(True, delay=0.05)
    monkeypatch.setattr(sys, "stderr", FakeTTY())
    io_mod = sys.modules["milkit.io"]
    _slow_first_call(monkeypatch, io_mod._core, "save_mlpackage")
    milkit.save(_prog(), path)
    assert "save m.mlpackage" in sys.stderr.getvalue()

    monkeypatch.setattr(sys, "stderr", FakeTTY())
    _slow_first_call(monkeypatch, io_mod._core, "load_mlpackage")
    milkit.load(path)
    assert "load m.mlpackage" in sys.stderr.getvalue()

    monkeypatch.setattr(sys, "stderr", FakeTTY())
    _slow_first_call(monkeypatch, shutil, "copy2")
    milkit.models.MLModel(str(path)).save(tmp_path / "copy.mlpackage")
    text = sys.stderr.getvalue()
    assert "save copy.mlpackage" in text and "B" in text
    assert milkit.load(tmp_path / "copy.mlpackage") is not None


def test_notebook_counts_as_interactive(monkeypatch):
    import types as pytypes

    class ZMQInteractiveShell:  # the kernel shell's class name is what identifies a notebook
        pass

    fake = pytypes.ModuleType("IPython")
    fake.get_ipython = lambda: ZMQInteractiveShell()
    monkeypatch.setitem(sys.modules, "IPython", fake)
    s = io.StringIO()  # a kernel's stderr is no TTY
    assert progress.progress_enabled(s)
    _slow_step(s)
    assert "slow step" in s.getvalue()

    class TerminalInteractiveShell:  # plain IPython in a terminal: the TTY test decides
        pass

    fake.get_ipython = lambda: TerminalInteractiveShell()
    assert not progress.progress_enabled(io.StringIO())


def test_cli_no_progress_flag(tmp_path, capsys):
    from milkit.cli import main

    milkit.save(_prog(), tmp_path / "m.mlpackage")
    assert progress.progress_enabled(FakeTTY())
    assert main(["--no-progress", "info", str(tmp_path / "m.mlpackage")]) == 0
    assert not progress.progress_enabled(FakeTTY())
    assert "function main" in capsys.readouterr().out


def test_a_failing_bar_never_breaks_the_work(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # `from tqdm import tqdm` raises ImportError
    s = FakeTTY()
    _slow_step(s)  # no exception, no output
    assert s.getvalue() == ""
