"""Periodic tasks: the scheduler that enqueues aws-sqsd cron messages and the DynamoDB claims that keep a
fleet from sending one slot twice."""
