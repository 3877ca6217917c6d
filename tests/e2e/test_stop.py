"""Real signals to the real daemon: warm stop, cold stop, grace period, duplicate signals; a stop hides
nothing (long polls on their way end on their own, and what they bring is released as it lands)."""

from __future__ import annotations

import json
import re
import signal
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable

import gevent.event

from tests.e2e.helpers import send_batch
from tests.support import (
    CountingProxy,
    Daemon,
    HttpApp,
    ProxiedRequest,
    Queue,
    RecordedRequest,
    build_config_file,
    count_messages,
    count_visible,
    drain_bodies,
    status_url,
    wait_until,
)
from tests.support.http_app import Reply

HIDDEN_SECONDS = 300  # what a message handed to an abandoned receive would stay hidden for


def one_queue_config(tmp_path: Path, app: HttpApp, queue: Queue, shutdown_timeout: int, poll_for: int = 20) -> Path:
    return build_config_file(tmp_path, concurrency=1, shutdown_timeout=shutdown_timeout,
                             polling={"poll_for": poll_for}, queues=[{"name": queue.name}],
                             targets={"default": {"type": "http", "url": f"{app.url}/work"}})


def stop_config(tmp_path: Path, app: HttpApp, queues: list[Queue], poll_for: int, shutdown_timeout: int = 10,
                concurrency: int = 1, path: str = "/work") -> Path:
    """Queues whose messages a receive hides for minutes: one hidden by the stop could not go unnoticed."""
    return build_config_file(tmp_path, concurrency=concurrency, shutdown_timeout=shutdown_timeout,
                             polling={"poll_for": poll_for},
                             queues=[{"name": queue.name, "visibility_timeout": HIDDEN_SECONDS} for queue in queues],
                             targets={"default": {"type": "http", "url": f"{app.url}{path}"}})


def long_poll_on(proxy: CountingProxy, queue: Queue, poll_for: int, timeout: float = 60) -> ProxiedRequest:
    """Wait until a long poll of `queue` is on its way (the daemon watches it, idle); return it."""
    def pending() -> ProxiedRequest | None:
        return next((request for request in proxy.pending("ReceiveMessage")
                     if request.params.get("QueueUrl", "").endswith("/" + queue.name)
                     and request.params.get("WaitTimeSeconds") == poll_for), None)
    poll = wait_until(pending, timeout, message=lambda: f"no long poll of {queue.name}: {proxy.actions()}")
    assert poll is not None
    return poll


def stop_line(proc: Daemon) -> str:
    (line,) = [line for line in proc.output().splitlines() if "workerless stopped:" in line]
    return line


def hold_deliveries(app: HttpApp) -> gevent.event.Event:
    """Every delivery waits (60 s at most) until the returned event is set."""
    done = gevent.event.Event()

    def respond(request: RecordedRequest) -> Reply:
        done.wait(60)
        return 200, {}, b""
    app.respond = respond
    return done


def start_with_one_in_flight(daemon: Callable[..., Daemon], env: dict[str, str], app: HttpApp,
                             sqs: Any, queue: Queue, tmp_path: Path, shutdown_timeout: int,
                             messages: int) -> tuple[Daemon, list[str]]:
    """Daemon at concurrency 1 with `messages` on its queue: one delivery running, the rest buffered."""
    bodies = [f"message-{i}" for i in range(messages)]
    send_batch(sqs, queue.url, bodies)
    proc = daemon(["-c", str(one_queue_config(tmp_path, app, queue, shutdown_timeout))], env=env)
    app.wait_for_requests(1, timeout=60)
    assert app.in_flight == 1
    return proc, bodies


