"""Test support: a shorter loop interval for Dagster's backfill daemon, in the daemon process only.

Dagster 1.13 has no instance setting for it: the backfill daemon sleeps
`dagster._daemon.controller.DEFAULT_DAEMON_INTERVAL_SECONDS` (30 s) between iterations, reading the
constant when its loop starts. A test that puts this directory first on PYTHONPATH and sets
MILLRACE_TEST_BACKFILL_DAEMON_INTERVAL_S gets that many seconds in the `dagster._daemon` process
`dagster dev` starts (its webserver, code servers and run workers are left alone). The asset daemon
also falls back to the constant: a test keeps it as it was with `auto_materialize:
minimum_interval_seconds` in its dagster.yaml. Prints MARKER (to the dagster dev log) once set.

Every Python process started with this PYTHONPATH imports this module: it returns at once unless
it is the daemon and the variable is set.
"""
import os
import sys

MARKER = "millrace test: backfill daemon interval"


def _shorten() -> None:
    seconds = os.environ.get("MILLRACE_TEST_BACKFILL_DAEMON_INTERVAL_S")
    argv = sys.orig_argv  # the command line as given: sys.argv is not set yet for `python -m`
    module = argv[argv.index("-m") + 1] if "-m" in argv[:-1] else None
    if not seconds or module != "dagster._daemon":
        return
    from dagster._daemon import controller

    if not hasattr(controller, "DEFAULT_DAEMON_INTERVAL_SECONDS"):
        print(f"{MARKER}: dagster._daemon.controller has no DEFAULT_DAEMON_INTERVAL_SECONDS, left as it is", file=sys.stderr, flush=True)
        return
    controller.DEFAULT_DAEMON_INTERVAL_SECONDS = int(seconds)
    print(f"{MARKER} {int(seconds)} s (was 30 s)", file=sys.stderr, flush=True)


_shorten()
