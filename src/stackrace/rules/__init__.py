"""The judgments: what one level of one stack was, decided once for every front end.

Pure logic (no I/O, no Textual): the live app, a replay, bench, the summaries and the
exports all hand their figures to the same functions and show what comes back, so a
pane, its table row and a bench summary cannot tell two stories of one level.

- `rules.level`: the state of a level (keeping up, queueing, starving, failing,
  wedged, limited by the engine or by a shared core, …) from its own evidence, and the
  breaking point of a series of levels;
- `rules.engine`: whether the engine, not the server, limited a window's figures;
- `rules.cores`: whether a stack used its CPU up, or only waited for a core another
  stack or another process held, and whether the cores several stacks share were full;
- `rules.steadiness`: whether one capacity probe's own intervals agree (a server whose
  speed follows the wall clock, not the load, is unstable whatever its neighbours say);
- `rules.confidence`: intervals from independent rounds, and the ranking they allow;
- `rules.summaries`: what a summary says of a stack (its break and its tail, or how far
  it kept up);
- the evidence they read: `rules.breaking` (one level's figures), `rules.level_log` (the
  level log and the ramp), `rules.accounting` (Little's law), `rules.warmup` (a JIT
  still climbing), `rules.wedge` (a stall and what the kernel saw).
"""
