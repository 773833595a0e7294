"""The outside-program fixtures start real programs: a Redis that stores, a Chromium that renders."""

import socket


def test_redis_url_fixture_serves_a_real_redis(redis_url: str) -> None:
    host_port = redis_url.removeprefix("redis://").split("/")[0]
    host, port = host_port.split(":")
    with socket.create_connection((host, int(port)), timeout=2) as sock:
        sock.sendall(b"SET jevserve:probe 42\r\nGET jevserve:probe\r\n")
        reply = b""
        while b"42" not in reply:
            chunk = sock.recv(1024)
            assert chunk, f"redis closed the connection; got {reply!r}"
            reply += chunk
    assert reply.startswith(b"+OK\r\n$2\r\n42")


def test_chromium_fixture_renders_a_page(chromium) -> None:
    page = chromium.new_page()
    try:
        page.set_content("<html><body><p id='x'>decision: 0.93</p></body></html>")
        assert page.inner_text("#x") == "decision: 0.93"
    finally:
        page.close()
