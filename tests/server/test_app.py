"""The HTTP app with a swapped-in deterministic backend: routes, auth, limits and error shapes."""

import gzip
import json

import pytest
import zstandard
from fastapi.testclient import TestClient

from jevserve.server.app import ServerSettings, create_app
from tests.helpers import FakeBackend, ticket_body


def client_for(backend=None, **settings) -> TestClient:
    return TestClient(create_app([backend or FakeBackend()], ServerSettings(**settings)))


def test_answers_every_question_under_its_id_with_usage_integers():
    with client_for() as c:
        r = c.post("/v1/systemone", json=ticket_body())
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert body["model"] == "fake-1"
    assert list(body["answers"]) == ["refund", "team", "anger"]
    assert isinstance(body["usage"]["input_tokens"], int) and body["usage"]["output_tokens"] == 0
    assert r.headers["x-typesafe-request-id"]


def test_trailing_slash_is_served_without_a_redirect():
    with client_for() as c:
        r = c.post("/v1/systemone/", json=ticket_body(), follow_redirects=False)
    assert r.status_code == 200


def test_models_lists_alias_first_then_concrete_names():
    with client_for() as c:
        models = c.get("/v1/models").json()["models"]
    assert [m["name"] for m in models] == ["jev-latest", "fake-1"]
    assert all(isinstance(m[k], str) for m in models for k in ("name", "description", "release_date"))


def test_a_model_answers_to_its_aliases_under_its_own_name_and_lists_them():
    from dataclasses import replace

    backend = FakeBackend("fake-reader")
    backend.card = replace(backend.card, aliases=("fake-1",))
    with client_for(backend) as c:
        by_alias = c.post("/v1/systemone", json=ticket_body(model="fake-1"))
        by_name = c.post("/v1/systemone", json=ticket_body(model="fake-reader"))
        models = c.get("/v1/models").json()["models"]
    assert by_alias.status_code == 200 and by_alias.json()["model"] == "fake-reader"
    assert by_alias.json()["answers"] == by_name.json()["answers"]
    assert [m["name"] for m in models] == ["jev-latest", "fake-reader", "fake-1"]
    assert models[2]["description"] == "alias of fake-reader"


def test_an_alias_that_collides_with_a_served_name_is_refused():
    from dataclasses import replace

    second = FakeBackend("fake-2")
    second.card = replace(second.card, aliases=("fake-1",))
    with pytest.raises(ValueError, match="fake-1"):
        create_app([FakeBackend(), second])


def test_unknown_model_is_404_with_error_shape_listing_known_models():
    with client_for() as c:
        r = c.post("/v1/systemone", json=ticket_body(model="gpt-9"))
    assert r.status_code == 404
    assert r.json()["detail"]["error_type"] == "not_found"
    assert "fake-1" in r.json()["detail"]["message"]


def test_validation_errors_are_422_with_body_loc():
    with client_for() as c:
        r = c.post("/v1/systemone", json={"state": "x", "questions": {}})
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"][:2] == ["body", "questions"]


@pytest.mark.parametrize("header", [None, "Bearer wrong", "Basic abc", "Bearer "])
def test_auth_rejects_missing_or_wrong_key_with_401(header):
    headers = {"Authorization": header} if header else {}
    with client_for(api_key="s3cret") as c:
        r = c.post("/v1/systemone", json=ticket_body(), headers=headers)
        models = c.get("/v1/models", headers=headers)
    assert r.status_code == 401 and models.status_code == 401
    assert r.json()["detail"]["error_type"] == "authentication_error"
    assert r.headers["www-authenticate"] == models.headers["www-authenticate"] == "Bearer"  # the scheme it takes


def test_a_key_sent_without_its_scheme_is_called_malformed_not_missing():
    with client_for(api_key="s3cret") as c:
        bare = c.post("/v1/systemone", json=ticket_body(), headers={"Authorization": "s3cret"})
        none = c.post("/v1/systemone", json=ticket_body())
    assert bare.status_code == none.status_code == 401
    assert bare.json()["detail"]["message"].startswith("malformed Authorization header")
    assert none.json()["detail"]["message"].startswith("missing API key")


def test_a_bearer_with_no_key_after_it_is_called_empty_with_the_likely_cause():
    # `-H 'Authorization: Bearer '"$MY_KEY"` from a shell where MY_KEY is unset was told "malformed"
    with client_for(api_key="s3cret") as c:
        empty = c.post("/v1/systemone", json=ticket_body(), headers={"Authorization": "Bearer "})
    message = empty.json()["detail"]["message"]
    assert empty.status_code == 401 and message.startswith("empty API key") and "environment variable" in message


