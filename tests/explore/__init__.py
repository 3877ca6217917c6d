"""A fault test that explores: seeded schedules of faults, app behaviour and stops against the daemon's own
delivery path (in process), an SQS model of our own over HTTP and moto's DynamoDB behind a faulting proxy,
with invariants checked after each schedule (see test_explore_faults.py)."""
