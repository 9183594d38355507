"""One rule for a request's method, wherever it is given: `-m`, a scenario file, the
engine's own requests (engine/request.py check_method)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackrace.engine.request import RequestError, build_request, check_method
from stackrace.settings.scenario import ScenarioError, kinds_from, load_scenario


@pytest.mark.parametrize("method", ["get", "POST", "PROPFIND", "M-SEARCH"])
def test_a_token_is_a_method(method: str) -> None:
    assert check_method(method) == method.upper()
    kinds = kinds_from(["/"], method=method)
    assert kinds is not None and kinds[0].method == method.upper()


@pytest.mark.parametrize("method", ["HEAD", "head", "CONNECT"])
def test_methods_whose_answer_is_not_a_response_are_refused_everywhere(
    method: str, tmp_path: Path
) -> None:
    with pytest.raises(RequestError, match=method.upper()):
        check_method(method)
    with pytest.raises(RequestError, match=method.upper()):
        build_request("http://127.0.0.1:1/", method=method)
    with pytest.raises(ScenarioError, match=method.upper()):
        kinds_from(["/"], method=method)
    f = tmp_path / "s.toml"
    f.write_text(f'[[requests]]\npath = "/"\nmethod = "{method}"\n')
    with pytest.raises(ScenarioError, match=f"{f}: request 1: .*{method.upper()}"):
        load_scenario(str(f))


@pytest.mark.parametrize("method", ["G ET", "GET\r\n", "", "X" * 21, "GÉT"])
def test_what_is_not_a_short_token_is_refused(method: str) -> None:
    with pytest.raises(RequestError, match="token"):
        check_method(method)
