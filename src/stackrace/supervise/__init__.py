"""Supervising child processes: they die with stackrace, even when it is SIGKILLed.

Shared by the launcher (stacks) and the private MariaDB (db); below both.
"""
