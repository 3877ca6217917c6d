"""Run one schedule: the SQS model, the DynamoDB proxy in front of moto and the app on 127.0.0.1, the daemon in
this process (`lifecycle.daemon.Daemon.run`, the receive -> deliver -> settle path as `workerless run` builds
it, on the same wires), the schedule's timeline applied as it runs, then the stop (the daemon's own stop
request, what SIGTERM calls). What every part saw is kept in the `Run` for the invariants."""

from __future__ import annotations

import functools
import gc
import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import botocore.credentials
import gevent
from botocore.httpsession import get_cert_path

from tests.support.config_file import build_config_file
from workerless_gevent.aws.clients import Clients, build_dynamodb_wire, build_sqs_wire
from workerless_gevent.config.loading import load_config
from workerless_gevent.config.model import Config
from workerless_gevent.lifecycle.daemon import Daemon
from workerless_gevent.metrics import Registry

from .app import ExploreApp
from .schedule import MessageSpec, Schedule, Step
from .sqs_model import REGION
from .sqs_server import SqsServer
from .store_proxy import StoreProxy

STOP_WAIT_SECONDS = 30.0  # past the stop's deadline: a stop that never ends is reported, not waited on forever
EXPIRES_AFTER = 600


@dataclass(frozen=True)
class Names:
    queue: str
    redrive: str  # the dead-letter queue of the queue's redrive policy
    dead_letter: str  # the daemon's dead_letter_queue
    table: str

    @classmethod
    def of(cls, schedule: Schedule) -> Names:
        prefix, fifo = f"x{schedule.seed}", ".fifo" if schedule.fifo else ""
        return cls(f"{prefix}-q{fifo}", f"{prefix}-redrive{fifo}", f"{prefix}-dlq{fifo}", f"{prefix}-idem")


@dataclass
class Run:
    schedule: Schedule
    names: Names
    sqs: SqsServer
    store: StoreProxy
    app: ExploreApp
    sent: dict[int, str] = field(default_factory=dict)  # serial -> message id
    started: float = 0.0  # time.monotonic() at the daemon's start
    started_at: float = 0.0  # time.time() then, for log lines
    stop_requested: float = 0.0
    stopped: float = 0.0
    reload_applied: float = 0.0  # when the daemon's configuration became the keyed one (0: never)
    problems: list[str] = field(default_factory=list)

    def body(self, spec: MessageSpec) -> str:
        document: dict[str, Any] = {"n": spec.serial}
        if spec.key is not None:
            document["order"] = {"id": spec.key}
        return json.dumps(document)

    def send(self, spec: MessageSpec) -> None:
        queue = self.sqs.model.queues[self.names.queue]
        self.sent[spec.serial] = self.sqs.model.send(queue, self.body(spec), group=spec.group,
                                                     dedup=f"d{spec.serial}" if spec.group else None)


def config_file(run: Run, directory: Path, keyed: bool) -> Path:
    schedule, names = run.schedule, run.names
    queue: dict[str, Any] = {"name": names.queue, "url": run.sqs.model.queues[names.queue].url,
                             "visibility_timeout": schedule.visibility_timeout,
                             "error_visibility_timeout": schedule.error_visibility_timeout,
                             "max_retries": schedule.max_retries,
                             "dead_letter_queue": names.dead_letter if schedule.dead_letter_queue else None,
                             "idempotency_key": schedule.key if keyed else None}
    tables = {"idempotency": {"table": names.table, "expires_after": EXPIRES_AFTER,
                              "on_store_failure": schedule.on_store_failure}} if keyed else {}
    return build_config_file(directory, queues=[queue], polling={"poll_for": 1, "batch_size": schedule.batch_size},
                             targets={"default": {"type": "http", "url": run.app.url, "connect_timeout": 1,
                                                  "inactivity_timeout": 1}},
                             tables=tables, concurrency=schedule.concurrency,
                             shutdown_timeout=schedule.shutdown_timeout)


def build_daemon(run: Run, config: Config, path: Path) -> Daemon:
    """The daemon as `workerless run` builds it on the wire (commands/starting.py), aimed at our servers."""
    credentials = botocore.credentials.Credentials("testing", "testing")
    ca_bundle = get_cert_path(True)
    clients = Clients(sqs=build_sqs_wire(config, REGION, run.sqs.url, credentials, ca_bundle), lambda_=None,
                      cloudwatch=None, region=REGION,
                      idempotency=build_dynamodb_wire(config, REGION, run.store.url, credentials, ca_bundle))
    return Daemon(config, clients, Registry(), random.Random(run.schedule.seed),
                  functools.partial(load_config, str(path), {}, {}))


