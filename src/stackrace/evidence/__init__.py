"""Why a stack broke: an evidence window captured at a breaking point (its workers'
stacks sampled, the kernel's view of its processes and its accept queue, its own status
page) and the data a cause is named from (stackrace.rules.cause)."""
