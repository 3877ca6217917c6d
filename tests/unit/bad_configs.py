"""Bad TOML configurations and the exact one-line error each must produce.

Each item is `(id, toml_text, expected_line)`. `expected_line` holds a `{path}` placeholder for
the config file's path as given to `load_config` or `-c`; fill it with `expected_line_for`.
Every snippet is a valid configuration but for the one rule it breaks, so the unit suite
(`test_config.py`) and the e2e suite (the real CLI, exit 2, one line on stderr) can share them.
"""

from __future__ import annotations

QUEUE = '[[queues]]\nname = "payments"\n'
SECOND_QUEUE = '[[queues]]\nname = "submissions"\n'
TARGET = '[targets.default]\ntype = "http"\nurl = "http://127.0.0.1:8080/"\n'
LAMBDA_TARGET = '[targets.default]\ntype = "lambda"\nfunction = "billing-fn"\n'


def config_text(top: str = "", queue: str = "", target: str = "", tables: str = "") -> str:
    """A valid config with extra lines at the top, in the first queue, the default target, or after."""
    return f"{top}{QUEUE}{queue}\n{TARGET}{target}\n{tables}"


def lambda_config_text(target: str) -> str:
    return f"{QUEUE}\n{LAMBDA_TARGET}{target}"


def two_queues_text(first: str = "", second: str = "") -> str:
    return f"{QUEUE}{first}\n{SECOND_QUEUE}{second}\n{TARGET}"


def expected_line_for(template: str, path: object) -> str:
    """Fill the `{path}` placeholder (plain replace: the lines may hold other braces one day)."""
    return template.replace("{path}", str(path))


LONG_NAME = "a" * 81
FIFO_NAME_81 = "f" * 76 + ".fifo"  # SQS counts the suffix in its 80-character limit

# Cases whose expected line is right but the package prints something else: id -> reason.
# Both suites mark these `xfail(strict=True)`; drop an entry once the package is fixed.
KNOWN_BUGS: dict[str, str] = {}

