"""The operator's commands beside the daemon: `stats` (queue depths) and `redrive` (a dead-letter queue back)."""
