"""The streams the golden print() test prints, written once for PyFlink and Millrace alike.

`build(env, Types, Row)` adds one bounded stream per case to `env`, each printed with the case's
name as sink identifier (`<case>> <record>`, parallelism 1, so each case's lines keep their order).
generate.py runs it on apache-flink 2.3.0 and keeps what each case printed in `<case>.txt`;
tests/integration/api/test_print_golden.py runs it on Millrace and compares. Only values PyFlink
accepts are here: a Tuple field, a map value or a list element may not be None in PyFlink, and a
top-level LIST stream fails in its from_collection.
"""
from __future__ import annotations

import datetime
import decimal
from typing import Any

NAN, INF = float("nan"), float("inf")
FLOATS = [1.0, 0.1, 1e20, -0.0, 0.0, NAN, INF, -INF, 1e-5, 1e7, 9999999.0, 0.001, 1e-4, 123456789.125, -2.5e-7,
          3.4e38, 2.0 ** 53, 1.5, 100.0, 5e-324, 1e23, 8.41e21, 2.0 ** 62, 1.4e-45, 16777217.0, 1 / 3]
NOTES = ["", "a,b", "[c]", "(d, e)", "+I[x]", "{k=v}", "None", "null", "ünï", " x ", "it's", 'say "hi"']


def cases(Types: Any, Row: Any) -> dict[str, tuple[list[Any], Any]]:
    """name -> (values, type info; None: untyped, PyFlink's pickled objects)."""
    pair = Types.ROW([Types.INT(), Types.STRING()])
    named_pair = Types.ROW_NAMED(["id", "name"], [Types.INT(), Types.STRING()])
    tuple_pair = Types.TUPLE([Types.INT(), Types.STRING()])
    # Java HashMap order: colliding hashes ("Aa", "BB"; 1 and 17), and maps past 12 entries (a bigger table)
    maps = [{"a": 1, "b": 2, "c": 3, "zz": 4, "key10": 5, "Aa": 6, "BB": 7}, {}, {"one": 1}, {"x,y": -1, "[z]": 0},
            {f"k{i}": i for i in range(13)}]
    int_maps = [{1: "x", 17: "y", 2: "z", -5: "w"}, {}, {2 ** 31 - 1: "max", -2 ** 31: "min", 0: "zero"},
                {i * 7: str(i) for i in range(20)}]
    temporal = [decimal.Decimal("1.50"), datetime.date(2024, 1, 2), datetime.time(3, 4, 5),
                datetime.datetime(2024, 1, 2, 3, 4, 5, 123000), 7, -8]
    temporal2 = [decimal.Decimal("-0.001"), datetime.date(1999, 12, 31), datetime.time(23, 59, 0),
                 datetime.datetime(2024, 1, 2, 3, 4, 5), 0, 127]
    temporal_types = [Types.BIG_DEC(), Types.SQL_DATE(), Types.SQL_TIME(), Types.SQL_TIMESTAMP(), Types.SHORT(), Types.BYTE()]
    return {
        "row": (
            [Row(1, "a", True, 1.0, 2 ** 62), Row(None, None, None, None, None), Row(-2, "a,b [c] (d)", False, 0.1, -2 ** 63),
             *[Row(i, s, i % 2 == 0, i / 4, i * 10 ** 12) for i, s in enumerate(NOTES)]],
            Types.ROW([Types.INT(), Types.STRING(), Types.BOOLEAN(), Types.DOUBLE(), Types.LONG()]),
        ),
        "row_floats": ([Row(f, f) for f in FLOATS] + [Row(None, None)], Types.ROW([Types.DOUBLE(), Types.FLOAT()])),
        "row_nested": (
            [Row(Row(1, "x"), Row(2, "y"), (3, "z"), [1, 2], {"k": 1}, ["a", "b,c"], ["s", "t"], [1, 2, 3]),
             Row(None, None, None, None, None, None, None, None),
             Row(Row(None, ""), Row(None, None), (4, "w"), [], {}, [], [], []),
             Row(Row(-1, "[x]"), Row(5, "a,b"), (0, ""), [2 ** 31 - 1], {"": 0}, ["", "None"], [""], [-1])],
            Types.ROW([pair, named_pair, tuple_pair, Types.LIST(Types.INT()), Types.MAP(Types.STRING(), Types.INT()),
                       Types.LIST(Types.STRING()), Types.BASIC_ARRAY(Types.STRING()), Types.PRIMITIVE_ARRAY(Types.INT())]),
        ),
        "row_deep": (
            [Row(Row(Row(1, "x"), [1.5, 0.1, 1e20], {"k": [1.5, 0.1]})), Row(Row(None, [], {})), Row(None)],
            Types.ROW([Types.ROW_NAMED(["inner", "nums", "lists"], [pair, Types.LIST(Types.DOUBLE()), Types.MAP(Types.STRING(), Types.LIST(Types.DOUBLE()))])]),
        ),
        "row_maps": (
            [Row(m, i, {True: 1.5, False: 0.1} if n == 0 else {}) for n, (m, i) in enumerate(zip(maps, int_maps + [{}]))],
            Types.ROW([Types.MAP(Types.STRING(), Types.INT()), Types.MAP(Types.INT(), Types.STRING()), Types.MAP(Types.BOOLEAN(), Types.DOUBLE())]),
        ),
        "row_named": (
            [Row(id=1, name="a", tags=["x", "y"], point=Row(x=1.0, ok=True)), Row(id=None, name=None, tags=None, point=None),
             Row(id=2 ** 40, name="b,c", tags=[], point=Row(x=None, ok=False))],
            Types.ROW_NAMED(["id", "name", "tags", "point"],
                            [Types.LONG(), Types.STRING(), Types.LIST(Types.STRING()), Types.ROW_NAMED(["x", "ok"], [Types.DOUBLE(), Types.BOOLEAN()])]),
        ),
        "row_temporal": ([Row(*temporal), Row(*temporal2), Row(*[None] * 6)], Types.ROW(temporal_types)),
        "tuple": (
            [(1, "a", True, 1.0, 2 ** 62), (-2, "a,b [c] (d)", False, 0.1, -2 ** 63), *[(i, s, i % 3 == 0, i / 8, -i) for i, s in enumerate(NOTES)]],
            Types.TUPLE([Types.INT(), Types.STRING(), Types.BOOLEAN(), Types.DOUBLE(), Types.LONG()]),
        ),
        "tuple_floats": ([(f, f) for f in FLOATS], Types.TUPLE([Types.DOUBLE(), Types.FLOAT()])),
        "tuple_nested": (
            [(Row(1, "x"), Row(2, "y"), (3, "z"), [1, 2], {"k": 1}, [True, False], ["s", "t,u"], [1.0, 0.5]),
             (Row(None, ""), Row(None, None), (4, "w"), [], {}, [], [], []),
             (Row(-1, "[x]"), Row(5, "a,b"), (0, ""), [2 ** 31 - 1], {"": 0}, [True], [""], [1e20, -0.0])],
            Types.TUPLE([pair, named_pair, tuple_pair, Types.LIST(Types.INT()), Types.MAP(Types.STRING(), Types.INT()),
                         Types.LIST(Types.BOOLEAN()), Types.BASIC_ARRAY(Types.STRING()), Types.PRIMITIVE_ARRAY(Types.DOUBLE())]),
        ),
        "tuple_deep": (
            [(Row(Row(1, "x"), [1.5, 0.1, 1e20], {"k": [1.5, 0.1]}), ((1, "a"), "b"))],
            Types.TUPLE([Types.ROW_NAMED(["inner", "nums", "lists"], [pair, Types.LIST(Types.DOUBLE()), Types.MAP(Types.STRING(), Types.LIST(Types.DOUBLE()))]),
                         Types.TUPLE([tuple_pair, Types.STRING()])]),
        ),
        "tuple_maps": (
            [(m, i) for m, i in zip(maps, int_maps + [{}])],
            Types.TUPLE([Types.MAP(Types.STRING(), Types.INT()), Types.MAP(Types.INT(), Types.STRING())]),
        ),
        "tuple_keys": (
            [({2 ** 40: "a", -1: "b", 3: "c", 2 ** 32 + 3: "d"}, {0.5: "h", 1.0: "o", -2.5: "n", 1e20: "e"})],
            Types.TUPLE([Types.MAP(Types.LONG(), Types.STRING()), Types.MAP(Types.DOUBLE(), Types.STRING())]),
        ),
        "row_keys": (
            [Row({2 ** 40: "a", -1: "b", 3: "c", 2 ** 32 + 3: "d"}, {0.5: "h", 1.0: "o", -2.5: "n", 1e20: "e"})],
            Types.ROW([Types.MAP(Types.LONG(), Types.STRING()), Types.MAP(Types.DOUBLE(), Types.STRING())]),
        ),
        "tuple_temporal": ([tuple(temporal), tuple(temporal2)], Types.TUPLE(temporal_types)),
        "boolean": ([True, False, True], Types.BOOLEAN()),
        "double": (FLOATS, Types.DOUBLE()),
        "float": (FLOATS, Types.FLOAT()),
        "string": (NOTES, Types.STRING()),
        "int": ([0, -1, 2 ** 31 - 1, -2 ** 31], Types.INT()),
        "long": ([0, -1, 2 ** 62, -2 ** 63, 2 ** 63 - 1], Types.LONG()),
        "map": (maps, Types.MAP(Types.STRING(), Types.INT())),
        "untyped": (
            [(1, "a"), [1, 2], {"a": 1, "b": None}, None, 1.0, 0.1, 1e20, -0.0, NAN, INF, 2 ** 100, "text", "", True,
             Row(1, "a"), Row(id=1, name="a,b", inner=Row(None, [1.5])), {1, 2}, (), [], {}, ("a", (None, [Row(x=0.5)]))],
            None,
        ),
    }


