"""SIGINT and SIGTERM during training become a request to stop (keras_transformer.training.interrupts)."""

import gc
import os
import signal
import sys

import pytest

from keras_transformer.training import interrupts


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_the_first_signal_is_noted_the_second_stops_at_once(signum):
    before = signal.getsignal(signum)
    with interrupts.StopSignals() as signals:
        assert signals.received is None
        os.kill(os.getpid(), signum)
        assert signals.received == signum  # noted, nothing raised: the loop saves, then stops
        with pytest.raises(KeyboardInterrupt, match="again: stopping without saving"):
            os.kill(os.getpid(), signum)
    assert signal.getsignal(signum) is before  # the previous handler is back


def test_exit_codes_are_those_a_shell_shows():
    assert interrupts.exit_code(signal.SIGINT) == 130
    assert interrupts.exit_code(signal.SIGTERM) == 143
    assert interrupts.name(signal.SIGTERM) == "SIGTERM"


def test_inside_at_once_the_first_signal_stops_the_work_and_a_second_carries_its_exit_code():
    with interrupts.StopSignals() as signals:
        with pytest.raises(interrupts.Interrupted) as stopped:
            with signals.at_once():
                os.kill(os.getpid(), signal.SIGTERM)
        assert (stopped.value.signum, stopped.value.exit_code) == (signal.SIGTERM, 143)
        assert signals.received == signal.SIGTERM
        with pytest.raises(interrupts.Interrupted):  # received before: raised on entry, the work never starts
            with signals.at_once():
                pytest.fail("entered after a signal")
        with pytest.raises(interrupts.SignalStop, match="SIGTERM again") as again:
            os.kill(os.getpid(), signal.SIGTERM)
        assert again.value.exit_code == 143 and not isinstance(again.value, interrupts.Interrupted)


def raised_through_c_code(signum):
    """What C code that calls back into Python does when a handler raises there and it does not
    check (TensorFlow's graph building, seen in CI): it reports an error of its own instead."""
    try:
        os.kill(os.getpid(), signum)
    except KeyboardInterrupt:
        # pylint: disable-next=raise-missing-from
        raise SystemError("Objects/listobject.c:338: bad argument to internal function")


def test_an_error_that_c_code_reports_for_the_handlers_raise_is_still_the_signal():
    with interrupts.StopSignals() as signals:
        with pytest.raises(interrupts.Interrupted) as stopped:
            with signals.at_once():
                raised_through_c_code(signal.SIGTERM)
        assert stopped.value.exit_code == 143 and isinstance(stopped.value.__cause__, SystemError)
    with pytest.raises(interrupts.SignalStop, match="SIGTERM again") as again:
        with interrupts.StopSignals() as signals:
            os.kill(os.getpid(), signal.SIGTERM)
            raised_through_c_code(signal.SIGTERM)  # the second one, during the save
    assert again.value.exit_code == 143 and isinstance(again.value.__cause__, SystemError)


def test_errors_of_the_work_itself_pass_unchanged():
    with interrupts.StopSignals() as signals:
        with pytest.raises(ValueError, match="the work's own"):
            with signals.at_once():
                raise ValueError("the work's own")
        os.kill(os.getpid(), signal.SIGTERM)  # noted; an error after it that no handler raised stays itself
        with pytest.raises(ValueError, match="after the signal"):
            raise ValueError("after the signal")
    with pytest.raises(ValueError, match="outside"):
        with interrupts.StopSignals():
            raise ValueError("outside")


class SwallowsOnDelete:
    """An object whose `__del__` the signal lands in: Python prints "Exception ignored" and goes on."""

    def __init__(self, signum):
        self.signum = signum

    def __del__(self):
        os.kill(os.getpid(), self.signum)


def test_a_raise_that_a_del_swallowed_still_stops_the_work_and_prints_nothing(capsys):
    with interrupts.StopSignals() as signals:
        with pytest.raises(interrupts.Interrupted):
            with signals.at_once():
                SwallowsOnDelete(signal.SIGTERM)  # deleted at once; the block itself ends without an error
        assert signals.received == signal.SIGTERM
    assert "Exception ignored" not in capsys.readouterr().err
    with pytest.raises(interrupts.SignalStop, match="SIGTERM again"):
        with interrupts.StopSignals() as signals:
            os.kill(os.getpid(), signal.SIGTERM)
            SwallowsOnDelete(signal.SIGTERM)  # the second signal, lost in a __del__ during the save
    assert "Exception ignored" not in capsys.readouterr().err


def half_done():
    """Work that fails when it is collected unfinished, as TensorFlow's graph stack does after an
    interrupted trace ("Nesting violated")."""
    try:
        yield
    finally:
        raise AssertionError("Nesting violated for default stack")


def work_left_in_a_cycle(signum=None):
    work = half_done()
    next(work)
    cycle = [work]
    cycle.append(cycle)  # freed by the collector only
    if signum is not None:
        os.kill(os.getpid(), signum)


def test_what_the_interrupted_work_leaves_fails_quietly_other_failures_still_reach_the_hook(monkeypatch):
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)
    with interrupts.StopSignals() as signals:
        try:
            with signals.at_once():
                work_left_in_a_cycle(signal.SIGTERM)
        except interrupts.Interrupted:
            pass
    gc.collect()
    assert signals.received == signal.SIGTERM and reported == []  # collected on the way out, quietly
    with interrupts.StopSignals():
        work_left_in_a_cycle()
        gc.collect()
    assert [str(r.exc_value) for r in reported] == ["Nesting violated for default stack"]  # no signal: printed
    assert sys.unraisablehook == reported.append
