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

from tests.support.moto import build_client
from workerless_gevent.aws.clients import Clients, build_dynamodb_wire, build_lambda_wire, build_sqs_wire
from workerless_gevent.config.loading import load_config
from workerless_gevent.config.model import Config
from workerless_gevent.lifecycle.daemon import Daemon
from workerless_gevent.metrics import Registry

from .app import ExploreApp
from .schedule import MessageSpec, Schedule, Step
from .settings import config_file
from .sqs_model import REGION
from .sqs_server import SqsServer
from .store_proxy import StoreProxy

STOP_WAIT_SECONDS = 8.0  # past the stop's deadline: then the run ends its servers' stalls (it is reported)
END_WAIT_SECONDS = 10.0  # then for the daemon to end on its own, before its greenlet is killed
POINTER_CLASS = "software.amazon.payloadoffloading.PayloadS3Pointer"  # the AWS extended clients' S3 pointer


@dataclass(frozen=True)
class Names:
    queue: str
    redrive: str  # the dead-letter queue of the queue's redrive policy
    dead_letter: str  # the daemon's dead_letter_queue
    table: str
    extra: str  # the queue a reload adds by name (GetQueueUrl)
    bucket: str  # large payloads

    @classmethod
    def of(cls, schedule: Schedule) -> Names:
        prefix, fifo = schedule.prefix, ".fifo" if schedule.fifo else ""
        return cls(f"{prefix}-q{fifo}", f"{prefix}-redrive{fifo}", f"{prefix}-dlq{fifo}", f"{prefix}-idem",
                   f"{prefix}-extra{fifo}", f"{prefix}-payloads")


@dataclass(frozen=True)
class Moto:
    """The setup's clients on moto: each schedule's table and payload bucket are made and dropped with them."""
    url: str
    dynamodb: Any
    s3: Any


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
    changes: list[str] = field(default_factory=list)  # the reloads' changes so far, in the file now
    reloads: list[float] = field(default_factory=list)  # when each SIGHUP came
    stalls_ended: float = 0.0  # when the run ended its servers' stalls, the stop not having come
    problems: list[str] = field(default_factory=list)
    s3: Any = None  # moto's, to put the payloads
    moto_url: str = ""

    def body(self, spec: MessageSpec) -> str:
        document: dict[str, Any] = {"n": spec.serial}
        if spec.key is not None:
            document["order"] = {"id": spec.key}
        return json.dumps(document)

    def send(self, spec: MessageSpec) -> None:
        queue = self.sqs.model.queues[self.names.queue]
        body, attributes = self.body(spec), None
        if spec.payload:
            key = payload_key(spec.serial)
            if spec.payload == "s3":
                self.s3.put_object(Bucket=self.names.bucket, Key=key, Body=body.encode())
            attributes = {"ExtendedPayloadSize": {"DataType": "Number", "StringValue": str(len(body))}}
            body = json.dumps([POINTER_CLASS, {"s3BucketName": self.names.bucket, "s3Key": key}])
        self.sent[spec.serial] = self.sqs.model.send(queue, body, attributes, group=spec.group,
                                                     dedup=f"d{spec.serial}" if spec.group else None)


def payload_key(serial: int) -> str:
    """The S3 key of a message's payload; facts.py reads the serial back from a dead letter's pointer."""
    return f"payload-{serial}"


def build_daemon(run: Run, config: Config, path: Path) -> Daemon:
    """The daemon as `workerless run` builds it on the wire (commands/starting.py), aimed at our servers."""
    credentials = botocore.credentials.Credentials("testing", "testing")
    ca_bundle = get_cert_path(True)
    lambda_ = build_lambda_wire(config, REGION, run.app.url, credentials, ca_bundle) \
        if run.schedule.target == "lambda" else None
    s3 = build_client("s3", run.moto_url, max_pool_connections=config.concurrency + 10, connect_timeout=5,
                      read_timeout=20) if run.schedule.large_payloads else None
    clients = Clients(sqs=build_sqs_wire(config, REGION, run.sqs.url, credentials, ca_bundle), lambda_=lambda_,
                      cloudwatch=None, region=REGION, s3=s3,
                      idempotency=build_dynamodb_wire(config, REGION, run.store.url, credentials, ca_bundle))
    return Daemon(config, clients, Registry(), random.Random(run.schedule.seed),
                  functools.partial(load_config, str(path), {}, {}))


