from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from runtime.core.keygroups import (
    assign_to_key_group,
    assign_to_key_groups,
    compute_key_group_range_for_operator_index,
    compute_operator_index_for_key_group,
    key_to_subtask,
    stable_hash,
)

pytestmark = pytest.mark.unit

KEYS = [0, 1, -1, 42, 2**40, "user-7", "", "ünïcode", b"bytes", 3.5, 2.0, True, None, (1, "a"), ("x", (2, 3))]


def test_key_groups_are_stable_across_processes_with_different_hash_seeds() -> None:
    code = (
        "import json; from runtime.core.keygroups import assign_to_key_group as a;"
        f"keys = {KEYS!r}; print(json.dumps([a(k, 128) for k in keys]))"
    )
    here = [assign_to_key_group(k, 128) for k in KEYS]
    for seed in ("1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert json.loads(out.stdout) == here


def test_vectorized_hash_equals_scalar_hash() -> None:
    keys = np.array([0, 1, -1, 7, 123456789, -(2**62), 2**62], dtype=np.int64)
    assert assign_to_key_groups(keys, 128).tolist() == [assign_to_key_group(int(k), 128) for k in keys]
    assert [stable_hash(int(k)) for k in keys] == [stable_hash(k) for k in keys.tolist()]


def test_key_group_ranges_are_contiguous_and_cover_everything() -> None:
    for max_p in (1, 7, 128, 1000):
        for p in range(1, min(max_p, 17) + 1):
            covered = []
            for i in range(p):
                r = compute_key_group_range_for_operator_index(max_p, p, i)
                covered.extend(range(r.start, r.end + 1))
                for kg in r:
                    assert compute_operator_index_for_key_group(max_p, p, kg) == i
            assert covered == list(range(max_p))


def test_keys_spread_over_subtasks() -> None:
    counts = [0, 0, 0, 0]
    for k in range(10000):
        counts[key_to_subtask(k, 128, 4)] += 1
    assert min(counts) > 2000


def test_unkeyable_value_is_rejected_with_its_type() -> None:
    with pytest.raises(TypeError, match="list is not keyable"):
        stable_hash([1, 2])
