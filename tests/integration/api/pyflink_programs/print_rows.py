"""A PyFlink-style program (only the imports say runtime.api instead of pyflink): prints Rows."""
from runtime.api.common import Row, Types
from runtime.api.datastream import StreamExecutionEnvironment

if __name__ == '__main__':
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    ds = env.from_collection([(i, f"name-{i}") for i in range(1000)],
                             type_info=Types.TUPLE([Types.INT(), Types.STRING()]))
    ds.map(lambda t: Row(id=t[0], name=t[1], even=t[0] % 2 == 0, score=t[0] / 4 if t[0] % 3 else None),
           output_type=Types.ROW_NAMED(['id', 'name', 'even', 'score'],
                                       [Types.INT(), Types.STRING(), Types.BOOLEAN(), Types.DOUBLE()])) \
        .print()
    env.execute("print rows")
