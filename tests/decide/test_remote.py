"""The remote backend: a jevserve proxy in front of another System One server."""

import socket

import numpy as np
from fastapi.testclient import TestClient

from jevserve.client import SystemOne
from jevserve.decide.base import DecisionItem
from jevserve.decide.remote import RemoteBackend
from jevserve.protocol import SystemOneRequest, to_decision
from jevserve.server.app import ServerSettings, create_app
from jevserve.server.background import running_server
from tests.helpers import FakeBackend, ticket_body


def test_proxy_answers_equal_upstream_answers():
    with running_server(create_app([FakeBackend()])) as upstream:
        direct = SystemOne(upstream).decide_raw(ticket_body())
        with TestClient(create_app([RemoteBackend(upstream)])) as proxy:
            proxied = proxy.post("/v1/systemone", json=ticket_body()).json()
    assert proxied["model"] == "remote-jev-latest"
    for qid, answer in direct["answers"].items():
        if answer["type"] == "noul":
            assert abs(proxied["answers"][qid]["noul"] - answer["noul"]) < 1e-12
        else:
            got = np.array(list(proxied["answers"][qid]["probabilities"].values()))
            assert np.allclose(got, list(answer["probabilities"].values()), atol=1e-12)


def test_items_about_one_state_go_upstream_in_one_request():
    upstream_backend = FakeBackend()
    with running_server(create_app([upstream_backend])) as upstream:
        questions = SystemOneRequest.model_validate(ticket_body()).questions.values()
        items = [DecisionItem(s, to_decision(q)) for s in ("one", "two") for q in questions]
        probs = RemoteBackend(upstream).decide(items)
    assert len(probs) == 6 and upstream_backend.batches == [3, 3]


def test_upstream_key_is_sent_and_a_wrong_one_is_a_502_about_the_proxys_key_not_a_401_to_the_client():
    with running_server(create_app([FakeBackend()], ServerSettings(api_key="upstream-key"))) as upstream:
        with TestClient(create_app([RemoteBackend(upstream, api_key="upstream-key")])) as good:
            assert good.post("/v1/systemone", json=ticket_body()).status_code == 200
        with TestClient(create_app([RemoteBackend(upstream, api_key="wrong")])) as bad:
            r = bad.post("/v1/systemone", json=ticket_body())
    assert r.status_code == 502 and r.json()["detail"]["error_type"] == "internal_error"
    assert "--remote-key-env" in r.json()["detail"]["message"]


def test_unreachable_upstream_is_502_with_error_shape():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    backend = RemoteBackend(f"http://127.0.0.1:{port}", timeout_s=2)
    with TestClient(create_app([backend])) as proxy:
        r = proxy.post("/v1/systemone", json=ticket_body())
    assert r.status_code == 502 and r.json()["detail"]["error_type"] == "internal_error"


def test_the_listing_gives_the_upstream_models_release_date_not_a_placeholder():
    with running_server(create_app([FakeBackend()])) as upstream:
        upstream_listing = SystemOne(upstream).models()
        with TestClient(create_app([RemoteBackend(upstream)])) as proxy:
            listed = {m["name"]: m for m in proxy.get("/v1/models").json()["models"]}
    latest = next(m for m in upstream_listing if m["name"] == "jev-latest")
    assert listed["remote-jev-latest"]["release_date"] == latest["release_date"] != "1970-01-01"
    assert listed["remote-jev-latest"]["description"].endswith(f"(jev-latest at {upstream}, forwarded)")


def test_an_upstream_that_cannot_list_leaves_the_date_marked_unknown_and_the_server_starts(caplog):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with TestClient(create_app([RemoteBackend(f"http://127.0.0.1:{port}", timeout_s=2)])) as proxy:
        entry = next(m for m in proxy.get("/v1/models").json()["models"] if m["name"] == "remote-jev-latest")
    assert "release date unknown" in entry["description"]
    assert "could not be reached" in caplog.text and "until the upstream answers" in caplog.text


def test_an_upstream_down_at_start_gives_its_models_date_once_it_answers(monkeypatch):
    # the listing kept "1970-01-01" (release date unknown) until the proxy was restarted
    import time

    import jevserve.decide.remote as remote

    monkeypatch.setattr(remote, "RECHECK_S", 0.0)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with TestClient(create_app([RemoteBackend(f"http://127.0.0.1:{port}", timeout_s=2)])) as proxy:
        while proxy.get("/healthz").status_code == 200:  # the listing at start is read in the background
            time.sleep(0.05)
        with running_server(create_app([FakeBackend()]), port=port):
            deadline = time.monotonic() + 10
            while proxy.get("/healthz").status_code != 200 and time.monotonic() < deadline:
                time.sleep(0.05)  # each check sends the upstream one question in the background
            while (entry := next(m for m in proxy.get("/v1/models").json()["models"]
                                 if m["name"] == "remote-jev-latest"))["release_date"] == "1970-01-01" and (
                    time.monotonic() < deadline):
                time.sleep(0.05)
    assert entry["release_date"] != "1970-01-01" and "forwarded" in entry["description"]


def test_a_gzip_answer_read_in_small_pieces_is_the_whole_answer():
    # the proxy inflates an answer itself, in steps bounded by what it may still keep
    import gzip

    import httpx

    from jevserve.decide.remote import _BoundedBody

    answer = b'{"answers": {"q0": {"type": "noul", "noul": 0.25}}, "pad": "' + b"x" * 300_000 + b'"}'
    packed = gzip.compress(answer)
    response = httpx.Response(200, headers={"content-encoding": "gzip"}, content=b"",
                              request=httpx.Request("POST", "http://u/v1/systemone"))
    body = _BoundedBody(response, "http://u")
    for start in range(0, len(packed), 7):
        body.add(packed[start : start + 7])
    assert body.response().content == answer
