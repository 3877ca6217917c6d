"""SIGHUP: the configuration file read again and applied without dropping a delivery.

Unchanged queues keep running, buffers, watchers and all. A changed queue (its own keys, or its
target's) is taken out of the poller and drains: its buffer is released, its receives land, its
deliveries end; then it restarts with the new settings, as do the queues of a changed target. A new
queue starts at once (after the drain if its target is changing). A change of concurrency or
[polling] drains every queue, then the slots and the poller restart. A change to [idempotency] drains
every queue with a key (claims made under the running table end there), then the new table takes over,
made if missing as at start. A change that only a restart can apply, an invalid file, or a queue that
cannot be resolved refuses the whole reload in one ERROR line, and the running configuration stays."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection

import gevent
import gevent.event

from ..aws.clients import lambda_read_timeout
from ..config.changes import Changes, compare
from ..config.model import Config, LambdaTargetConfig
from ..errors import ConfigError, StartupError
from ..fleet.membership import fleet_limits
from ..idempotency.guard import Idempotency
from ..logs import configure_logging
from .assembly import (build_idempotency, build_target, connection_warnings, resolve_dead_letter_queue,
                       resolve_queue)
from .draining import DRAIN_CHECK_SECONDS
from .engine import Engine
from .stopping import KILL_SECONDS, StopDeadline
from .successors import Successors

logger = logging.getLogger(__name__)

TAKE_OVER_SECONDS = 5.0  # the running table's last `completed` writes, while it answers, before its successor


def run_reload(reload: Callable[[Callable[[], None]], None], stopping: gevent.event.Event,
               deadline: Callable[[], StopDeadline]) -> None:
    """One reload (`reload`, told when it starts `applying`), in a greenlet of its own so that a stop never waits
    for what it waits on (a queue to resolve, a target to build): a stop abandons a reload that has changed
    nothing yet, in one line, and one applying its changes ends at its next wait for queues to drain, at the
    latest at the stop's cut."""
    is_applying = gevent.event.Event()
    greenlet = gevent.spawn(reload, is_applying.set)
    gevent.wait([greenlet, stopping], count=1)
    if greenlet.dead:
        return
    if is_applying.is_set():
        greenlet.join(timeout=deadline().remaining(deadline().cut))
    greenlet.kill(block=True, timeout=deadline().remaining(cap=KILL_SECONDS))
    if is_applying.is_set():
        logger.warning("stop requested during a reload: the reload is abandoned; the queues it took out stop with "
                       "the others")
    else:
        logger.warning("stop requested during a reload: the reload is abandoned, the running configuration stays")


def reload_configuration(engine: Engine, running: Config, load: Callable[[], Config],
                         applying: Callable[[], None] = lambda: None) -> Config:
    """The configuration running afterwards: the loaded one, or `running` if the reload is refused. `applying`
    hears when it starts changing the running configuration (before that, abandoning it changes nothing)."""
    try:
        config = load()
    except ConfigError as error:
        logger.error("reload refused, the running configuration stays: %s", error.line())
        return running
    changes = compare(running, config)
    if changes.restart_only:  # never read and left unapplied: the whole file waits for the restart
        logger.error("reload refused, the running configuration stays: %s: %s changed, and only a restart applies "
                     "%s", config.source, ", ".join(changes.restart_only),
                     "it" if len(changes.restart_only) == 1 else "them")
        return running
    if changes.is_empty:
        logger.info("reload: %s has nothing to apply", config.source)
        return running
    if config.concurrency > engine.started_config.concurrency:
        logger.warning("reload: concurrency=%d is above the %d the SQS and Lambda connection pools were sized for "
                       "at start; deliveries may wait for a connection until a restart",
                       config.concurrency, engine.started_config.concurrency)
    try:
        successors = prepare(engine, config, changes)
    except StartupError as error:
        logger.error("reload refused, the running configuration stays: %s", error)
        return running
    applying()
    if {"log_format", "log_level"} & set(changes.settings):
        configure_logging(config.log_format, config.log_level)
    for warning in connection_warnings(config):
        logger.warning("reload: %s", warning)
    logger.info("reload: applying %s", changes.summary())
    if apply(engine, config, changes, successors):
        logger.info("reload applied: %s", changes.summary())
    return config


