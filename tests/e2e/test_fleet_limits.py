"""Fleet-wide limits through real daemons sharing moto's DynamoDB: what a downstream sees.

Each daemon posts to its own path of one app, so the app knows who delivered what; the app counts
the requests it holds at once, over all daemons (the downstream's view of the cap) and per daemon.
A daemon's DynamoDB can go through a fault proxy (an outage for that member alone), and a daemon's
wall clock can be shifted by seconds (a `sitecustomize` on its PYTHONPATH): the leases read only
monotonic clocks, so neither frees a share early."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gevent
import pytest

from tests.e2e.helpers import send_batch
from tests.support import REPO_ROOT, Daemon, HttpApp, Queue, build_config_file, count_messages, status_url, wait_until
from tests.support.chaos import ChaosProxy
from tests.support.http_app import RecordedRequest, Reply

pytestmark = pytest.mark.slow

LEASE_SECONDS = 4
HOLD_SECONDS = 0.2  # each delivery takes this long at the app


class Downstream:
    """The app's view: requests held at once (all daemons, and per daemon), with every hold's span."""

    def __init__(self, app: HttpApp, hold_seconds: float = HOLD_SECONDS) -> None:
        self.hold_seconds = hold_seconds
        self.now: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()
        self.spans: list[tuple[str, float, float]] = []  # (member, arrived, answered)
        app.respond = self.respond

    def respond(self, request: RecordedRequest) -> Reply:
        member = request.path.strip("/")
        for key in (member, "all"):
            self.now[key] += 1
            self.peak[key] = max(self.peak[key], self.now[key])
        try:
            gevent.sleep(self.hold_seconds)
        finally:
            for key in (member, "all"):
                self.now[key] -= 1
            self.spans.append((member, request.arrived, time.monotonic()))
        return 200, {}, b""

    def arrivals(self, member: str | None = None) -> list[float]:
        return sorted(arrived for who, arrived, _ in self.spans if member is None or who == member)

    def mean_in_flight(self, start: float, end: float) -> float:
        """Time-averaged requests held at once between `start` and `end`."""
        held = sum(max(0.0, min(answered, end) - max(arrived, start)) for _, arrived, answered in self.spans)
        return held / (end - start)

    def peak_between(self, start: float, end: float) -> int:
        """Most requests held at once at any instant in [start, end]."""
        events = sorted([(arrived, 1) for _, arrived, answered in self.spans if answered >= start and arrived <= end]
                        + [(answered, -1) for _, arrived, answered in self.spans if answered >= start and arrived <= end])
        held = peak = 0
        for _, step in events:
            held += step
            peak = max(peak, held)
        return peak


def member_config(tmp_path: Path, index: int, queue: Queue, app: HttpApp, table: str, *, concurrency: int = 6,
                  queue_keys: dict[str, Any] | None = None, target_keys: dict[str, Any] | None = None,
                  status: bool = False, visibility_seconds: int = 60) -> Path:
    tables: dict[str, dict[str, Any]] = {"fleet": {"table": table, "name": "orders", "lease": LEASE_SECONDS}}
    if status:
        tables["status"] = {"listen": "127.0.0.1:0"}
    return build_config_file(tmp_path, name=f"member-{index}.toml", concurrency=concurrency, shutdown_timeout=5,
                             queues=[{"name": queue.name, "visibility_timeout": visibility_seconds, **(queue_keys or {})}],
                             targets={"default": {"type": "http", "url": f"{app.url}/m{index}", **(target_keys or {})}},
                             tables=tables)


def start_members(daemon: Callable[..., Daemon], env: dict[str, str], configs: list[Path],
                  envs: list[dict[str, str]] | None = None) -> list[Daemon]:
    members = [daemon(["-c", str(config)], env=(envs[i] if envs else env)) for i, config in enumerate(configs)]
    for member in members:
        member.wait_for_output("workerless started", timeout=60)
    return members


def start_fleet(daemon: Callable[..., Daemon], env: dict[str, str], tmp_path: Path, queue: Queue, app: HttpApp,
                table: str, sqs: Any, count: int, total: int, envs: list[dict[str, str]] | None = None,
                **keys: Any) -> tuple[list[Path], list[Daemon]]:
    """`count` members started (each logged its start), then `total` messages sent to their queue."""
    configs = [member_config(tmp_path, i, queue, app, table, **keys) for i in range(count)]
    members = start_members(daemon, env, configs, envs)
    send_batch(sqs, queue.url, [str(i) for i in range(total)])
    return configs, members


def wait_for_backlog_done(downstream: Downstream, sqs: Any, queue: Queue, total: int, timeout: float) -> None:
    wait_until(lambda: len(downstream.spans) >= total, timeout,
               message=lambda: f"{len(downstream.spans)} of {total} delivered; in flight {dict(downstream.now)}")
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30, message="messages left in the queue")


def test_three_daemons_under_one_queue_cap_never_exceed_it_and_keep_it_busy(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path, claims_table: str,
) -> None:
    cap, total = 6, 360
    queue = make_queue()
    downstream = Downstream(http_app)
    configs, members = start_fleet(daemon, aws_env, tmp_path, queue, http_app, claims_table, sqs, 3, total,
                                   queue_keys={"fleet_max_concurrency": cap})
    wait_for_backlog_done(downstream, sqs, queue, total, 120)
    for member in members:
        assert member.stop(timeout=30) == 0
    arrivals = downstream.arrivals()
    mean = downstream.mean_in_flight(arrivals[0], arrivals[-1])
    per_member = {f"m{i}": len(downstream.arrivals(f"m{i}")) for i in range(3)}
    print(f"fleet cap {cap} over 3 daemons: peak {downstream.peak['all']}, mean in flight {mean:.2f} "
          f"({mean / cap:.0%} of the cap) over {arrivals[-1] - arrivals[0]:.1f}s; deliveries {per_member}")
    assert downstream.peak["all"] <= cap  # the downstream never saw more than the fleet's cap
    assert mean >= 0.7 * cap  # and the cap was used while the backlog lasted
    assert sum(per_member.values()) == total and min(per_member.values()) > 0  # every member took part
    assert len({request.body for request in http_app.requests}) == total
    checked = subprocess.run([sys.executable, "bin/workerless", "check", "--online", "-c", str(configs[0])],
                             env=aws_env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stderr
    assert f"fleet table {claims_table}: ACTIVE, key 'slot'" in checked.stderr


def test_a_sigkilled_members_share_is_taken_by_the_others_within_a_lease(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path, claims_table: str,
) -> None:
    cap, total = 6, 600
    queue = make_queue()
    downstream = Downstream(http_app)
    # What the killed member had received comes back a visibility timeout after its last heartbeat.
    _, members = start_fleet(daemon, aws_env, tmp_path, queue, http_app, claims_table, sqs, 3, total,
                             visibility_seconds=10, queue_keys={"fleet_max_concurrency": cap})
    wait_until(lambda: downstream.now["m2"] > 0 and len(downstream.spans) > 60, 60, interval=0.02,
               message="the third member holds no share")
    members[2].kill()
    killed = time.monotonic()
    wait_until(lambda: downstream.now["all"] >= cap and downstream.now["m2"] == 0, 4 * LEASE_SECONDS,
               interval=0.02, message=lambda: f"in flight after the kill: {dict(downstream.now)}")
    back = time.monotonic() - killed
    wait_for_backlog_done(downstream, sqs, queue, total, 180)
    for member in members[:2]:
        assert member.stop(timeout=30) == 0
    print(f"share of a SIGKILLed member back at the cap {back:.1f}s after the kill (lease {LEASE_SECONDS}s); "
          f"peak {downstream.peak['all']}")
    assert downstream.peak["all"] <= cap
    # One lease after its last renewal (renewals come every third of a lease), plus a renewal of a survivor,
    # plus 2 s for a loaded machine's late greenlets.
    assert back <= LEASE_SECONDS * (1 + 1 / 3 + 1 / 3) + 2.0


def test_a_fleet_rate_over_two_daemons_holds_every_second_and_is_used(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path, claims_table: str,
) -> None:
    rate, total = 10, 150
    queue = make_queue()
    downstream = Downstream(http_app, hold_seconds=0.0)
    _, members = start_fleet(daemon, aws_env, tmp_path, queue, http_app, claims_table, sqs, 2, total,
                             target_keys={"fleet_rate_limit": rate})
    wait_for_backlog_done(downstream, sqs, queue, total, 120)
    for member in members:
        assert member.stop(timeout=30) == 0
    arrivals = downstream.arrivals()
    busiest = max(sum(1 for moment in arrivals if first <= moment < first + 1.0) for first in arrivals)
    used = (len(arrivals) - rate) / (arrivals[-1] - arrivals[0])  # beyond one burst, paced by the rate
    per_member = {f"m{i}": len(downstream.arrivals(f"m{i}")) for i in range(2)}
    print(f"fleet rate {rate}/s over 2 daemons: busiest second {busiest}, {used:.2f}/s beyond the burst "
          f"({used / rate:.0%}); deliveries {per_member}")
    assert busiest <= 2 * rate  # the rate plus one burst
    assert used >= 0.75 * rate
    assert used <= 1.05 * rate
    assert min(per_member.values()) > 0


def test_a_member_that_loses_dynamodb_stops_at_its_lease_end_and_the_others_take_its_share(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path, claims_table: str, moto_endpoint: str,
) -> None:
    cap, total = 4, 900
    queue = make_queue()
    downstream = Downstream(http_app)
    proxy = ChaosProxy(moto_endpoint)
    proxy.start()
    try:
        configs = [member_config(tmp_path, i, queue, http_app, claims_table, status=True,
                                 queue_keys={"fleet_max_concurrency": cap}) for i in range(2)]
        envs = [aws_env, {**aws_env, "AWS_ENDPOINT_URL_DYNAMODB": proxy.url}]
        members = start_members(daemon, aws_env, configs, envs)
        send_batch(sqs, queue.url, [str(i) for i in range(total)])
        wait_until(lambda: downstream.now["m1"] > 0 and downstream.now["m0"] > 0, 60, interval=0.02,
                   message="both members should be delivering")
        limit = f"queue/{queue.name}/concurrency"
        metrics = urllib.request.urlopen(status_url(members[1]) + "/metrics", timeout=10).read().decode()
        page = urllib.request.urlopen(status_url(members[1]) + "/", timeout=10).read().decode()
        proxy.outage(refuse=True)
        cut = time.monotonic()
        # It stops starting work when its lease ends on its own clock (a lease after its last write at most).
        stopped_by = cut + LEASE_SECONDS + 1.0
        wait_until(lambda: downstream.now["all"] >= cap and downstream.now["m1"] == 0
                   and time.monotonic() > stopped_by, 6 * LEASE_SECONDS, interval=0.02,
                   message=lambda: f"in flight during the outage: {dict(downstream.now)}")
        late = [moment for moment in downstream.arrivals("m1") if moment > stopped_by]
        status = json.loads(urllib.request.urlopen(status_url(members[1]) + "/status", timeout=10).read())
        with pytest.raises(urllib.error.HTTPError) as unready:
            urllib.request.urlopen(status_url(members[1]) + "/readyz", timeout=10)
        reasons = json.loads(unready.value.read())["reasons"]
        proxy.heal()
        healed = time.monotonic()
        wait_until(lambda: any(moment > healed for moment in downstream.arrivals("m1")), 6 * LEASE_SECONDS,
                   message="the member never delivered again after DynamoDB came back")
        for member in members:
            assert member.stop(timeout=30) == 0
    finally:
        proxy.stop()
    print(f"DynamoDB cut for one member: its last delivery began {max(downstream.arrivals('m1')[:1] + [m for m in downstream.arrivals('m1') if m <= healed]) - cut:.1f}s "
          f"after the cut; peak {downstream.peak['all']}; readyz {reasons}")
    assert f'workerless_fleet_share{{limit="{limit}"}}' in metrics
    assert "Fleet-wide limits" in page and limit in page
    assert late == []  # nothing started after its lease ended
    assert downstream.peak["all"] <= cap
    assert status["queues"][0]["state"] == "paused" and "lease lapsed" in status["queues"][0]["paused_reason"]
    assert any("lease lapsed" in reason for reason in reasons)


def test_clocks_seconds_apart_do_not_break_the_cap(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path, claims_table: str,
) -> None:
    cap, total = 4, 300
    queue = make_queue()
    downstream = Downstream(http_app)
    envs = []
    for index, offset in enumerate((-4.0, 0.0, 4.0)):
        site = tmp_path / f"clock{index}"
        site.mkdir()
        (site / "sitecustomize.py").write_text(
            f"import time\n_time = time.time\ntime.time = lambda: _time() + {offset}\n"
            f"_time_ns = time.time_ns\ntime.time_ns = lambda: _time_ns() + {int(offset * 1e9)}\n")
        envs.append({**aws_env, "PYTHONPATH": str(site)})
    _, members = start_fleet(daemon, aws_env, tmp_path, queue, http_app, claims_table, sqs, 3, total, envs,
                             queue_keys={"fleet_max_concurrency": cap})
    wait_for_backlog_done(downstream, sqs, queue, total, 120)
    for member in members:
        assert member.stop(timeout=30) == 0
    per_member = {f"m{i}": len(downstream.arrivals(f"m{i}")) for i in range(3)}
    print(f"clocks -4 s, 0, +4 s: peak {downstream.peak['all']} under a cap of {cap}; deliveries {per_member}")
    assert downstream.peak["all"] <= cap
    assert min(per_member.values()) > 0


def fleet_rows(member: Daemon) -> list[dict[str, Any]]:
    return list(json.loads(urllib.request.urlopen(status_url(member) + "/status", timeout=10).read())["fleet"])


def wait_until_quiet(members: list[Daemon]) -> list[int]:
    """Until no member holds a share of the first limit and none has made a request for it for a whole lease;
    returns each one's request count then."""
    counts: list[int] = []
    quiet_since = [time.monotonic()]

    def quiet_for_a_lease() -> bool:
        rows = [fleet_rows(member)[0] for member in members]
        now = [row["dynamodb_requests"] for row in rows]
        if now != counts or any(row["share"] or row["live_members"] for row in rows):
            counts[:] = now
            quiet_since[0] = time.monotonic()
        return time.monotonic() - quiet_since[0] >= LEASE_SECONDS

    wait_until(quiet_for_a_lease, 8 * LEASE_SECONDS, interval=0.5, message=lambda: f"requests {counts}")
    return counts