MAPPED = ("mapped_row", "mapped_untyped", "mapped_tuple", "mapped_double")  # build()'s streams made by map()


def case_names(Types: Any, Row: Any) -> list[str]:
    return [*cases(Types, Row), *MAPPED]


def build(env: Any, Types: Any, Row: Any) -> list[str]:
    """Add every case to `env` (parallelism 1); the names, in order."""
    env.set_parallelism(1)
    names = []
    for name, (values, type_info) in cases(Types, Row).items():
        stream = env.from_collection(values) if type_info is None else env.from_collection(values, type_info=type_info)
        stream.print(name)
        names.append(name)
    # streams made by map(): with an output type (a ROW stream) and without (pickled objects)
    ints = env.from_collection([1, 2, 3], type_info=Types.INT())
    ints.map(lambda i: Row(i, str(i) * i, i / 2), output_type=Types.ROW([Types.INT(), Types.STRING(), Types.FLOAT()])).print("mapped_row")
    ints.map(lambda i: Row(id=i, half=i / 2)).print("mapped_untyped")
    ints.map(lambda i: (i, i > 1), output_type=Types.TUPLE([Types.INT(), Types.BOOLEAN()])).print("mapped_tuple")
    ints.map(lambda i: i / 3, output_type=Types.DOUBLE()).print("mapped_double")
    return names + list(MAPPED)
