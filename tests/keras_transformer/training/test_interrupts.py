"""SIGINT and SIGTERM during training become a request to stop (keras_transformer.training.interrupts)."""

import os
import signal

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
