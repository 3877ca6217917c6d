"""The bench's table: every scenario of bench/run.py as a row, in the order a full run takes them (BENCHMARKS.md,
"What runs"). A Case is a worker and what it meets (workload, app, SQS round trip, daemon configuration); a Row
names its kind of run, its cases and the targets its figures are held to (a path into its block)."""

from __future__ import annotations

from shapes import Case, Row

D, B = Case(), Case(worker="baseline")
SIDES = {"daemon": D, "baseline": B}
DRAIN_KEYS = ("msgs_per_s", "cpu_us_per_msg", "peak_rss_mb", "peak_tree_rss_mb", "cpu_share_of_one_core",
              "fauxqs_cpu_us_per_msg", "sink_cpu_us_per_msg")
STEADY_KEYS = ("msgs_per_s", "fraction_of_ideal", "fraction_of_ideal_at_measured_hold", "steady_msgs_per_s",
               "steady_fraction_of_ideal", "ms_to_first_wave", "cpu_us_per_msg", "cpu_share_of_one_core",
               "fauxqs_cpu_share", "sink_cpu_share", "runner_cpu_share", "sink_mean_held_ms", "sink_max_in_flight",
               "messages_per_post", "peak_tree_rss_mb", "peak_rss_mb", "sqs_requests_per_msg", "left_in_queue")
IDEMPOTENT = {name: D.but(messages=(20000, 1000), sqs_ms=sqs, dynamodb_ms=db) for name, sqs, db in (  # 5,000 took
    ("plain", None, None), ("dynamodb0", None, 0), ("dynamodb10", None, 10), ("plain_sqs10", 10, None),  # < 1 s:
    ("dynamodb10_sqs10", 10, 10))}  # the ramp-up was much of each figure
TRACED = {name: D.but(messages=(20000, 1000), tracing=shape) for name, shape in (
    ("off", None), ("all", ("always_on", None, "up")), ("ratio1", ("traceidratio", "0.01", "up")),
    ("down", ("always_on", None, "down")), ("slow", ("always_on", None, "slow")))}
WIDE = {f"d{ms}_c{c}": D.but(concurrency=c, app_ms=ms, messages=n, target={"max_connections": c}) for c, ms, n in (
    (1000, 200, (30000, 5000)), (1000, 2000, (15000, 3000)), (50, 2000, (1000, 250)))}
MEMORY = {f"c{c}/{side}": case.but(concurrency=c, app_ms=500, messages=n, target={"max_connections": c},
                                   idle_first=c == 50)
          for c, n in ((50, (500, 150)), (500, (5000, 1500)), (1000, (10000, 3000))) for side, case in SIDES.items()}

PER_GROUP_10 = {"max_concurrency_per_group": 10}  # the fair kind's per-tenant cap
SOAK = {"messages": (100_000, 2000), "rate": 350.0, "failure_rate": 0.10, "concurrency": 20, "app_ms": 5,
        "restart_s": [20, 40], "kills": True, "seed": 2024, "timeout_s": 3600}
SOAK_TARGETS = (("messages lost", "lost", "==", 0), ("messages left in the queue", "left_in_queue", "==", 0),
                ("every SIGTERM exited 0", "sigterm_exit_codes_all_0", "==", 1))

def sides(group: str, **changes: object) -> dict[str, Case]:
    return {f"{group}/{side}": case.but(**changes) for side, case in SIDES.items()}

def worst(path: str, op: str, limit: float, what: str) -> tuple[str, str, str, float]:
    return (f"{what} (worst run)", f"{path}.max", op, limit)

