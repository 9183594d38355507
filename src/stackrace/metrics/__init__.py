"""A race's live figures in the OpenMetrics text format, served for Prometheus (`--metrics`).

`figures.py` turns the engine's snapshots (and the stacks' resource samples) into
counters, gauges and a latency histogram per target and writes the exposition;
`exporter.py` follows an engine or a race core and serves that text over HTTP on
127.0.0.1 (another address only with `--metrics-remote`). `stackrace load`, `bench` and
the app take `--metrics [HOST:]PORT` (commands/metrics_args.py reads them into a
`MetricsOptions`).

Names follow Prometheus' conventions (base units, `_total` counters) with the label
`target` (a stack name, or the URL of `stackrace load`):

    stackrace_requests_sent_total            counter  requests put in play
    stackrace_responses_total{code}          counter  complete responses (code: 2xx, or
                                                      the status from 300 up)
    stackrace_request_failures_total{kind}   counter  failures by the engine's kinds
    stackrace_response_bytes_total           counter  bytes read, headers included
    stackrace_request_duration_seconds       histogram  latency (rate mode: from when the
                                                      request was due)
    stackrace_requests_waiting               gauge    sent, no answer yet
    stackrace_requests_in_flight             gauge    time-average over the last interval
    stackrace_connections                    gauge    open connections
    stackrace_connections_wanted             gauge    connections asked for
    stackrace_rate_wanted_requests_per_second gauge   the constant rate asked for (rate mode)
    stackrace_engine_cpu_ratio               gauge    the target's engine processes, cores
    stackrace_engine_saturated               gauge    1: an engine process near 100 %
    stackrace_stack_resident_memory_bytes    gauge    the stack's process tree: RSS
    stackrace_stack_unique_memory_bytes      gauge    USS (pages no other process shares)
    stackrace_stack_cpu_ratio                gauge    the stack's CPU, in cores
    stackrace_stack_processes                gauge    processes in the stack's tree
    stackrace_build_info{version}            info

No Textual here, and nothing of the race package: the race core is handed in by the
front end that made it (duck-typed), so this sits beside report/ in the layers.
"""
