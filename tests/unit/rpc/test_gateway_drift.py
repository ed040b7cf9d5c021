"""Every endpoint and its gateway Protocol match exactly: the same RPC methods, each with the same
message parameter and reply (the Protocol adds only `timeout`, Flink's @RpcTimeout). A Protocol that
drifts from its endpoint lies to every caller typed against it; these tests catch it both ways."""
from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any, Protocol

import pytest

from runtime.jobmanager.dispatcher import Dispatcher
from runtime.jobmanager.job_master import JobMaster
from runtime.jobmanager.resource_manager import ResourceManager
from runtime.rpc import gateways as gw
from runtime.rpc import messages as m
from runtime.rpc.service import DEFAULT_TIMEOUT_S, RpcEndpoint, gateway_methods, rpc_method, rpc_methods
from runtime.taskmanager.task_executor import TaskExecutor

ENDPOINTS: list[tuple[type[RpcEndpoint], type]] = [
    (Dispatcher, gw.DispatcherGateway),
    (ResourceManager, gw.ResourceManagerGateway),
    (JobMaster, gw.JobMasterGateway),
    (TaskExecutor, gw.TaskExecutorGateway),
]


def _params(fn: Callable[..., Any]) -> list[tuple[str, Any, Any, Any]]:
    """(name, kind, default, resolved annotation) of each parameter after `self`."""
    hints = typing.get_type_hints(fn)
    params = list(inspect.signature(fn).parameters.values())[1:]
    return [(p.name, p.kind, p.default, hints.get(p.name, p.empty)) for p in params]


def gateway_drift(endpoint: type, protocol: type) -> list[str]:
    """How `protocol` and the @rpc_methods of `endpoint` differ (empty: they match)."""
    problems: list[str] = []
    served, declared = rpc_methods(endpoint), gateway_methods(protocol)
    for name in sorted(declared.keys() - served.keys()):
        problems.append(f"{protocol.__name__}.{name} is not an @rpc_method of {endpoint.__name__}")
    for name in sorted(served.keys() - declared.keys()):
        problems.append(f"{endpoint.__name__}.{name} is an @rpc_method that {protocol.__name__} does not declare")
    for name in sorted(served.keys() & declared.keys()):
        impl, decl = served[name], declared[name]
        where = f"{protocol.__name__}.{name}"
        if not inspect.iscoroutinefunction(impl):
            problems.append(f"{endpoint.__name__}.{name} is not a coroutine function")
        impl_params, decl_params = _params(impl), _params(decl)
        if not decl_params or decl_params[-1] != ("timeout", inspect.Parameter.POSITIONAL_OR_KEYWORD, DEFAULT_TIMEOUT_S, float):
            problems.append(f"{where} does not end with `timeout: float = DEFAULT_TIMEOUT_S`")
        else:
            decl_params = decl_params[:-1]
        if impl_params != decl_params:
            problems.append(f"{where} takes {decl_params}, {endpoint.__name__}.{name} takes {impl_params}")
        impl_return, decl_return = typing.get_type_hints(impl).get("return"), typing.get_type_hints(decl).get("return")
        if impl_return != decl_return:
            problems.append(f"{where} returns {decl_return}, {endpoint.__name__}.{name} returns {impl_return}")
    return problems


@pytest.mark.parametrize(("endpoint", "protocol"), ENDPOINTS, ids=[e.__name__ for e, _ in ENDPOINTS])
def test_each_endpoint_matches_its_gateway(endpoint: type, protocol: type) -> None:
    assert gateway_drift(endpoint, protocol) == []
    assert rpc_methods(endpoint)  # not vacuous


def _subclasses(cls: type) -> set[type]:
    out: set[type] = set(cls.__subclasses__())
    for sub in list(out):
        out |= _subclasses(sub)
    return out


def test_every_endpoint_has_a_gateway() -> None:
    endpoints = {c for c in _subclasses(RpcEndpoint) if c.__module__.startswith("runtime.")}
    assert endpoints == {e for e, _ in ENDPOINTS}


# --- the check catches planted drift ----------------------------------------------------------
def _without(endpoint: type, method: str) -> type:
    """The endpoint with one RPC method removed (as if someone deleted it)."""
    return type(f"{endpoint.__name__}Without_{method}", (endpoint,), {method: None})


class _ExtraRpc:
    @rpc_method
    async def list_everything(self, msg: m.Empty) -> m.Ack:
        return m.Ack()


class _WiderGateway(gw.TaskExecutorGateway, Protocol):
    async def list_everything(self, msg: m.Empty, timeout: float = DEFAULT_TIMEOUT_S) -> m.Ack: ...


# one method each, drifted from TaskExecutor's (not subclasses of TaskExecutorGateway: a type
# checker rightly refuses such overrides)
class _DriftedMessage(Protocol):
    async def free_slot(self, msg: m.CancelTask, timeout: float = DEFAULT_TIMEOUT_S) -> m.Ack: ...


class _DriftedReply(Protocol):
    async def cancel_task(self, msg: m.CancelTask, timeout: float = DEFAULT_TIMEOUT_S) -> m.AcceptedSlots: ...


class _NoTimeout(Protocol):
    async def release(self, msg: m.ReleaseTaskExecutor) -> m.Ack: ...


@pytest.mark.parametrize(("endpoint", "protocol"), ENDPOINTS, ids=[e.__name__ for e, _ in ENDPOINTS])
def test_a_method_removed_from_an_endpoint_is_drift(endpoint: type, protocol: type) -> None:
    for method in rpc_methods(endpoint):
        assert gateway_drift(_without(endpoint, method), protocol) == [
            f"{protocol.__name__}.{method} is not an @rpc_method of {endpoint.__name__}Without_{method}"
        ]


def test_an_rpc_method_the_gateway_lacks_is_drift() -> None:
    endpoint = type("TaskExecutorPlus", (_ExtraRpc, TaskExecutor), {})
    assert gateway_drift(endpoint, gw.TaskExecutorGateway) == [
        "TaskExecutorPlus.list_everything is an @rpc_method that TaskExecutorGateway does not declare"
    ]


def test_a_gateway_method_the_endpoint_lacks_is_drift() -> None:
    assert gateway_drift(TaskExecutor, _WiderGateway) == ["_WiderGateway.list_everything is not an @rpc_method of TaskExecutor"]


def _about(protocol: type) -> list[str]:
    """The drift of the one method `protocol` declares (the others it leaves out are drift too)."""
    [method] = gateway_methods(protocol)
    return [p for p in gateway_drift(TaskExecutor, protocol) if p.startswith(f"{protocol.__name__}.{method} ")]


def test_a_different_message_reply_or_missing_timeout_is_drift() -> None:
    [message] = _about(_DriftedMessage)
    assert message.startswith("_DriftedMessage.free_slot takes") and "CancelTask" in message
    [reply] = _about(_DriftedReply)
    assert reply.startswith("_DriftedReply.cancel_task returns") and "AcceptedSlots" in reply
    assert _about(_NoTimeout) == ["_NoTimeout.release does not end with `timeout: float = DEFAULT_TIMEOUT_S`"]
