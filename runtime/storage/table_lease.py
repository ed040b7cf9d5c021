"""The Delta sink's table lease in storage: who writes a table, readable by every JobManager process.

Delta's own concurrency control catches two commits that race (two runs of the same job commit
under the same app transaction id: delta-rs refuses the second with "Concurrent transaction
failed"), but not two jobs that take turns: an overwrite after another job's commit, or appends
beside another job's appends, are a legal serial order to it. So the sink's coordinator takes a
lease on its table when the job starts, renews it while the job runs and releases it at the end;
the rules are in `table_lease_rules` (pure), this module keeps the state.

Layout: `<table>/_millrace_lease/<generation>.json`, one file per generation of the lease state
(a `LeaseState`: its holders, each with job id, JobManager host and pid, renewal time and
expiry). The newest generation is the state. A transition reads generation n and creates n + 1;
creating is atomic and exclusive (a temp file hard-linked to its final name: `link` fails if the
name exists), so of two transitions from the same state only one lands and the other reads
again. A writer that finds a newer generation than its own after writing was stale (it read an
old state); its file is not the newest, so nobody reads it, and it retries. Old generations are
deleted (the newest few are kept). Names starting with `_` are ignored by Delta readers, Spark
and VACUUM, so the folder never becomes part of the table.

On object stores (s3://, ...) pyarrow offers no exclusive create: there the lease is written
check-then-put, which catches a second job started seconds later but not two started within the
same few milliseconds (logged once per table; see docs/fault_tolerance.md).
"""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from runtime.core.errors import StorageError, TableInUseError, TableLeaseLostError
from runtime.storage import table_lease_rules as rules
from runtime.storage.table_lease_rules import IsAlive, LeaseHolder, LeaseState

log = logging.getLogger(__name__)

LEASE_DIR = "_millrace_lease"
# How long a lease outlives its last renewal. A JobManager that crashed on another host holds its
# tables this long (on the same host its dead pid frees them at once); one that pauses (a long
# GC, a slow commit, a stopped Spark driver) keeps them if it renews within it. 60 s is above
# Flink's heartbeat timeout (50 s, after which the JobManager counts as lost anyway) and gives
# three renewals (every 15 s) the chance to get through a passing storage error.
DEFAULT_LEASE_TIMEOUT_S = 60.0
RENEWALS_PER_TIMEOUT = 4
_KEEP_GENERATIONS = 4
_CAS_ATTEMPTS = 50
_GENERATION = re.compile(r"^(\d{12})\.json$")
_warned_remote: set[str] = set()


def process_alive(host: str, pid: int) -> bool | None:
    """Whether the JobManager process (host, pid) still runs; None when it is on another host."""
    if host != socket.gethostname():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: it runs
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except OSError:
        return True


def _local_dir(table_uri: str) -> str | None:
    if "://" not in table_uri:
        return os.path.join(os.path.abspath(table_uri), LEASE_DIR)
    if table_uri.startswith("file://"):
        return os.path.join(table_uri[len("file://"):], LEASE_DIR)
    return None


