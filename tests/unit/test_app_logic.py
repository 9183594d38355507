"""The app's logic without a UI: the warm-up rule, talk tracks, remembered choices,
summary exports, annotations, `--url` paths and the app's command line."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest

from stackrace.engine.model import LatencySummary, WindowStats
from stackrace.race.core.urls import target_url
from stackrace.race.live import explain
from stackrace.race.live.choices import Choices, load_choices, save_choices
from stackrace.race.live.talk import TalkError, TalkPlayer, parse_talk
from stackrace.rules.breaking import LevelVerdict, StepResult
from stackrace.rules.level import KEEPING_UP, QUEUEING, SATURATED, Evidence, Judgment, judge
from stackrace.rules.warmup import MAX_WARMING, WarmupTracker, is_settled
from stackrace.settings.race_settings import RaceSettings

# --- warm-up ------------------------------------------------------------------------------


def feed_seconds(tracker: WarmupTracker, level: int, rps_each_second: Sequence[float]) -> None:
    for rps in rps_each_second:
        for _ in range(4):
            tracker.feed(level, round(rps / 4), 0.25)


def test_a_steady_stack_settles_within_seconds():
    t = WarmupTracker()
    feed_seconds(t, 10, [900, 1000, 1000, 1010, 995, 1000])
    assert not t.warming


def test_a_jit_stays_warming_while_its_req_s_climbs_then_settles():
    t = WarmupTracker()
    climb = [300 + 40 * i for i in range(15)]  # +13 %/s at first, still climbing
    feed_seconds(t, 10, climb)
    climb_now = t.climb()
    assert t.warming and climb_now is not None and climb_now > 1.0
    feed_seconds(t, 10, [900, 905, 898, 902, 900])
    assert not t.warming


def test_a_level_change_restarts_the_points_but_a_steady_stack_counts_as_settled():
    t = WarmupTracker()
    feed_seconds(t, 1, [90, 90, 90])  # 1 s skipped, then two steady points
    feed_seconds(t, 2, [180])
    assert not t.warming  # a ramp's short levels must not keep it "warming"
    climbing = WarmupTracker()
    feed_seconds(climbing, 1, [100, 150, 220])
    feed_seconds(climbing, 2, [400])
    assert climbing.warming


def test_warming_ends_at_the_latest_after_max_warming():
    t = WarmupTracker()
    feed_seconds(t, 10, [100 * 1.1**i for i in range(int(MAX_WARMING) + 2)])  # forever up
    assert not t.warming


def test_noise_is_not_warming_a_steady_rise_is():
    assert is_settled([100, 102, 98, 101])
    assert is_settled([100, 110, 95, 105])  # a noisy shared core: it does not climb
    assert not is_settled([100, 110, 121, 133])  # +10 % a second: a JIT
    assert not is_settled([100, 100])  # too few points to say
    assert is_settled([0, 0, 0, 0])


# --- talk tracks --------------------------------------------------------------------------

TRACK = """
[[step]]
at = "0s"
concurrency = 1
say = "one client"

[[step]]
after = "20s"
concurrency = 100

[[step]]
after = "5s"
rate = 500
say = "a constant rate"

