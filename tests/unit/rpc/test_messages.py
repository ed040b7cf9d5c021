"""Messages live in one module per protocol, yet keep every old import path and wire name."""
from __future__ import annotations

import io
import pickle

from runtime.core.states import ExecutionState
from runtime.rpc import messages as m
from runtime.rpc.service import _decode


def test_every_message_keeps_its_old_import_path_and_wire_name() -> None:
    for name in m.__all__:
        cls = getattr(m, name)
        # pickles made when every message lived in runtime/rpc/messages.py name that module
        assert pickle.Unpickler(io.BytesIO()).find_class("runtime.rpc.messages", name) is cls
        if issubclass(cls, m.Message):
            assert cls.__module__.startswith("runtime.rpc.messages.")  # in its protocol's module
    error = m.ErrorInfo(type_name="ValueError", message="bad", task="map (1/2)#0")
    assert pickle.loads(pickle.dumps(error)) == error
    update = m.TaskExecutionStateUpdate(job_id="j", execution_attempt_id="a", state=ExecutionState.FAILED, error=error)
    assert _decode("TaskExecutionStateUpdate", update.model_dump_json()) == update  # frames name the class only
