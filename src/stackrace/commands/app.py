"""`stackrace` with no subcommand: open the live comparator (the Textual app)."""

from __future__ import annotations

import argparse
import sys


def run(args: argparse.Namespace) -> int:
    from stackrace.config import ConfigError, load_stacks

    try:
        load_stacks(args.stacks_file)
    except ConfigError as exc:
        if not getattr(args, "url", None):
            print(f"stackrace: {exc}", file=sys.stderr)
            return 2
    if not getattr(args, "demo", False) and not getattr(args, "cluster", None):
        # before the screen opens: a read-only home is one line here, not a crash later
        from stackrace.paths import writable_dir
        from stackrace.stacks.launcher import runs_dir

        writable_dir(runs_dir(), "its run directories", "STACKRACE_RUNS_DIR")
    from stackrace.metrics.exporter import MetricsError, open_from_args

    try:  # bound before anything starts: a port in use is one line, not a broken screen
        args.metrics_exporter = open_from_args(args, "stackrace")
    except MetricsError as exc:
        print(f"stackrace: {exc}", file=sys.stderr)
        return 2
    try:
        return _run(args)
    finally:
        if args.metrics_exporter is not None:
            args.metrics_exporter.close()


def _run(args: argparse.Namespace) -> int:
    from stackrace.cluster.flags import wants_cluster

    if wants_cluster(args):  # checked before the TUI is imported
        return _run_on_cluster(args)
    from stackrace.tui.app import run_app

    return run_app(args)


def _run_on_cluster(args: argparse.Namespace) -> int:
    """`stackrace --cluster ADDRESS`: the same app, its stacks on the cluster's app node
    and each stack's engine processes on its load nodes (stackrace.cluster)."""
    from stackrace.cluster.errors import ClusterError
    from stackrace.cluster.flags import connect_from_args
    from stackrace.cluster.frontends import app_parts
    from stackrace.config import load_stacks

    cluster = connect_from_args(args, "stackrace")
    if cluster is None:
        return 2
    try:
        from stackrace.tui.app import run_app

        return run_app(args, app_parts(cluster, load_stacks(args.stacks_file)))
    except ClusterError as exc:
        print(f"stackrace: {exc}", file=sys.stderr)
        return 2
    finally:
        cluster.close()
