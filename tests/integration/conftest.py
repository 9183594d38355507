"""Fixtures of the integration tests; helpers for real stacks are in tests/conftest_stacks.py."""
