"""The fast tier: every test here runs without a process, a connection or a database
(tests/costguard.py fails one that tries), so `./dev test --fast` stays under a minute."""

from tests.costguard import (  # noqa: F401  (hooks, found by name)
    pytest_runtest_call,
    pytest_runtest_setup,
    pytest_runtest_teardown,
)
