"""How the real daemon polls: weighted shares, wake latency of an idle daemon, and idle cost."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

from tests.e2e.helpers import bodies_of, queue_of, send_batch
from tests.support import (
    CountingProxy,
    Daemon,
    HttpApp,
    ProxiedRequest,
    Queue,
    count_messages,
    drain_bodies,
    wait_until,
    write_config,
)


def strict_config(tmp_path: Path, app: HttpApp, queues: list[Queue], concurrency: int, poll_for: int) -> Path:
    listed = "".join(f'[[queues]]\nname = "{queue.name}"\n\n' for queue in queues)
    return write_config(tmp_path, f"""
concurrency = {concurrency}

[polling]
strategy = "priority"
poll_for = {poll_for}

{listed}[targets.default]
type = "http"
url = "{app.url}/work"
""")


def long_polls_in_progress(proxy: CountingProxy, queues: list[Queue], wait_seconds: int) -> bool:
    """Each queue has a ReceiveMessage with WaitTimeSeconds=`wait_seconds` pending at moto."""
    urls = {request.params.get("QueueUrl", "").rsplit("/", 1)[-1]
            for request in proxy.pending("ReceiveMessage")
            if request.params.get("WaitTimeSeconds") == wait_seconds}
    return urls >= {queue.name for queue in queues}


def test_weighted_3_2_1_shares_follow_the_weights_under_a_backlog(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    # 1200 draws keep a 5-point tolerance beyond 3.5 standard deviations for every share; each
    # backlog (700) stays above what its weight can take (600 +- 60), so no queue runs dry.
    backlog, deliveries = 700, 1200
    heavy, middle, light = make_queue(), make_queue(), make_queue()
    queues = (heavy, middle, light)
    for queue in queues:
        send_batch(sqs, queue.url, [f"{queue.name}-{i}" for i in range(backlog)])
    spec = f"{heavy.name}:3,{middle.name}:2,{light.name}:1"
    proc = daemon([f"--queues={spec}", f"--http={http_app.url}/work", "--concurrency=4",
                   f"--max-messages={deliveries}"], env=aws_env)
    assert proc.wait_exit(timeout=240) == 0
    assert "strategy=weighted" in proc.output()

    delivered = Counter(queue_of(http_app))
    shares = {queue.name: delivered[queue.name] / deliveries for queue in queues}
    print("weighted 3:2:1 shares over", deliveries, "deliveries:",
          {name: f"{share:.1%}" for name, share in shares.items()})
    assert sum(delivered.values()) == deliveries
    for queue, expected in zip(queues, (3 / 6, 2 / 6, 1 / 6)):
        assert abs(shares[queue.name] - expected) <= 0.05, (queue.name, shares, expected)
    assert len({request.body for request in http_app.requests}) == deliveries  # none twice
    # every delivered message is deleted, and only those: the released buffers are visible again
    for queue in queues:
        left = drain_bodies(sqs, queue.url)
        assert len(left) == backlog - delivered[queue.name], (queue.name, set(left) & set(bodies_of(http_app)))
        assert count_messages(sqs, queue.url) == 0


def test_idle_daemon_wakes_for_a_low_priority_message_within_a_second(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy,
    http_app: HttpApp, sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queues = [make_queue(), make_queue(), make_queue()]
    config = strict_config(tmp_path, http_app, queues, concurrency=10, poll_for=20)
    proc = daemon(["-c", str(config)], env=proxied_env)
    proc.wait_for_output("workerless started", timeout=60)
    wait_until(lambda: long_polls_in_progress(counting_proxy, queues, 20), 30,
               message=lambda: f"long polls pending: {[r.params for r in counting_proxy.pending()]}")

    sent = time.monotonic()
    sqs.send_message(QueueUrl=queues[-1].url, MessageBody="wake up")
    (request,) = http_app.wait_for_requests(1, timeout=30)
    latency = request.arrived - sent
    print(f"wake latency of an idle daemon (poll_for=20, lowest of 3 queues): {latency * 1000:.0f} ms")
    assert request.body == b"wake up"
    assert request.headers["x-aws-sqsd-queue"] == queues[-1].name
    assert latency < 1.0
    wait_until(lambda: count_messages(sqs, queues[-1].url) == 0, 30, message="message not deleted")
    assert proc.stop(timeout=30) == 0
    assert len(http_app.requests) == 1


def overlapping(requests: list[ProxiedRequest]) -> bool:
    spans = sorted((r.started, r.ended if r.ended is not None else float("inf")) for r in requests)
    return any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:]))


def test_idle_cost_is_one_long_poll_per_queue_per_poll_for_whatever_the_concurrency(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy,
    http_app: HttpApp, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queues = [make_queue(), make_queue(), make_queue()]
    window, poll_for = 10.0, 2
    config = strict_config(tmp_path, http_app, queues, concurrency=50, poll_for=poll_for)
    proc = daemon(["-c", str(config)], env=proxied_env)
    wait_until(lambda: counting_proxy.count("ReceiveMessage") > 0, 60, message="no receive at all")
    first = counting_proxy.between(0, float("inf"), "ReceiveMessage")[0].started
    wait_until(lambda: time.monotonic() > first + window, window + 5, interval=0.1)
    assert proc.alive()

    receives = counting_proxy.between(first, first + window, "ReceiveMessage")
    startup = Counter(r.action for r in counting_proxy.requests if r.started < first)
    others = [r.action for r in counting_proxy.between(first, first + window) if r.action != "ReceiveMessage"]
    print(f"idle requests in {window:g}s (3 queues, concurrency 50, poll_for {poll_for}): "
          f"{len(receives)} receives, {len(others)} other; before them at startup: {dict(startup)}")
    ideal = 3 * window / poll_for  # one long poll per queue per poll_for, plus one first receive each
    assert ideal - 3 <= len(receives) <= ideal + 3
    assert others == []
    # startup: resolve each queue (GetQueueUrl, GetQueueAttributes), perhaps one credential check
    assert startup["GetQueueUrl"] == 3 and 3 <= startup["GetQueueAttributes"] <= 4, startup
    assert set(startup) == {"GetQueueUrl", "GetQueueAttributes"}, startup
    by_queue: dict[str, list[ProxiedRequest]] = {}
    for request in receives:
        by_queue.setdefault(request.params["QueueUrl"].rsplit("/", 1)[-1], []).append(request)
    assert set(by_queue) == {queue.name for queue in queues}
    for name, requests in by_queue.items():
        waits = [request.params.get("WaitTimeSeconds") for request in requests]
        assert waits[0] == 0 and set(waits[1:]) == {poll_for}, (name, waits)
        assert not overlapping(requests), f"{name}: more than one receive at a time"
    assert proc.stop(timeout=30) == 0
    assert http_app.requests == []
