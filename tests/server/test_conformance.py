"""The public conformance suite (jevcompat 0.1.1) and the official SDK against a started server, embedded model."""

import os

import pytest
from jevcompat.runner import run as run_jevcompat

from jevserve.server.app import ServerSettings, create_app
from jevserve.server.background import running_server
from tests.helpers import embedded_backends

pytestmark = pytest.mark.slow


def test_jevcompat_conformant_without_auth():
    with running_server(create_app(list(embedded_backends()))) as url:
        report = run_jevcompat(url, timeout=60.0)
    summary = report.summary()
    assert report.verdict == "conformant", summary
    assert (summary["MUST"]["passed"], summary["MUST"]["tested"]) == (32, 32)
    assert (summary["SHOULD"]["passed"], summary["SHOULD"]["tested"]) == (13, 13)


def test_jevcompat_conformant_with_auth():
    key = "jevserve-test-key-123"
    with running_server(create_app(list(embedded_backends()), ServerSettings(api_key=key))) as url:
        report = run_jevcompat(url, key=key, timeout=60.0)
    summary = report.summary()
    assert report.verdict == "conformant", summary
    assert (summary["MUST"]["passed"], summary["MUST"]["tested"]) == (32, 32)
    assert (summary["SHOULD"]["passed"], summary["SHOULD"]["tested"]) == (15, 15)


def test_official_sdk_parses_every_answer_type():
    from typesafe_sdk import Choice, Noul, Score, TypeSafeClient

    with running_server(create_app(list(embedded_backends()))) as url:
        os.environ.pop("TYPESAFE_BASE_URL", None)
        client = TypeSafeClient(api_key="any-key", base_url=url, timeout=60)
        result = client.system_one(
            state={"subject": "Double charge", "body": "I was billed twice in March, please refund one."},
            questions={
                "refund": Noul(instructions="Is the customer asking for money back?"),
                "team": Choice(instructions="Which team?", criteria={"Billing": "Payments", "Technical": None}),
                "anger": Score(instructions="How upset?", criteria=["Calm", "Annoyed", "Furious"]),
            },
        )
        models = client.models.list()
    assert 0.0 <= result.nouls["refund"].noul <= 1.0
    assert result.choices["team"].choice in {"Billing", "Technical"}
    assert set(result.scores["anger"].probabilities) == {0, 1, 2}
    assert any(m.name == "jev-latest" for m in models.models)


def test_jevcompat_conformant_with_a_tiny_causal_lm(tmp_path):
    from jevserve.decide.registry import load_backends
    from tests.decide.tiny_causal_lm import save_tiny_causal_lm

    model_dir = save_tiny_causal_lm(tmp_path / "tiny", max_positions=16384)  # the 255-option case needs ~8k
    backends = load_backends(f"causal:{model_dir}")
    with running_server(create_app(backends)) as url:
        report = run_jevcompat(url, timeout=60.0)
    summary = report.summary()
    assert report.verdict == "conformant", summary
    assert (summary["MUST"]["passed"], summary["MUST"]["tested"]) == (32, 32)