[[step]]
after = "5s"
rate = false
ramp = true
"""


def test_talk_track_times_and_steps():
    steps = parse_talk(TRACK)
    assert [s.at for s in steps] == [0.0, 20.0, 25.0, 30.0]
    assert steps[2].rate == 500.0 and steps[3].closed and steps[3].ramp
    player = TalkPlayer(steps)
    assert [s.say for s in player.due(100.0)] == ["one client"]
    assert player.due(110.0) == []
    assert [s.concurrency for s in player.due(125.0)] == [100, None]
    assert not player.done
    player.due(131.0)
    assert player.done


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("[[step]]\nconcurrency = 0", "step 1: key 'concurrency'"),
        ("[[step]]\nconcurrency = true", "step 1: key 'concurrency'"),
        ("[[step]]\nconcurrency = 10\nrate = 500", "step 1: give `concurrency`"),
        ("[[step]]\nbogus = 1", "step 1: unknown key 'bogus'"),
        ("[[step]]\nat = '1s'\nafter = '2s'", "`at` or `after`"),
        ("[[step]]\nrate = 'fast'", "key 'rate'"),
        ("[[step]]\nafter = 'soon'", "key 'after'"),
        ("x = 1", "no [[step]]"),
    ],
)
def test_talk_track_errors_name_the_step_and_key(text, error):
    with pytest.raises(TalkError, match="talk track"):
        parse_talk(text)
    with pytest.raises(TalkError) as exc:
        parse_talk(text)
    assert error in str(exc.value)


# --- remembered choices ---------------------------------------------------------------------


def test_choices_round_trip_and_a_broken_file_is_ignored(tmp_path):
    path = tmp_path / "stackrace" / "last-race.json"
    settings = RaceSettings(stacks=["uvicorn", "gunicorn-sync:workers=4"], workload="io")
    c = Choices(settings, level=200)
    assert save_choices(c, path) == path
    assert load_choices(path) == c
    path.write_text("{not json")
    assert load_choices(path) is None
    assert load_choices(tmp_path / "missing.json") is None


def test_choices_are_race_settings_held_to_their_parsers(tmp_path):
    """The picker's remembered settings are RaceSettings fields read back through the
    same parsers as an option or a preset: a hand-edited value the command line would
    refuse is a file ignored (it was loaded and raced); a file of the old shape loads."""
    from stackrace.race.core.plan import RacePlan
    from stackrace.race.live.choices import PICKED

    path = tmp_path / "last-race.json"
    old = {"stacks": ["uvicorn"], "workload": "db", "io_ms": 25, "queries": 3}
    path.write_text(json.dumps({**old, "rate_mode": True, "level": 50}))
    last = load_choices(path)
    assert last is not None and last.stacks == ["uvicorn"] and last.rate_mode
    assert (last.settings.workload, last.settings.io_ms, last.settings.queries) == ("db", 25, 3)
    for bad in ({"io_ms": -5}, {"workload": "../x"}, {"queries": 0}, {"level": 0}):
        path.write_text(json.dumps({**old, **bad}))
        assert load_choices(path) is None, bad
    # each picked setting is a RaceSettings field with its default; nothing else is kept
    assert set(PICKED) <= set(RaceSettings.__struct_fields__)
    assert Choices().settings == RaceSettings()
    kept = Choices(RaceSettings(workload="io", timeout=3.0, slo="p99<5ms"))
    assert kept.settings == RaceSettings(workload="io")
    # applied to a plan: the picked fields and the mode, over the plan's other settings
    plan = RacePlan(settings=RaceSettings(timeout=2.0))
    applied = last.apply(plan, [])
    assert applied.settings.workload == "db" and applied.settings.timeout == 2.0
    assert applied.stacks == () and applied.rate == 50.0 and applied.concurrency == 50
    assert Choices.of_plan(applied).settings.workload == "db"


# --- --url: the path typed is the path loaded -----------------------------------------------


def test_url_loads_the_path_typed_and_only_a_bare_host_gets_the_workloads():
    assert target_url("http://127.0.0.1:8000/", "hello") == "http://127.0.0.1:8000/"
    assert target_url("http://127.0.0.1:8000/x?y=1", "io") == "http://127.0.0.1:8000/x?y=1"
    assert target_url("http://127.0.0.1:8000", "io", io_ms=20) == "http://127.0.0.1:8000/io?ms=20"


# --- explanations --------------------------------------------------------------------------


def _window(**kw: Any) -> WindowStats:
    lat = kw.pop("latency", LatencySummary(count=100, mean=10_000, p50=9_000, p99=20_000))
    return WindowStats(seconds=kw.pop("seconds", 0.25), latency=lat, **kw)


def _judged(w: WindowStats, level: int = 10, **kw: Any) -> Judgment:
    return judge(Evidence(StepResult(level, w, **kw)))


def test_annotation_says_how_many_queue_and_how_long_they_wait():
    # the level's window: 990 in flight, 90 answered a second, the fastest in 11 ms
    lat = LatencySummary(count=270, mean=9_000_000, p50=9_000_000, p99=11_000_000, min=11_000)
    w = _window(
        seconds=3.0, waiting=990, in_flight=990.0, requests=270, ok=270, oldest_wait_us=11_000_000,
        latency=lat,
    )  # fmt: skip
    j = _judged(w, 1000)
    assert j.state == QUEUEING
    note = explain.annotate(judgment=j, interval=w, total=w, rate=None, timeout=30)
    assert note == "≈ 990 requests queued, each waits ~11 s (90 req/s served)"
    # a stack that keeps up: nothing to say
    lat = LatencySummary(count=2000, mean=11_000, p50=11_000, p99=15_000, min=10_000)
    w = _window(seconds=2.0, waiting=10, in_flight=10.0, requests=2000, ok=2000, latency=lat)
    j = _judged(w)
    assert j.state == KEEPING_UP
    assert explain.annotate(judgment=j, interval=w, total=w, rate=None, timeout=30) == ""


def test_annotation_for_a_cpu_bound_stack_gives_its_ceiling():
    lat = LatencySummary(count=8000, mean=125_000, p50=120_000, p99=200_000, min=300)
    w = _window(seconds=2.0, waiting=500, in_flight=500.0, requests=8000, ok=8000, latency=lat)
    j = _judged(w, 500, cpu_percent=99.0, cpu_capacity=100.0)
    assert j.state == SATURATED
    note = explain.annotate(
        judgment=j,
        interval=w,
        total=w,
        rate=None,
        timeout=10,
        cpu_us_per_request=250.0,
        cpu_capacity=100.0,
    )
    assert note.startswith("CPU-bound: 250 µs of CPU per request, so at most ≈ 4,000 req/s")


def test_annotation_names_the_failure_kind():
    w = _window(seconds=2.0, requests=0, failures={"refused": 500})
    note = explain.annotate(judgment=_judged(w), interval=w, total=w, rate=None, timeout=10)
    assert note.startswith("connections refused")
    w = _window(seconds=2.0, requests=100, ok=0, failures={"http_status": 100}, status={404: 100})
    note = explain.annotate(judgment=_judged(w), interval=w, total=w, rate=None, timeout=10)
    assert "HTTP 404" in note
    calm = _window(requests=100, rps=400.0, waiting=4)
    assert explain.annotate(judgment=None, interval=calm, total=None, rate=None, timeout=10) == ""


def test_behind_schedule_only_when_it_is():
    keeping = _window(seconds=4.0, requests=400)
    assert explain.behind_schedule(100.0, keeping) == ""
    behind = _window(seconds=4.0, requests=360, late=300, unsent=40)
    text = explain.behind_schedule(100.0, behind)
    assert text.startswith("behind schedule: 90 of 100 req/s") and "300 sent late" in text
    assert explain.behind_schedule(None, behind) == ""


# --- the summary as files ----------------------------------------------------------------------


def test_summary_exports_markdown_and_json(tmp_path):
    from stackrace.race.live.summary import export
    from stackrace.race.live.view import SummaryRow

    steps = (
        StepResult(1, _window(seconds=3.0, requests=270, ok=270, rps=90.0)),
        StepResult(10, _window(seconds=3.0, requests=270, ok=270, rps=90.0, waiting=10)),
    )
    v = LevelVerdict(10, QUEUEING, "10 wait ~110 ms each", 110_000, 90.0)
    rows = [
        SummaryRow(
            "gunicorn-sync",
            "gunicorn sync",
            steps[0],
            v,
            None,
            0,
            steps,
            why="10 waiting, req/s flat at 90",
        )
    ]
    md, js = export(rows, False, tmp_path, title="Ramp result", stem="s")
    text = md.read_text()
    assert "## Ramp result" in text and "| gunicorn sync | 90 | c=1 | c=10 | queueing |" in text
    data = json.loads(js.read_text())
    assert data["stacks"][0]["breaking"]["kind"] == "queueing"
    assert [lv["level"] for lv in data["stacks"][0]["levels"]] == [1, 10]


# --- the app's command line ---------------------------------------------------------------------


def test_app_options_come_from_the_settings_and_presets():
    from stackrace.cli import build_parser
    from stackrace.commands.app_args import app_options
    from stackrace.race.live.setup import AppSetupError, build_session

    args = build_parser().parse_args(
        ["--demo", "--stacks", "gunicorn-sync,uvicorn", "--workload", "io", "-c", "50", "--go"]
    )
    _session, plan, _catalog, show_picker = build_session(app_options(args))
    assert plan.stacks == ("gunicorn-sync", "uvicorn") and plan.concurrency == 50
    assert plan.settings.workload == "io" and not show_picker
    # -c is the starting level, not bench's levels: the settings stay valid (a recording
    # writes them)
    msgspec.convert(msgspec.to_builtins(plan.settings), type(plan.settings))
    args = build_parser().parse_args(["--demo", "--preset", "sync-ceiling", "--go"])
    _s, plan, _c, show_picker = build_session(app_options(args))
    assert plan.stacks == ("gunicorn-sync", "gunicorn-gevent", "gunicorn-meinheld")
    assert plan.settings.workload == "io" and not show_picker
    with pytest.raises(AppSetupError, match="--go needs stacks"):
        build_session(app_options(build_parser().parse_args(["--demo", "--go"])))


def test_the_app_race_is_made_headless_with_what_rides_along(tmp_path: Path) -> None:
    """race/live/setup.py makes the whole race the app shows: the demo's engine stepped at
    the app's pace, a recorder listening, the picker skipped with --go and nothing
    remembered in a demo; the UI receives it ready (a contract keeps tui/ from building)."""
    from stackrace.cli import build_parser
    from stackrace.commands.app_args import app_options
    from stackrace.race.live.demo import SyntheticEngine
    from stackrace.race.live.session_recorder import Recorder
    from stackrace.race.live.setup import app_race

    argv = ["--demo", "--go", "--stacks", "uvicorn", "--record", str(tmp_path / "r.rec"), "--big"]
    parser = build_parser()
    parser.set_defaults(argv=argv)  # as cli.py gives it
    race = app_race(app_options(parser.parse_args(argv)))
    engine = race.session.engine
    assert isinstance(engine, SyntheticEngine) and race.drive == engine.step
    assert [type(x) for x in race.session.listeners].count(Recorder) == 1
    assert not race.show_picker and not race.remember and race.projector
    assert race.argv == argv and race.plan.stacks == ("uvicorn",)


def test_the_app_takes_variants_and_presets_as_bench_does():
    """The app merges options over a preset with bench's code: a variant's second
    KEY=VALUE is not a stack of its own (the app split `--stacks` at every comma)."""
    from stackrace.cli import build_parser
    from stackrace.commands.app_args import app_options
    from stackrace.race.live.setup import build_session
    from stackrace.settings.race_settings import BENCH_ONLY, options

    argv = ["--demo", "--stacks", "gunicorn-sync:workers=2,threads=4,uvicorn", "-c", "7"]
    _s, plan, _c, _p = build_session(app_options(build_parser().parse_args(argv)))
    settings = plan.settings
    assert settings.stacks == ["gunicorn-sync:workers=2,threads=4", "uvicorn"]
    assert settings.concurrency_levels == [10, 100]  # -c is the app's starting level, not levels
    args = build_parser().parse_args(["--demo", "--preset", "sync-ceiling", "--workload", "json"])
    _s, plan, _c, _p = build_session(app_options(args))
    assert plan.settings.workload == "json" and plan.settings.stacks[0] == "gunicorn-sync"
    # bench's own settings are declared so on the field, and the app offers none of them
    assert {"concurrency_levels", "duration", "warmup", "repeat", "isolation"} <= set(BENCH_ONLY)
    app_flags = {a for action in build_parser()._actions for a in action.option_strings}
    for name in BENCH_ONLY:
        if name != "concurrency_levels":  # the app's -c: its own starting level
            assert options()[name].flag not in app_flags, name
    assert options()["workload"].flag in app_flags


def test_web_passes_the_app_options_on_and_drops_its_own():
    from stackrace.commands.web import app_command

    cmd = app_command(
        ["web", "--host", "0.0.0.0", "--port=9000", "--demo", "--go", "--stacks", "uvicorn"]
    )
    assert cmd.endswith("-m stackrace --demo --go --stacks uvicorn")
    assert "--host" not in cmd and "9000" not in cmd


def test_the_slow_clients_preset_and_options_reach_the_race():
    from stackrace.cli import build_parser
    from stackrace.commands.app_args import app_options
    from stackrace.race.live.setup import build_session

    args = build_parser().parse_args(["--demo", "--preset", "slow-clients", "--go"])
    _session, plan, _c, _show = build_session(app_options(args))
    assert plan.stacks == ("gunicorn-sync", "nginx-proxy:backend=gunicorn-sync", "uvicorn")
    assert plan.settings.clients == "slow:upload=50ms" and plan.settings.slow_share == 0.25
    profile = plan.settings.client_profile
    assert profile is not None and profile.upload == 0.05
    args = build_parser().parse_args(
        ["--demo", "--stacks", "uvicorn", "--clients", "mobile", "--slow-share", "20%", "--go"]
    )
    _s, plan, _c, _show = build_session(app_options(args))
    assert plan.settings.clients == "mobile:upload=200ms,read=180KB/s"
    assert plan.settings.slow_share == pytest.approx(0.2)


def test_the_app_names_slow_clients_holding_a_sync_worker():
    held = _window(requests=300, rps=77.0, latency=LatencySummary(count=300, p50=51_000))
    free = _window(requests=3000, rps=600.0, latency=LatencySummary(count=3000, p50=4_000))
    note = explain.held_by_slow_clients("sync", 0.05, 0.25, held)
    assert note.startswith("slow clients hold the worker: it waits ~50 ms")
    assert "(25% of clients)" in note
    # a buffering proxy in front, an async server, fast medians, or every client slow
    assert explain.held_by_slow_clients("other", 0.05, 0.25, held) == ""
    assert explain.held_by_slow_clients("async", 0.05, 0.25, held) == ""
    assert explain.held_by_slow_clients("sync", 0.05, 0.25, free) == ""
    assert explain.held_by_slow_clients("sync", 0.05, 1.0, held) == ""
    assert explain.held_by_slow_clients("sync", 0.0, 0.25, held) == ""


def test_a_long_median_on_a_busy_worker_is_not_slow_clients_holding_it():
    # one gunicorn sync worker at c=50 sharing a full core (walked in the app): the
    # median (57 ms) exceeds half the 50 ms upload, but the uploads finished in the
    # accept queue and the worker was busy or waiting for the core 90% of the time
    queued = _window(requests=4400, rps=885.0, latency=LatencySummary(count=4400, p50=56_600))
    assert explain.held_by_slow_clients("sync", 0.05, 0.25, queued, 27 + 63, 100.0) == ""
    # at c=10 the same worker was mostly idle while clients waited (CPU 9%, waited 21%)
    held = _window(requests=960, rps=192.0, latency=LatencySummary(count=960, p50=51_900))
    assert explain.held_by_slow_clients("sync", 0.05, 0.25, held, 9 + 21, 100.0).startswith(
        "slow clients hold the worker"
    )
    # four workers on two cores, all of them held: little CPU for what they could use
    assert explain.held_by_slow_clients("sync", 0.05, 0.25, held, 40.0, 200.0) != ""
