"""One message's life, receive to delete, in reading order: queue (SQS calls of one queue), batching,
ordering, receiving, poller (choosing), slots (delivering), outcomes (settling), leases (visibility)."""