def test_auth_is_checked_before_the_body():
    with client_for(api_key="s3cret") as c:
        r = c.post("/v1/systemone", content=b"not json", headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401


def test_auth_accepts_the_right_bearer_key_and_ignores_headers_when_off():
    with client_for(api_key="s3cret") as c:
        assert (
            c.post("/v1/systemone", json=ticket_body(), headers={"Authorization": "Bearer s3cret"}).status_code == 200
        )
    with client_for() as c:
        assert c.post("/v1/systemone", json=ticket_body(), headers={"Authorization": "Bearer x"}).status_code == 200


def test_oversized_body_is_413_before_parsing():
    with client_for(max_body_bytes=200) as c:
        r = c.post("/v1/systemone", json=ticket_body(state="x" * 500))
    assert r.status_code == 413
    assert r.json()["detail"]["error_type"] == "api_usage_error"


@pytest.mark.parametrize("encoding", ["gzip", "zstd"])
def test_compressed_bodies_are_decoded(encoding):
    raw = json.dumps(ticket_body()).encode()
    data = gzip.compress(raw) if encoding == "gzip" else zstandard.ZstdCompressor().compress(raw)
    with client_for() as c:
        r = c.post(
            "/v1/systemone", content=data, headers={"Content-Encoding": encoding, "Content-Type": "application/json"}
        )
    assert r.status_code == 200


def test_decompression_bomb_is_413():
    data = zstandard.ZstdCompressor().compress(b'{"state": "' + b"a" * 100_000 + b'"}')
    with client_for(max_body_bytes=10_000) as c:
        r = c.post("/v1/systemone", content=data, headers={"Content-Encoding": "zstd"})
    assert r.status_code == 413


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Content-Encoding": "br"}, 415),
        ({"Content-Encoding": "gzip"}, 415),
        ({"Content-Type": "multipart/form-data; boundary=x"}, 415),
        ({"Content-Type": "text/plain"}, 415),
    ],
)
def test_unreadable_encodings_and_media_types_are_415(headers, status):
    with client_for() as c:
        r = c.post("/v1/systemone", content=b"{}", headers=headers)
    assert r.status_code == status
    assert "detail" in r.json()


def test_unknown_route_and_wrong_method_get_json_errors():
    with client_for() as c:
        assert c.get("/v2/other").json()["detail"]["error_type"] == "not_found"
        r = c.get("/v1/systemone")
    assert r.status_code == 405 and r.headers["content-type"].startswith("application/json")
    # the route is there: the message says the method is wrong and which one to send, not "no route"
    assert r.json()["detail"]["message"] == "/v1/systemone does not take GET; send POST"


def test_metrics_count_requests_questions_errors_and_batches():
    with client_for() as c:
        c.post("/v1/systemone", json=ticket_body())
        c.post("/v1/systemone", json={"state": "x"})
        c.get("/v1/nothere")
        c.get("/v1/systemone")
        c.post("/v1/models")  # a served path with a method it lacks (an outside tester's was counted "unmatched")
        c.post("/metrics")
        c.post("/v1/models/")  # no such path (404): not the served one
        text = c.get("/metrics").text
    assert 'jevserve_requests_total{route="/v1/systemone",status="200"} 1.0' in text
    # a request to no route is an error and a request, as every other error answer is
    assert 'jevserve_errors_total{error_type="not_found"} 2.0' in text
    assert 'jevserve_requests_total{route="/v1/systemone",status="405"} 1.0' in text
    assert 'jevserve_requests_total{route="/v1/models",status="405"} 1.0' in text
    assert 'jevserve_requests_total{route="/metrics",status="405"} 1.0' in text
    assert 'jevserve_requests_total{route="unmatched",status="404"} 2.0' in text
    assert 'jevserve_questions_total{type="choice"} 1.0' in text
    assert 'jevserve_errors_total{error_type="validation_error"} 1.0' in text
    assert 'jevserve_batch_size_count{model="fake-1"} 1.0' in text
    assert "jevserve_request_latency_seconds_bucket" in text and "jevserve_queue_depth" in text


def test_healthz_reports_ok_and_queue_depths():
    with client_for() as c:
        assert c.get("/healthz").json() == {"status": "ok", "models": ["fake-1"], "queue_depth": {"fake-1": 0},
                                            "running": {"fake-1": 0}}
        assert c.head("/healthz").status_code == 200  # what many load balancers' probes send
        assert c.head("/v1/models").status_code == 200 and c.head("/metrics").status_code == 200


