"""Bytes on sockets: keep-alive HTTP, SigV4 signing, botocore-style retries, and the SQS and Lambda calls
of the hot path. Knows nothing of the daemon: no queue state, no outcomes, no configuration."""
