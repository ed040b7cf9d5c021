"""State written by earlier versions still loads (checkpoints and savepoints outlive a release)."""
from __future__ import annotations

import pickle

import pytest

from runtime.api.datastream.window import TimeWindow
from runtime.state.serialization import decode_key, loads_state

pytestmark = pytest.mark.unit

# written by the version before d8b5750, where TimeWindow was a frozen slots dataclass:
# pickle.dumps([w, w, ("k", w)], protocol=5) with w = TimeWindow(0, 10)
OLD_WINDOWS_PICKLE = bytes.fromhex(
    "8005954a000000000000005d94288c1d72756e74696d652e6170692e6461746173747265616d2e77696e646f77948c0a"
    "54696d6557696e646f779493942981945d94284b004b0a656268048c016b9468048694652e"
)
# encode_key(TimeWindow(1000, 2000)): a window namespace in a state file or RocksDB key
OLD_NAMESPACE_KEY = bytes.fromhex(
    "70000000498004953e000000000000008c1d72756e74696d652e6170692e6461746173747265616d2e77696e646f7794"
    "8c0a54696d6557696e646f779493942981945d94284de8034dd00765622e"
)
# pickle.dumps(("user", TimeWindow(5, 15), 14), protocol=5): a window timer entry
OLD_TIMER_PICKLE = bytes.fromhex(
    "80059547000000000000008c0475736572948c1d72756e74696d652e6170692e6461746173747265616d2e77696e646f"
    "77948c0a54696d6557696e646f779493942981945d94284b054b0f65624b0e87942e"
)


def test_old_time_window_pickles_load_as_time_windows() -> None:
    windows = loads_state(OLD_WINDOWS_PICKLE)
    assert windows == [TimeWindow(0, 10), TimeWindow(0, 10), ("k", TimeWindow(0, 10))]
    assert all(type(w) is TimeWindow for w in (windows[0], windows[1], windows[2][1]))
    assert windows[0] is windows[1] is windows[2][1]  # one object in the pickle, one after loading
    assert loads_state(OLD_TIMER_PICKLE) == ("user", TimeWindow(5, 15), 14)
    namespace, end = decode_key(OLD_NAMESPACE_KEY)
    assert type(namespace) is TimeWindow and namespace.start == 1000 and namespace.max_timestamp() == 1999 and end == len(OLD_NAMESPACE_KEY)


def test_other_load_errors_are_not_hidden() -> None:
    with pytest.raises(pickle.UnpicklingError):
        loads_state(b"\x80\x05not a pickle")