def test_a_request_is_never_allowed_more_questions_than_the_queue_holds_by_default():
    from jevserve.server.defaults import DEFAULT_MAX_QUESTIONS

    # a request larger than the queue is admitted only when nothing is queued: told to retry forever on a busy server
    assert ServerSettings().max_queue >= DEFAULT_MAX_QUESTIONS


def test_backend_failure_is_500_internal_error_not_a_dropped_connection():
    app = create_app([FakeBackend(fail_on="BOOM")])
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.post("/v1/systemone", json=ticket_body(state="BOOM"))
        ok = c.post("/v1/systemone", json=ticket_body())
    assert r.status_code == 500 and r.json()["detail"]["error_type"] == "internal_error"
    assert ok.status_code == 200


def test_under_auth_healthz_and_metrics_stay_open_while_models_and_answers_need_the_key():
    with client_for(api_key="k") as c:
        assert c.get("/healthz").status_code == 200
        assert c.get("/metrics").status_code == 200
        assert c.get("/v1/models").status_code == 401
        assert c.post("/v1/systemone", json=ticket_body()).status_code == 401


def test_every_gzip_member_and_zstd_frame_is_read_and_a_cut_or_padded_stream_is_refused():
    import zlib

    raw = json.dumps(ticket_body()).encode()
    half = len(raw) // 2
    two_members = gzip.compress(raw[:half]) + gzip.compress(raw[half:])
    whole = gzip.compress(raw)
    deflated = zlib.compress(raw)
    cases = [
        ("gzip", two_members, 200),  # RFC 1952: a file may hold several members
        ("gzip", whole[:-8], 415),  # its trailer (CRC and length) cut off
        ("gzip", whole + b"garbage", 415),
        ("deflate", deflated[:-4], 415),  # its checksum cut off
        ("deflate", deflated + b"x", 415),
        ("zstd", zstandard.ZstdCompressor().compress(raw[:half]) + zstandard.ZstdCompressor().compress(raw[half:]),
         200),  # two frames
        ("zstd", zstandard.ZstdCompressor().compress(raw)[:-5], 415),
    ]
    with client_for() as c:
        for encoding, data, status in cases:
            r = c.post("/v1/systemone", content=data,
                       headers={"Content-Encoding": encoding, "Content-Type": "application/json"})  # fmt: skip
            assert r.status_code == status, (encoding, len(data), r.text)
            if status == 415:
                assert encoding in r.json()["detail"]["message"]


def test_an_empty_body_is_refused_alike_whatever_its_content_encoding():
    # gzip's empty body was 415 "incomplete gzip data", zstd's a 422 for the JSON: one answer, the identity one's
    with client_for() as c:
        answers = {}
        for encoding in ("identity", "gzip", "x-gzip", "deflate", "zstd"):
            r = c.post("/v1/systemone", content=b"",
                       headers={"Content-Encoding": encoding, "Content-Type": "application/json"})  # fmt: skip
            answers[encoding] = (r.status_code, r.json())
        assert answers["identity"][0] == 422
        assert all(answer == answers["identity"] for answer in answers.values()), answers
        r = c.post("/v1/systemone", content=b"", headers={"Content-Encoding": "br", "Content-Type": "application/json"})
        assert r.status_code == 415 and "'br' is not supported" in r.json()["detail"]["message"]


def test_a_body_declared_in_another_charset_is_told_to_come_in_utf8():
    # an outside tester's Latin-1 body (charset=iso-8859-1) got 422 "invalid unicode code point", which did not say
    # what to change
    body = json.dumps(ticket_body(), ensure_ascii=False).replace("Hi", "Café")
    with client_for() as c:
        latin = c.post("/v1/systemone", content=body.encode("latin-1"),
                       headers={"Content-Type": "application/json; charset=ISO-8859-1"})
        utf8 = c.post("/v1/systemone", content=body.encode(),
                      headers={"Content-Type": "application/json; charset=utf-8"})
        ascii_ = c.post("/v1/systemone", content=json.dumps(ticket_body()).encode(),
                        headers={"Content-Type": 'application/json; charset="us-ascii"'})
    assert latin.status_code == 415 and "send the JSON body in UTF-8" in latin.json()["detail"]["message"]
    assert utf8.status_code == ascii_.status_code == 200
