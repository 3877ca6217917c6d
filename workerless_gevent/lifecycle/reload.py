"""SIGHUP: the configuration file read again and applied without dropping a delivery.

Unchanged queues keep running, buffers, watchers and all. A changed queue (its own keys, or its
target's) is taken out of the poller and drains: its buffer is released, its receives land, its
deliveries end; then it restarts with the new settings, as do the queues of a changed target. A new
queue starts at once (after the drain if its target is changing). A change of concurrency or
[polling] drains every queue, then the slots and the poller restart. Keys that only a restart
applies keep their running value and are named in a WARNING. An invalid file, or a queue that cannot
be resolved, is logged in one line and the running configuration stays."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection

from ..aws.clients import lambda_read_timeout
from ..config.changes import Changes, applicable, compare
from ..config.model import Config, LambdaTargetConfig
from ..errors import ConfigError, StartupError
from ..fleet.membership import fleet_limits
from ..logs import configure_logging
from .assembly import build_target, connection_warnings, resolve_dead_letter_queue, resolve_queue
from .engine import Engine, Successors

logger = logging.getLogger(__name__)


def reload_configuration(engine: Engine, running: Config, load: Callable[[], Config]) -> Config:
    """The configuration running afterwards: the loaded one (less restart-only keys), or `running`."""
    try:
        loaded = load()
    except ConfigError as error:
        logger.error("reload refused, the running configuration stays: %s", error.line())
        return running
    changes = compare(running, loaded)
    if changes.restart_only:
        logger.warning("reload: %s changed; only a restart applies that, the running value stays",
                       ", ".join(changes.restart_only))
    if changes.is_empty:
        logger.info("reload: %s has nothing %sto apply", loaded.source, "else " if changes.restart_only else "")
        return running
    config = applicable(running, loaded)
    if config.concurrency > engine.started_config.concurrency:
        logger.warning("reload: concurrency=%d is above the %d the SQS and Lambda connection pools were sized for "
                       "at start; deliveries may wait for a connection until a restart",
                       config.concurrency, engine.started_config.concurrency)
    try:
        successors = prepare(engine, config, changes)
    except StartupError as error:
        logger.error("reload refused, the running configuration stays: %s", error)
        return running
    if {"log_format", "log_level"} & set(changes.settings):
        configure_logging(config.log_format, config.log_level)
    for warning in connection_warnings(config):
        logger.warning("reload: %s", warning)
    logger.info("reload: applying %s", changes.summary())
    if apply(engine, config, changes, successors):
        logger.info("reload applied: %s", changes.summary())
    return config


def prepare(engine: Engine, config: Config, changes: Changes) -> Successors:
    """New queues resolved and new targets built, before anything drains; StartupError if one cannot be."""
    for name in changes.changed_targets:
        target = config.targets.get(name)
        if not isinstance(target, LambdaTargetConfig):
            continue
        if engine.clients.lambda_ is None:
            raise StartupError(f"targets.{name}: a Lambda target needs a restart (the daemon started without one)")
        # The Invoke's read timeout was set from the targets at start: a longer function would be cut off.
        longest = lambda_read_timeout(engine.started_config) - 10
        if target.timeout > longest:
            raise StartupError(f"targets.{name}.timeout: {target.timeout}s is above the {longest}s the Lambda client "
                               f"was built for at start; a restart applies it")
    if (config.fleet, fleet_limits(config)) != (engine.started_config.fleet, fleet_limits(engine.started_config)):
        raise StartupError("[fleet] and the fleet_* keys need a restart (this member's leases were taken for the "
                           "limits it started with)")
    for queue_config in config.queues:
        if queue_config.large_payloads and engine.clients.s3 is None:
            raise StartupError(f"queue {queue_config.name}: large_payloads needs a restart (the daemon started "
                               f"without an S3 client)")
    parts, clients = engine.parts, engine.clients
    queues = dict.fromkeys(changes.removed_queues, None)
    dead_letter_queues = {}
    for queue_config in config.queues:
        name = queue_config.name
        if name not in changes.added_queues and name not in changes.changed_queues:
            continue
        old = parts.queues.get(name)
        queue = old if old is not None and old.config == queue_config else resolve_queue(clients.sqs, queue_config,
                                                                                         engine.registry)
        queues[name] = queue
        if queue_config.dead_letter_queue:
            old_dead_letter = parts.dead_letter_queues.get(name)
            dead_letter_queues[name] = (old_dead_letter if old_dead_letter is not None
                                        and old_dead_letter.name == queue_config.dead_letter_queue
                                        else resolve_dead_letter_queue(clients.sqs, queue_config, engine.registry))
    targets = {name: (target, build_target(target, clients, engine.rng, engine.config.aws.ca_bundle)) if target is not None else None
               for name in changes.changed_targets for target in [config.targets.get(name)]}
    return Successors(queues, dead_letter_queues, targets)


def apply(engine: Engine, config: Config, changes: Changes, successors: Successors) -> bool:
    """False if the daemon started stopping while queues drained (its stop then finishes the job)."""
    engine.config = config
    if not changes.is_global:
        engine.slots.config = config  # --max-messages, read at each take; a global change gets new slots
    running_targets = {state.queue.config.target for state in engine.poller.states}
    if changes.is_global:
        retiring = [state.queue.name for state in engine.poller.states]
    else:
        retiring = [*changes.changed_queues, *changes.removed_queues]
    retired = engine.retire(retiring)
    # What no draining queue uses starts at once: new queues on unchanged or new targets.
    later_targets = {name for name in changes.changed_targets if name in running_targets}
    now = [queue.name for queue in config.queues if queue.name in changes.added_queues
           and queue.target not in later_targets and not changes.is_global]
    engine.replace(pick(successors, now, [name for name in successors.targets if name not in later_targets]))
    engine.install(config, now)
    if not retired:
        return True
    in_flight = sum(1 for work in list(engine.in_flight) if work.state in retired)
    logger.info("reload: draining %s (%d deliveries in flight) before restarting with the new configuration",
                ",".join(retiring), in_flight)
    if not engine.wait_for_drained(retired):
        return False
    later = [name for name in successors.queues if name not in now]
    engine.replace(pick(successors, later, later_targets))
    if changes.is_global:
        engine.restart_slots(config)
    configured = [queue.name for queue in config.queues]
    engine.install(config, [name for name in configured if name not in now and
                            (changes.is_global or name in retiring or name in later)])
    return True


def pick(successors: Successors, queues: Collection[str], targets: Collection[str]) -> Successors:
    return Successors({name: successors.queues[name] for name in queues},
                      {name: queue for name, queue in successors.dead_letter_queues.items() if name in queues},
                      {name: successors.targets[name] for name in targets})
