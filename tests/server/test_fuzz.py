"""Property-based fuzzing of POST /v1/systemone with the embedded model: 2,000+ malformed or odd requests.

Every response must be < 500, every error must have the contract's shape, every 200 must be a valid answer to
exactly the question ids sent, and the server must still be healthy afterwards.
"""

import json

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jevserve.protocol import SystemOneResponse
from jevserve.server.app import ServerSettings, create_app
from tests.helpers import embedded_backends

pytestmark = pytest.mark.slow

TEXT = st.text(max_size=40)  # includes lone surrogates, control characters, emoji
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT
JSON = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4), max_leaves=12
)
STRUCTURED = TEXT | st.dictionaries(TEXT, TEXT, max_size=3) | st.lists(TEXT, max_size=3)

noul = st.fixed_dictionaries(
    {"type": st.just("noul")},
    optional={
        "instructions": st.none() | STRUCTURED,
        "criteria": st.none()
        | st.dictionaries(st.sampled_from(["true", "false", "maybe"]), st.none() | STRUCTURED, max_size=3)
        | JSON,
    },
)
choice = st.fixed_dictionaries(
    {"type": st.just("choice")},
    optional={
        "instructions": st.none() | STRUCTURED,
        "criteria": st.dictionaries(TEXT, st.none() | STRUCTURED, max_size=6) | JSON,
    },
)
score = st.fixed_dictionaries(
    {"type": st.just("score")},
    optional={
        "instructions": st.none() | STRUCTURED,
        "criteria": st.lists(st.none() | STRUCTURED, max_size=11) | JSON,
    },
)
odd_question = st.fixed_dictionaries(
    {}, optional={"type": st.sampled_from(["boolean", "box", "", "NOUL"]) | JSON, "criteria": JSON}
)
question = noul | choice | score | odd_question | JSON

body = st.fixed_dictionaries(
    {},
    optional={
        "model": st.just("jev-latest") | st.just("jev-minilm-zs") | JSON,
        "state": STRUCTURED | JSON,
        "questions": st.dictionaries(TEXT, question, max_size=4) | JSON,
        "assets": JSON,
        "x_nonce": TEXT,
    },
)

# Well-formed requests with odd content (empty strings, lone surrogates, emoji ids, structured texts): these reach
# the model, so they test the answering path rather than validation.
valid_question = (
    st.fixed_dictionaries(
        {"type": st.just("noul")},
        optional={
            "instructions": STRUCTURED,
            "criteria": st.fixed_dictionaries(
                {}, optional={"true": st.none() | STRUCTURED, "false": st.none() | STRUCTURED}
            ),
        },
    )
    | st.fixed_dictionaries(
        {"type": st.just("choice"), "criteria": st.dictionaries(TEXT, st.none() | STRUCTURED, min_size=2, max_size=6)},
        optional={"instructions": st.none() | STRUCTURED},
    )
    | st.fixed_dictionaries(
        {"type": st.just("score"), "criteria": st.lists(STRUCTURED, min_size=2, max_size=10)},
        optional={"instructions": st.none() | STRUCTURED},
    )
)
valid_body = st.fixed_dictionaries(
    {"state": STRUCTURED, "questions": st.dictionaries(TEXT.filter(bool), valid_question, min_size=1, max_size=4)},
    optional={"model": st.just("jev-latest"), "x_trace_id": JSON},
)


def encode(value, how: str) -> bytes:
    raw = json.dumps(value, ensure_ascii=(how == "ascii")).encode("utf-8", "surrogatepass")
    return raw[: len(raw) // 2] if how == "truncated" else raw


def check_response(response, sent) -> None:
    assert response.status_code < 500, (response.status_code, response.text, sent)
    payload = response.json()
    assert response.headers["content-type"].startswith("application/json")
    if response.status_code == 200:
        parsed = SystemOneResponse.model_validate(payload)
        assert isinstance(sent, dict)
        assert list(parsed.answers) == list(sent["questions"])
        return
    detail = payload["detail"]
    if response.status_code == 422:
        assert isinstance(detail, list) and detail
        assert all(
            item["loc"][0] == "body" and isinstance(item["msg"], str) and isinstance(item["type"], str)
            for item in detail
        )
    else:
        assert isinstance(detail["error_type"], str) and isinstance(detail["message"], str)


@pytest.fixture(scope="module")
def client():
    app = create_app(list(embedded_backends()), ServerSettings(max_body_bytes=64 * 1024))
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c
        assert c.get("/healthz").json()["status"] == "ok"
        ok = c.post(
            "/v1/systemone", json={"state": "still fine?", "questions": {"q": {"type": "noul", "instructions": "ok?"}}}
        )
        assert ok.status_code == 200


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(value=valid_body | body, how=st.sampled_from(["utf8", "ascii", "ascii", "truncated"]))
def test_structured_fuzz_never_gets_a_5xx(client, value, how):
    check_response(
        client.post("/v1/systemone", content=encode(value, how), headers={"Content-Type": "application/json"}), value
    )


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    raw=st.binary(max_size=300),
    content_type=st.sampled_from(["application/json", "", "text/plain", "application/x+json", "multipart/form-data"]),
    encoding=st.sampled_from(["identity", "gzip", "zstd", "br", ""]),
)
def test_raw_bytes_and_headers_never_get_a_5xx(client, raw, content_type, encoding):
    headers = {"Content-Type": content_type, "Content-Encoding": encoding}
    check_response(client.post("/v1/systemone", content=raw, headers=headers), None)
