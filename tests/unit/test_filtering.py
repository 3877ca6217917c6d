"""Filter criteria in Lambda's syntax, matched against messages as Lambda's SQS record shows them."""

from __future__ import annotations

import json

import pytest

from tests.unit.sqs_messages import raw_message, string_attribute
from workerless_gevent.filtering import FilterError, matches_any, parse_filters
from workerless_gevent.message import Message


def message(body: str, **attributes: str) -> Message:
    raw = raw_message(body=body)
    raw["MessageAttributes"] = {name: string_attribute(value) for name, value in attributes.items()}
    return Message.from_sqs("orders", raw, 0.0, 0.0)


def matches(pattern: object, body: object, **attributes: str) -> bool:
    text = body if isinstance(body, str) else json.dumps(body)
    return matches_any(parse_filters([json.dumps(pattern)]), message(text, **attributes))


@pytest.mark.parametrize(("pattern", "body", "expected"), [
    ({"body": {"kind": ["order"]}}, {"kind": "order"}, True),
    ({"body": {"kind": ["order"]}}, {"kind": "refund"}, False),
    ({"body": {"kind": ["order"]}}, "not json", False),
    ({"body": {"kind": ["order", "refund"]}}, {"kind": "refund"}, True),
    ({"body": {"amount": [5]}}, {"amount": 5.0}, True),
    ({"body": {"flag": [True]}}, {"flag": 1}, False),
    ({"body": {"gone": [None]}}, {"gone": None}, True),
    ({"body": {"customer": {"tier": ["gold"]}}}, {"customer": {"tier": "gold"}}, True),
    ({"body": {"tags": ["b"]}}, {"tags": ["a", "b"]}, True),
    ({"body": {"sku": [{"prefix": "AB-"}]}}, {"sku": "AB-12"}, True),
    ({"body": {"sku": [{"prefix": "AB-"}]}}, {"sku": "XAB-12"}, False),
    ({"body": {"file": [{"suffix": ".png"}]}}, {"file": "a.png"}, True),
    ({"body": {"city": [{"equals-ignore-case": "oslo"}]}}, {"city": "OSLO"}, True),
    ({"body": {"amount": [{"numeric": [">", 0, "<=", 100]}]}}, {"amount": 100}, True),
    ({"body": {"amount": [{"numeric": [">", 0, "<=", 100]}]}}, {"amount": 0}, False),
    ({"body": {"amount": [{"numeric": [">", 0]}]}}, {"amount": "7"}, False),
    ({"body": {"coupon": [{"exists": True}]}}, {"coupon": "X"}, True),
    ({"body": {"coupon": [{"exists": False}]}}, {"coupon": "X"}, False),
    ({"body": {"coupon": [{"exists": False}]}}, {}, True),
    ({"body": {"state": [{"anything-but": ["test", "dev"]}]}}, {"state": "prod"}, True),
    ({"body": {"state": [{"anything-but": "test"}]}}, {"state": "test"}, False),
    ({"body": {"state": [{"anything-but": "test"}]}}, {}, False),
    ({"body": ["plain text"]}, "plain text", True),
])
def test_body_patterns_match_as_lambda_documents(pattern: object, body: object, expected: bool) -> None:
    assert matches(pattern, body) is expected


def test_message_attributes_and_any_of_several_filters() -> None:
    pattern = {"messageAttributes": {"kind": {"stringValue": ["order"]}}}
    assert matches(pattern, "x", kind="order")
    assert not matches(pattern, "x", kind="refund")
    assert not matches(pattern, "x")
    either = parse_filters(['{"body": {"a": [1]}}', '{"body": {"b": [2]}}'])
    assert matches_any(either, message('{"b": 2}')) and not matches_any(either, message('{"c": 3}'))
    assert matches_any((), message("anything"))


@pytest.mark.parametrize(("text", "problem"), [
    ("{", "is not valid JSON (Expecting property name enclosed in double quotes at character 1)"),
    ("[]", 'must be a non-empty JSON object, e.g. {"body": {"kind": ["order"]}}'),
    ('{"headers": {"a": ["b"]}}', "may filter on body, attributes and messageAttributes only (got headers)"),
    ('{"body": {"kind": "order"}}', "body.kind: must be an object or a non-empty list of values to match"),
    ('{"body": {"kind": []}}', "body.kind: must be an object or a non-empty list of values to match"),
    ('{"body": {"n": [{"numeric": [">"]}]}}', "body.n: numeric takes [op, number] or [op, number, op, number]"),
    ('{"body": {"n": [{"numeric": ["~", 1]}]}}', "body.n: numeric takes operators = < <= > >= followed by numbers"),
    ('{"body": {"n": [{"wildcard": "a*"}]}}', 'body.n: an operator must be one of prefix, suffix, '
                                              'equals-ignore-case, anything-but, numeric, exists (got {"wildcard": "a*"})'),
    ('{"body": {"n": [{"exists": "yes"}]}}', "body.n: exists takes true or false"),
    ('{"body": {"n": [{"prefix": 1}]}}', "body.n: prefix takes a string"),
])
def test_a_filter_that_does_not_parse_says_why(text: str, problem: str) -> None:
    with pytest.raises(FilterError) as caught:
        parse_filters([text])
    assert str(caught.value) == problem


def test_a_body_nested_past_the_parser_s_depth_matches_no_body_pattern() -> None:
    deep = "[" * 100_000 + "]" * 100_000  # json.loads raises RecursionError, not ValueError
    assert matches({"body": {"kind": ["order"]}}, deep) is False
    assert matches({"body": {"kind": [{"exists": False}]}}, deep) is False
