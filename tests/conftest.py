from gevent import monkey

if not monkey.is_module_patched("socket"):  # already done under `python -m gevent.monkey`
    monkey.patch_all()

# Shared fixtures. gevent must be patched before anything imports ssl, urllib3 or boto3, hence
# the statement above comes first. Fixtures start real servers on 127.0.0.1; see tests/support.

import os  # noqa: E402
import uuid  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import botocore.exceptions  # noqa: E402
import pytest  # noqa: E402

from tests.support import (  # noqa: E402
    REPO_ROOT,
    CountingProxy,
    Daemon,
    FakeLambda,
    HttpApp,
    MotoServer,
    Queue,
    create_queue,
)
from tests.support.moto import aws_environ  # noqa: E402


MOTO_LOG_START = pytest.StashKey[int]()
MOTO_LOG_LINES = 80  # of a failing test's SQS calls, the last ones


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: takes more than a few seconds")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    server = getattr(item, "funcargs", {}).get("moto_server")
    if isinstance(server, MotoServer):
        item.stash[MOTO_LOG_START] = server.log_path.stat().st_size
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    """A failing test shows the SQS calls moto saw while it ran, to tell a flaky test from a defect."""
    report = yield
    server = getattr(item, "funcargs", {}).get("moto_server")
    if report.failed and call.when == "call" and isinstance(server, MotoServer) and MOTO_LOG_START in item.stash:
        with open(server.log_path, "rb") as log:
            log.seek(item.stash[MOTO_LOG_START])
            lines = log.read().decode(errors="replace").splitlines()
        shown = lines[-MOTO_LOG_LINES:]
        report.sections.append((f"moto during the test ({len(shown)} of {len(lines)} lines, the last)", "\n".join(shown)))
    return report


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    """One moto server for the session; this process's AWS environment points at it."""
    workdir = tmp_path_factory.mktemp("moto")
    server = MotoServer(workdir)
    server.start()
    with pytest.MonkeyPatch.context() as patch:
        for key in [k for k in os.environ if k.startswith(("AWS_", "BOTO_"))]:
            patch.delenv(key)
        for key, value in aws_environ({}, server.url, workdir).items():
            patch.setenv(key, value)
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture(scope="session")
def moto_endpoint(moto_server: MotoServer) -> str:
    """The moto server URL, e.g. "http://127.0.0.1:PORT"."""
    return moto_server.url


@pytest.fixture
def counting_proxy(moto_endpoint: str) -> Iterator[CountingProxy]:
    """A reverse proxy in front of moto that records every AWS request; aim AWS_ENDPOINT_URL here."""
    proxy = CountingProxy(moto_endpoint)
    proxy.start()
    yield proxy
    proxy.stop()


@pytest.fixture
def aws_env(moto_server: MotoServer) -> dict[str, str]:
    """A copy of os.environ aimed at moto, for subprocesses (fake keys, no profile)."""
    return dict(os.environ)


@pytest.fixture(scope="session")
def sqs(moto_server: MotoServer) -> Any:
    """A boto3 SQS client on moto with standard retries."""
    return moto_server.client("sqs")


@pytest.fixture
def make_queue(sqs: Any) -> Iterator[Callable[..., Queue]]:
    """`make_queue(fifo=False, name=None, **attrs) -> Queue`; queues are deleted afterwards."""
    made: list[Queue] = []

    def make(fifo: bool = False, name: str | None = None, **attrs: Any) -> Queue:
        queue = create_queue(sqs, fifo=fifo, name=name, **attrs)
        made.append(queue)
        return queue

    yield make
    for queue in made:
        try:
            sqs.delete_queue(QueueUrl=queue.url)
        except Exception:  # already deleted by the test; moto stays small either way
            pass


@pytest.fixture
def moto_lambda_function(moto_server: MotoServer) -> Iterator[str]:
    """A function in moto's docker-free Lambda; invoke payloads are recorded meanwhile.

    Read them with `moto_server.lambda_invocations(name)`; queue answers with
    `moto_server.queue_lambda_results(...)`. Unused queued answers are drained at teardown.
    """
    name = moto_server.create_lambda_function()
    moto_server.start_recording()
    yield name
    moto_server.stop_recording()
    moto_server.drain_lambda_results(name)
    moto_server.client("lambda").delete_function(FunctionName=name)


@pytest.fixture
def claims_table(moto_server: MotoServer) -> Iterator[str]:
    """A fresh DynamoDB claims-table name; the table is deleted afterwards if anything created it."""
    name = f"claims-{uuid.uuid4().hex[:10]}"
    yield name
    try:
        moto_server.client("dynamodb").delete_table(TableName=name)
    except botocore.exceptions.ClientError as error:  # a test that never created it
        assert error.response["Error"]["Code"] == "ResourceNotFoundException"


@pytest.fixture(scope="session")
def s3(moto_server: MotoServer) -> Any:
    """A boto3 S3 client on moto."""
    return moto_server.client("s3")


@pytest.fixture
def bucket(s3: Any) -> Iterator[str]:
    """A fresh S3 bucket on moto, emptied and deleted afterwards."""
    name = f"payloads-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    yield name
    for item in s3.list_objects_v2(Bucket=name).get("Contents", []):
        s3.delete_object(Bucket=name, Key=item["Key"])
    s3.delete_bucket(Bucket=name)


@pytest.fixture
def http_app() -> Iterator[HttpApp]:
    """A recording HTTP app on 127.0.0.1 (port 0) in this process; answers 200 by default."""
    app = HttpApp()
    app.start()
    yield app
    app.stop()


@pytest.fixture
def fake_lambda() -> Iterator[FakeLambda]:
    """A stand-in Lambda Invoke API for errors and throttles; answers `null` by default."""
    fake = FakeLambda()
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    """`daemon(args, env=None, cwd=REPO_ROOT, program=None, is_executable=False) -> Daemon`; kills leftovers.

    `env` defaults to os.environ (pass `aws_env` to aim it at moto). Logs of every daemon are
    printed at teardown, so a failing test shows them.
    """
    started: list[Daemon] = []

    def start(
        args: list[str],
        env: dict[str, str] | None = None,
        cwd: Path = REPO_ROOT,
        program: Path | None = None,
        is_executable: bool = False,
    ) -> Daemon:
        log_path = tmp_path / f"workerless-{len(started)}.log"
        env = dict(os.environ) if env is None else env
        proc = Daemon(args, env, cwd=cwd, log_path=log_path, program=program, is_executable=is_executable)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.alive():
            proc.kill()
        print(f"--- workerless {proc.args} exit {proc.returncode} ---\n{proc.output()}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slow tests run only when a marker expression asks for them (.ci/run passes -m)."""
    if config.getoption("markexpr"):
        return
    skip = pytest.mark.skip(reason="slow: run with -m 'slow or not slow' (as .ci/run does)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
