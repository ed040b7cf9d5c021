"""Operator ids: stable across builds and processes, uid / set_uid_hash honoured, chaining left out."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.api.common import Configuration, WatermarkStrategy
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.errors import InvalidProgramError
from runtime.graph.job_graph import JobGraph

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]

PROGRAM = '''
from runtime.api.common import Configuration
from runtime.api.datastream import StreamExecutionEnvironment


def build(chaining: bool = True, extra_map: bool = False, uid: bool = False, uid_hash: str | None = None, noise: int = 0):
    from runtime.api.datastream import StreamExecutionEnvironment as Env

    for _ in range(noise):  # transformations of another program, built first: node ids shift
        Env.get_execution_environment().from_collection([1]).map(lambda x: x).print()
    conf = Configuration()
    if not chaining:
        conf.set_string("pipeline.operator-chaining", "false")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    s = env.from_collection([1, 2, 3]).name("numbers")
    m = s.map(lambda x: x + 1).name("plus one")
    if uid:
        m = m.uid("plus-one")
    if uid_hash:
        m = m.set_uid_hash(uid_hash)
    if extra_map:
        m = m.map(lambda x: x).name("extra")
    k = m.key_by(lambda x: x % 2).reduce(lambda a, b: a + b).name("sum")
    k.print().name("out")
    return env.get_job_graph("ids")
'''


def build(**kw) -> JobGraph:
    ns: dict = {}
    exec(PROGRAM, ns)  # noqa: S102 - the test's own program text, also run in a subprocess
    return ns["build"](**kw)


def ids(jg: JobGraph) -> dict[str, str]:
    return {op.name: op.operator_id for v in jg.vertices for op in v.operators}


def test_same_program_same_ids_even_when_node_ids_shift() -> None:
    a, b = build(), build(noise=3)
    assert [op.node_id for v in a.vertices for op in v.operators] != [op.node_id for v in b.vertices for op in v.operators]
    assert ids(a) == ids(b)
    assert all(len(i) == 32 for i in ids(a).values()) and len(set(ids(a).values())) == len(ids(a))


def test_same_program_in_another_process_same_ids() -> None:
    script = PROGRAM + "\nimport json\nprint(json.dumps({op.name: op.operator_id for v in build(noise=2).vertices for op in v.operators}))\n"
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == ids(build())


def test_chaining_does_not_change_ids() -> None:
    chained, unchained = build(), build(chaining=False)
    assert len(unchained.vertices) > len(chained.vertices)
    assert ids(chained) == ids(unchained)


def test_uid_and_uid_hash_are_honoured() -> None:
    assert ids(build(uid=True))["plus one"] == "plus-one"
    h = "0123456789abcdef0123456789abcdef"
    assert ids(build(uid=True, uid_hash=h))["plus one"] == h  # Flink: the user hash wins
    with pytest.raises(InvalidProgramError, match="32 lowercase hexadecimal"):
        build(uid_hash="not-a-hash")


def test_a_changed_topology_changes_ids_downstream_only() -> None:
    base, more = ids(build()), ids(build(extra_map=True))
    assert base["numbers"] == more["numbers"] and base["plus one"] == more["plus one"]
    assert base["sum"] != more["sum"]  # behind the new operator: give it a uid to keep its state
    with_uid = ids(build(uid=True)), ids(build(uid=True, extra_map=True))
    assert with_uid[0]["plus one"] == with_uid[1]["plus one"] == "plus-one"


def test_clashing_ids_are_refused() -> None:
    env = StreamExecutionEnvironment.get_execution_environment(Configuration())
    s = env.from_collection([1]).uid("0123456789abcdef0123456789abcdef")
    s.map(lambda x: x).set_uid_hash("0123456789abcdef0123456789abcdef").print()
    with pytest.raises(InvalidProgramError, match="same operator id"):
        env.get_job_graph("clash")


def test_watermark_strategy_operator_gets_an_id_too() -> None:
    env = StreamExecutionEnvironment.get_execution_environment(Configuration())
    env.from_collection([1, 2]).assign_timestamps_and_watermarks(WatermarkStrategy.no_watermarks()).print()
    jg = env.get_job_graph("wm")
    assert all(op.operator_id for v in jg.vertices for op in v.operators)
