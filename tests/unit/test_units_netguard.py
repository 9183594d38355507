import pytest

from stackrace.base.netguard import RemoteTargetError, is_loopback, require_loopback
from stackrace.engine.spread import split
from stackrace.settings.units import fmt_us, parse_duration


@pytest.mark.parametrize(
    "text,seconds", [("10s", 10), ("500ms", 0.5), ("2m", 120), ("1.5", 1.5), (" 3 s", 3)]
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


def test_parse_duration_rejects_garbage():
    with pytest.raises(ValueError, match="bad duration"):
        parse_duration("ten seconds")


def test_fmt_us():
    assert fmt_us(850) == "850µs"
    assert fmt_us(1250) == "1.25ms"
    assert fmt_us(3_400_000) == "3.40s"


def test_loopback_guard():
    assert is_loopback("127.0.0.1")
    assert is_loopback("127.0.0.2")
    assert is_loopback("localhost")
    assert is_loopback("::1")
    assert not is_loopback("10.1.2.3")
    require_loopback("10.1.2.3", allow_remote=True)
    with pytest.raises(RemoteTargetError, match="--allow-remote"):
        require_loopback("192.168.1.1", allow_remote=False)


def test_split_spreads_evenly():
    assert split(10, 3) == [4, 3, 3]
    assert split(2, 4) == [1, 1, 0, 0]
    assert sum(split(10_000, 3)) == 10_000