def test_dynamodb_requests_follow_the_lease_not_the_messages_and_stop_when_idle(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path, claims_table: str,
) -> None:
    cap, total = 4, 600
    queue = make_queue()
    downstream = Downstream(http_app, hold_seconds=0.02)
    configs = [member_config(tmp_path, i, queue, http_app, claims_table, status=True,
                             queue_keys={"fleet_max_concurrency": cap}) for i in range(2)]
    members = start_members(daemon, aws_env, configs)
    # A starting daemon does not know its queue is empty: it joins, receives nothing and leaves; then nothing.
    before = wait_until_quiet(members)
    send_batch(sqs, queue.url, [str(i) for i in range(total)])
    wait_for_backlog_done(downstream, sqs, queue, total, 120)
    arrivals = downstream.arrivals()
    busy_seconds = arrivals[-1] - arrivals[0]
    after = wait_until_quiet(members)  # each leaves (one write) within a renewal, then a whole lease of none
    rows = [fleet_rows(member)[0] for member in members]
    for member in members:
        assert member.stop(timeout=30) == 0
    busy = [end - start for start, end in zip(before, after)]
    # About 3 writes per lease while busy, plus the join, the leave and a few to take free room or give it back.
    ceiling = 3 * (busy_seconds + LEASE_SECONDS) / LEASE_SECONDS + 8
    print(f"DynamoDB requests per member: {before} while starting idle, {busy} for {total} messages in "
          f"{busy_seconds:.1f}s (lease {LEASE_SECONDS}s; ceiling {ceiling:.0f}), then none for a lease")
    assert all(count <= 8 for count in before)  # read, create, join (a conflict or two when joining together), leave
    assert all(0 < count <= ceiling for count in busy)
    assert all(row["state"] == "idle" and row["share"] == 0 for row in rows)