def prepare(engine: Engine, config: Config, changes: Changes) -> Successors:
    """New queues resolved, new targets and [idempotency] built, before anything drains; StartupError if one
    cannot be."""
    refuse_missing_clients(engine, config, changes)
    # Built now, not yet used: no claim is made in its table before the running one's claims have ended
    idempotency = build_idempotency(config, engine.clients, engine.registry, engine.rng, engine.stopping) \
        if changes.is_idempotency else None
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
    return Successors(queues, dead_letter_queues, targets, changes.is_idempotency, idempotency)


def refuse_missing_clients(engine: Engine, config: Config, changes: Changes) -> None:
    """StartupError for a change that needs what the daemon built at start only (a client, the fleet's leases)."""
    for name in changes.changed_targets:
        target = config.targets.get(name)
        if not isinstance(target, LambdaTargetConfig) or target.endpoint_url is not None:
            continue  # an endpoint_url target gets a client of its own, built with the target
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
    # Claims end in the table they were made in: a new [idempotency] takes over once the queues that claimed
    # (every queue with a key, retired) have drained, at once if none did; new queues with a key wait for it.
    is_claiming = successors.replaces_idempotency and any(state.queue.config.idempotency_key for state in retired)
    if successors.replaces_idempotency and not is_claiming:
        engine.use_idempotency(successors.idempotency)
    # What no draining queue uses starts at once: new queues on unchanged or new targets.
    later_targets = {name for name in changes.changed_targets if name in running_targets}
    now = [queue.name for queue in config.queues if queue.name in changes.added_queues
           and queue.target not in later_targets and not changes.is_global
           and not (is_claiming and queue.idempotency_key)]
    engine.replace(pick(successors, now, [name for name in successors.targets if name not in later_targets]))
    engine.install(config, now)
    if not retired:
        return True
    in_flight = sum(1 for work in list(engine.in_flight) if work.state in retired)
    logger.info("reload: draining %s (%d deliveries in flight) before restarting with the new configuration",
                ",".join(retiring), in_flight)
    if not engine.wait_for_drained(retired):
        return False
    if is_claiming and not take_over_claims(engine, successors.idempotency):
        return False
    later = [name for name in successors.queues if name not in now]
    engine.replace(pick(successors, later, later_targets))
    if changes.is_global:
        engine.restart_slots(config)
    configured = [queue.name for queue in config.queues]
    engine.install(config, [name for name in configured if name not in now and
                            (changes.is_global or name in retiring or name in later)])
    return True


def take_over_claims(engine: Engine, successor: Idempotency | None) -> bool:
    """With the queues that claimed drained, `successor` takes over. The running [idempotency]'s last successes
    get a few seconds to be written `completed` in its own table while it answers; those still on their way then
    go on beside the successor (their deletes wait for them, and the stop writes what is left), so that a failing
    table, the very one an operator moves off, holds no keyed queue back. False if stopping first."""
    running = engine.idempotency
    until = time.monotonic() + TAKE_OVER_SECONDS
    while running is not None and running.completions.left() and not running.health.failing_since \
            and time.monotonic() < until:
        if engine.stopping.wait(DRAIN_CHECK_SECONDS):
            return False
    if running is not None and running.completions.left():
        logger.info("reload: %d successes still being written to idempotency table %s: the new [idempotency] "
                    "takes over beside them", running.completions.left(), running.config.table)
    engine.use_idempotency(successor)
    return True


def pick(successors: Successors, queues: Collection[str], targets: Collection[str]) -> Successors:
    return Successors({name: successors.queues[name] for name in queues},
                      {name: queue for name, queue in successors.dead_letter_queues.items() if name in queues},
                      {name: successors.targets[name] for name in targets})
