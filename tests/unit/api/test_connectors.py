from __future__ import annotations

import pytest

from runtime.api.common import Types
from runtime.api.connectors.collect import CloseableIterator, CollectSinkCoordinator, CollectSinkOperator
from runtime.api.connectors.collection import CollectionSource
from runtime.api.connectors.generator import DataGeneratorSource, NumberSequenceSource
from runtime.api.connectors.print import PrintSinkOperator
from runtime.core.operators import FixedCoordinatorContext
from runtime.core.records import MAX_TIMESTAMP, ColumnBatch
from runtime.core.row import Row
from runtime.core.states import JobStatus
from tests.harness import FakeEventGateway, obj, run_one_input, run_split_source

pytestmark = pytest.mark.unit


def _run_all_subtasks(source, parallelism):
    return run_split_source(source, parallelism)


@pytest.mark.parametrize("count,batch_size,parallelism", [(0, 4, 2), (10, 3, 1), (100, 7, 3), (64, 8, 4), (5, 8, 4)])
def test_generator_splits_cover_index_space_exactly_once(count, batch_size, parallelism):
    src = DataGeneratorSource(lambda i: i, count, batch_size=batch_size)
    outs = _run_all_subtasks(src, parallelism)
    seen = [r for o in outs for r in o.values()]
    assert sorted(seen) == list(range(count))
    for o in outs:
        assert all(len(b) <= batch_size for b in o.batches)
        assert o.watermarks[-1:] == [MAX_TIMESTAMP]
        recs = o.values()
        assert recs == sorted(recs)  # each subtask walks forward


def test_generator_subtasks_advance_together():
    src = DataGeneratorSource(lambda i: i, 1000, batch_size=10)
    outs = _run_all_subtasks(src, 4)
    # the k-th batch of every subtask comes from the same stripe of 40 indices
    for k in range(len(outs[0].batches)):
        firsts = [o.batches[k].rows()[0] for o in outs if k < len(o.batches)]
        assert max(firsts) - min(firsts) < 40


def test_generator_is_deterministic_and_batch_path_agrees_with_record_path():
    per_record = DataGeneratorSource(lambda i: Row(id=i, v=i * 2.5, ts=1000 + i), 50, batch_size=8)
    batched = DataGeneratorSource(
        None, 50, batch_generator=lambda idx: {"id": idx, "v": idx * 2.5, "ts": 1000 + idx}, batch_size=8
    )
    a = [r for o in _run_all_subtasks(per_record, 3) for r in o.values()]
    b_outs = _run_all_subtasks(batched, 3)
    assert all(isinstance(b, ColumnBatch) for o in b_outs for b in o.batches)
    b = [r for o in b_outs for r in o.values()]
    assert a == b
    assert a == [r for o in _run_all_subtasks(per_record, 3) for r in o.values()]


def test_number_sequence_inclusive():
    outs = _run_all_subtasks(NumberSequenceSource(5, 20), 2)
    assert sorted(r for o in outs for r in o.values()) == list(range(5, 21))


def test_collection_source_batches_and_rows():
    src = CollectionSource(list(range(20000)))
    (out,) = run_split_source(src)
    assert [len(b) for b in out.batches] == [8192, 8192, 3616]
    assert out.values() == list(range(20000))
    assert out.watermarks == [MAX_TIMESTAMP]
    named = CollectionSource([(1, "a"), (2, "b")], Types.ROW_NAMED(["id", "name"], [Types.INT(), Types.STRING()]))
    (out2,) = run_split_source(named)
    assert isinstance(out2.batches[0], ColumnBatch)
    assert out2.values() == [Row(id=1, name="a"), Row(id=2, name="b")]
    # an unnamed ROW: tuples become Rows, objects path
    (out3,) = run_split_source(CollectionSource([(1, None)], Types.ROW([Types.INT(), Types.STRING()])))
    assert out3.values() == [Row(1, None)]


def test_collection_source_empty_and_other_subtasks():
    assert run_split_source(CollectionSource([]))[0].values() == []
    first, second = run_split_source(CollectionSource([1, 2]), 2)  # forced to 2: the second subtask gets no split
    assert first.values() == [1, 2] and second.values() == []


