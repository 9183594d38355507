from __future__ import annotations

import pytest

from tests.helpers import TestServer


@pytest.fixture
def server():
    s = TestServer()
    yield s
    s.kill()
