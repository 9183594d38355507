"""Slow-client profiles (engine.slow_clients): named ones, changes, the checks, the share."""

import itertools

import pytest

from stackrace.engine.slow_clients import (
    NAMED,
    ClientProfile,
    ProfileError,
    is_slow,
    parse_profile,
    parse_share,
)


def test_named_profiles_and_changes():
    assert parse_profile("mobile") == NAMED["mobile"]
    p = parse_profile("slow:upload=20ms,read=64KB/s,pieces=4,rcvbuf=8KiB")
    assert p == ClientProfile("slow", upload=0.02, pieces=4, read=64_000, rcvbuf=8192)
    # every figure is in the text the race settings keep: it reads back the same
    assert p.describe() == "slow:upload=20ms,pieces=4,read=64KB/s,rcvbuf=8192B"
    assert parse_profile(p.describe()) == p
    assert parse_profile("wan:read=2MiB/s").read == 2 * 1024 * 1024
    assert parse_profile(parse_profile("mobile").describe()) == NAMED["mobile"]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("dialup", "neither upload nor read is slow"),  # a name of your own says how
        ("9lives:upload=1ms", "a profile is slow, mobile, wan, or a name of your own"),
        ("slow:upload=20ms,upload=40ms", "upload is given twice"),
        ("slow:upload=fast", "not a duration"),
        ("slow:upload=2h", "not a duration"),
        ("slow:upload=90s", "at most 60s"),
        ("slow:read=64KB", "read is a rate"),
        ("slow:read=10B/s", "at least 100B/s"),
        ("slow:pieces=1", "pieces must be"),
        ("slow:rcvbuf=1", "rcvbuf must be"),
        ("slow:upload=0ms", "neither upload nor read is slow"),
        ("slow:speed=1", "unknown key 'speed'"),
        ("slow:upload", "not KEY=VALUE"),
    ],
)
def test_a_bad_profile_says_what_is_expected(text, words):
    """Each refusal names what was wrong; a key given twice is one (not the last wins)."""
    with pytest.raises(ProfileError, match=words):
        parse_profile(text)


def test_a_profile_of_your_own_as_the_help_writes_it():
    """`--clients NAME:upload=20ms,read=64KB/s` (the help's syntax): a new name starts
    from nothing and keeps its name."""
    p = parse_profile("mine:upload=20ms,read=64KB/s")
    assert p == ClientProfile("mine", upload=0.02, read=64_000)
    assert parse_profile(p.describe()) == p
    assert parse_profile("edge:read=1MB/s") == ClientProfile("edge", upload=0.0, read=1e6)


@pytest.mark.parametrize(("text", "share"), [("20%", 0.2), ("0.5", 0.5), ("100%", 1.0)])
def test_shares(text, share):
    assert parse_share(text) == pytest.approx(share)


@pytest.mark.parametrize("text", ["0", "0%", "150%", "-1", "half"])
def test_bad_shares(text):
    with pytest.raises(ProfileError):
        parse_share(text)


@pytest.mark.parametrize("share", [0.2, 0.25, 1 / 3, 0.5, 1.0])
def test_the_share_is_spread_evenly(share):
    slow = [i for i in range(60) if is_slow(i, share)]
    assert len(slow) == round(60 * share)
    gaps = {b - a for a, b in itertools.pairwise(slow)}
    assert max(gaps, default=1) - min(gaps, default=1) <= 1