def test_sigterm_finishes_the_delivery_in_flight_and_releases_the_buffer(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy,
    http_app: HttpApp, sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    http_app.delay = 3
    proc, bodies = start_with_one_in_flight(daemon, proxied_env, http_app, sqs, queue, tmp_path,
                                            shutdown_timeout=10, messages=5)
    assert count_visible(sqs, queue.url) == 0  # one receive took all five: one delivering, four buffered
    signalled = time.monotonic()
    proc.send_signal(signal.SIGTERM)

    # the buffer is released with visibility 0 while the delivery is still running
    wait_until(lambda: count_visible(sqs, queue.url) == 4, 10,
               message=lambda: f"visible: {count_visible(sqs, queue.url)}")
    released_after = time.monotonic() - signalled
    assert http_app.in_flight == 1, "buffer released only after the delivery ended"
    assert proc.wait_exit(timeout=30) == 0
    exited_after = time.monotonic() - signalled
    print(f"buffer visible again {released_after * 1000:.0f} ms after SIGTERM; exit after {exited_after:.1f}s")
    assert exited_after < 10

    (delivered,) = http_app.requests
    assert counting_proxy.count("ReceiveMessage", since=signalled) == 0
    assert count_messages(sqs, queue.url) == 4  # the delivered message was deleted
    left = drain_bodies(sqs, queue.url)
    assert sorted(left + [delivered.body.decode()]) == bodies
    assert delivered.body.decode() not in left
    assert "delivered=1 failed=0" in proc.output()
    assert stop_line(proc).endswith(" released=4")  # the buffer


def test_second_sigterm_stops_at_once_and_releases_the_delivery_in_flight(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    http_app.delay = 30
    proc, bodies = start_with_one_in_flight(daemon, aws_env, http_app, sqs, queue, tmp_path,
                                            shutdown_timeout=25, messages=1)
    first = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait_for_output("stopping (SIGTERM)", timeout=10)
    # a repeat within a second is taken as a duplicate (Heroku sends them); this one is not
    wait_until(lambda: time.monotonic() - first > 1.5, 5)
    second = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait_exit(timeout=20) == 0
    print(f"exit {time.monotonic() - second:.1f}s after the second SIGTERM")
    assert time.monotonic() - second < 10  # far below shutdown_timeout = 25 and the 30 s delivery
    assert "second stop signal" in proc.output()

    # released, not deleted: visible again at once, and not counted as delivered
    wait_until(lambda: count_visible(sqs, queue.url) == 1, 5, message="in-flight message not released")
    assert drain_bodies(sqs, queue.url) == bodies
    assert count_messages(sqs, queue.url) == 0
    assert len(http_app.requests) == 1
    assert "delivered=0" in proc.output()


def test_grace_period_ends_and_the_unfinished_delivery_is_released(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    http_app.delay = 30
    proc, bodies = start_with_one_in_flight(daemon, aws_env, http_app, sqs, queue, tmp_path,
                                            shutdown_timeout=2, messages=1)
    signalled = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait_exit(timeout=20) == 0
    elapsed = time.monotonic() - signalled
    print(f"exit {elapsed:.1f}s after SIGTERM with shutdown_timeout = 2")
    assert 1.5 <= elapsed < 10  # the deliveries get 1.5 s, the last flushes the other 0.5 s (lifecycle/stopping.py)
    wait_until(lambda: count_visible(sqs, queue.url) == 1, 5, message="unfinished delivery not released")
    assert drain_bodies(sqs, queue.url) == bodies
    assert "still running after the grace period" in proc.output()


def test_a_duplicate_sigterm_within_a_second_keeps_the_grace_period(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    http_app.delay = 3
    proc, _ = start_with_one_in_flight(daemon, aws_env, http_app, sqs, queue, tmp_path,
                                       shutdown_timeout=10, messages=1)
    proc.send_signal(signal.SIGTERM)
    proc.send_signal(signal.SIGTERM)  # Heroku and some supervisors send the signal twice
    assert proc.wait_exit(timeout=30) == 0
    assert "second stop signal" not in proc.output()
    assert count_messages(sqs, queue.url) == 0  # delivered and deleted, not cut short
    assert "delivered=1 failed=0" in proc.output()


def status_of(port: int) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5) as response:
            return dict(json.loads(response.read()))
    except OSError:
        return {}


def test_a_message_sent_right_after_an_idle_stop_is_not_hidden(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    config = one_queue_config(tmp_path, http_app, queue, shutdown_timeout=10, poll_for=5)
    proc = daemon(["-c", str(config), "--status=127.0.0.1:0"], env=aws_env)  # straight to moto
    port = int(status_url(proc).rsplit(":", 1)[1])  # port 0: the daemon binds it, no race
    wait_until(lambda: [q.get("state") for q in status_of(port).get("queues", [])] == ["idle"], 60,
               message=lambda: f"status: {status_of(port)}")
    long_polling = time.monotonic() + 0.5  # the watcher's request leaves within milliseconds of "idle"
    wait_until(lambda: time.monotonic() > long_polling, 5)
    assert proc.stop(timeout=30) == 0
    sqs.send_message(QueueUrl=queue.url, MessageBody="after the stop")
    # nobody is consuming any more: the message must stay visible for the next instance
    wait_until(lambda: count_visible(sqs, queue.url) == 1, 5, message="hidden by the abandoned long poll")
    assert http_app.requests == []


def test_receives_still_on_their_way_at_a_max_messages_stop_are_waited_for_and_released(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy,
    http_app: HttpApp, sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    """Receives ahead that SQS answers later than the stop's two 5 s joins used to be abandoned at exit:
    SQS still handed out their messages, which stayed hidden for the visibility timeout, unlogged (the
    weighted 3:2:1 test on a slow moto lost one receive's worth this way)."""
    queue = make_queue()
    bodies = [f"message-{i}" for i in range(60)]
    send_batch(sqs, queue.url, bodies)
    http_app.delay = 0.2
    proc = daemon([f"--queues={queue.name}", f"--http={http_app.url}/work", "--concurrency=2",
                   "--max-messages=16"], env=proxied_env)
    http_app.wait_for_requests(1, timeout=60)
    counting_proxy.delays["ReceiveMessage"] = 11.0  # every later receive lands after both joins
    assert proc.wait_exit(timeout=90) == 0
    wait_until(lambda: not counting_proxy.pending("ReceiveMessage"), 30, message="receives still held")
    delivered = {request.body.decode() for request in http_app.requests}
    assert len(delivered) == 16
    wait_until(lambda: count_visible(sqs, queue.url) == len(bodies) - 16, 10,
               message=lambda: f"visible {count_visible(sqs, queue.url)} of {len(bodies) - 16}: "
                               f"{proc.output()[-1500:]}")
    assert sorted(drain_bodies(sqs, queue.url)) == sorted(set(bodies) - delivered)
    assert "still unanswered" not in proc.output()


def test_an_idle_stop_lets_the_long_poll_end_and_takes_at_most_poll_for_plus_2s(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy,
    http_app: HttpApp, sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    poll_for = 5
    queue = make_queue(VisibilityTimeout=HIDDEN_SECONDS)
    proc = daemon(["-c", str(stop_config(tmp_path, http_app, [queue], poll_for))], env=proxied_env)
    poll = long_poll_on(counting_proxy, queue, poll_for)
    signalled = time.monotonic()  # the poll has just left: the stop has most of poll_for to wait
    proc.send_signal(signal.SIGTERM)
    assert proc.wait_exit(timeout=30) == 0
    exited = time.monotonic()
    print(f"idle stop: exit {exited - signalled:.2f}s after SIGTERM, {exited - poll.started:.2f}s after the "
          f"long poll left (poll_for = {poll_for})")
    assert poll.ended is not None and poll.ended <= exited, "the long poll was cut, not let end"
    assert exited - poll.started >= poll_for - 0.5
    assert exited - signalled <= poll_for + 2
    assert "still unanswered" not in proc.output()
    assert "delivered=0 failed=0 received=0 " in stop_line(proc) and stop_line(proc).endswith(" released=0")
    sqs.send_message(QueueUrl=queue.url, MessageBody="after the stop")
    wait_until(lambda: count_visible(sqs, queue.url) == 1, 5, message="hidden by the stop")


def test_a_message_sent_during_an_idle_stop_is_released_at_once_and_counted(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy,
    http_app: HttpApp, sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    poll_for = 20  # the message surely comes while the stop waits for the poll
    queue = make_queue(VisibilityTimeout=HIDDEN_SECONDS)
    proc = daemon(["-c", str(stop_config(tmp_path, http_app, [queue], poll_for))], env=proxied_env)
    long_poll_on(counting_proxy, queue, poll_for)
    signalled = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait_for_output("stopping (SIGTERM)", timeout=10)
    assert proc.alive(), "exited without waiting for the long poll"
    sqs.send_message(QueueUrl=queue.url, MessageBody="during the stop")
    # the poll brings it back at once; released at once, not hidden for the visibility timeout
    wait_until(lambda: count_visible(sqs, queue.url) == 1, 5, message="hidden by the stop")
    assert proc.wait_exit(timeout=10) == 0
    print(f"exit {time.monotonic() - signalled:.2f}s after SIGTERM (poll_for = {poll_for})")
    assert time.monotonic() - signalled < poll_for / 2  # the poll ended when the message came
    sqs.send_message(QueueUrl=queue.url, MessageBody="after the stop")
    wait_until(lambda: count_visible(sqs, queue.url) == 2, 5, message="hidden by the stop")
    assert sorted(drain_bodies(sqs, queue.url)) == ["after the stop", "during the stop"]
    assert http_app.requests == []
    assert " received=1 " in stop_line(proc) and stop_line(proc).endswith(" released=1")
    assert "still unanswered" not in proc.output()


def test_what_a_long_poll_brings_during_a_stop_is_released_while_a_delivery_still_runs(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy,
    http_app: HttpApp, sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    poll_for = 10  # the stop waits for the busy queue's poll too: it is watched meanwhile
    busy, idle = make_queue(VisibilityTimeout=HIDDEN_SECONDS), make_queue(VisibilityTimeout=HIDDEN_SECONDS)
    done = hold_deliveries(http_app)
    sqs.send_message(QueueUrl=busy.url, MessageBody="slow")
    config = stop_config(tmp_path, http_app, [busy, idle], poll_for, shutdown_timeout=30, concurrency=2)
    proc = daemon(["-c", str(config)], env=proxied_env)
    http_app.wait_for_requests(1, timeout=60)
    long_poll_on(counting_proxy, idle, poll_for)
    proc.send_signal(signal.SIGTERM)
    proc.wait_for_output("stopping (SIGTERM)", timeout=10)
    sqs.send_message(QueueUrl=idle.url, MessageBody="during the stop")
    wait_until(lambda: count_visible(sqs, idle.url) == 1, 5, message="released only at the end of the stop")
    assert http_app.in_flight == 1 and proc.alive()
    done.set()
    assert proc.wait_exit(timeout=40) == 0
    assert count_messages(sqs, busy.url) == 0  # delivered and deleted
    assert drain_bodies(sqs, idle.url) == ["during the stop"]
    assert "delivered=1 failed=0" in stop_line(proc) and stop_line(proc).endswith(" released=1")
    assert "still unanswered" not in proc.output()


def test_a_draining_queue_of_a_reload_lets_its_long_poll_end_at_a_stop(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy,
    http_app: HttpApp, sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    poll_for = 20
    queue = make_queue(VisibilityTimeout=HIDDEN_SECONDS)
    done = hold_deliveries(http_app)
    sqs.send_message(QueueUrl=queue.url, MessageBody="slow")
    config = stop_config(tmp_path, http_app, [queue], poll_for, shutdown_timeout=30, concurrency=2)
    proc = daemon(["-c", str(config)], env=proxied_env)
    http_app.wait_for_requests(1, timeout=60)
    long_poll_on(counting_proxy, queue, poll_for)  # the free slot found it empty: watched
    stop_config(tmp_path, http_app, [queue], poll_for, shutdown_timeout=30, concurrency=2, path="/v2")
    proc.send_signal(signal.SIGHUP)
    proc.wait_for_output("reload: draining", timeout=10)
    proc.send_signal(signal.SIGTERM)
    proc.wait_for_output("stopping (SIGTERM)", timeout=10)
    sqs.send_message(QueueUrl=queue.url, MessageBody="during the stop")
    wait_until(lambda: count_visible(sqs, queue.url) == 1, 5, message="hidden by the retired queue's long poll")
    assert http_app.in_flight == 1 and proc.alive()
    done.set()
    assert proc.wait_exit(timeout=40) == 0
    assert drain_bodies(sqs, queue.url) == ["during the stop"]  # "slow" was delivered and deleted
    assert "delivered=1 failed=0" in stop_line(proc) and stop_line(proc).endswith(" released=1")
    assert "still unanswered" not in proc.output()


def test_a_second_sigterm_during_an_idle_stop_exits_at_once_and_names_the_abandoned_poll(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy,
    http_app: HttpApp, sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    poll_for = 20
    queue = make_queue(VisibilityTimeout=HIDDEN_SECONDS)
    proc = daemon(["-c", str(stop_config(tmp_path, http_app, [queue], poll_for))], env=proxied_env)
    poll = long_poll_on(counting_proxy, queue, poll_for)
    first = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait_for_output("stopping (SIGTERM)", timeout=10)
    wait_until(lambda: time.monotonic() - first > 1.5, 5)  # not a duplicate
    second = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait_exit(timeout=10) == 0
    exited = time.monotonic()
    print(f"exit {exited - second:.2f}s after the second SIGTERM, {exited - first:.2f}s after the first "
          f"(poll_for = {poll_for})")
    assert exited - second < 3 and exited - first < poll_for / 2
    assert poll.ended is None, "the poll ended: nothing was abandoned"
    output = proc.output()
    assert "second stop signal" in output
    assert (f"queue={queue.name} 1 receives still unanswered at stop, abandoned (a second stop signal): "
            f"the up to 10 messages SQS hands them stay invisible until their visibility timeout "
            f"({HIDDEN_SECONDS}s)") in output


def test_an_idle_stop_never_waits_past_shutdown_timeout_and_names_the_poll_it_abandons(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy,
    http_app: HttpApp, sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    poll_for = 20
    queue = make_queue(VisibilityTimeout=HIDDEN_SECONDS)
    config = stop_config(tmp_path, http_app, [queue], poll_for, shutdown_timeout=2)
    proc = daemon(["-c", str(config)], env=proxied_env)
    poll = long_poll_on(counting_proxy, queue, poll_for)
    signalled = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait_exit(timeout=20) == 0
    elapsed = time.monotonic() - signalled
    print(f"exit {elapsed:.2f}s after SIGTERM with shutdown_timeout = 2, poll_for = {poll_for}")
    assert 1.5 <= elapsed < 6
    assert poll.ended is None, "the poll ended: nothing was abandoned"
    assert re.search(rf"queue={queue.name} 1 receives still unanswered at stop, abandoned \(\d+s after the stop\)",
                     proc.output()), proc.output()[-2000:]
