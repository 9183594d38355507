"""Beyond one machine: engine processes on load nodes, stacks on an app node, on Ray.

    stackrace load  --cluster HEAD:6379 URL          engine processes on the load nodes
    stackrace bench --cluster HEAD:6379 --stacks …   and the stacks on the app node
    stackrace       --cluster HEAD:6379              the app, the same way

Ray gives what a cluster needs — membership, placement on named nodes, failure
detection, shipping calls to processes on other hosts — so stackrace adds no cluster
software of its own. What crosses the network is the engine's channel: commands one way,
an interval report every 250 ms per engine process the other way; never per-request data.

Modules:
  placement.py     cluster.toml and flags → which node reference takes which role
  nodes.py         the live nodes; references resolved to node ids (fails fast)
  run.py           ClusterRun: connect, build the Engine and the launcher, close
  load_role.py     RayLink (an EngineLink to a remote engine process), ClusterEngine
  engine_actor.py  EngineHost: the actor that runs `python -m stackrace.engine.worker`
  app_role.py      RemoteLauncher & co.: the stacks on the app node, for bench and the app
  app_actor.py     AppHost (wraps stacks.launcher.Launcher + samplers), DbHost (MariaDB)
  hostinfo.py      what a node runs (Python, stackrace, engine protocol), checked
  flags.py         --cluster, --placement, --load-node, --app-node, --db-node
  errors.py        ClusterError, RayMissing, PlacementError

Only the commands (and cli.py) import this package (import-linter), and only when
`--cluster` is given does anything here import Ray.
"""