ROWS = (
    Row("throughput", cases={**sides("c10", concurrency=10), **sides("c50")}, keys=DRAIN_KEYS, ratio=True,
        warmup=("c10/daemon", "c10/baseline", "c50/daemon", "c50/baseline"),
        targets=(("msgs/s c=50 / plain baseline", "c50.ratio_daemon_to_baseline.msgs_per_s", ">=", 3),
                 ("daemon CPU us/msg, c=10", "c10.daemon.cpu_us_per_msg", "<=", 250),
                 ("daemon CPU us/msg, c=50", "c50.daemon.cpu_us_per_msg", "<=", 250))),
    Row("slow_sink", cases={**sides("d20", app_ms=20, messages=(2000, 500)),
                            **sides("d200", app_ms=200, messages=(1000, 250))}, ratio=True, params={"block": {
        "concurrency": 50, **{f"d{ms}": {"delay_ms": ms, "ideal_msgs_per_s": 50_000 / ms} for ms in (20, 200)}}},
        keys=("msgs_per_s", "fraction_of_ideal", "fraction_of_ideal_at_measured_hold", "cpu_us_per_msg",
              "cpu_share_of_one_core", "peak_rss_mb", "sink_mean_held_ms", "sink_max_in_flight"),
        shown=("msgs_per_s", "fraction_of_ideal"),
        targets=(("20 ms app, c=50: share of the ideal", "d20.daemon.fraction_of_ideal", ">=", 0.90),)),
    Row("requests", cases={"daemon": D.but(messages=(2000, 500), until_empty=True), "baseline": B.but(
        messages=(2000, 500))}, keys=("requests_per_msg=sqs_requests_per_msg",
                                      "requests_per_msg_without_startup=sqs_requests_per_msg_without_startup"),
        ratio=True, shown=("requests_per_msg",), params={"block": {"messages": 2000, "concurrency": 50}},
        targets=(("SQS requests per message, backlog", "daemon.requests_per_msg", "<=", 0.22),)),
    Row("idle", "listen", ratio=True, shown=("requests_per_min",), params={
        "workers": {f"c{c}/{side}": (case.but(concurrency=c), 3) for c in (10, 50, 500)
                    for side, case in SIDES.items()}, "poll_for": 2, "window": (30.0, 6.0), "settle": 3.5,
        "block": {"poll_for": 2, "target_per_min": 92}},
        targets=tuple(worst(f"c{c}.daemon.requests_per_min", "<=", 92, f"requests/min, 3 empty queues, c={c}")
                      for c in (10, 50, 500))),
    Row("wake", "listen", ratio=True, shown=("p50_ms", "p99_ms"), params={
        "workers": {side: (case, 3) for side, case in SIDES.items()}, "poll_for": 20, "settle": 1.5,
        "wake": ("daemon", "baseline"), "wake_at": "{side}", "tries": (20, 5), "block": {"poll_for": 20, "tries": 20}},
        targets=(("wake-up p99, lowest of 3 queues, ms", "daemon.p99_ms", "<", 50),)),
    Row("memory", cases=MEMORY, ratio=True, shown=("peak_rss_mb", "peak_tree_rss_mb", "tree_peak_over_idle"),
        keys=("peak_rss_mb", "peak_tree_rss_mb", "idle_tree_rss_mb", "tree_peak_over_idle", "sink_max_in_flight",
              "msgs_per_s"), params={"block": {"delay_ms": 500}},
        targets=(worst("c50.daemon.peak_rss_mb", "<=", 40, "peak RSS MB, c=50"),
                 worst("c500.daemon.peak_rss_mb", "<=", 80, "peak RSS MB, c=500"),
                 worst("c1000.daemon.peak_rss_mb", "<=", 60, "peak RSS MB, c=1000"),
                 worst("c50.daemon.peak_tree_rss_mb", "<=", 40, "process tree peak RSS MB, c=50"),
                 worst("c50.daemon.tree_peak_over_idle", "<=", 1.25, "process tree peak / idle, c=50"))),
    Row("priority", "order", cases={side: case.but(concurrency=10) for side, case in SIDES.items()}, ratio=True,
        shown=("inversions",), params={"queues": 2, "preload": ((0, 0), (2000, 500)), "bursts": 1,
                                       "burst_size": (200, 50), "burst_to": "first", "after": 300, "app_ms": 5,
                                       "from_first_burst": True, "block": {"concurrency": 10, "sink_delay_ms": 5}},
        targets=(worst("daemon.inversions", "==", 0, "priority inversions, c=10"),)),
    Row("latency", cases={f"rtt{ms}/{side}": case.but(sqs_ms=ms, messages=(50000, 5000)) for ms in (0, 10, 30)
                          for side, case in SIDES.items()}, ratio=True, warmup=("rtt0/daemon", "rtt0/baseline"),
        keys=("msgs_per_s", "cpu_us_per_msg", "cpu_share_of_one_core", "peak_rss_mb", "sqs_requests_per_msg",
              "sqs_mean_added_ms", "left_in_queue", "fauxqs_cpu_us_per_msg", "sink_cpu_us_per_msg"),
        paired=tuple((f"ratios.{side}_rtt{ms}_over_rtt0", f"rtt{ms}/{side}", f"rtt0/{side}", "msgs_per_s")
                     for ms in (10, 30) for side in SIDES) + tuple(
            (f"ratios.daemon_over_baseline_rtt{ms}", f"rtt{ms}/daemon", f"rtt{ms}/baseline", "msgs_per_s")
            for ms in (0, 10, 30)), params={"block": {"concurrency": 50, "rtts_ms": [0, 10, 30]}},
        targets=(("msgs/s at 10 ms / at 0 ms (paired)", "ratios.daemon_rtt10_over_rtt0", ">=", 0.90),
                 ("msgs/s at 30 ms / at 0 ms (paired)", "ratios.daemon_rtt30_over_rtt0", ">=", 0.75),
                 ("daemon / baseline msgs/s at 10 ms (paired)", "ratios.daemon_over_baseline_rtt10", ">=", 1.2),
                 *(worst(f"rtt{ms}.daemon.left_in_queue", "==", 0, f"undeleted at {ms} ms") for ms in (0, 10, 30)))),
    Row("startup", "startup", cases=SIDES, shown=("first_delivery_s", "cpu_s_to_exit"),
        params={"tries": (5, 3), "poll_for": 20, "block": {"concurrency": 50, "poll_for": 20}},
        targets=(("start to first delivery, s", "daemon.first_delivery_s", "<=", 0.25),)),
    Row("scale", "listen", ratio=True, shown=("requests_per_min", "cpu_s_per_idle_min", "rss_mb", "p99_ms"), params={
        "workers": {**{f"q50/{side}": (case, 50) for side, case in SIDES.items()},
                    **{f"c1000/{side}": (case.but(concurrency=1000), 1) for side, case in SIDES.items()}},
        "poll_for": 20, "window": (60.0, 40.0), "stop_before_wake": ("c1000/daemon", "c1000/baseline"),
        "wake": ("q50/daemon", "q50/baseline"), "wake_at": "wake/{side}", "tries": (20, 5),
        "block": {"poll_for": 20, "queues": 50, "concurrency": 50, "wide_concurrency": 1000}},
        targets=(worst("q50.daemon.requests_per_min", "<=", 152, "idle requests/min, 50 empty queues"),
                 worst("c1000.daemon.requests_per_min", "<=", 5, "idle requests/min, 1 queue, c=1000"),
                 ("wake-up p99, lowest of 50 queues, ms", "wake.daemon.p99_ms", "<", 50))),
    Row("lambda", cases={"lambda": D.but(lambda_target=True), "http": D}, ratio=True, warmup=("lambda", "http"),
        keys=("cpu_us_per_msg", "msgs_per_s", "cpu_share_of_one_core", "peak_rss_mb", "sink_cpu_us_per_msg",
              "left_in_queue", "invocations"), paired=(("paired_cpu_ratio", "lambda", "http", "cpu_us_per_msg"),),
        targets=(("CPU/msg Lambda target / HTTP target (paired)", "paired_cpu_ratio", "<=", 2),)),
    Row("scale_wide", cases=WIDE, keys=STEADY_KEYS, shown=("msgs_per_s", "fraction_of_ideal", "peak_tree_rss_mb"),
        paired=(("d2000_cpu_ratio_c1000_to_c50", "d2000_c1000", "d2000_c50", "cpu_us_per_msg"),),
        targets=(*((f"c=1000, {ms} ms app: msgs/s / ideal", f"d{ms}_c1000.fraction_of_ideal", ">=", 0.95)
                   for ms in (200, 2000)),
                 *(worst(f"d{ms}_c1000.peak_tree_rss_mb", "<=", 80, f"c=1000, {ms} ms app: tree MB")
                   for ms in (200, 2000)),
                 ("2 s app: CPU/msg c=1000 / c=50 (paired)", "d2000_cpu_ratio_c1000_to_c50", "<=", 1.5))),
    Row("scale_queues", "listen", shown=("requests_per_queue_min", "p50_over_round_trip_ms", "p99_over_round_trip_ms"),
        params={"workers": {"": (D, 50)}, "copies": True, "poll_for": 20, "window": (180.0, 45.0), "settle": 5.0,
                "wake": ("",), "wake_at": "wake_rtt{rtt}", "wake_rtts": (0, 20), "tries": (20, 5),
                "random_queue": True, "round_trip": True, "block": {"queues": 50, "poll_for": 20, "concurrency": 50}},
        targets=(worst("requests_per_queue_min", "<=", 3, "idle requests per queue per minute"),
                 *((f"wake p{q}, random of 50 queues, +{ms} ms, over the round trip, ms",
                    f"wake_rtt{ms}.p{q}_over_round_trip_ms", "<=", 5) for ms in (0, 20) for q in (50, 99)))),
    Row("scale_priority", "order", cases={"": D.but(concurrency=1)}, shown=("inversions", "inversions_past_slack"),
        params={"queues": 50, "preload": ((20, 10),) * 50, "bursts": 20, "burst_size": (5, 5), "burst_to": "random",
                "burst_gap_s": 0.2, "threads": 1, "after": 100, "app_ms": 5, "poll_for": 20,
                "block": {"queues": 50, "concurrency": 1}},
        targets=(worst("inversions", "==", 0, "inversions across 50 queues, c=1"),)),
    Row("flow", "flow", shown=("steady_ratio", "max_1s_ratio", "convergence_s", "mean_in_flight_second_half_ratio",
                               "low_share_of_free_slots", "high_peak_in_flight"),
        params={"rates": [10, 50, 200], "steady_s": (8.0, 5.0), "rate_concurrency": 20, "capacity": 8,
                "aimd_concurrency": 50, "aimd_messages": (1000, 600), "app_delay": 0.05, "threshold": 0.7,
                "priority_concurrency": 10, "high_cap": 3, "high_messages": (300, 200), "low_messages": (1200, 900)},
        targets=(*((f"rate_limit {r}: steady / rate", f"rate_{r}.steady_ratio", ">=", 0.95) for r in (10, 50, 200)),
                 *(worst(f"rate_{r}.max_1s_ratio", "<=", 1, f"rate_limit {r}: most in 1 s / (rate + burst)")
                   for r in (10, 50, 200)),
                 worst("aimd.lost", "==", 0, "backpressure: messages lost"),
                 worst("priority.high_peak_in_flight", "<=", 3, "high queue capped at 3: peak in flight"))),
    Row("fleet", "fleet", shown=("msgs_per_s", "sqs_requests_per_msg"), params={"cases": {
        "cpu": {"delay_ms": 0, "concurrency": 50, "messages": (10000, 2000)},
        "app": {"delay_ms": 20, "concurrency": 10, "messages": (8000, 2000)}}}),
    Row("fleet_limits", "fleet_limits", shown=("share_of_cap_ideal", "peak_in_flight",
                                               "dynamodb_per_minute_per_member_median"),
        targets=tuple(worst(f"shared-p{n}.peak_in_flight", "<=", 8, f"{n} process(es) under a fleet cap of 8: peak")
                      for n in (1, 2, 4))),
    Row("idempotency", cases=IDEMPOTENT, warmup=("plain", "dynamodb0"), params={"block": {"concurrency": 50}},
        keys=("msgs_per_s", "cpu_us_per_msg", "cpu_share_of_one_core", "dynamodb_requests_per_msg",
              "dynamodb_startup_requests", "claims_per_transaction", "completions_per_batch_write",
              "dynamodb_mean_added_ms", "dynamodb_standin_cpu_us_per_msg", "sqs_requests_per_msg", "left_in_queue",
              "warnings"), shown=("msgs_per_s", "cpu_us_per_msg", "dynamodb_requests_per_msg", "rate_over_plain"),
        paired=tuple((f"{name}.{out}", name, "plain_sqs10" if case.sqs_ms else "plain", key) for name, case in
                     IDEMPOTENT.items() for out, key in (("rate_over_plain", "msgs_per_s"),
                                                          ("cpu_over_plain", "cpu_us_per_msg"))),
        targets=(("msgs/s at a 10 ms DynamoDB round trip / no key (paired)", "dynamodb10.rate_over_plain", ">=", 0.70),
                 *(worst(f"{name}.dynamodb_requests_per_msg", "<=", 2, f"{name}: DynamoDB requests/msg")
                   for name, case in IDEMPOTENT.items() if case.dynamodb_ms is not None))),
    Row("tracing", cases=TRACED, warmup=("off", "all"), params={"shuffle": True, "block": {"concurrency": 50}},
        keys=("msgs_per_s", "cpu_us_per_msg", "cpu_us_per_msg_to_exit", "cpu_share_of_one_core", "spans_received",
              "spans_not_received", "export_requests", "export_bytes_per_span", "span_warnings", "left_in_queue"),
        shown=("cpu_us_per_msg_to_exit", "cpu_us_per_msg_to_exit_over_off", "spans_received"),
        paired=tuple((f"{name}.{key}_over_off", name, "off", key) for name in TRACED
                     for key in ("msgs_per_s", "cpu_us_per_msg", "cpu_us_per_msg_to_exit")) + tuple(
            (f"{name}.msgs_per_s_over_all", name, "all", "msgs_per_s") for name in TRACED),
        targets=(("CPU/msg, every span sampled / off (paired)", "all.cpu_us_per_msg_to_exit_over_off", "<=", 1.5),
                 ("CPU/msg, 1 % sampled / off (paired)", "ratio1.cpu_us_per_msg_to_exit_over_off", "<=", 1.1),
                 ("opentelemetry modules imported without [tracing]", "opentelemetry_modules_imported.off", "==", 0))),
    Row("redrive", "redrive", shown=("msgs_per_s", "rate_over_p1"),
        targets=(("msgs/s at a 20 ms SQS round trip, --parallel=10", "rtt20_p10.msgs_per_s", ">=", 1500),
                 ("messages lost, duplicated or left (worst run, any case)", "harm_worst", "==", 0))),
    Row("batch", cases={f"b{n}": D.but(app_ms=100, target={"batch_size": n}, messages=m)
                        for n, m in ((1, (5000, 1000)), (10, (30000, 5000)))},
        keys=STEADY_KEYS, warmup=("b1", "b10"), shown=("msgs_per_s", "fraction_of_ideal", "cpu_us_per_msg"),
        paired=(("cpu_ratio_b10_to_b1", "b10", "b1", "cpu_us_per_msg"), ("rate_ratio_b10_to_b1", "b10", "b1",
                                                                           "msgs_per_s")),
        params={"block": {"concurrency": 50, "hold_ms": 100}},
        targets=(("batch_size 10, 100 ms app: msgs/s / ideal", "b10.fraction_of_ideal", ">=", 0.90),
                 ("CPU/msg batch_size 10 / batch_size 1 (paired)", "cpu_ratio_b10_to_b1", "<=", 0.5))),
    Row("fair_alone", cases={"grouped": D.but(app_ms=20, group="tenant-1", messages=(3000, 1000)),
                             "ungrouped": D.but(app_ms=20, messages=(3000, 1000))}, keys=STEADY_KEYS,
        paired=(("grouped_over_ungrouped", "grouped", "ungrouped", "msgs_per_s"),),
        targets=(("one tenant alone / the same messages without a group, msgs/s (paired)", "grouped_over_ungrouped",
                  ">=", 0.95),)),
    Row("fair_queue", "fair", cases={"without": D.but(app_ms=50), "with": D.but(app_ms=50, queue=PER_GROUP_10),
                                     "with_in_send_order": D.but(app_ms=50, queue=PER_GROUP_10, in_send_order=True)},
        shown=("quiet_p50_ms", "quiet_p99_ms", "quiet_rate_over_ideal", "backlog_over_ideal", "backlog_share_of_slots"),
        params={"backlog": (5000, 1000), "tenants": 10, "quiet_every_s": 0.1, "window_s": (40.0, 15.0),
                "block": {"concurrency": 50, "app_ms": 50, "tenants": 10, "quiet_every_s": 0.1}},
        targets=(("with the cap: quiet tenants' p99 send to delivery, ms (2 x app + 1 s)", "with.quiet_p99_ms", "<=",
                  1100),
                 ("with the cap: the backlog's share of the slots the cap allows", "with.backlog_share_of_slots", ">=",
                  0.90))),
    *(Row(name, "soak", params={**SOAK, **changes}, targets=SOAK_TARGETS, in_full_run=False) for name, changes in (
        ("soak", {}), ("soak_idempotent", {"idempotency": "standin"}), ("soak_faults", {"sqs_faults": 0.2}),
        ("soak_idempotent_faults", {"idempotency": "standin", "sqs_faults": 0.2}),
        ("soak_faults_calm", {"messages": (20000, 2000), "sqs_faults": 0.2, "kills": False}),
        ("soak_moto", {"messages": (1000, 200), "rate": 5.0, "idempotency": "moto"}))),
    Row("cpu_check", cases={"rtt0": D, "rtt10": D.but(sqs_ms=10)}, keys=DRAIN_KEYS, warmup=("rtt0",),
        in_full_run=False, params={"block": {"reference_us": {"rtt0": 98.0, "rtt10": 96.0},
                                              "reference_of": "ecb6951, median of 5, 2026-11-26"}}),
    Row("instructions", "instructions", in_full_run=False, params={"small": 1000, "large": 5000}),
)
SCENARIOS = {row.name: row for row in ROWS}
