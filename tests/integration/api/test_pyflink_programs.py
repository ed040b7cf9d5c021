"""PyFlink-style programs run unchanged but for their imports, through `millrace run`."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PROGRAMS = Path(__file__).parent / "pyflink_programs"


def _stdout_lines(program: str) -> list[str]:
    """What `millrace run <program>` printed (local TaskManagers), line by line; it must succeed."""
    proc = subprocess.run(
        [sys.executable, "-m", "runtime.cli", "run", str(PROGRAMS / program), "--provider", "local"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.splitlines()


def _run(program: str) -> list[str]:
    return [line for line in _stdout_lines(program) if line.startswith("(")]


def _printed_records(program: str) -> list[str]:
    """The print sink's lines of a parallelism-2 program, without their subtask prefix, sorted."""
    return sorted(line.split("> ", 1)[1] for line in _stdout_lines(program) if line[:3] in ("1> ", "2> "))


def test_keyed_state_and_event_time_timers_program() -> None:
    assert sorted(_run("running_total_timers.py")) == sorted(
        ["('pens', 2000, 6)", "('pens', 2700, 6)", "('pens', 7500, 6)", "('ink', 4000, 5)", "('ink', 5500, 5)"]
    )


def test_tumbling_window_process_function_program() -> None:
    # a TUPLE stream prints as Flink's Tuple.toString, as under PyFlink
    assert sorted(_run("window_counts.py")) == sorted(
        ["(a,0,5,2)", "(b,0,5,1)", "(a,5,10,1)", "(b,10,15,1)", "(a,10,15,1)"]
    )


def test_side_outputs_program() -> None:
    lines = _printed_records("side_outputs.py")
    assert lines == sorted([
        "negative ('a', -3)", "negative ('b', -15)",  # yield tag, value
        "big ('a', 30)", "big ('a', 31)",  # ctx.output(tag, value)
        "window ('a', 0, 5)", "window ('b', 0, 10)", "window ('a', 10, 12)", "window ('b', 10, 14)", "window ('a', 30, 61)",
    ])


def test_ttl_state_with_event_time_timers_program() -> None:
    """Counts live 2 s after their last write: the 4 s pause expires what came before it (Flink's semantics:
    NeverReturnExpired, OnCreateAndWrite), and the timers at the end read what is still alive."""
    lines = [line for line in _stdout_lines("ttl_counts.py") if line.startswith(("count ", "timer "))]
    assert lines[:6] == ["count a 1", "count b 1", "count a 2", "count pause 1", "count a 1", "count a 2"]
    assert sorted(lines[6:]) == ["timer a 2", "timer b 0", "timer pause 1"]


def test_keyed_broadcast_process_function_applying_rules_program() -> None:
    """Orders against limits that come as broadcast rules, in whichever order the two inputs arrive:
    an order before its rule waits in keyed state until apply_to_keyed_state hands it over."""
    lines = _printed_records("broadcast_rules.py")
    limits = {"pens": 5, "ink": 10, "paper": 100}
    orders = [("pens", 3, 1), ("ink", 12, 2), ("pens", 9, 3), ("paper", 500, 4), ("ink", 4, 5), ("pens", 6, 6)]
    expected = [f"alert {i} order {n}: {a} > {limits[i]}" for i, a, n in orders if a > limits[i]]
    expected += [f"checked {i} {sum(1 for o in orders if o[0] == i)} limit {limits[i]}" for i in limits]
    assert lines == sorted(expected)


def _window_reference() -> list[str]:
    """What Flink's window semantics give for window_kinds.EVENTS, computed with plain Python."""
    sys.path.insert(0, str(PROGRAMS))
    try:
        from window_kinds import EVENTS
    finally:
        sys.path.pop(0)
    out = []
    for key in ("a", "b"):
        ev = [e for e in EVENTS if e[0] == key]

        def line(kind: str, span: str, vals: list[int], key: str = key) -> str:
            return f"{kind} {key} {span} n={len(vals)} sum={sum(vals)}"

        for start in sorted({e[1] - e[1] % 10 for e in ev}):  # tumbling 10
            out.append(line("tumbling", f"[{start},{start + 10})", [e[2] for e in ev if start <= e[1] < start + 10]))
        starts = sorted({s for e in ev for s in (e[1] - e[1] % 10, e[1] - e[1] % 10 - 10)})  # sliding 20 / 10
        for start in starts:
            vals = [e[2] for e in ev if start <= e[1] < start + 20]
            if vals:
                out.append(line("sliding", f"[{start},{start + 20})", vals))
        gap = 5 if key == "a" else 10  # sessions: merge while [ts, ts+gap) overlap
        sessions: list[list[int]] = []
        for e in ev:
            if sessions and e[1] <= sessions[-1][1]:  # Flink merges windows that overlap or touch
                sessions[-1][1] = max(sessions[-1][1], e[1] + gap)
                sessions[-1][2].append(e[2])
            else:
                sessions.append([e[1], e[1] + gap, [e[2]]])
        out += [line("session", f"[{s},{t})", vals) for s, t, vals in sessions]
        out += [line("count", "count", [e[2] for e in ev[i:i + 2]]) for i in range(0, len(ev) - 1, 2)]  # full windows only
    return out


def test_tumbling_sliding_session_and_count_windows_program() -> None:
    lines = _printed_records("window_kinds.py")
    assert lines == sorted(_window_reference())