def test_print_sink_prefix(capsys):
    run_one_input(PrintSinkOperator(), [obj([1, "a"])])
    assert capsys.readouterr().out == "1\na\n"
    run_one_input(PrintSinkOperator(), [obj([1])], subtask=1, parallelism=2)
    assert capsys.readouterr().out == "2> 1\n"
    run_one_input(PrintSinkOperator("sink"), [obj([1])], subtask=0, parallelism=2)
    assert capsys.readouterr().out == "sink:1> 1\n"


def test_print_shows_each_stream_type_as_pyflink_does(capsys):
    """ROW streams through Python's str() per field, TUPLE and the other types through Java's toString,
    untyped streams as str() (the golden outputs of PyFlink itself: tests/integration/api/test_print_golden.py)."""
    from runtime.api.common import Types
    from runtime.core.row import Row

    named = Types.ROW_NAMED(["name", "age", "score", "ok", "tags", "inner"],
                            [Types.STRING(), Types.INT(), Types.DOUBLE(), Types.BOOLEAN(), Types.LIST(Types.STRING()),
                             Types.ROW([Types.INT(), Types.STRING()])])
    row = Row(name="Alice", age=1, score=None, ok=True, tags=["a", "b"], inner=Row(1, "x"))
    run_one_input(PrintSinkOperator(type_info=named), [obj([row])])
    assert capsys.readouterr().out == "+I[Alice,1,None,True,['a', 'b'],Row(f0=1, f1='x')]\n"
    floats = Types.TUPLE([Types.DOUBLE(), Types.DOUBLE(), Types.FLOAT(), Types.MAP(Types.STRING(), Types.INT()),
                          Types.ROW([Types.INT(), Types.STRING()])])
    run_one_input(PrintSinkOperator(type_info=floats), [obj([(1e7, float("nan"), 0.1, {"k": 2}, Row(None, "x"))])])
    assert capsys.readouterr().out == "(1.0E7,NaN,0.1,{k=2},+I[null, x])\n"
    run_one_input(PrintSinkOperator(type_info=Types.BOOLEAN()), [obj([True, False])])
    assert capsys.readouterr().out == "true\nfalse\n"
    run_one_input(PrintSinkOperator(), [obj([("a", 1), Row(1, "a"), "plain", None])])
    assert capsys.readouterr().out.splitlines() == ["('a', 1)", "<Row(1, 'a')>", "plain", "None"]


def test_java_number_and_map_formats() -> None:
    """Java 17's Double/Float.toString (not always the shortest digits) and HashMap's iteration order."""
    from runtime.api.common import Types
    from runtime.api.connectors.print_format import java_double, java_float, java_hash_map_order

    assert [java_double(v) for v in (1.0, 0.001, 1e-4, 1e7, 9999999.0, 5e-324, -0.0, 2.0 ** 62, 1e23)] == [
        "1.0", "0.001", "1.0E-4", "1.0E7", "9999999.0", "4.9E-324", "-0.0", "4.6116860184273879E18", "9.999999999999999E22"]
    assert [java_float(v) for v in (0.1, 123456789.125, 2.0 ** 53, 1e39)] == ["0.1", "1.23456792E8", "9.0071993E15", "Infinity"]
    items = [(k, None) for k in ("a", "Aa", "BB", "b")]
    assert [k for k, _ in java_hash_map_order(items, Types.STRING())] == ["BB", "Aa", "a", "b"]


def test_stdout_forwarder_ships_everything_in_order_and_forward_waits_for_it():
    import threading

    from runtime.taskmanager.stdout import StdoutForwarder

    shipped: list[str] = []
    gate = threading.Event()

    def send(text: str) -> None:
        gate.wait(5)
        shipped.append(text)

    fwd = StdoutForwarder(send, interval_s=60.0, max_buffered=64)
    writers = [threading.Thread(target=lambda i=i: [fwd.write(f"{i}-{n}\n") for n in range(50)]) for i in range(3)]
    for w in writers:
        w.start()
    gate.set()  # a slow receiver: writers wait for room (64 characters), nothing is dropped
    for w in writers:
        w.join(10)
    assert fwd.forward(5)
    lines = "".join(shipped).splitlines()
    assert sorted(lines) == sorted(f"{i}-{n}" for i in range(3) for n in range(50))
    for i in range(3):  # each writer's lines in its order
        assert [line for line in lines if line.startswith(f"{i}-")] == [f"{i}-{n}" for n in range(50)]
    # a receiver that keeps failing: the text goes to the fallback stream instead of being lost
    import io

    fallback = io.StringIO()
    broken = StdoutForwarder(lambda _t: (_ for _ in ()).throw(ConnectionError("down")), interval_s=60.0, fallback=fallback)
    broken.write("kept\n")
    assert broken.forward(10) and fallback.getvalue() == "kept\n"
    fwd.close()
    broken.close()


