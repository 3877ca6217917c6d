"""The daemon's lifecycle: build the parts, signals (SIGHUP reloads, `reload.py`), the background greenlets,
the delivery side (`engine.py`); stop warm, then cold."""

from __future__ import annotations

import logging
import random
import signal
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import gevent
import gevent.event

from ..aws.clients import Clients
from ..config.model import Config, HttpTargetConfig
from ..delivery.poller import Poller, Work
from ..delivery.queue_state import QueueRow
from ..delivery.slots import MessageRow, Slots
from ..fleet.membership import FleetRow
from ..metrics import OVERALL, Registry
from ..rules import is_loopback_url
from ..observability.backlog import watch_backlog
from ..observability.cloudwatch import MetricsFlusher
from ..observability.snapshot import TargetRow
from ..observability.status import StatusServer
from ..periodic.scheduler import build_scheduler
from ..supervision import spawn_supervised
from . import hangup
from .assembly import Parts, config_warnings
from .runtime import settle_runtime
from .engine import Engine
from .reload import reload_configuration, run_reload
from .stopping import BACKGROUND_JOIN_SECONDS, Stop, StopDeadline

if TYPE_CHECKING:
    from ..tracing.setup import TracingParts

logger = logging.getLogger(__name__)

REPEATED_SIGNAL_SECONDS = 1.0  # a signal this soon after the first is a duplicate (Heroku sends them)
STATUS_STOP_SECONDS = 1.0  # for the status server's requests on their way to end


