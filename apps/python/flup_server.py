"""Django (django_app.py) under flup's FastCGI servers, on a unix socket for nginx's
`fastcgi_pass`, the way Django 1.x deployed with `manage.py runfcgi` (experiment 004):

    python flup_server.py --socket PATH --mode prefork --workers N [--min-spare A --max-spare B]
    python flup_server.py --socket PATH --mode threaded --threads N [--min-spare A --max-spare B]

- prefork (`flup.server.fcgi_fork`): a parent that forks children, each serving one
  request at a time; it keeps between min-spare and max-spare idle children, forking and
  killing them as load changes, up to `workers` children.
- threaded (`flup.server.fcgi`): one process, a pool of up to `threads` threads, between
  min-spare and max-spare of them idle.

`--max-spare auto` (the default) means as many as the pool may hold: every child or
thread is made at start and kept, like the other stacks' fixed workers. runfcgi's own
defaults were min-spare 2, max-spare 5 (and up to 50 children or threads): give those to
replay 2010.

umask=0: the socket must be writable by nginx's workers, which may run as another user
(nginx answers 502 "Permission denied" otherwise).

Stopping: both stop on SIGTERM sent to their process group, as the launcher sends it
(0.5-1.2 s here). The prefork parent alone does not: its handler only sets a flag, and its
select() (restarted after signals since Python 3.5) wakes when a child exits; a SIGTERM to
the parent only left it running for an hour in a test by hand.
"""

from __future__ import annotations

import argparse


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--socket", required=True)
    parser.add_argument("--mode", choices=("prefork", "threaded"), required=True)
    parser.add_argument("--workers", type=int, default=1, help="prefork: most children")
    parser.add_argument("--threads", type=int, default=8, help="threaded: most threads")
    parser.add_argument("--min-spare", type=int, default=1)
    parser.add_argument("--max-spare", default="auto", help="a number, or auto: all of them")
    args = parser.parse_args()
    most = args.workers if args.mode == "prefork" else args.threads
    max_spare = most if args.max_spare == "auto" else int(args.max_spare)
    min_spare = min(args.min_spare, max_spare)

    from django_app import app  # after parsing: --help works without Django

    if args.mode == "prefork":
        from flup.server.fcgi_fork import WSGIServer

        server = WSGIServer(
            app,
            bindAddress=args.socket,
            umask=0,
            minSpare=min_spare,
            maxSpare=max_spare,
            maxChildren=most,
        )
    else:
        from flup.server.fcgi import WSGIServer

        server = WSGIServer(
            app,
            bindAddress=args.socket,
            umask=0,
            minSpare=min_spare,
            maxSpare=max_spare,
            maxThreads=most,
        )
    server.run()


if __name__ == "__main__":
    main()
