"""A two-input operator chained with both of its inputs (the seeds' DAG chain) runs correctly."""
from __future__ import annotations

from collections import Counter

from runtime.api.datastream import StreamExecutionEnvironment
from runtime.api.datastream.functions import CoMapFunction
from runtime.deploy.minicluster import MiniCluster


class Tag(CoMapFunction):
    def map1(self, value: int) -> tuple[str, int]:
        return ("even", value)

    def map2(self, value: int) -> tuple[str, int]:
        return ("odd", value)


def test_two_input_operator_chained_with_both_inputs(cluster_env: MiniCluster) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    src = env.from_collection(list(range(1000))).rebalance().map(lambda x: x)  # parallelism 2 from here
    evens = src.filter(lambda x: x % 2 == 0)
    odds = src.filter(lambda x: x % 2 == 1).map(lambda x: x * 10)
    joined = evens.connect(odds).map(Tag())
    joined.print()
    job_graph = env.get_job_graph("dag-chain")
    names = [v.name for v in job_graph.vertices]
    # the map, both filters, the second map and the co-map form one chain (a DAG)
    dag = [v for v in job_graph.vertices if len(v.operators) >= 5]
    assert dag, names
    assert any(op.num_inputs == 2 for op in dag[0].operators)

    env2 = StreamExecutionEnvironment.get_execution_environment()
    env2.set_parallelism(2)
    src2 = env2.from_collection(list(range(1000))).rebalance().map(lambda x: x)
    out = list(src2.filter(lambda x: x % 2 == 0).connect(src2.filter(lambda x: x % 2 == 1).map(lambda x: x * 10)).map(Tag()).execute_and_collect())
    expected = [("even", x) for x in range(0, 1000, 2)] + [("odd", x * 10) for x in range(1, 1000, 2)]
    assert Counter(map(tuple, out)) == Counter(expected)
    assert joined is not None
