import time
from collections import Counter
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.api.connectors.generator import DataGeneratorSource
from runtime.api.common import WatermarkStrategy

def gen(i):
    return (f"k{i % 7}", (i * 37) % 101, i * 10)

def test_a(cluster_env):
    for _ in range(3):
        t=time.time()
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(2)
        src = DataGeneratorSource(gen, 2000, batch_size=100)
        got = list(env.from_source(src, WatermarkStrategy.no_watermarks(), "gen").map(lambda r: (r[0], r[1]*2)).execute_and_collect())
        print("job", time.time()-t)
        assert Counter(got) == Counter((gen(i)[0], gen(i)[1]*2) for i in range(2000))