def prepare(schedule: Schedule, moto_url: str, dynamodb: Any) -> Run:
    names = Names.of(schedule)
    run = Run(schedule, names, SqsServer(schedule.seed), StoreProxy(moto_url, schedule.seed), ExploreApp())
    run.store.start()
    model = run.sqs.model
    for name in (names.redrive, names.dead_letter):
        model.create_queue(name)
    model.create_queue(names.queue, (names.redrive, schedule.max_receive_count) if schedule.max_receive_count else None)
    run.app.poison = {spec.serial for spec in schedule.messages if spec.poison}
    dynamodb.create_table(TableName=names.table, KeySchema=[{"AttributeName": "slot", "KeyType": "HASH"}],
                          AttributeDefinitions=[{"AttributeName": "slot", "AttributeType": "S"}],
                          BillingMode="PAY_PER_REQUEST")
    for spec in schedule.messages:
        if not spec.send_at:
            run.send(spec)
    return run


def explore(schedule: Schedule, moto_url: str, dynamodb: Any, directory: Path) -> Run:
    """One schedule from start to stop; servers stopped, the daemon's sockets closed, what they saw kept."""
    run = prepare(schedule, moto_url, dynamodb)
    try:
        path = config_file(run, directory, keyed=schedule.is_keyed and not schedule.reload_adds_key)
        daemon = build_daemon(run, load_config(str(path), {}, {}), path)
        runner = gevent.spawn(serve, run, daemon)
        run.started, run.started_at = time.monotonic(), time.time()
        driver = gevent.spawn(drive, run, daemon, directory)
        runner.join(schedule.stop_at + schedule.shutdown_timeout + STOP_WAIT_SECONDS)
        if not runner.dead:
            run.problems.append(f"the daemon had not stopped {STOP_WAIT_SECONDS:.0f}s past its stop's deadline")
            runner.kill(block=True, timeout=5)
        driver.kill(block=True, timeout=5)
        close(daemon)
    finally:
        for server in (run.app, run.sqs, run.store):
            server.stop()
        gc.unfreeze()  # Daemon.run froze what it built: let it go with the rest of this run
    return run


def serve(run: Run, daemon: Daemon) -> None:
    try:
        daemon.run()
    except Exception as error:  # reported as a finding, not raised into the pool
        run.problems.append(f"Daemon.run raised {type(error).__name__}: {error}")
    finally:
        run.stopped = time.monotonic()


def drive(run: Run, daemon: Daemon, directory: Path) -> None:
    specs = {spec.serial: spec for spec in run.schedule.messages}
    for step in run.schedule.timeline:
        gevent.sleep(max(0.0, run.started + step.at - time.monotonic()))
        apply(run, daemon, step, specs, directory)


def apply(run: Run, daemon: Daemon, step: Step, specs: dict[int, MessageSpec], directory: Path) -> None:
    if step.what == "app":
        run.app.mode = step.app_mode
    elif step.what == "store":
        run.store.plan.modes = list(step.modes)
    elif step.what == "sqs":
        run.sqs.plan.modes = list(step.modes)
    elif step.what == "send":
        run.send(specs[step.serial])
    elif step.what == "reload":
        config_file(run, directory, keyed=True)
        first = daemon.config
        daemon.request_reload()
        gevent.spawn(watch_reload, run, daemon, first)
    elif step.what == "stop":
        run.stop_requested = time.monotonic()
        daemon.request_stop("explore")


def watch_reload(run: Run, daemon: Daemon, first: Config) -> None:
    while not run.stopped:
        if daemon.config is not first:
            run.reload_applied = time.monotonic()
            return
        gevent.sleep(0.01)


def close(daemon: Daemon) -> None:
    """Its connections, which would otherwise wait for the garbage collector."""
    for wire in (daemon.clients.sqs, daemon.clients.idempotency):
        if wire is not None:
            wire.close()
    for target in daemon.parts.targets.values():
        closer = getattr(target, "close", None)
        if closer is not None:
            closer()
