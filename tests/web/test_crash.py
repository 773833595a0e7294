"""A server killed mid-round (SIGKILL) loses no stored answer and duplicates none when the round resumes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from jevserve.web.store import Store
from tests.web.builders import ROOT, first_choice

pytestmark = pytest.mark.slow


def _start(db_path) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen([sys.executable, "-m", "tests.web.serve_stub", str(db_path)], cwd=ROOT,
                               stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    port = process.stdout.readline().strip()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return process, base
        except httpx.TransportError:
            time.sleep(0.2)
    process.kill()
    raise AssertionError("the stub server did not start")


def _answer(client: httpx.Client, url: str, position: int, choice: str | None = None) -> httpx.Response:
    choice = choice or first_choice(client.get(url).text)
    return client.post(f"{url}/answer", data={"position": str(position), "choice": choice})


def test_killed_server_mid_round_keeps_every_answer_once(tmp_path):
    db = tmp_path / "db.sqlite"
    process, base = _start(db)
    try:
        client = httpx.Client(base_url=base, follow_redirects=False, timeout=30)
        url = client.post("/play/rounds").headers["location"]
        for position in range(2):
            choice = first_choice(client.get(url).text)
            assert _answer(client, url, position, choice).status_code == 303
        client.get(url)  # item 3 shown, not answered, when the server dies
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert Store(db).counts()["answers"] == 2

    process, base = _start(db)
    try:
        client = httpx.Client(base_url=base, follow_redirects=False, timeout=30, cookies=client.cookies)
        # the browser re-sends the answer it saw no reply to, then goes on
        assert _answer(client, url, 1, choice).status_code == 303
        for position in range(2, 5):
            assert _answer(client, url, position).status_code == 303
        assert "Round done" in client.get(url).text
    finally:
        process.terminate()
        process.wait()
    rows = Store(db).answer_rows()
    assert [r["position"] for r in rows] == [0, 1, 2, 3, 4]
    # the served model is asked as each answer is stored, though no reveal page was read: once per answer
    assert Store(db).counts() == {"rounds": 1, "round_items": 5, "answers": 5, "model_answers": 5}