class LeaseRegister:
    """The lease state of one table: read the newest generation; write the next one only if no
    one else did (compare-and-set)."""

    def __init__(self, table_uri: str) -> None:
        self.table_uri = table_uri
        self._local = _local_dir(table_uri)
        if self._local is None:
            import pyarrow.fs as pafs

            fs, root = pafs.FileSystem.from_uri(table_uri)
            self._fs, self._dir = fs, f"{root.rstrip('/')}/{LEASE_DIR}"
            if table_uri not in _warned_remote:
                _warned_remote.add(table_uri)
                log.warning("table lease of %s: this store has no exclusive create; two jobs started within "
                            "milliseconds of each other may both take the lease", table_uri)

    # --- files ------------------------------------------------------------------------------------
    def _generations(self) -> list[int]:
        try:
            if self._local is not None:
                names = os.listdir(self._local)
            else:
                import pyarrow.fs as pafs

                infos = self._fs.get_file_info(pafs.FileSelector(self._dir, allow_not_found=True))
                names = [i.base_name for i in infos]
        except FileNotFoundError:
            return []
        except OSError as e:
            raise StorageError(f"cannot read the table lease of {self.table_uri}: {e}") from e
        return sorted(int(m.group(1)) for m in map(_GENERATION.match, names) if m)

    def _path(self, generation: int) -> str:
        return f"{self._local if self._local is not None else self._dir}/{generation:012d}.json"

    def _read_file(self, generation: int) -> str:
        if self._local is not None:
            with open(self._path(generation), encoding="utf-8") as f:
                return f.read()
        with self._fs.open_input_stream(self._path(generation)) as f:
            return f.read().decode()

    def read(self) -> LeaseState:
        """The newest generation's state (generation 0, no holders, when there is none)."""
        for _ in range(_CAS_ATTEMPTS):
            gens = self._generations()
            if not gens:
                return LeaseState()
            try:
                state = LeaseState.model_validate_json(self._read_file(gens[-1]))
            except FileNotFoundError:
                continue  # removed by the clean-up of a newer generation meanwhile: read again
            except Exception as e:  # a damaged lease file must say where it is
                raise StorageError(f"the table lease {self._path(gens[-1])} of {self.table_uri} cannot be read ({e}); "
                                   f"if no job writes the table, delete the folder {LEASE_DIR}") from e
            return state.model_copy(update={"generation": gens[-1]})
        raise StorageError(f"the table lease of {self.table_uri} keeps changing under its readers")

    def write_next(self, state: LeaseState) -> bool:
        """Create generation `state.generation` (one more than what was read); False if another
        transition got there first (read again and decide again)."""
        body = state.model_dump_json()
        gen = state.generation
        try:
            if self._local is not None:
                created = self._create_local(gen, body)
            else:
                created = self._create_remote(gen, body)
        except OSError as e:
            raise StorageError(f"cannot write the table lease of {self.table_uri}: {e}") from e
        if not created:
            return False
        newest = self._generations()
        if newest and newest[-1] != gen:  # a stale write: a newer state exists; ours is never read
            self._delete(gen)
            return False
        for old in newest[:-_KEEP_GENERATIONS]:
            self._delete(old)
        return True

    def _create_local(self, gen: int, body: str) -> bool:
        assert self._local is not None
        os.makedirs(self._local, exist_ok=True)
        tmp = f"{self._local}/.{gen:012d}.{uuid.uuid4().hex}.tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(body)
                f.flush()
                os.fsync(f.fileno())
            os.link(tmp, self._path(gen))  # atomic, and fails if the name exists: the compare-and-set
            return True
        except (FileExistsError, FileNotFoundError):  # taken, or the folder was removed meanwhile
            return False
        finally:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass

    def _create_remote(self, gen: int, body: str) -> bool:
        import pyarrow.fs as pafs

        path = self._path(gen)
        if self._fs.get_file_info(path).type != pafs.FileType.NotFound:
            return False
        self._fs.create_dir(self._dir, recursive=True)
        with self._fs.open_output_stream(path) as f:
            f.write(body.encode())
        return True

    def _delete(self, gen: int) -> None:
        try:
            if self._local is not None:
                os.unlink(self._path(gen))
            else:
                self._fs.delete_file(self._path(gen))
        except (FileNotFoundError, OSError):
            pass

    def remove_if_free(self) -> bool:
        """Remove the lease folder if no one holds the table (a new table that never got a commit
        leaves nothing behind). A transition racing with this finds its file gone and reads again."""
        if self.read().holders:
            return False
        try:
            if self._local is not None:
                shutil.rmtree(self._local, ignore_errors=True)
            else:
                self._fs.delete_dir(self._dir)
        except Exception:  # noqa: BLE001 - left-over lease files hold nothing
            return False
        return True

    def transition(self, decide: Callable[[LeaseState], LeaseState | None]) -> LeaseState:
        """Apply `decide` to the current state and write what it returns, again from the newest state
        until it lands; returns the state written (or the current one when `decide` returned None)."""
        for _ in range(_CAS_ATTEMPTS):
            state = self.read()
            new = decide(state)
            if new is None:
                return state
            if self.write_next(new.model_copy(update={"generation": state.generation + 1})):
                return new
        raise StorageError(f"the table lease of {self.table_uri} did not settle after {_CAS_ATTEMPTS} attempts; try again")


