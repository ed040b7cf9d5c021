"""`RpcService.gateway(Protocol, endpoint_id)` hands out a proxy with exactly the Protocol's methods."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import pytest

from runtime.rpc import messages as m
from runtime.rpc.service import DEFAULT_TIMEOUT_S, RpcEndpoint, RpcGateway, RpcService, rpc_method, sync


class EchoGateway(RpcGateway, Protocol):
    async def echo(self, msg: m.JobIdMessage, timeout: float = DEFAULT_TIMEOUT_S) -> m.JobIdMessage: ...


class Echo(RpcEndpoint):
    @rpc_method
    async def echo(self, msg: m.JobIdMessage) -> m.JobIdMessage:
        return m.JobIdMessage(job_id=msg.job_id + "!")

    @rpc_method
    async def not_in_the_protocol(self, msg: m.Empty) -> m.Ack:
        return m.Ack()


@pytest.fixture
def rpc() -> Iterator[RpcService]:
    service = RpcService("secret", "node", listen=False).start()  # local calls only: no socket
    endpoint = Echo(service, "echo")
    endpoint.start()
    try:
        yield service
    finally:
        endpoint.stop()
        service.stop()


def test_the_gateway_calls_the_protocols_methods(rpc: RpcService) -> None:
    gw = rpc.gateway(EchoGateway, "echo")
    assert sync(gw.echo(m.JobIdMessage(job_id="a"), timeout=5)) == m.JobIdMessage(job_id="a!")
    assert gw.call_sync("echo", m.JobIdMessage(job_id="b")) == m.JobIdMessage(job_id="b!")  # by name, untyped
    assert sync(gw.invoke("echo", m.JobIdMessage(job_id="c"))) == m.JobIdMessage(job_id="c!")
    assert gw.endpoint_id == "echo" and "EchoGateway" in repr(gw)


def test_a_method_the_protocol_does_not_declare_fails_at_the_caller(rpc: RpcService) -> None:
    gw = rpc.gateway(EchoGateway, "echo")
    with pytest.raises(AttributeError, match="EchoGateway has no method 'not_in_the_protocol'"):
        _ = gw.not_in_the_protocol
    with pytest.raises(AttributeError, match="EchoGateway has no method 'not_in_the_protocol'"):
        gw.call_sync("not_in_the_protocol", m.Empty())
    with pytest.raises(AttributeError):
        gw.invoke("not_in_the_protocol", m.Empty())


def test_a_class_without_rpc_methods_is_no_gateway(rpc: RpcService) -> None:
    class NotAGateway(RpcGateway, Protocol):
        def plain(self) -> None: ...

    with pytest.raises(TypeError, match="NotAGateway is not a gateway Protocol"):
        rpc.gateway(NotAGateway, "echo")