def prepare(schedule: Schedule, moto: Moto) -> Run:
    names = Names.of(schedule)
    run = Run(schedule, names, SqsServer(schedule.seed), StoreProxy(moto.url, schedule.seed),
              ExploreApp(schedule.seed), s3=moto.s3, moto_url=moto.url)
    run.store.start()
    model = run.sqs.model
    for name in (names.redrive, names.dead_letter, names.extra):
        model.create_queue(name)
    model.create_queue(names.queue, (names.redrive, schedule.max_receive_count) if schedule.max_receive_count else None)
    run.app.poison = {spec.serial for spec in schedule.messages if spec.poison}
    moto.dynamodb.create_table(TableName=names.table, KeySchema=[{"AttributeName": "slot", "KeyType": "HASH"}],
                               AttributeDefinitions=[{"AttributeName": "slot", "AttributeType": "S"}],
                               BillingMode="PAY_PER_REQUEST")
    if schedule.large_payloads:
        moto.s3.create_bucket(Bucket=names.bucket)
    for spec in schedule.messages:
        if not spec.send_at:
            run.send(spec)
    return run


def explore(schedule: Schedule, moto: Moto, directory: Path) -> Run:
    """One schedule from start to stop; servers stopped, the daemon's sockets closed, what they saw kept."""
    run = prepare(schedule, moto)
    try:
        path = config_file(run, directory)
        daemon = build_daemon(run, load_config(str(path), {}, {}), path)
        runner = gevent.spawn(serve, run, daemon)
        run.started, run.started_at = time.monotonic(), time.time()
        driver = gevent.spawn(drive, run, daemon, directory)
        runner.join(schedule.stop_at + schedule.shutdown_timeout + STOP_WAIT_SECONDS)
        if not runner.dead:  # a stop that waits on a stalled call: end the stalls, then wait for it some more
            run.stalls_ended = time.monotonic()
            for plan in (run.sqs.plan, run.store.plan, run.app.plan):
                plan.ended.set()
            runner.join(END_WAIT_SECONDS)
        if not runner.dead:
            run.problems.append(f"the daemon had not stopped {STOP_WAIT_SECONDS + END_WAIT_SECONDS:.0f}s past its "
                                f"stop's deadline ({END_WAIT_SECONDS:.0f}s after its stalled calls were ended)")
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
    """One step of the timeline. The control events call what the daemon's signal handlers call (SIGHUP:
    request_reload, SIGTERM: request_stop): many daemons share this process, and a signal would reach the last
    one's handler only."""
    plans = {"store": run.store.plan, "sqs": run.sqs.plan, "lambda": run.app.plan}
    if step.what == "app":
        run.app.mode = step.app_mode
    elif step.what in plans:
        plans[step.what].modes = list(step.modes)
    elif step.what == "send":
        run.send(specs[step.serial])
    elif step.what == "reload":
        run.changes.append(step.change)
        config_file(run, directory)
        run.reloads.append(time.monotonic())
        first = daemon.config
        daemon.request_reload()
        if step.change == "adds_key":
            gevent.spawn(watch_reload, run, daemon, first)
    elif step.what == "stop":
        run.stop_requested = time.monotonic()
        daemon.request_stop("explore")


def watch_reload(run: Run, daemon: Daemon, first: Config) -> None:
    while not run.stopped:
        if daemon.config is not first and daemon.config.idempotency is not None:
            run.reload_applied = time.monotonic()
            return
        gevent.sleep(0.01)


def close(daemon: Daemon) -> None:
    """Its connections, which would otherwise wait for the garbage collector."""
    for wire in (daemon.clients.sqs, daemon.clients.idempotency, daemon.clients.lambda_):
        if wire is not None and hasattr(wire, "close"):
            wire.close()
    for target in daemon.parts.targets.values():
        closer = getattr(target, "close", None)
        if closer is not None:
            closer()