BAD_CONFIGS: list[tuple[str, str, str]] = [
    # --- top level ---------------------------------------------------------------------------
    ("name-not-a-string", config_text(top="name = 5\n"),
     "{path}: name: must be a non-empty string (got 5)"),
    ("name-empty", config_text(top='name = ""\n'),
     '{path}: name: must be a non-empty string (got "")'),
    ("name-with-space", config_text(top='name = "my app"\n'),
     '{path}: name: must be letters, digits and . - _ / # (CloudWatch namespace) (got "my app")'),
    ("name-with-newline", config_text(top='name = "my\\napp"\n'),
     '{path}: name: must be letters, digits and . - _ / # (CloudWatch namespace) (got "my\\napp")'),
    ("name-aws-prefix", config_text(top='name = "AWS/EC2"\n'),
     '{path}: name: must be letters, digits and . - _ / # (CloudWatch namespace) (got "AWS/EC2")'),
    ("name-too-long", config_text(top=f'name = "{"n" * 201}"\n'),
     f'{{path}}: name: must be letters, digits and . - _ / # (CloudWatch namespace) (got "{"n" * 201}")'),
    ("concurrency-zero", config_text(top="concurrency = 0\n"),
     "{path}: concurrency: must be an integer from 1 to 10000 (got 0)"),
    ("concurrency-too-high", config_text(top="concurrency = 10001\n"),
     "{path}: concurrency: must be an integer from 1 to 10000 (got 10001)"),
    ("concurrency-string", config_text(top='concurrency = "50"\n'),
     '{path}: concurrency: must be an integer from 1 to 10000 (got "50")'),
    ("concurrency-float", config_text(top="concurrency = 5.5\n"),
     "{path}: concurrency: must be an integer from 1 to 10000 (got 5.5)"),
    ("concurrency-bool", config_text(top="concurrency = true\n"),
     "{path}: concurrency: must be an integer from 1 to 10000 (got true)"),
    ("shutdown-timeout-negative", config_text(top="shutdown_timeout = -1\n"),
     "{path}: shutdown_timeout: must be an integer from 0 to 3600 (got -1)"),
    ("shutdown-timeout-too-high", config_text(top="shutdown_timeout = 3601\n"),
     "{path}: shutdown_timeout: must be an integer from 0 to 3600 (got 3601)"),
    ("log-format-choice", config_text(top='log_format = "xml"\n'),
     '{path}: log_format: must be one of text, json (got "xml")'),
    ("log-level-choice", config_text(top='log_level = "debug"\n'),
     '{path}: log_level: must be one of DEBUG, INFO, WARNING, ERROR (got "debug")'),
    ("drain-not-bool", config_text(top='drain = "yes"\n'),
     '{path}: drain: must be true or false (got "yes")'),
    ("max-messages-zero", config_text(top="max_messages = 0\n"),
     "{path}: max_messages: must be an integer >= 1 (got 0)"),
    ("unknown-top-key", config_text(top="concurency = 5\n"),
     "{path}: concurency: unknown key"),
    ("polling-not-a-table", config_text(top="polling = 5\n"),
     "{path}: polling: must be a table (got 5)"),
    # --- [polling] -----------------------------------------------------------------------------
    ("poll-for-zero", config_text(tables="[polling]\npoll_for = 0\n"),
     "{path}: polling.poll_for: must be an integer from 1 to 20 (got 0)"),
    ("poll-for-too-high", config_text(tables="[polling]\npoll_for = 21\n"),
     "{path}: polling.poll_for: must be an integer from 1 to 20 (got 21)"),
    ("poll-for-string", config_text(tables='[polling]\npoll_for = "10"\n'),
     '{path}: polling.poll_for: must be an integer from 1 to 20 (got "10")'),
    ("batch-size-zero", config_text(tables="[polling]\nbatch_size = 0\n"),
     "{path}: polling.batch_size: must be an integer from 1 to 10 (got 0)"),
    ("batch-size-too-high", config_text(tables="[polling]\nbatch_size = 11\n"),
     "{path}: polling.batch_size: must be an integer from 1 to 10 (got 11)"),
    ("strategy-choice", config_text(tables='[polling]\nstrategy = "fastest"\n'),
     '{path}: polling.strategy: must be one of priority, weighted, random, round-robin (got "fastest")'),
    ("sleep-negative", config_text(tables="[polling]\nsleep = -1\n"),
     "{path}: polling.sleep: must be a number from 0 to 3600 (got -1)"),
    ("sleep-string", config_text(tables='[polling]\nsleep = "1"\n'),
     '{path}: polling.sleep: must be a number from 0 to 3600 (got "1")'),
    ("sleep-nan", config_text(tables="[polling]\nsleep = nan\n"),
     "{path}: polling.sleep: must be a number from 0 to 3600 (got nan)"),
    ("polling-unknown-key", config_text(tables="[polling]\nwait = 5\n"),
     "{path}: polling.wait: unknown key"),
    # --- [[queues]] ------------------------------------------------------------------------------
    ("queues-missing", TARGET,
     "{path}: queues: at least one queue is required (a [[queues]] table or --queues)"),
    ("queues-empty-list", "queues = []\n" + TARGET,
     "{path}: queues: at least one queue is required (got a list)"),
    ("queues-not-a-list", 'queues = "payments"\n' + TARGET,
     '{path}: queues: must be a list of tables (got "payments")'),
    ("queues-item-not-a-table", "queues = [1]\n" + TARGET,
     "{path}: queues[0]: must be a table (got 1)"),
    ("queue-name-missing", "[[queues]]\nweight = 2\n\n" + TARGET,
     "{path}: queues[0].name: is required"),
    ("queue-name-invalid", '[[queues]]\nname = "pay ments"\n\n' + TARGET,
     '{path}: queues[0].name: must be 1-80 letters, digits, - or _ (plus .fifo) (got "pay ments")'),
    ("queue-name-too-long", f'[[queues]]\nname = "{LONG_NAME}"\n\n' + TARGET,
     f'{{path}}: queues[0].name: must be 1-80 letters, digits, - or _ (plus .fifo) (got "{LONG_NAME}")'),
    ("queue-name-trailing-newline", '[[queues]]\nname = "payments\\n"\n\n' + TARGET,
     '{path}: queues[0].name: must be 1-80 letters, digits, - or _ (plus .fifo) (got "payments\\n")'),
    ("queue-url-invalid", '[[queues]]\nurl = "sqs://payments"\n\n' + TARGET,
     '{path}: queues[0].url: must be an http(s) queue URL (got "sqs://payments")'),
    ("weight-string-second-queue", two_queues_text(second='weight = "5"\n'),
     '{path}: queues[1].weight: must be an integer from 1 to 1000 (got "5")'),
    ("weight-zero", config_text(queue="weight = 0\n"),
     "{path}: queues[0].weight: must be an integer from 1 to 1000 (got 0)"),
    ("weight-too-high", config_text(queue="weight = 1001\n"),
     "{path}: queues[0].weight: must be an integer from 1 to 1000 (got 1001)"),
    ("visibility-timeout-zero", config_text(queue="visibility_timeout = 0\n"),
     "{path}: queues[0].visibility_timeout: must be an integer from 1 to 43200 (got 0)"),
    ("visibility-timeout-too-high", config_text(queue="visibility_timeout = 43201\n"),
     "{path}: queues[0].visibility_timeout: must be an integer from 1 to 43200 (got 43201)"),
    ("error-visibility-timeout-negative", config_text(queue="error_visibility_timeout = -1\n"),
     "{path}: queues[0].error_visibility_timeout: must be an integer from 0 to 43200 (got -1)"),
    ("error-visibility-timeout-too-high", config_text(queue="error_visibility_timeout = 43201\n"),
     "{path}: queues[0].error_visibility_timeout: must be an integer from 0 to 43200 (got 43201)"),
    ("backoff-choice", config_text(queue='backoff = "linear"\n'),
     '{path}: queues[0].backoff: must be one of constant, exponential (got "linear")'),
    ("max-retries-zero", config_text(queue="max_retries = 0\n"),
     "{path}: queues[0].max_retries: must be an integer from 1 to 1000 (got 0)"),
    ("max-retries-too-high", config_text(queue="max_retries = 1001\n"),
     "{path}: queues[0].max_retries: must be an integer from 1 to 1000 (got 1001)"),
    ("retention-period-too-low", config_text(queue="retention_period = 59\n"),
     "{path}: queues[0].retention_period: must be an integer from 60 to 1209600 (got 59)"),
    ("retention-period-too-high", config_text(queue="retention_period = 1209601\n"),
     "{path}: queues[0].retention_period: must be an integer from 60 to 1209600 (got 1209601)"),
    ("queue-target-not-a-string", config_text(queue="target = 5\n"),
     "{path}: queues[0].target: must be a non-empty string (got 5)"),
    ("queue-unknown-key", config_text(queue="priority = 1\n"),
     "{path}: queues[0].priority: unknown key"),
    ("duplicate-queue", f"{QUEUE}\n{QUEUE}\n{TARGET}",
     '{path}: queues[1].name: duplicate queue (got "payments")'),
    ("duplicate-queue-by-url",
     QUEUE + '\n[[queues]]\nurl = "https://sqs.us-east-1.amazonaws.com/123456789012/payments"\n\n' + TARGET,
     '{path}: queues[1].name: duplicate queue (got "payments")'),
    ("undefined-target", config_text(queue='target = "billing"\n'),
     '{path}: queues[0].target: names a target that is not defined in [targets] (got "billing")'),
    ("missing-default-target", QUEUE,
     '{path}: queues[0].target: has no target: define [targets.default] or pass --http=URL '
     'or --function=NAME (got "default")'),
    ("dead-letter-queue-is-itself", config_text(queue='dead_letter_queue = "payments"\n'),
     '{path}: queues[0].dead_letter_queue: must differ from the queue itself (got "payments")'),
    ("dead-letter-queue-name-invalid", config_text(queue='dead_letter_queue = "payments dlq"\n'),
     '{path}: queues[0].dead_letter_queue: must be 1-80 letters, digits, - or _ (plus .fifo) (got "payments dlq")'),
    ("fifo-queue-name-too-long", f'[[queues]]\nname = "{FIFO_NAME_81}"\n\n' + TARGET,
     f'{{path}}: queues[0].name: must be 1-80 letters, digits, - or _ (plus .fifo) (got "{FIFO_NAME_81}")'),
    ("dead-letter-queue-is-polled", two_queues_text(first='dead_letter_queue = "submissions"\n'),
     '{path}: queues[0].dead_letter_queue: must not be one of the polled queues (got "submissions")'),
    # --- [targets.*] -----------------------------------------------------------------------------
    ("targets-not-a-table", "targets = 5\n" + QUEUE,
     "{path}: targets: must be a table (got 5)"),
    ("target-not-a-table", QUEUE + '\n[targets]\ndefault = "http://127.0.0.1:8080/"\n',
     '{path}: targets.default: must be a table (got "http://127.0.0.1:8080/")'),
    ("target-type-missing", QUEUE + '\n[targets.default]\nurl = "http://127.0.0.1:8080/"\n',
     "{path}: targets.default.type: is required"),
    ("target-type-choice", QUEUE + '\n[targets.default]\ntype = "sqs"\n',
     '{path}: targets.default.type: must be one of http, lambda (got "sqs")'),
    ("http-url-missing", QUEUE + '\n[targets.default]\ntype = "http"\n',
     "{path}: targets.default.url: is required"),
    ("http-url-https", QUEUE + '\n[targets.default]\ntype = "http"\nurl = "https://example.com/"\n',
     '{path}: targets.default.url: must be an http:// URL with a host (got "https://example.com/")'),
    ("http-url-no-host", QUEUE + '\n[targets.default]\ntype = "http"\nurl = "http:///jobs"\n',
     '{path}: targets.default.url: must be an http:// URL with a host (got "http:///jobs")'),
    ("http-url-query", QUEUE + '\n[targets.default]\ntype = "http"\nurl = "http://127.0.0.1:8080/?a=1"\n',
     '{path}: targets.default.url: must be an http:// URL with a host (got "http://127.0.0.1:8080/?a=1")'),
    ("http-url-port-out-of-range", QUEUE + '\n[targets.default]\ntype = "http"\nurl = "http://127.0.0.1:65536/"\n',
     '{path}: targets.default.url: must be an http:// URL with a host (got "http://127.0.0.1:65536/")'),
    ("http-url-port-not-a-number", QUEUE + '\n[targets.default]\ntype = "http"\nurl = "http://127.0.0.1:http/"\n',
     '{path}: targets.default.url: must be an http:// URL with a host (got "http://127.0.0.1:http/")'),
    ("connect-timeout-zero", config_text(target="connect_timeout = 0\n"),
     "{path}: targets.default.connect_timeout: must be an integer from 1 to 60 (got 0)"),
    ("connect-timeout-too-high", config_text(target="connect_timeout = 61\n"),
     "{path}: targets.default.connect_timeout: must be an integer from 1 to 60 (got 61)"),
    ("inactivity-timeout-zero", config_text(target="inactivity_timeout = 0\n"),
     "{path}: targets.default.inactivity_timeout: must be an integer from 1 to 1800 (got 0)"),
    ("inactivity-timeout-too-high", config_text(target="inactivity_timeout = 1801\n"),
     "{path}: targets.default.inactivity_timeout: must be an integer from 1 to 1800 (got 1801)"),
    ("max-connections-zero", config_text(target="max_connections = 0\n"),
     "{path}: targets.default.max_connections: must be an integer from 1 to 10000 (got 0)"),
    ("ready-path-relative", config_text(target='ready_path = "health"\n'),
     '{path}: targets.default.ready_path: must be a path that starts with / (GET on the url\'s host and port) '
     '(got "health")'),
    ("ready-path-a-url", config_text(target='ready_path = "http://127.0.0.1:8080/health"\n'),
     '{path}: targets.default.ready_path: must be a path that starts with / (GET on the url\'s host and port) '
     '(got "http://127.0.0.1:8080/health")'),
    ("ready-path-with-a-space", config_text(target='ready_path = "/he alth"\n'),
     '{path}: targets.default.ready_path: must be a path that starts with / (GET on the url\'s host and port) '
     '(got "/he alth")'),
    ("ready-path-empty", config_text(target='ready_path = ""\n'),
     '{path}: targets.default.ready_path: must be a non-empty string (got "")'),
    ("ready-path-on-lambda", lambda_config_text('ready_path = "/health"\n'),
     "{path}: targets.default.ready_path: unknown key"),
    ("content-type-empty", config_text(target='content_type = ""\n'),
     '{path}: targets.default.content_type: must be a non-empty string (got "")'),
    ("http-target-unknown-key", config_text(target='function = "billing-fn"\n'),
     "{path}: targets.default.function: unknown key"),
    ("lambda-function-missing", QUEUE + '\n[targets.default]\ntype = "lambda"\n',
     "{path}: targets.default.function: is required"),
    ("lambda-batch-size-zero", lambda_config_text("batch_size = 0\n"),
     "{path}: targets.default.batch_size: must be an integer from 1 to 10 (got 0)"),
    ("lambda-batch-size-too-high", lambda_config_text("batch_size = 11\n"),
     "{path}: targets.default.batch_size: must be an integer from 1 to 10 (got 11)"),
    ("lambda-timeout-too-high", lambda_config_text("timeout = 901\n"),
     "{path}: targets.default.timeout: must be an integer from 1 to 900 (got 901)"),
    ("lambda-target-unknown-key", lambda_config_text('url = "http://127.0.0.1:8080/"\n'),
     "{path}: targets.default.url: unknown key"),
    ("named-target-unknown-key",
     config_text(queue='target = "billing"\n',
                 tables='[targets.billing]\ntype = "lambda"\nfunction = "billing-fn"\nmemory = 128\n'),
     "{path}: targets.billing.memory: unknown key"),
    # --- [status], [metrics], [aws] --------------------------------------------------------------
    ("status-listen-no-host", config_text(tables='[status]\nlisten = ":9100"\n'),
     '{path}: status.listen: must be HOST:PORT or PORT (got ":9100")'),
    ("status-listen-named-port", config_text(tables='[status]\nlisten = "localhost:http"\n'),
     '{path}: status.listen: must be HOST:PORT or PORT (got "localhost:http")'),
    ("status-listen-port-out-of-range", config_text(tables='[status]\nlisten = "127.0.0.1:65536"\n'),
     '{path}: status.listen: must be HOST:PORT or PORT (got "127.0.0.1:65536")'),
    ("status-unknown-key", config_text(tables="[status]\nport = 9100\n"),
     "{path}: status.port: unknown key"),
    ("metrics-interval-zero", config_text(tables="[metrics]\ninterval = 0\n"),
     "{path}: metrics.interval: must be an integer from 1 to 86400 (got 0)"),
    ("metrics-unknown-key", config_text(tables='[metrics]\nnamespace = "x"\n'),
     "{path}: metrics.namespace: unknown key"),
    ("aws-region-not-a-string", config_text(tables="[aws]\nregion = 5\n"),
     "{path}: aws.region: must be a non-empty string (got 5)"),
    ("aws-unknown-key", config_text(tables='[aws]\nsecret_key = "x"\n'),
     "{path}: aws.secret_key: unknown key"),
    # --- not TOML --------------------------------------------------------------------------------
    ("invalid-toml-missing-value", "concurrency = \n",
     "{path}: invalid TOML: Invalid value (at line 1, column 15)"),
    ("invalid-toml-duplicate-key", "concurrency = 1\nconcurrency = 2\n",
     "{path}: invalid TOML: Cannot overwrite a value (at line 2, column 16)"),
    ("invalid-toml-unclosed-array-table", "[[queues]\n",
     "{path}: invalid TOML: Expected ']]' at the end of an array declaration (at line 1, column 9)"),
]
