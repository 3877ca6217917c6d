"""Idempotent delivery: a message's key (`keys.py`), its item in DynamoDB (`store.py`), and the claims the
settler asks for around a delivery (`guard.py`)."""
