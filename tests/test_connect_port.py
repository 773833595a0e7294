import pytest

from jevserve.argtypes import connect_port


@pytest.mark.parametrize(("url", "port"), [
    ("http://host", 80),
    ("https://host", 443),
    ("http://host:8000/v1", 8000),
    ("https://[::1]:8443", 8443),
    ("http://host:0", None),  # nothing can listen on port 0
    ("http://host:65536", None),  # out of range: urlsplit raises only when .port is read
    ("http://host:eighty", None),
])
def test_connect_port_reads_the_port_a_connection_goes_to(url: str, port: int | None) -> None:
    assert connect_port(url) == port


def test_the_gateway_config_and_its_start_up_check_read_a_port_alike() -> None:
    from jevserve.gateway.config import UpstreamConfig
    from jevserve.gateway.upstream import _unreachable

    for url in ("http://host:0", "http://host:70000", "http://host:port"):
        with pytest.raises(ValueError, match="names no port"):
            UpstreamConfig(name="u", url=url)
        assert "names no port" in (_unreachable(0, "u", url, 0.1) or "")