class TableLease:
    """One sink's lease on its table: acquire at the job's start, renew while it runs (a thread,
    every timeout / 4), check before each commit, release at its end."""

    def __init__(
        self,
        table_uri: str,
        job_id: str,
        sink_id: str,
        *,
        job_name: str = "",
        operator: str = "",
        concurrent: bool = False,
        timeout_s: float = DEFAULT_LEASE_TIMEOUT_S,
        clock: Callable[[], float] = time.time,
        is_alive: IsAlive = process_alive,
        host: str | None = None,
        pid: int | None = None,
    ) -> None:
        if timeout_s <= 0:
            raise StorageError(f"table lease of {table_uri}: the timeout must be > 0 s, got {timeout_s}")
        self.table_uri = table_uri
        self.register = LeaseRegister(table_uri)
        self.owner = f"{job_id}/{sink_id}"
        self.job_id = job_id
        self.job_name = job_name
        self.operator = operator
        self.concurrent = concurrent
        self.timeout_s = float(timeout_s)
        self.renew_every_s = self.timeout_s / RENEWALS_PER_TIMEOUT
        self.clock = clock
        self.is_alive = is_alive
        self.host = host or socket.gethostname()
        self.pid = os.getpid() if pid is None else pid
        self.held = False
        self.lost: str | None = None  # why, once the lease was lost
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _who(self) -> str:
        return f"job {self.job_id}: Delta sink '{self.operator}'"

    # --- acquire, renew, release -------------------------------------------------------------------
    def acquire(self) -> None:
        """Take the lease, or raise TableInUseError naming the job(s) in the way."""
        in_the_way: list[LeaseHolder] = []

        def decide(state: LeaseState) -> LeaseState | None:
            now = self.clock()
            request = LeaseHolder(
                owner=self.owner, job_id=self.job_id, job_name=self.job_name, operator=self.operator, host=self.host,
                pid=self.pid, concurrent=self.concurrent, acquired_at=now, renewed_at=now, expires_at=now + self.timeout_s,
            )
            decision = rules.acquire(state, request, now, self.is_alive)
            in_the_way[:] = decision.conflicts
            return decision.state

        self.register.transition(decide)
        if in_the_way:
            raise TableInUseError(self._in_use_message(in_the_way))
        self.held = True
        self.lost = None

    def _in_use_message(self, holders: list[LeaseHolder]) -> str:
        now = self.clock()
        others = "; ".join(h.describe(now) for h in holders)
        if self.concurrent:
            hint = "the other job does not allow concurrent writers: it must end first, or write another table"
        else:
            hint = ("stop that job or wait for it to end, or give this job another table; if both jobs only append, "
                    "set DeltaSink(..., allow_concurrent_writers=True) on both")
        return (
            f"{self._who()} cannot write {self.table_uri}: another running job writes it ({others}). Two jobs writing one "
            f"table lose each other's rows (an overwrite removes the other's files; appends mix both outputs), so "
            f"nothing was written. To go on: {hint}. A JobManager that crashed holds the table until its lease expires "
            f"({self.timeout_s:.0f} s after its last renewal; at once if it ran on this host)."
        )

    def renew(self) -> None:
        """Extend the lease by its timeout; raises TableLeaseLostError if it was taken over."""
        if not self.held:
            return
        dropped = []

        def decide(state: LeaseState) -> LeaseState | None:
            new = rules.renew(state, self.owner, self.clock(), self.timeout_s, self.host, self.pid)
            if new is None:
                dropped.append(state)
            return new

        self.register.transition(decide)
        if dropped:
            self._lose(f"{self._who()} lost its lease on {self.table_uri}: it was not renewed within {self.timeout_s:.0f} s and "
                       f"another job took the table over")

    def _lose(self, why: str) -> None:
        self.held = False
        self.lost = why
        raise TableLeaseLostError(f"{why}; it commits nothing more (the other job may have written the table since). "
                                  "Find out which job should write the table, then run this one again")

    def ensure_held(self) -> None:
        """Before a commit: the lease is held for at least one more renewal interval (renewed now if
        the renewal thread fell behind); raises TableLeaseLostError if not."""
        if self.lost is not None:
            raise TableLeaseLostError(self.lost)
        if not self.held:
            return
        state = self.register.read()
        now = self.clock()
        reason = rules.check_held(state, self.owner, now, self.renew_every_s)
        if reason is None:
            return
        self.renew()  # still present but due: renewed here (raises if it was dropped)
        reason = rules.check_held(self.register.read(), self.owner, self.clock(), 0.0)
        if reason is not None:
            self._lose(f"{self._who()} may not commit to {self.table_uri}: {reason}")

    def release(self) -> None:
        """Give the table back (idempotent); a new table that never got anything leaves no lease folder."""
        self.stop_renewing()
        if not self.held:
            return
        self.held = False
        self.register.transition(lambda state: rules.release(state, self.owner))

    # --- renewal thread ----------------------------------------------------------------------------
    def start_renewing(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._renew_loop, name=f"table-lease-{self.job_id[:8]}", daemon=True)
        self._thread.start()

    def stop_renewing(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)

    def _renew_loop(self) -> None:
        wait = self.renew_every_s
        while not self._stop.wait(wait):
            try:
                self.renew()
                wait = self.renew_every_s
            except TableLeaseLostError as e:
                log.error("%s", e)
                return
            except Exception as e:  # noqa: BLE001 - a passing storage error: try again sooner
                log.warning("%s: renewing the lease on %s failed (%s); trying again", self._who(), self.table_uri, e)
                wait = max(0.5, self.renew_every_s / 4)

    def describe(self) -> dict[str, Any]:
        return {"table": self.table_uri, "owner": self.owner, "held": self.held, "lost": self.lost, "timeout_s": self.timeout_s}


def read_lease(table_uri: str) -> dict[str, Any]:
    """The current lease of a table as plain data (operators, tests): generation and holders."""
    return json.loads(LeaseRegister(table_uri).read().model_dump_json())
