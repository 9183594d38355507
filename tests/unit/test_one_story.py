"""Every screen one story (issue 48): the words that fit a line keep its figure, a
summary names every level, `load` says one duration, a table says what its marks
mean, a full core names what filled it, and `--stack` is hinted toward `--stacks`.

Text functions only (no app, no process); the app's side is tests/tui/test_one_story.py.
"""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.text import Text

from stackrace.cli import build_parser
from stackrace.engine.model import LatencySummary, WindowStats
from stackrace.report import tables
from stackrace.rules.breaking import step_result
from stackrace.rules.level import MEASURING, QUEUEING, WEDGED, Evidence, Judgment, judge
from stackrace.rules.summaries import every_level
from stackrace.tui.fit import fit_parts, fit_words, fits
from tests.unit.test_report import make_run

TIMEOUTS = (
    "1,200 timed out after 10 s: its accept queue is not full (1,371 of 4,096): "
    "the server took them and did not answer in time"
)


@pytest.mark.parametrize("width", [80, 60, 40, 30, 20, 12])
@pytest.mark.parametrize("rows", [1, 2])
def test_a_line_in_any_width_keeps_its_figures_whole(width, rows):
    """The pane's sentence under a wedged or failing verdict, at every width: it fits,
    and every figure in it is one of the sentence's, whole (never "(1,371" cut)."""
    said = fit_words(TIMEOUTS, width, rows)
    assert fits(said, width, rows), said
    assert said.count("(") == said.count(")"), said  # no bracket left open at a cut
    figures = {"1,200", "10", "1,371", "4,096"}
    for word in said.replace("(", " ").replace(")", " ").replace("…", " ").split():
        if any(ch.isdigit() for ch in word):
            assert word in figures, (word, said)


def test_words_go_before_figures():
    # room for the figures once the words are shorter: the limit stays, the words go
    said = fit_words(TIMEOUTS, 80)
    assert said == "1,200 timed out after 10 s: accept queue not full (1,371 of 4,096)"
    # a line that fits is left as it is
    assert fit_words(TIMEOUTS, len(TIMEOUTS)) == TIMEOUTS
    # too narrow for the queue's figures: cut before them, said with "…"
    assert fit_words(TIMEOUTS, 30) == "1,200 timed out after 10 s…"


def test_figures_side_by_side_are_left_out_whole():
    """The waiting line read "waiting 200 · 2.18s old · timeout …" at 36 columns: a
    figure left out is left out whole, and said to be."""
    parts = [Text("waiting 200"), Text("2.18s old"), Text("timeout 10s")]
    assert fit_parts(parts, 0).plain == "waiting 200 · 2.18s old · timeout 10s"
    assert fit_parts(parts, 37).plain == "waiting 200 · 2.18s old · timeout 10s"
    assert fit_parts(parts, 36).plain == "waiting 200 · 2.18s old …"
    assert fit_parts(parts, 12).plain == "waiting 200"  # the first always
    # a part's shorter form before the part goes: what is new, then the total
    failed: list[Text | tuple[Text, ...]] = [
        Text("failed"),
        (Text("timeout 91 (+3)"), Text("timeout 91")),
    ]
    assert fit_parts(failed, 30, sep=" ").plain == "failed timeout 91 (+3)"
    assert fit_parts(failed, 20, sep=" ").plain == "failed timeout 91"
    assert fit_parts(failed, 12, sep=" ").plain == "failed …"
    mem = [Text("RSS 44.0 MiB"), Text("USS 35.2 MiB"), Text("before 43.1 MiB")]
    assert fit_parts(mem, 36, sep="  ").plain == "RSS 44.0 MiB  USS 35.2 MiB …"


def _judgment(level: int, state: str) -> Judgment:
    return Judgment(level=level, state=state, why="", goodput=0.0, p99_us=None, failed=0)


def test_a_summary_names_every_level_those_after_the_break_too():
    """A 4-stack ramp's summary said where each broke and never what c=1,000 did."""
    judged = [
        _judgment(1, "keeping up"),
        _judgment(100, QUEUEING),
        _judgment(1000, WEDGED),
    ]
    said = every_level([1, 10, 100, 1000], judged)
    assert said == ("c=1 keeping up, c=10 too short to judge, c=100 QUEUEING, c=1,000 WEDGED")
    assert every_level([500], [_judgment(500, QUEUEING)], rate_mode=True) == ("500 req/s QUEUEING")


def test_a_few_answers_are_timed_as_their_req_s_is():
    """`load -n 1000` said "0.09 s measured" and "1,000 answers in 0.3 s": the verdict
    on a short load is timed as req/s is, from the first send to the last answer."""
    lat = LatencySummary(count=1000, mean=800, p50=700, p99=2000, max=3000, min=100)
    w = WindowStats(
        seconds=0.3, span_seconds=0.09, sent=1000, requests=1000, ok=1000, rps=11_111.0,
        latency=lat,
    )  # fmt: skip
    j = judge(Evidence(step_result(10, w)))
    assert j.state == MEASURING
    assert j.why == "1,000 answers in 0.09 s"
    assert f"{w.span_seconds:.2f}" in j.why  # the same duration the summary's lines say


def test_every_mark_in_a_bench_table_is_said_under_it():
    run = make_run()
    md = tables.markdown(run)
    assert "| sync | 100 ✗ |" in md
    assert "✗ marks each stack's breaking point" in md
    # the terminal's table: its caption explains the ✗ it holds
    out = io.StringIO()
    Console(file=out, width=160).print(tables.rich_table(run, "t"))
    text = out.getvalue()
    assert "✗" in text and "✗ marks each stack's breaking point" in text
    # a table with no mark explains none
    clean = make_run(sync_rps=1000.0)
    clean.stacks = [clean.stacks[1]]
    assert not any("✗" in line for line in tables.legend(clean))


def test_a_level_with_a_note_is_marked_and_the_mark_explained():
    run = make_run()
    lv = run.stacks[1].levels[0]
    lv.samples = [900.0, 400.0]  # repeats that differ by half: a note
    cells = [c for r in tables.rows(run) for c in r]
    assert any("†" in c for c in cells)
    said = " ".join(tables.legend(run))
    assert "† a level whose figures come with a note" in said
    assert "In brackets" in said  # the repeats' range in the req/s cell


def _error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err.strip()


def test_stack_is_hinted_toward_stacks(capsys):
    """`stackrace --stack uvicorn` took `uvicorn` for a command and named the commands;
    the unknown option is the error, and the nearest is named."""
    err = _error(["--stack", "uvicorn"], capsys)
    assert err == "stackrace: unrecognized arguments: --stack uvicorn (did you mean --stacks?)"
    # a command mistyped is still a command mistyped
    err = _error(["lod", "http://127.0.0.1:9/"], capsys)
    assert err.startswith("stackrace: argument COMMAND: invalid choice: 'lod'")


def test_a_demo_of_a_seed_preset_carries_its_experiment():
    """`stackrace --preset seed-002-… --demo --go` showed no then-beside-now strip, and so
    its recording and replay had none: the demo's session carries the experiment too."""
    from stackrace.commands.app_args import app_options
    from stackrace.race.live.setup import build_session

    args = build_parser().parse_args(
        ["--demo", "--preset", "seed-002-concurrency-ceilings", "--go"]
    )
    session, _plan, _catalog, _picker = build_session(app_options(args))
    assert session.then is not None and session.then.experiment == "002"
    plain, *_ = build_session(
        app_options(build_parser().parse_args(["--demo", "--stacks", "uvicorn", "--go"]))
    )
    assert plain.then is None