# -- collect -----------------------------------------------------------------------------------------


def _collect_through(coord, subtask, attempt, batches):
    gw = FakeEventGateway(coordinator=coord, subtask=subtask, attempt=attempt)
    run_one_input(CollectSinkOperator(), batches, subtask=subtask, parallelism=2, attempt=attempt, gateway=gw)


def test_collect_coordinator_offsets_no_loss_no_duplicates():
    coord = CollectSinkCoordinator(FixedCoordinatorContext("j", "collect", 2))
    _collect_through(coord, 0, 0, [obj([1, 2]), obj([3])])
    r = coord.handle_coordination_request({"offset": 0, "max_rows": 2})
    assert r["rows"] == [1, 2] and r["next_offset"] == 2 and not r["finished"]
    _collect_through(coord, 1, 0, [obj([10])])
    r = coord.handle_coordination_request({"offset": 2})
    assert r["rows"] == [3, 10] and r["next_offset"] == 4
    # asking again from the same offset gives the same rows (a lost response is re-fetched)
    assert coord.handle_coordination_request({"offset": 2})["rows"] == [3, 10]
    coord.on_job_finished()
    assert coord.handle_coordination_request({"offset": 4}) == {"rows": [], "next_offset": 4, "finished": True}


def test_collect_coordinator_skips_replayed_rows_of_restarted_attempt():
    coord = CollectSinkCoordinator(FixedCoordinatorContext("j", "collect", 2))
    _collect_through(coord, 0, 0, [obj(["a", "b"])])  # attempt 0 delivered 2 rows, then "failed"
    _collect_through(coord, 0, 1, [obj(["a", "b", "c"]), obj(["d"])])  # deterministic replay
    coord.handle_event_from_operator(0, 0, {"type": "rows", "subtask": 0, "attempt": 0, "seq": 2, "rows": ["late"]})
    assert coord.handle_coordination_request({"offset": 0})["rows"] == ["a", "b", "c", "d"]


class FakeJobClient:
    def __init__(self, coord: CollectSinkCoordinator, feed: list) -> None:
        self.coord = coord
        self.feed = feed  # callables run on each request, to simulate the job progressing
        self.status = JobStatus.RUNNING
        self.canceled = False
        self.closed = False

    @property
    def job_id(self) -> str:
        return "j"

    def get_job_status(self):
        return self.status

    def get_job_execution_result(self, timeout=None):
        if self.status is not JobStatus.FINISHED:
            from runtime.core.errors import JobExecutionError

            raise JobExecutionError("job j failed", "j")
        return None

    def send_coordination_request(self, node_id, request):
        if self.feed:
            self.feed.pop(0)()
        return self.coord.handle_coordination_request(request)

    def cancel(self):
        self.canceled = True
        self.status = JobStatus.CANCELED

    def close(self):
        self.closed = True


def test_closeable_iterator_drains_until_job_finished():
    coord = CollectSinkCoordinator(FixedCoordinatorContext("j", "collect", 1))
    client = FakeJobClient(coord, [])

    def finish():
        coord.on_job_finished()
        client.status = JobStatus.FINISHED

    client.feed = [
        lambda: coord.handle_event_from_operator(0, 0, {"type": "rows", "seq": 0, "rows": [1, 2]}),
        lambda: None,
        lambda: coord.handle_event_from_operator(0, 0, {"type": "rows", "seq": 2, "rows": [3]}),
        finish,
    ]
    it = CloseableIterator(client, node_id=7, poll_interval_s=0.0)
    assert list(it) == [1, 2, 3]
    it.close()
    assert client.closed and not client.canceled


def test_closeable_iterator_raises_when_job_failed_and_close_cancels():
    from runtime.core.errors import JobExecutionError

    coord = CollectSinkCoordinator(FixedCoordinatorContext("j", "collect", 1))
    client = FakeJobClient(coord, [])

    def fail():
        client.status = JobStatus.FAILED

    client.feed = [fail]
    with pytest.raises(JobExecutionError):
        list(CloseableIterator(client, 1, poll_interval_s=0.0))

    client2 = FakeJobClient(CollectSinkCoordinator(), [])
    it = CloseableIterator(client2, 1)
    it.close()
    assert client2.canceled
