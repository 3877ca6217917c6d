"""What a configuration re-read on SIGHUP changes against the running one, and which of those changes no
reload can apply (a change to any of them refuses the whole reload: a restart applies it)."""

from __future__ import annotations

from dataclasses import dataclass

from .model import Config

# field -> how the logs name it. Built once per process: the CloudWatch client and its namespace, the metrics
# flusher, the status socket, the clients of [aws], the periodic scheduler and its claims, the tracer, --drain's
# watch. ([fleet] and the fleet_* keys are refused too, where the leases are known: lifecycle/reload.py.)
RESTART_ONLY = {
    "name": "name",
    "metrics_interval": "[metrics] interval",
    "status_listen": "[status] listen",
    "aws": "[aws]",
    "periodic": "[periodic]",
    "tracing": "[tracing]",
    "drain": "drain",
}
SETTINGS = ("shutdown_timeout", "log_format", "log_level", "max_messages", "unready_after")  # applied at once


@dataclass(frozen=True, slots=True)
class Changes:
    restart_only: tuple[str, ...] = ()  # as RESTART_ONLY names them: the reload is refused
    settings: tuple[str, ...] = ()
    is_global: bool = False  # concurrency or [polling]: every queue drains, then the slots restart
    added_queues: tuple[str, ...] = ()
    removed_queues: tuple[str, ...] = ()
    changed_queues: tuple[str, ...] = ()  # its own keys or its target's changed: drained, then restarted
    changed_targets: tuple[str, ...] = ()  # added, removed or changed
    is_reordered: bool = False  # the same queues in another priority order
    # [idempotency] added, removed or changed (as the first idempotency_key adds its defaults): every queue with
    # a key drains (its claims end in the table they were made in), then claims in the new one
    is_idempotency: bool = False

    @property
    def is_empty(self) -> bool:
        return not (self.settings or self.is_global or self.added_queues or self.removed_queues
                    or self.changed_queues or self.changed_targets or self.is_reordered or self.is_idempotency)

    def summary(self) -> str:
        parts = [f"{label}={','.join(names)}" for label, names in (
            ("added", self.added_queues), ("restarted", self.changed_queues), ("removed", self.removed_queues),
            ("targets", self.changed_targets), ("settings", self.settings)) if names]
        if self.is_global:
            parts.insert(0, "every queue restarted (concurrency or [polling] changed)")
        if self.is_reordered:
            parts.append("queue order changed")
        if self.is_idempotency:
            parts.append("[idempotency] changed")
        return " ".join(parts) or "nothing"


def compare(running: Config, loaded: Config) -> Changes:
    running_queues = {queue.name: queue for queue in running.queues}
    loaded_queues = {queue.name: queue for queue in loaded.queues}
    changed_targets = tuple(name for name in dict.fromkeys([*running.targets, *loaded.targets])
                            if running.targets.get(name) != loaded.targets.get(name))
    is_idempotency = running.idempotency != loaded.idempotency
    changed_queues = tuple(name for name, queue in loaded_queues.items() if name in running_queues
                           and (queue != running_queues[name] or queue.target in changed_targets
                                or is_idempotency and bool(queue.idempotency_key)))
    kept = [name for name in running_queues if name in loaded_queues]
    return Changes(
        restart_only=tuple(label for key, label in RESTART_ONLY.items()
                           if getattr(running, key) != getattr(loaded, key)),
        settings=tuple(key for key in SETTINGS if getattr(running, key) != getattr(loaded, key)),
        is_global=running.concurrency != loaded.concurrency or running.polling != loaded.polling,
        added_queues=tuple(name for name in loaded_queues if name not in running_queues),
        removed_queues=tuple(name for name in running_queues if name not in loaded_queues),
        changed_queues=changed_queues,
        changed_targets=changed_targets,
        is_reordered=kept != [name for name in loaded_queues if name in running_queues],
        is_idempotency=is_idempotency,
    )
