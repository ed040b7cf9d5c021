"""CheckpointCoordinator: triggers checkpoints, collects acknowledgements, completes them in Delta.

Port of Flink's CheckpointCoordinator, simplified to one concurrent checkpoint:
- a periodic trigger (interval, min pause) asks the tasks of its plan (`plan.py`, FLIP-147) to
  inject barrier n: the sources, or, once some tasks finished, the running tasks whose upstream
  tasks all finished; it is skipped while a task is neither running nor finished (deploying,
  restarting);
- every running task acknowledges n with its state files (or declines it); finished tasks are
  recorded as finished, with the final committables their operator coordinators hold for them;
- with every acknowledgement in, the checkpoint is completed by ONE Delta commit (through
  `CompletedCheckpointStore`): it exists if and only if that commit exists. Then tasks and
  operator coordinators are notified (the Delta sink commits its files here);
- a decline, a timeout or a failover aborts the pending checkpoint and deletes its files; more
  than `tolerable_failures` failures in a row fail the job;
- ids only grow, also across restarts and restores.

Runs on the JobMaster's main thread; blocking I/O (Delta commits, file deletes) runs on one I/O
thread, in order, so checkpoint n is durable (and its sink commit done) before n+1's.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from runtime.core.errors import CheckpointError, LeadershipLostError, SharedStateMissingError
from runtime.core.states import ExecutionState
from runtime.jobmanager.checkpoint.config import CheckpointCoordinatorConfiguration
from runtime.jobmanager.checkpoint.plan import CheckpointPlan, calculate_checkpoint_plan
from runtime.jobmanager.checkpoint.stats import CheckpointStatsTracker
from runtime.rpc import messages as m

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CheckpointTask:
    """A task (its current attempt) as the coordinator sees it."""

    attempt_id: str
    tm_id: str
    vertex_id: str
    subtask_index: int
    parallelism: int
    operator_ids: tuple[str, ...]
    is_source: bool  # a task of an input vertex
    max_parallelism: int = 128
    state: ExecutionState = ExecutionState.RUNNING
    upstream: tuple[tuple[str, int], ...] = ()  # (vertex id, subtask) of the tasks it reads from


class CheckpointHost(Protocol):
    """What the coordinator needs from the scheduler that hosts it (test doubles implement this)."""

    def checkpoint_tasks(self) -> list[CheckpointTask] | str:
        """Every task with its state, or why no checkpoint can start now (the job is not running,
        a restart is pending): the checkpoint is skipped."""
        ...

    def final_committables(self, finished: list[CheckpointTask]) -> dict[str, dict[int, bytes]]:
        """Operator id -> subtask -> the pickled final committables the operator's coordinator
        holds for these finished subtasks (their last files, reported before they finished): the
        checkpoint holds them as those subtasks' committables (FLIP-147's final checkpoint)."""
        ...

    async def snapshot_coordinators(self, checkpoint_id: int) -> dict[str, bytes]:
        """Operator coordinators' states (operator id -> bytes), taken before any task is triggered;
        their events to tasks are held until `tasks_triggered` (Flink's OperatorCoordinatorCheckpoints)."""
        ...

    def tasks_triggered(self, checkpoint_id: int) -> None:
        """Every task of the checkpoint was triggered (or could not be): held events go out."""
        ...

    async def send_trigger(self, task: CheckpointTask, msg: m.TriggerCheckpoint) -> None: ...

    async def send_notify(self, task: CheckpointTask, msg: m.NotifyCheckpoint) -> None: ...

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> Any: ...

    def spawn(self, coro: Awaitable[Any]) -> Any: ...

    async def on_checkpoint_completed(self, checkpoint: Any) -> None:
        """Checkpoint durable: operator coordinators commit (raising fails over the job)."""
        ...

    def on_checkpoint_failures_exceeded(self, error: m.ErrorInfo) -> None: ...


@dataclass
class PendingCheckpoint:
    checkpoint_id: int
    timestamp_ms: int
    started: float
    tasks: dict[str, CheckpointTask]
    not_yet_acknowledged: set[str]
    acks: dict[str, m.AcknowledgeCheckpoint] = field(default_factory=dict)
    timeout_handle: Any = None
    discarded: bool = False
    savepoint: m.SavepointOptions | None = None
    done: asyncio.Future[Any] | None = None  # a savepoint's caller waits here: metadata, or the failure
    # every acknowledgement is in and the Delta commit is in flight: only its outcome decides now
    # (aborting here would delete files a landing commit references)
    completing: bool = False
    # FLIP-147: tasks that had finished when it was triggered (recorded, not waited for), and the
    # final committables their operators' coordinators hold for them
    finished: tuple[CheckpointTask, ...] = ()
    finished_committables: dict[str, dict[int, bytes]] = field(default_factory=dict)
    coordinator_states: dict[str, bytes] = field(default_factory=dict)  # operator id -> its coordinator's state

    def files(self) -> list[str]:
        return [f.path for a in self.acks.values() for f in a.state.files]


class CheckpointCoordinator:
    def __init__(
        self,
        job_id: str,
        config: CheckpointCoordinatorConfiguration,
        store: Any,
        host: CheckpointHost,
        clock: Callable[[], float] = time.time,
        fence: Callable[[], bool] | None = None,
    ) -> None:
        """`fence`: asked (on the I/O thread) right before each Delta commit whether this JobManager
        still leads (high availability); a commit it refuses does not happen."""
        self.job_id = job_id
        self.fence = fence
        self.config = config
        self.store = store  # runtime.jobmanager.checkpoint.store.CompletedCheckpointStore
        self.host = host
        self.clock = clock
        self.stats = CheckpointStatsTracker()
        self.pending: PendingCheckpoint | None = None
        self.latest_completed: Any = None  # CheckpointMetadata
        self._next_id = 1
        self.latest_savepoint: Any = None  # CheckpointMetadata (with its location) of the newest savepoint taken or restored
        self._savepoint_targets: dict[int, str] = {}  # savepoint id -> its table: where late acknowledgements' files go
        self._last_completion = 0.0
        self._completing: asyncio.Future[None] | None = None  # a checkpoint's commit in flight (see settle)
        self._consecutive_failures = 0
        self._periodic = False
        self._timer: Any = None
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"checkpoint-io-{job_id[:8]}")
        self._shutdown = False

    def _log(self, level: int, msg: str, *args: Any) -> None:
        log.log(level, f"[CheckpointCoordinator {self.job_id}] {msg}", *args)

    async def _run_io(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._io, fn, *args)

    # --- periodic triggering --------------------------------------------------------------------
    def start_periodic(self) -> None:
        if self._periodic or self._shutdown:
            return
        self._periodic = True
        self._schedule(self.config.interval_ms / 1000.0)

    def stop_periodic(self) -> None:
        self._periodic = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _schedule(self, delay_s: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.host.call_later(max(0.0, delay_s), self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if not self._periodic or self._shutdown:
            return
        self.host.spawn(self.trigger_checkpoint())
        self._schedule(self.config.interval_ms / 1000.0)

    # --- trigger --------------------------------------------------------------------------------
    async def trigger_checkpoint(self) -> int | None:
        """Start checkpoint n; None if skipped (one pending, min pause, tasks not all running)."""
        if self._shutdown or self.pending is not None:
            return None
        now = self.clock()
        if self._last_completion and (now - self._last_completion) * 1000 < self.config.min_pause_ms:
            return None
        plan = self._plan()
        if isinstance(plan, str):
            self._log(logging.DEBUG, "checkpoint skipped: %s", plan)
            return None
        cid = self._next_id
        self._next_id += 1
        ts = int(now * 1000)
        pending = self._pending_for(cid, ts, now, plan)
        self.pending = pending
        self.stats.report_pending(cid, ts, len(pending.tasks))
        pending.timeout_handle = self.host.call_later(
            self.config.timeout_ms / 1000.0,
            lambda: self.host.spawn(self._abort(cid, f"checkpoint {cid} expired before completing (timeout {self.config.timeout_ms} ms)")),
        )
        self._log(
            logging.DEBUG, "triggering checkpoint %d at %d of %d running tasks (%d finished)",
            cid, len(plan.tasks_to_trigger), len(pending.tasks), len(plan.finished_tasks),
        )
        msg_mode = self.config.mode.value
        triggers = [
            (t, m.TriggerCheckpoint(job_id=self.job_id, execution_attempt_id=t.attempt_id, checkpoint_id=cid, timestamp_ms=ts, mode=msg_mode))
            for t in plan.tasks_to_trigger
        ]
        if not await self._snapshot_coordinators(pending):
            return None
        self.host.spawn(self._trigger_all(cid, triggers))
        return cid

    async def _snapshot_coordinators(self, p: PendingCheckpoint) -> bool:
        """The operator coordinators' states go first; False: the checkpoint was aborted meanwhile or by their failure."""
        try:
            p.coordinator_states = await self.host.snapshot_coordinators(p.checkpoint_id)
        except Exception as e:  # noqa: BLE001 - a coordinator that cannot snapshot fails this checkpoint, not the job
            self._log(logging.WARNING, "operator coordinators could not take checkpoint %d: %s", p.checkpoint_id, e)
            self.host.tasks_triggered(p.checkpoint_id)
            await self._abort(p.checkpoint_id, f"operator coordinators could not take checkpoint {p.checkpoint_id}: {e}")
            return False
        if self.pending is not p or p.discarded:
            self.host.tasks_triggered(p.checkpoint_id)
            return False
        return True

    async def _trigger_all(self, checkpoint_id: int, triggers: list[tuple[CheckpointTask, m.TriggerCheckpoint]]) -> None:
        try:
            await asyncio.gather(*(self._send_trigger(t, msg) for t, msg in triggers))
        finally:
            self.host.tasks_triggered(checkpoint_id)

    def _plan(self) -> CheckpointPlan[CheckpointTask] | str:
        tasks = self.host.checkpoint_tasks()
        if isinstance(tasks, str):
            return tasks
        return calculate_checkpoint_plan(tasks, self.config.checkpoints_after_tasks_finish)

    def _pending_for(
        self, cid: int, ts: int, now: float, plan: CheckpointPlan[CheckpointTask], savepoint: m.SavepointOptions | None = None
    ) -> PendingCheckpoint:
        waiting = plan.tasks_to_wait_for
        finished = plan.finished_tasks
        return PendingCheckpoint(
            cid, ts, now, {t.attempt_id: t for t in waiting}, {t.attempt_id for t in waiting}, savepoint=savepoint,
            finished=finished, finished_committables=self.host.final_committables(list(finished)) if finished else {},
        )

    async def trigger_savepoint(self, options: m.SavepointOptions, wait_s: float = 60.0) -> Any:
        """Take a savepoint into `options.target` and return its metadata once committed there.

        It waits (up to `wait_s`) for a pending checkpoint to end first (one at a time), ignores the
        min pause, and fails with a clear error when not every task runs. Its files live in the
        savepoint's own Delta table (one commit, kept until disposed); like a checkpoint it is
        committed before operator coordinators commit (the Delta sink) and tasks hear of it.
        """
        if self._shutdown:
            raise CheckpointError(f"job {self.job_id} is ending: no savepoint")
        deadline = self.clock() + wait_s
        while self.pending is not None:
            if self.clock() > deadline or self._shutdown:
                raise CheckpointError(f"job {self.job_id}: checkpoint {self.pending.checkpoint_id} is still in progress; try again later")
            await asyncio.sleep(0.02)
        plan = self._plan()
        if isinstance(plan, str):
            raise CheckpointError(f"job {self.job_id}: cannot take a savepoint now: {plan}")
        cid = self._next_id
        self._next_id += 1
        now = self.clock()
        ts = int(now * 1000)
        pending = self._pending_for(cid, ts, now, plan, savepoint=options)
        pending.done = asyncio.get_running_loop().create_future()
        self._savepoint_targets[cid] = options.target
        self.pending = pending
        self.stats.report_pending(cid, ts, len(pending.tasks), is_savepoint=True)
        pending.timeout_handle = self.host.call_later(
            self.config.timeout_ms / 1000.0,
            lambda: self.host.spawn(self._abort(cid, f"savepoint {cid} expired before completing (timeout {self.config.timeout_ms} ms)")),
        )
        how = " (stop, drain)" if options.drain else " (stop)" if options.stop else ""
        self._log(logging.INFO, "triggering savepoint %d into %s%s", cid, options.target, how)
        triggers = [
            (t, m.TriggerCheckpoint(
                job_id=self.job_id, execution_attempt_id=t.attempt_id, checkpoint_id=cid, timestamp_ms=ts, mode=self.config.mode.value, savepoint=options
            ))
            for t in plan.tasks_to_trigger
        ]
        if await self._snapshot_coordinators(pending):
            self.host.spawn(self._trigger_all(cid, triggers))
        return await pending.done

    async def _send_trigger(self, task: CheckpointTask, msg: m.TriggerCheckpoint) -> None:
        try:
            await self.host.send_trigger(task, msg)
        except Exception as e:  # noqa: BLE001 - the task is gone (a failover follows): not a checkpoint failure
            where = f"{task.vertex_id}[{task.subtask_index}]"
            await self._abort(msg.checkpoint_id, f"could not trigger checkpoint {msg.checkpoint_id} at task {where}: {e}", count_failure=False)

    # --- acknowledgements -------------------------------------------------------------------------
    async def receive_acknowledge(self, msg: m.AcknowledgeCheckpoint) -> None:
        p = self.pending
        if p is None or p.checkpoint_id != msg.checkpoint_id or p.discarded or msg.execution_attempt_id not in p.tasks:
            # late or unknown: its files belong to no checkpoint
            self._log(logging.DEBUG, "late or unknown acknowledgement of checkpoint %d", msg.checkpoint_id)
            files = [f.path for f in msg.state.files]
            target = self._savepoint_targets.get(msg.checkpoint_id)
            if files and target is not None:
                self._discard_late(self.store.discard_savepoint, target, files)
            elif files:
                self._discard_late(self.store.discard, files)
            return
        if msg.execution_attempt_id not in p.not_yet_acknowledged:
            return
        p.not_yet_acknowledged.discard(msg.execution_attempt_id)
        p.acks[msg.execution_attempt_id] = msg
        self.stats.report_ack(p.checkpoint_id, msg.state.state_size, msg.sync_ms, msg.async_ms, msg.alignment_ms, msg.start_delay_ms)
        if not p.not_yet_acknowledged:
            await self._complete(p)

    def _discard_late(self, fn: Callable[..., Any], *args: Any) -> None:
        """Delete the files of a late acknowledgement: on the I/O thread, or, once the coordinator
        was shut down (the job ended; writers that finished after it still report), on a thread of
        its own: a late file must go even then."""
        if not self._shutdown:
            self.host.spawn(self._run_io(fn, *args))
            return

        def discard() -> None:
            try:
                fn(*args)
            except Exception as e:  # noqa: BLE001 - garbage left behind, not damage
                self._log(logging.WARNING, "could not delete the files of a late acknowledgement: %s", e)

        threading.Thread(target=discard, name=f"checkpoint-late-{self.job_id[:8]}", daemon=True).start()

    async def receive_decline(self, msg: m.DeclineCheckpoint) -> None:
        await self._abort(msg.checkpoint_id, f"checkpoint {msg.checkpoint_id} declined by a task: {msg.reason}", msg.counts_as_failure)

    async def _complete(self, p: PendingCheckpoint) -> None:
        if self._shutdown:
            # the job ended while its last acknowledgements were in flight: a checkpoint completed now
            # would notify sinks of a job that is over (a cancelled job must commit nothing); its files go
            p.discarded = True
            if p.savepoint is not None:
                self._discard_late(self.store.discard_savepoint, p.savepoint.target, p.files())
            else:
                self._discard_late(self.store.discard, p.files())
            return
        done = asyncio.get_running_loop().create_future()
        self._completing = done
        try:
            await self._commit(p)
        finally:
            done.set_result(None)
            if self._completing is done:
                self._completing = None

    def _fenced(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` if this JobManager still leads (I/O thread, right before the commit)."""
        if self.fence is not None and not self.fence():
            raise LeadershipLostError(f"job {self.job_id}: this JobManager no longer leads the cluster; nothing is committed")
        return fn(*args)

    async def settle(self) -> None:
        """Wait for a checkpoint whose Delta commit is in flight, and its operator coordinators'
        commits: with checkpoints after tasks finish (FLIP-147) one may still complete while the
        job finishes, and the job's final commit must come after it."""
        if self._completing is not None:
            await asyncio.shield(self._completing)

    async def _commit(self, p: PendingCheckpoint) -> None:
        if p.timeout_handle is not None:
            p.timeout_handle.cancel()
        p.completing = True
        metadata = self.store.metadata_for(p, self.clock())
        kind = "savepoint" if p.savepoint else "checkpoint"
        try:
            if p.savepoint is not None:
                metadata = metadata.model_copy(update={"is_savepoint": True, "location": p.savepoint.target})
                await self._run_io(self._fenced, self.store.add_savepoint, p.savepoint.target, metadata)
            else:
                await self._run_io(self._fenced, self.store.add, metadata)
        except Exception as e:  # noqa: BLE001 - the checkpoint does not exist; its files go
            self._log(logging.WARNING, "completing %s %d failed: %s", kind, p.checkpoint_id, e)
            # a checkpoint built on removed shared state is not a storage failure: the abort makes
            # the tasks take a full one next
            counts = p.savepoint is None and not isinstance(e, (SharedStateMissingError, LeadershipLostError))
            await self._discard(p, f"{kind} {p.checkpoint_id} could not be committed to Delta: {e}", count_failure=counts)
            return
        if self.pending is p:
            self.pending = None
        self._last_completion = self.clock()
        if p.savepoint is not None:
            self.latest_savepoint = metadata  # newer than every checkpoint: a failover restores from it
        else:
            self.latest_completed = metadata
            self._consecutive_failures = 0
        self.stats.report_completed(p.checkpoint_id, metadata, p.savepoint.target if p.savepoint else self.store.table_uri)
        self._log(logging.INFO, "completed %s %d (%d bytes, %d ms)", kind, p.checkpoint_id, metadata.state_size, metadata.duration_ms)
        for t in p.tasks.values():
            note = m.NotifyCheckpoint(job_id=self.job_id, execution_attempt_id=t.attempt_id, checkpoint_id=p.checkpoint_id, completed=True)
            self.host.spawn(self._notify(t, note))
        try:
            await self.host.on_checkpoint_completed(metadata)
        finally:
            if p.done is not None and not p.done.done():
                p.done.set_result(metadata)

    async def _notify(self, task: CheckpointTask, msg: m.NotifyCheckpoint) -> None:
        try:
            await self.host.send_notify(task, msg)
        except Exception:  # noqa: BLE001 - notifications are best effort (Flink: the same)
            pass

    async def _abort(self, checkpoint_id: int, reason: str, count_failure: bool = True) -> None:
        p = self.pending
        if p is None or p.checkpoint_id != checkpoint_id or p.discarded or p.completing:
            return
        await self._discard(p, reason, count_failure)

    async def _discard(self, p: PendingCheckpoint, reason: str, count_failure: bool) -> None:
        checkpoint_id = p.checkpoint_id
        p.discarded = True
        if self.pending is p:
            self.pending = None
        if p.timeout_handle is not None:
            p.timeout_handle.cancel()
        self.stats.report_failed(checkpoint_id, reason)
        self._log(logging.WARNING, "checkpoint %d aborted: %s", checkpoint_id, reason)
        files = p.files()
        try:
            if p.savepoint is not None:  # nothing was committed there: the savepoint's folder goes
                await self._run_io(self.store.discard_savepoint, p.savepoint.target, files)
            else:  # its files, and the empty folders of tasks whose write failed (a full disk)
                await self._run_io(self.store.discard, files, checkpoint_id)
        except Exception as e:  # noqa: BLE001 - clean-up is best effort; the failed checkpoint's outcome stands
            self._log(logging.WARNING, "could not delete the files of aborted checkpoint %d: %s", checkpoint_id, e)
        if p.done is not None and not p.done.done():
            p.done.set_exception(CheckpointError(reason))
            count_failure = False  # a failed savepoint is the caller's error to handle, not a checkpoint failure
        for t in p.tasks.values():
            note = m.NotifyCheckpoint(job_id=self.job_id, execution_attempt_id=t.attempt_id, checkpoint_id=checkpoint_id, completed=False)
            self.host.spawn(self._notify(t, note))
        if count_failure:
            self._consecutive_failures += 1
            if self._consecutive_failures > self.config.tolerable_failures:
                self.host.on_checkpoint_failures_exceeded(
                    m.ErrorInfo(
                        type_name="CheckpointException",
                        message=(
                            f"exceeded checkpoint tolerable failure threshold ({self.config.tolerable_failures}); "
                            f"the last: {reason}"
                        ),
                    )
                )

    async def abort_pending(self, reason: str) -> None:
        """A failover or the job's end: the pending checkpoint cannot complete (not a checkpoint failure)."""
        if self.pending is not None:
            await self._abort(self.pending.checkpoint_id, reason, count_failure=False)

    # --- restore --------------------------------------------------------------------------------
    def restorable(self) -> list[Any]:
        """Metadata of what a later run may restore this job from: the newest checkpoint and savepoint,
        and a checkpoint whose Delta commit is in flight (it may land). Operator coordinators of a job
        that ends without finishing keep what these hold (the Delta sink's files of a checkpoint that
        completed but was not committed yet: a restore commits them)."""
        out = [c for c in (self.latest_completed, self.latest_savepoint) if c is not None]
        p = self.pending
        if p is not None and p.completing and not p.discarded:
            out.append(self.store.metadata_for(p, self.clock()))
        return out

    async def latest_for_restore(self) -> Any:
        """The newest completed checkpoint or savepoint (Delta is the truth for checkpoints: a commit
        that landed but whose reply was lost counts). A savepoint newer than every checkpoint wins:
        its sink commits happened, so restoring an older checkpoint would replay them."""
        latest = await self._run_io(self.store.latest)
        sp = self.latest_savepoint
        if sp is not None and (latest is None or sp.checkpoint_id > latest.checkpoint_id):
            self._next_id = max(self._next_id, sp.checkpoint_id + 1)
            self.stats.report_restored(sp.checkpoint_id)
            return sp
        if latest is not None:
            self.latest_completed = latest
            self._next_id = max(self._next_id, latest.checkpoint_id + 1)
            self.stats.report_restored(latest.checkpoint_id)
        return latest

    def continue_after(self, checkpoint_id: int) -> None:
        """The next checkpoint's id is above `checkpoint_id` (ids an earlier execution of the same job used)."""
        self._next_id = max(self._next_id, checkpoint_id + 1)

    @property
    def next_checkpoint_id(self) -> int:
        return self._next_id

    def restore_from_savepoint(self, savepoint: Any) -> None:
        """The job starts from a savepoint (run -s): ids continue after it, a failover before the
        first checkpoint restores it again."""
        self.latest_savepoint = savepoint
        self._next_id = max(self._next_id, savepoint.checkpoint_id + 1)
        self.stats.report_restored(savepoint.checkpoint_id)

    async def run_io(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Blocking work that must be ordered with checkpoint commits (e.g. a sink's commit on restore)."""
        return await self._run_io(fn, *args)

    def suspend(self) -> None:
        """Leadership lost: stop, and delete nothing (the new leader owns the files now, and a
        checkpoint of this one may be what it restores)."""
        self._shutdown = True
        self.stop_periodic()
        if self.pending is not None and self.pending.timeout_handle is not None:
            self.pending.timeout_handle.cancel()
        self._io.shutdown(wait=False)

    def shutdown(self) -> Future[None] | None:
        """Stop triggering; returns the clean-up still running on the I/O thread (None: nothing to do).
        The job reports its end only after it, so whoever reads the job's result (a test, a restore, a
        JobResultStore entry) finds no folder of a checkpoint that never completed."""
        if self._shutdown:
            return None
        self._shutdown = True
        self.stop_periodic()
        if self.pending is not None and self.pending.timeout_handle is not None:
            self.pending.timeout_handle.cancel()
        cleanup = None
        if self._next_id > 1:
            # every task is done now: what failed checkpoints left (files no acknowledgement listed, a
            # killed writer's temp file, empty folders) goes, after any commit still queued before it
            cleanup = self._io.submit(self._remove_uncommitted, self._next_id - 1)
        self._io.shutdown(wait=False)
        return cleanup

    def _remove_uncommitted(self, up_to: int) -> None:
        try:
            self.store.remove_uncommitted(up_to)
        except Exception as e:  # noqa: BLE001 - garbage left behind, not damage
            self._log(logging.WARNING, "could not remove the folders of checkpoints that never completed: %s", e)