class Daemon:
    def __init__(self, config: Config, clients: Clients, registry: Registry, rng: random.Random,
                 load_config: Callable[[], Config] | None = None) -> None:
        self.config = config
        self.registry = registry
        self.clients = clients
        self.load_config = load_config  # reads the configuration file again, for SIGHUP
        self.stopping = gevent.event.Event()
        self.forced = gevent.event.Event()
        self.stopped = gevent.event.Event()
        self.reload_requested = gevent.event.Event()
        self.stop_requested_at = 0.0
        self.deadline = StopDeadline(0.0, config.shutdown_timeout)  # set again by the first stop signal
        self.stop: Stop | None = None
        self.tracing = build_tracing(config, registry.count) if config.tracing is not None else None
        self.engine = Engine(config, clients, registry, rng, self.stopping, self.request_stop,
                             self.tracing.tracing if self.tracing is not None else None)
        self.flusher = MetricsFlusher(clients.cloudwatch, config.name, config.metrics_interval, registry, rng)
        registry.track_gauge("InFlight", lambda: self.slots.in_flight_by_queue(self.parts.queues))
        registry.track_gauge("TargetLimit", self.engine.target_limits)
        registry.track_gauge("Utilization", lambda: {OVERALL: self.slots.utilization.average()})
        registry.track_gauge("FleetShare", self.engine.fleet.shares)
        self.backlog = watch_backlog(config, clients.sqs, self.parts.queues, registry, rng)
        self.status_server = StatusServer(config.status_listen, self) if config.status_listen else None
        self.scheduler = build_scheduler(config, clients, self.parts.queues, rng)
        self.rng = rng
        self.background: list[gevent.Greenlet] = []

    @property
    def parts(self) -> Parts:
        return self.engine.parts

    @property
    def poller(self) -> Poller:
        return self.engine.poller

    @property
    def slots(self) -> Slots:
        return self.engine.slots

    def request_stop(self, reason: str = "signal") -> None:
        """Signal handlers only set events; the loop does the stopping."""
        now = time.monotonic()
        if not self.stopping.is_set():
            self.stop_requested_at = now
            self.deadline = deadline = StopDeadline(now, self.config.shutdown_timeout)
            logger.info("stopping (%s): no new receives, waiting up to %.1fs for %d deliveries; the stop ends within "
                        "%ds", reason, deadline.cut - now, len(self.in_flight), self.config.shutdown_timeout)
            self.stopping.set()
            self.poller.wake.set()
        elif now - self.stop_requested_at >= REPEATED_SIGNAL_SECONDS and not self.forced.is_set():
            logger.warning("second stop signal: not waiting for in-flight deliveries or receives on their way")
            self.deadline.force(now)
            self.forced.set()

    def request_reload(self) -> None:
        """SIGHUP; the loop re-reads the file. Several before it gets to it make one reload."""
        if self.stopping.is_set():
            logger.info("SIGHUP while stopping: not reloading")
            return
        self.reload_requested.set()

    def run(self) -> int:
        started = time.monotonic()
        for signum in (signal.SIGTERM, signal.SIGINT):
            gevent.signal_handler(signum, self.request_stop, signal.Signals(signum).name)
        gevent.signal_handler(signal.SIGHUP, self.request_reload)
        if hangup.held():
            logger.info("SIGHUP while starting: reading the configuration again now")
            self.request_reload()
        background = self.background = self.start_background()
        self.log_start()
        if self.status_server is not None:
            self.status_server.start()
            server = self.status_server
            background.append(spawn_supervised("status server", lambda: server.keep_serving(self.stopped),
                                               self.stopped, self.registry.count, self.rng))
        settle_runtime()
        self.engine.start()
        while not self.stopping.is_set():
            gevent.wait([self.stopping, self.reload_requested], count=1)
            if self.reload_requested.is_set() and not self.stopping.is_set():
                self.reload_requested.clear()
                run_reload(self.reload, self.stopping, lambda: self.deadline)
        self.shut_down()
        self.stopped.set()
        gevent.joinall(background, timeout=self.deadline.remaining(cap=BACKGROUND_JOIN_SECONDS))
        if self.status_server is not None:
            with gevent.Timeout(self.deadline.remaining(cap=STATUS_STOP_SECONDS), False):  # its listener closes first
                self.status_server.stop()
        self.log_stop(time.monotonic() - started)
        return 0

    def reload(self, applying: Callable[[], None]) -> None:
        if self.load_config is None:
            logger.info("SIGHUP: this daemon has no configuration to read again")
            return
        logger.info("SIGHUP: reading %s again", self.config.source)
        try:
            self.config = reload_configuration(self.engine, self.config, self.load_config, applying)
        except Exception:  # a bug in the reload must not take the deliveries in flight down with it
            self.registry.count(OVERALL, "InternalErrors")
            logger.error("reload failed unexpectedly; queues it took out may stay unserved until a restart",
                         exc_info=True)

    def start_background(self) -> list[gevent.Greenlet]:
        """The supervised loops beside the delivery slots: heartbeat, metrics, --drain, scheduler, backlog."""
        count, rng = self.registry.count, self.rng
        leases = self.engine.leases
        loops = [("heartbeat", lambda: leases.run(self.stopped), self.stopped),
                 ("metrics flusher", lambda: self.flusher.run(self.stopped), self.stopped)]
        if self.config.drain:
            loops.append(("drain watch", self.watch_for_drained, self.stopping))
        scheduler = self.scheduler
        if scheduler is not None:
            loops.append(("periodic scheduler", lambda: scheduler.run(self.stopping), self.stopping))
        backlog = self.backlog
        if backlog is not None:
            loops.append(("backlog", lambda: backlog.run(self.stopped), self.stopped))
        if self.tracing is not None:
            buffer = self.tracing.buffer
            loops.append(("span export", lambda: buffer.run(self.stopped), self.stopped))
        renew = self.clients.renew_credentials
        if renew is not None:
            loops.append(("credentials renewal", lambda: renew(self.stopped), self.stopped))
        loops.extend((name, loop, self.stopped) for name, loop in self.engine.fleet.loops(self.stopped))
        return [spawn_supervised(name, loop, until, count, rng) for name, loop, until in loops]

    def are_loops_alive(self) -> bool:
        """Liveness: every supervised loop is still running (they end only when stopping)."""
        loops = self.background + self.engine.loops()
        return self.stopping.is_set() or all(not greenlet.dead for greenlet in loops)

    @property
    def in_flight(self) -> set[Work]:
        return self.engine.in_flight

    def queue_rows(self) -> list[QueueRow]:
        return self.engine.queue_rows()

    def message_rows(self) -> list[MessageRow]:
        return self.slots.message_rows()

    def target_rows(self) -> list[TargetRow]:
        return self.engine.target_rows()

    def fleet_rows(self) -> list[FleetRow]:
        return self.engine.fleet.rows()

    def shut_down(self) -> None:
        """The stop's steps (`stopping.Stop`), within the deadline the first stop signal set."""
        flushes = [self.flusher.flush_final]
        if self.tracing is not None:  # the last deliveries' spans
            flushes.append(self.tracing.buffer.flush_final)
        self.stop = Stop(self.engine, self.deadline, self.forced, flushes)
        self.stop.run()

    def watch_for_drained(self) -> None:
        """--drain: stop once every queue came back empty from a long poll and nothing is in flight (claims
        retried in place count: their messages are the daemon's while the queue looks empty)."""
        while not self.stopping.wait(0.1):
            idempotency = self.engine.idempotency
            if idempotency is not None and idempotency.is_retrying():
                continue
            if not self.in_flight and not self.engine.draining and self.poller.is_drained():
                self.request_stop("drained: every queue is empty")

    def log_start(self) -> None:
        config = self.config
        targets = ", ".join(f"{name}={getattr(t, 'url', None) or getattr(t, 'function', '')}"
                            for name, t in config.targets.items())
        logger.info("workerless started: queues=%s strategy=%s concurrency=%d targets=[%s]",
                    ",".join(f"{q.name}:{q.weight}" for q in config.queues), config.polling.strategy,
                    config.concurrency, targets)
        for warning in config_warnings(config, self.parts.queues):
            logger.warning("%s", warning)
        for target in config.targets.values():
            if isinstance(target, HttpTargetConfig) and not is_loopback_url(target.url) and not is_authenticated(target):
                logger.warning("target=%s posts to %s, which is not on loopback, without signing or an Authorization "
                               "header: set signing_secret_env (or headers) so the app can verify deliveries",
                               target.name, target.url)

    def log_stop(self, seconds: float) -> None:
        total = self.registry.total
        logger.info("workerless stopped: delivered=%d failed=%d received=%d seconds=%.1f released=%d",
                    total("Succeeded"), total("Failed"), total("Received"), seconds,
                    self.stop.released if self.stop is not None else 0)


def is_authenticated(target: HttpTargetConfig) -> bool:
    """The app can tell our POSTs from others: they are signed, or carry an Authorization header."""
    return bool(target.signing_secret) or any(name.lower() == "authorization" for name in target.headers)


def build_tracing(config: Config, count: Callable[[str, str, int], None]) -> TracingParts:
    from ..tracing.setup import build_tracing as build  # OpenTelemetry is imported only with [tracing]

    return build(config, count)
