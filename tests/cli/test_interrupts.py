"""A Ctrl-C during ``ranklit``'s start-up is one line and exit 130, whatever the interrupted code made of it.

Seen in CI: a Ctrl-C during scipy's HiGHS import (pybind11, imported by torchmetrics) surfaced as
``ImportError: generic_type: type "ObjSense" is already registered!``, and the command printed that traceback, exit 1.
"""

from __future__ import annotations

import signal

import pytest

from ranklit.cli._interrupts import run_interruptible


def _extension_import_hit_by_ctrl_c() -> None:
    try:
        signal.raise_signal(signal.SIGINT)
    except KeyboardInterrupt:
        raise ImportError('generic_type: type "ObjSense" is already registered!') from None


def test_a_ctrl_c_the_interrupted_import_turned_into_an_import_error_is_reported_as_the_ctrl_c(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import ranklit.cli._app

    monkeypatch.delenv("RANKLIT_TRACEBACK", raising=False)
    monkeypatch.setattr(ranklit.cli._app, "main", lambda args: _extension_import_hit_by_ctrl_c())
    with pytest.raises(SystemExit) as stopped:
        ranklit.cli.main(["fit", "--config", "quickstart.yaml"])
    assert stopped.value.code == 130
    assert capsys.readouterr().err == "interrupted (Ctrl-C)\n"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is put back


def test_without_a_ctrl_c_an_error_is_left_alone_and_with_ranklit_traceback_the_interruption_shows_its_traceback(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> None:
        raise ImportError("a real import error")

    with pytest.raises(ImportError, match="a real import error"):
        run_interruptible(broken)
    monkeypatch.setenv("RANKLIT_TRACEBACK", "1")
    with pytest.raises(ImportError, match="ObjSense"):
        run_interruptible(_extension_import_hit_by_ctrl_c)


def test_a_sigint_ignored_at_start_stays_ignored() -> None:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        run_interruptible(lambda: signal.raise_signal(signal.SIGINT))  # nothing happens
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
