"""AWS as the daemon finds it: region, endpoints, credentials (in a child process when it can) and the
clients built from them once, before anything is spawned; the DynamoDB tables it makes for itself (`tables.py`)."""
