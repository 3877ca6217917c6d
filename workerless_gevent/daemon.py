"""The daemon's lifecycle: build the parts, signals, the background greenlets, the slots; stop warm, then cold."""

from __future__ import annotations

import ipaddress
import logging
import random
import signal
import time
import urllib.parse

import gevent
import gevent.event

from .aws.clients import Clients
from .config.model import Config, HttpTargetConfig
from .delivery.leases import Leases
from .delivery.ordering import STRATEGIES
from .delivery.outcomes import Settler
from .delivery.poller import Poller, QueueRow, QueueState, Work
from .delivery.slots import MessageRow, Slots
from .metrics import OVERALL, Registry
from .observability.backlog import watch_backlog
from .observability.cloudwatch import MetricsFlusher
from .observability.status import StatusServer
from .periodic.scheduler import build_scheduler
from .setup import Parts, build_parts, dead_letter_warnings
from .supervision import spawn_supervised

logger = logging.getLogger(__name__)

REPEATED_SIGNAL_SECONDS = 1.0  # a signal this soon after the first is a duplicate (Heroku sends them)


class Daemon:
    def __init__(self, config: Config, clients: Clients, registry: Registry, rng: random.Random) -> None:
        self.config = config
        self.registry = registry
        self.clients = clients
        self.parts: Parts = build_parts(config, clients, registry, rng)
        self.leases = Leases(self.parts.queues)
        self.settler = Settler(self.parts.queues, self.parts.dead_letter_queues, registry, self.leases,
                               finish=lambda work, failed_groups: self.poller.finish(work, failed_groups))
        self.stopping = gevent.event.Event()
        self.forced = gevent.event.Event()
        self.stopped = gevent.event.Event()
        self.stop_requested_at = 0.0
        states = [self.queue_state(queue.name) for queue in config.queues]
        self.poller = Poller(states, STRATEGIES[config.polling.strategy], batch_size=config.polling.batch_size,
                             poll_for_seconds=config.polling.poll_for, sleep_seconds=config.polling.sleep,
                             rng=rng, stopping=self.stopping, admit=self.settler.admit, count=registry.count)
        self.slots = Slots(config, self.parts, self.poller, self.settler, registry, self.stopping, self.request_stop)
        self.flusher = MetricsFlusher(clients.cloudwatch, config.name, config.metrics_interval, registry, rng)
        registry.track_gauge("InFlight", lambda: self.slots.in_flight_by_queue(self.parts.queues))
        registry.track_gauge("Utilization", lambda: {OVERALL: self.slots.utilization.average()})
        self.backlog = watch_backlog(config, clients.sqs, self.parts.queues, registry, rng)
        self.status_server = StatusServer(config.status_listen, self) if config.status_listen else None
        self.scheduler = build_scheduler(config, clients, self.parts.queues, rng)
        self.rng = rng
        self.background: list[gevent.Greenlet] = []

    def queue_state(self, name: str) -> QueueState:
        target = self.parts.targets[self.parts.queues[name].config.target]
        return QueueState(self.parts.queues[name], target.messages_per_delivery, target.pause.remaining_seconds)

    def request_stop(self, reason: str = "signal") -> None:
        """Signal handlers only set events; the loop does the stopping."""
        now = time.monotonic()
        if not self.stopping.is_set():
            self.stop_requested_at = now
            logger.info("stopping (%s): no new receives, waiting up to %ds for %d deliveries",
                        reason, self.config.shutdown_timeout, len(self.in_flight))
            self.stopping.set()
            self.poller.wake.set()
        elif now - self.stop_requested_at >= REPEATED_SIGNAL_SECONDS and not self.forced.is_set():
            logger.warning("second stop signal: not waiting for in-flight deliveries")
            self.forced.set()

    def run(self) -> int:
        started = time.monotonic()
        for signum in (signal.SIGTERM, signal.SIGINT):
            gevent.signal_handler(signum, self.request_stop, signal.Signals(signum).name)
        background = self.background = self.start_background()
        self.log_start()
        if self.status_server is not None:
            self.status_server.start()
            server = self.status_server
            background.append(spawn_supervised("status server", lambda: server.keep_serving(self.stopped),
                                               self.stopped, self.registry.count, self.rng))
        self.slots.dispatch()
        self.shut_down()
        self.stopped.set()
        gevent.joinall(background, timeout=3)
        if self.status_server is not None:
            self.status_server.stop()
        self.log_stop(time.monotonic() - started)
        return 0

    def start_background(self) -> list[gevent.Greenlet]:
        """The supervised loops beside the delivery slots: heartbeat, metrics, --drain, scheduler, backlog."""
        count, rng = self.registry.count, self.rng
        loops = [("heartbeat", lambda: self.leases.run(self.stopped), self.stopped),
                 ("metrics flusher", lambda: self.flusher.run(self.stopped), self.stopped)]
        if self.config.drain:
            loops.append(("drain watch", self.watch_for_drained, self.stopping))
        scheduler = self.scheduler
        if scheduler is not None:
            loops.append(("periodic scheduler", lambda: scheduler.run(self.stopping), self.stopping))
        backlog = self.backlog
        if backlog is not None:
            loops.append(("backlog", lambda: backlog.run(self.stopped), self.stopped))
        renew = self.clients.renew_credentials
        if renew is not None:
            loops.append(("credentials renewal", lambda: renew(self.stopped), self.stopped))
        return [spawn_supervised(name, loop, until, count, rng) for name, loop, until in loops]

    def are_loops_alive(self) -> bool:
        """Liveness: every supervised loop is still running (they end only when stopping)."""
        return self.stopping.is_set() or all(not greenlet.dead for greenlet in self.background)

    @property
    def in_flight(self) -> set[Work]:
        return self.slots.in_flight

    def queue_rows(self) -> list[QueueRow]:
        return self.poller.rows()

    def message_rows(self) -> list[MessageRow]:
        return self.slots.message_rows()

    def shut_down(self) -> None:
        """Release the buffer at once, give deliveries their grace period, then release the rest."""
        self.settler.release(self.poller.stop(cancel_watchers=bool(not self.in_flight)))
        self.flush_queues()
        waiter = gevent.spawn(self.slots.pool.join)
        gevent.wait([waiter, self.forced], count=1, timeout=self.config.shutdown_timeout)
        if self.in_flight:
            logger.warning("%d deliveries still running after the grace period; releasing them", len(self.in_flight))
            self.slots.pool.kill(block=True, timeout=2)
            for work in list(self.in_flight):
                self.settler.abandon(work)
        waiter.kill(block=False)
        self.settler.release(self.poller.stop())
        with gevent.Timeout(3, False):
            self.flush_queues()
        self.flusher.flush_final(timeout_seconds=2)

    def flush_queues(self) -> None:
        queues = list(self.parts.queues.values()) + list(self.parts.dead_letter_queues.values())
        gevent.joinall([gevent.spawn(queue.flush) for queue in queues])

    def watch_for_drained(self) -> None:
        """--drain: stop once every queue came back empty from a long poll and nothing is in flight."""
        while not self.stopping.wait(0.1):
            if not self.in_flight and self.poller.is_drained():
                self.request_stop("drained: every queue is empty")

    def log_start(self) -> None:
        config = self.config
        targets = ", ".join(f"{name}={getattr(t, 'url', None) or getattr(t, 'function', '')}"
                            for name, t in config.targets.items())
        logger.info("workerless started: queues=%s strategy=%s concurrency=%d targets=[%s]",
                    ",".join(f"{q.name}:{q.weight}" for q in config.queues), config.polling.strategy,
                    config.concurrency, targets)
        for warning in dead_letter_warnings(config, self.parts.queues):
            logger.warning("%s", warning)
        for target in config.targets.values():
            if isinstance(target, HttpTargetConfig) and not target.signing_secret and not is_loopback(target.url):
                logger.warning("target=%s posts to %s, which is not on loopback, without signing: "
                               "set signing_secret_env so the app can verify deliveries", target.name, target.url)

    def log_stop(self, seconds: float) -> None:
        total = self.registry.total
        logger.info("workerless stopped: delivered=%d failed=%d received=%d seconds=%.1f",
                    total("Succeeded"), total("Failed"), total("Received"), seconds)


def is_loopback(url: str) -> bool:
    host = urllib.parse.urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
