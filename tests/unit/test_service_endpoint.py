"""`aws.service_endpoint` against what botocore's own clients resolve (no network: clients only resolve)."""

from __future__ import annotations

import botocore.session
import pytest

from workerless_gevent.aws.session import service_endpoint

ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_LAMBDA",
                      "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "AWS_USE_FIPS_ENDPOINT", "AWS_USE_DUALSTACK_ENDPOINT")


@pytest.fixture
def session(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> botocore.session.Session:
    for name in ENDPOINT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    return new_session()


def new_session() -> botocore.session.Session:
    session = botocore.session.Session()
    session.set_credentials("a", "b")
    return session


def known_regions(session: botocore.session.Session) -> list[str]:
    partitions = session.get_component("data_loader").load_data("partitions")["partitions"]
    return [region for partition in partitions for region in partition["regions"]]


def test_every_region_botocore_knows_resolves_as_its_clients_do(session: botocore.session.Session) -> None:
    regions = known_regions(session) + ["eu-central-9", "cn-northwest-9", "us-gov-east-3", "us-isob-west-7", "mars-1"]
    assert len(regions) > 30
    for service in ("sqs", "lambda"):
        for region in regions:
            expected = session.create_client(service, region_name=region).meta.endpoint_url
            assert service_endpoint(session, service, region, None) == expected, (service, region)


def test_china_and_govcloud_use_their_partitions_suffix(session: botocore.session.Session) -> None:
    assert service_endpoint(session, "sqs", "cn-north-1", None) == "https://sqs.cn-north-1.amazonaws.com.cn"
    assert service_endpoint(session, "sqs", "us-gov-west-1", None) == "https://sqs.us-gov-west-1.amazonaws.com"
    assert service_endpoint(session, "sqs", "eu-west-1", None) == "https://sqs.eu-west-1.amazonaws.com"


def test_configured_endpoints_win_in_botocores_order(session: botocore.session.Session,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1111")
    assert service_endpoint(new_session(), "sqs", "eu-west-1", None) == "http://127.0.0.1:1111"
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:2222")
    fresh = new_session()
    assert service_endpoint(fresh, "sqs", "eu-west-1", None) == "http://127.0.0.1:2222"
    assert service_endpoint(fresh, "lambda", "eu-west-1", None) == "http://127.0.0.1:1111"
    assert fresh.create_client("sqs", region_name="eu-west-1").meta.endpoint_url == "http://127.0.0.1:2222"
    # [aws] endpoint_url is passed to every client explicitly, so it wins over the environment
    assert service_endpoint(fresh, "sqs", "eu-west-1", "http://127.0.0.1:3333") == "http://127.0.0.1:3333"
    monkeypatch.setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")
    assert service_endpoint(new_session(), "sqs", "eu-west-1", None) == "https://sqs.eu-west-1.amazonaws.com"


@pytest.mark.parametrize("variable", ["AWS_USE_FIPS_ENDPOINT", "AWS_USE_DUALSTACK_ENDPOINT"])
def test_fips_and_dual_stack_are_left_to_botocore(session: botocore.session.Session, monkeypatch: pytest.MonkeyPatch,
                                                  variable: str) -> None:
    monkeypatch.setenv(variable, "true")
    assert service_endpoint(new_session(), "sqs", "us-east-1", None) is None
