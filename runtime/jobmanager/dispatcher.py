"""Dispatcher: accepts jobs, starts a JobMaster per job, answers status/result/cancel (Flink: Dispatcher)."""
from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import cloudpickle
import pydantic

from runtime.core.errors import ConfigurationError, JobNotRunningError, NotLeaderError, UnknownJobError, UnknownTriggerError
from runtime.core.states import JobStatus
from runtime.graph.job_graph import JobGraph
from runtime.graph.validation import JobGraphValidationError, validate_job_graph
from runtime.ha.services import DispatcherHaServices
from runtime.jobmanager.job_master import JobMaster
from runtime.rpc import gateways as gw
from runtime.rpc import messages as m
from runtime.rpc.service import RpcEndpoint, RpcService, rpc_method

log = logging.getLogger(__name__)


class JobSubmissionError(ValueError):
    pass


@dataclass
class JobEntry:
    job_graph: JobGraph
    job_master: JobMaster
    submitted_at: float
    status: JobStatus = JobStatus.INITIALIZING
    result: m.JobResultMessage | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    history: list[tuple[JobStatus, float, str | None]] = field(default_factory=list)
    savepoints: dict[str, m.SavepointStatus] = field(default_factory=dict)  # trigger id -> status (Flink: the REST trigger cache)
    # set on the JobMaster's thread at the terminal status: what a stopping Dispatcher waits for
    # (`done` is set on the Dispatcher's main thread, which takes no calls once it stops)
    ended: threading.Event = field(default_factory=threading.Event)


# what a standby Dispatcher still answers: nothing about jobs (its own empty list would read as "no
# jobs" to a client that meant the cluster: a sensor would miss a running job); the leader answers
_STANDBY_METHODS: frozenset[str] = frozenset()


class Dispatcher(RpcEndpoint):
    def __init__(
        self, rpc: RpcService, retained_jobs: int = 100, cancel_on_stop_timeout_s: float = 4.0, ha: DispatcherHaServices | None = None,
    ) -> None:
        """`ha`: the HA stores and the leadership fence (high-availability.type: zookeeper); this
        Dispatcher then serves only while it leads (grant_leadership / revoke_leadership). Without,
        it leads from the start and its jobs end with it."""
        super().__init__(rpc, gw.DISPATCHER)
        self.jobs: dict[str, JobEntry] = {}
        self.retained_jobs = retained_jobs
        # how long a stopping Dispatcher waits for the jobs it cancelled to end; under half of
        # RpcEndpoint.stop's default 10 s, which bounds on_stop and the endpoint's own tasks
        self.cancel_on_stop_timeout_s = cancel_on_stop_timeout_s
        self.ha = ha
        self.leader_session: str | None = None if ha is not None else "no-ha"
        # the HA stores' writes, one at a time and in order (a job's result before its graph goes)
        self._ha_io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dispatcher-ha-io") if ha is not None else None

    # --- leadership (high availability) -------------------------------------------------------------
    async def _dispatch(self, method: str, arg: Any, token: str | None) -> Any:
        if self.leader_session is None and method not in _STANDBY_METHODS:
            leader = self.ha.leader_url() if self.ha is not None else None
            where = f"the leader is at {leader}" if leader else "no leader is elected yet; try again shortly"
            raise NotLeaderError(f"this JobManager is a standby: {where}", leader_url=leader)
        return await super()._dispatch(method, arg, token)

    def grant_leadership(self, session_id: str) -> None:
        """LeaderContender (the election's thread): lead, and recover the jobs of the stores; returns
        once they are started (the election publishes this leader then)."""
        if self._stopped:
            return
        try:
            self.run_async(self._granted(session_id)).result(timeout=120)
        except Exception as e:  # noqa: BLE001 - leading without every job beats not leading; the log says which failed
            log.error("[Dispatcher] recovering the jobs failed: %s", e)

    def revoke_leadership(self) -> None:
        """LeaderContender (the election's thread): suspend every job at once."""
        if self._stopped:  # it suspended its jobs as it stopped
            self.leader_session = None
            return
        done = threading.Event()
        self.run_in_main_thread(lambda: self.spawn(self._revoked(done)))
        done.wait(10)

    def _leads(self) -> bool:
        """The commit fence of this Dispatcher's jobs: a ZooKeeper round trip (any thread but the main one)."""
        session = self.leader_session
        return self.ha is None or (session is not None and self.ha.confirm_leadership(session))

    async def _ha(self, fn: Any, *args: Any) -> Any:
        return await self.loop.run_in_executor(self._ha_io, fn, *args)

    async def _granted(self, session_id: str) -> None:
        assert self.ha is not None
        self.leader_session = session_id
        log.info("[Dispatcher] leading (session %s): recovering the jobs of the job graph store", session_id)
        try:
            job_ids = await self._ha(self.ha.job_graphs.job_ids)
        except Exception as e:  # noqa: BLE001 - without the store no job can be recovered; say so, keep leading
            log.error("[Dispatcher] cannot read the job graph store: %s; no job is recovered", e)
            return
        for job_id in job_ids:
            if self.leader_session != session_id:
                return  # revoked meanwhile
            entry = self.jobs.get(job_id)
            if entry is not None and entry.result is None:
                continue
            try:
                await self._recover_job(job_id)
            except Exception as e:  # noqa: BLE001 - one job's broken entry must not keep the others down
                log.error("[Dispatcher] job %s could not be recovered: %s", job_id, e)

    async def _recover_job(self, job_id: str) -> None:
        assert self.ha is not None
        done = await self._ha(self.ha.job_results.get, job_id)
        if done is not None:
            # it ended before the failover (FLIP-194): never again; finish its clean-up
            log.info("[Dispatcher] job %s ended %s before the failover: not recovered", job_id, done.status)
            await self._ha(self._clean_up_job, job_id)
            return
        try:
            job_graph = JobGraph.model_validate_json(await self._ha(self.ha.job_graphs.get, job_id))
        except Exception as e:  # noqa: BLE001 - a corrupt entry: the job fails with that cause, once
            cause = f"the job graph store's entry of job {job_id} cannot be read: {e}"
            log.error("[Dispatcher] %s; the job fails", cause)
            result = m.JobResultMessage(
                job_id=job_id, job_name="", status=JobStatus.FAILED, duration_ms=0,
                error=m.ErrorInfo(type_name=type(e).__name__, message=cause),
            )
            await self._ha(self._record_result, result)
            return
        log.info("[Dispatcher] recovering job %s '%s'", job_id, job_graph.job_name)
        await self._start_job(job_graph, recovered=True)

    async def _revoked(self, done: threading.Event) -> None:
        try:
            self.leader_session = None
            running = [e for e in self.jobs.values() if e.result is None]
            log.warning("[Dispatcher] leadership lost: suspending %d job(s); the new leader recovers them", len(running))
            for entry in running:
                jm = entry.job_master
                try:
                    await asyncio.wrap_future(jm.run_async(jm.suspend("this JobManager lost its leadership")))
                except Exception as e:  # noqa: BLE001 - a stopped JobMaster has nothing to suspend
                    log.debug("[Dispatcher] suspending job %s: %s", entry.job_graph.job_id, e)
        finally:
            done.set()

    def _record_result(self, result: m.JobResultMessage) -> None:
        """HA I/O thread: the job's end in the JobResultStore (dirty), then its HA data goes, then clean."""
        assert self.ha is not None
        if not self._leads():
            log.warning("[Dispatcher] job %s ended %s, but this JobManager no longer leads: the new leader decides", result.job_id, result.status.name)
            return
        self.ha.job_results.create_dirty(result.job_id, result.status.value, result.model_dump_json())
        self._clean_up_job(result.job_id)

    def _clean_up_job(self, job_id: str) -> None:
        assert self.ha is not None
        self.ha.job_graphs.remove(job_id)
        entry = self.ha.job_results.get(job_id)
        if entry is not None and not entry.clean:
            self.ha.job_results.mark_clean(job_id)

    async def _stored_result(self, job_id: str) -> m.JobResultMessage | None:
        """A job this Dispatcher never ran, ended under an earlier leader: its result from the JobResultStore."""
        if self.ha is None:
            return None
        try:
            entry = await self._ha(self.ha.job_results.get, job_id)
        except Exception as e:  # noqa: BLE001 - unknown is the honest answer when the store cannot be read
            log.warning("[Dispatcher] cannot read the job result store: %s", e)
            return None
        return None if entry is None else m.JobResultMessage.model_validate_json(entry.result_json)

    async def on_stop(self) -> None:
        running = [entry for entry in self.jobs.values() if entry.result is None]
        for entry in running:
            jm = entry.job_master
            try:
                if self.ha is not None:
                    # a JobManager of an HA cluster stopping (SIGTERM, cluster stop) hands its jobs on:
                    # suspended, not cancelled, the standby recovers them (Flink does the same)
                    await asyncio.wrap_future(jm.run_async(jm.suspend("this JobManager stops; a standby takes the job over")))
                else:
                    await asyncio.wrap_future(jm.run_async(jm.cancel(m.Empty())))
            except Exception:  # noqa: BLE001 - a job master that fails to cancel must not stop the others' cancellation
                pass
        # a cluster stopping under a running job (Ctrl-C, SIGTERM, DELETE /cluster): the job must end
        # before its JobMaster stops, since ending is what deletes the Delta files no commit
        # references (a job in its final commit completes it instead: untouched or complete)
        deadline = time.monotonic() + self.cancel_on_stop_timeout_s
        while not all(entry.ended.is_set() for entry in running) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        still = [entry for entry in running if not entry.ended.is_set()]
        if still:
            log.warning("[Dispatcher] %d job(s) did not end within %.0fs of the cancel; stopping them anyway", len(still), self.cancel_on_stop_timeout_s)
        for entry in self.jobs.values():
            entry.job_master.stop()
        if self._ha_io is not None:
            self._ha_io.shutdown(wait=True)

    @rpc_method
    async def submit_job(self, msg: m.SubmitJob) -> m.JobIdMessage:
        try:
            job_graph = JobGraph.model_validate_json(msg.job_graph_json)
        except pydantic.ValidationError as e:
            first = e.errors()[0]
            raise JobSubmissionError(f"the submitted JobGraph is invalid: {e.error_count()} errors, first: {first['msg']} at {first['loc']}") from e
        if job_graph.job_id in self.jobs:
            raise JobSubmissionError(f"job {job_graph.job_id} was already submitted")
        try:
            validate_job_graph(job_graph)  # inconsistent graphs fail here with a reason, not in the JobMaster
        except JobGraphValidationError as e:
            raise JobSubmissionError(str(e)) from None
        job_id = job_graph.job_id
        await self._check_capacity(job_graph)
        if job_id in self.jobs:  # submitted twice while the ResourceManager answered
            raise JobSubmissionError(f"job {job_id} was already submitted")
        if self.ha is not None:
            if await self._stored_result(job_id) is not None:
                raise JobSubmissionError(f"job {job_id} already ran to its end in this cluster (the job result store has it)")
            # durable before it runs: a new leader recovers what this one accepted
            await self._ha(self.ha.job_graphs.put, job_id, msg.job_graph_json, int(time.time() * 1000))
        await self._start_job(job_graph)
        return m.JobIdMessage(job_id=job_id)

    async def _start_job(self, job_graph: JobGraph, recovered: bool = False) -> None:
        job_id = job_graph.job_id

        def on_status(jid: str, status: JobStatus, cause: str | None) -> None:
            self.run_in_main_thread(self._status_changed, jid, status, cause)

        ended = threading.Event()

        def on_terminal(result: m.JobResultMessage) -> None:
            ended.set()
            self.run_in_main_thread(self._job_ended, result)

        try:
            jm = JobMaster(
                self.rpc, job_graph, on_terminal, on_status, recovered=recovered,
                confirm_leadership=self._leads if self.ha is not None else None,
                # Flink's JobMaster id: the leader session it runs under; calls of an earlier one are refused
                fencing_token=self.leader_session if self.ha is not None else None,
            )
        except ConfigurationError as e:  # e.g. a scheduler this version does not have
            raise JobSubmissionError(str(e)) from None
        entry = JobEntry(job_graph, jm, time.time(), status=JobStatus.CREATED, ended=ended)
        entry.history.append((JobStatus.CREATED, entry.submitted_at, None))
        self.jobs[job_id] = entry
        log.info("[Dispatcher] job %s '%s' submitted (%d vertices)", job_id, job_graph.job_name, len(job_graph.vertices))
        try:
            await asyncio.get_running_loop().run_in_executor(None, jm.start)
        except Exception as e:
            # a JobMaster that could not start leaves no zombie entry behind
            self.jobs.pop(job_id, None)
            await asyncio.get_running_loop().run_in_executor(None, jm.stop)
            raise JobSubmissionError(f"job {job_id} '{job_graph.job_name}' could not be started: {e!r}") from e

    async def _check_capacity(self, job_graph: JobGraph) -> None:
        """Refuse a job the cluster could never run (too many slots, or a slot no TaskManager may be that big).
        A batch job needs only its widest region's slots: its regions run one after another."""
        from runtime.core.errors import RpcError
        from runtime.jobmanager.scheduler.ng import adaptive_scheduling
        from runtime.jobmanager.scheduler.slot_sharing import least_resource_requirements

        requirements = least_resource_requirements(job_graph)
        if adaptive_scheduling(job_graph):
            # the adaptive scheduler runs at what it gets: the cluster must hold its minimum (one slot per group)
            requirements = [r.model_copy(update={"min_count": 1}) for r in requirements]
        msg = m.ResourceRequirements(
            job_id=job_graph.job_id, job_master_endpoint=gw.job_master_endpoint(job_graph.job_id),
            job_name=job_graph.job_name, requirements=requirements,
        )
        try:
            ack: m.Ack = await self.rpc.gateway(gw.ResourceManagerGateway, gw.RESOURCE_MANAGER).check_job_requirements(msg, timeout=10)
        except RpcError as e:  # no ResourceManager answering: the JobMaster's declaration checks again
            log.warning("[Dispatcher] job %s: could not check its resources at the ResourceManager: %s", job_graph.job_id, e)
            return
        if not ack.ok:
            log.warning("[Dispatcher] job %s '%s' refused: %s", job_graph.job_id, job_graph.job_name, ack.message)
            raise JobSubmissionError(ack.message)

    def _status_changed(self, job_id: str, status: JobStatus, cause: str | None) -> None:
        entry = self.jobs.get(job_id)
        if entry is not None:
            entry.status = status
            entry.history.append((status, time.time(), cause))

    def _job_ended(self, result: m.JobResultMessage) -> None:
        entry = self.jobs.get(result.job_id)
        if entry is None:
            return
        # the JobMaster's work is done; stop its thread off the dispatcher loop
        self.loop.run_in_executor(None, entry.job_master.stop)
        if result.status is JobStatus.SUSPENDED:
            # leadership lost: the job is the new leader's now; a later leadership here recovers it anew
            del self.jobs[result.job_id]
            entry.ended.set()
            return
        if self.ha is not None and result.status.is_globally_terminal:
            self.spawn(self._persist_result(entry, result))
            return
        self._publish_result(entry, result)

    async def _persist_result(self, entry: JobEntry, result: m.JobResultMessage) -> None:
        """HA: the result reaches clients only once the JobResultStore has it, so a job whose end a
        client saw never runs again after a failover (FLIP-194)."""
        try:
            await self._ha(self._record_result, result)
        except Exception as e:  # noqa: BLE001 - the job's end stands; a new leader would run it again
            log.error("[Dispatcher] job %s ended %s, but the job result store could not record it: %s", result.job_id, result.status.name, e)
        self._publish_result(entry, result)

    def _publish_result(self, entry: JobEntry, result: m.JobResultMessage) -> None:
        entry.status = result.status
        entry.result = result
        entry.done.set()
        self._evict_old_jobs()

    def _evict_old_jobs(self) -> None:
        """Keep the last `retained_jobs` finished jobs (results and coordinators); forget older ones."""
        ended = [jid for jid, e in self.jobs.items() if e.result is not None]
        for jid in ended[: max(0, len(ended) - self.retained_jobs)]:
            del self.jobs[jid]

    def _job_master(self, entry: JobEntry) -> gw.JobMasterGateway:
        """A gateway to the entry's JobMaster, carrying its fencing token."""
        return self.rpc.gateway(gw.JobMasterGateway, entry.job_master.endpoint_id, token=entry.job_master.fencing_token)

    def _entry(self, job_id: str) -> JobEntry:
        entry = self.jobs.get(job_id)
        if entry is None:
            raise UnknownJobError(f"unknown job id {job_id}: it was never submitted here, or ended long ago")
        return entry

    @rpc_method
    async def request_job_status(self, msg: m.JobIdMessage) -> m.JobStatusMessage:
        if msg.job_id not in self.jobs and (stored := await self._stored_result(msg.job_id)) is not None:
            return m.JobStatusMessage(job_id=msg.job_id, status=stored.status)
        return m.JobStatusMessage(job_id=msg.job_id, status=self._entry(msg.job_id).status)

    @rpc_method
    async def request_job_result(self, msg: m.JobIdMessage) -> m.JobResultMessage:
        """Long poll: waits up to 5 s for the end; a non-terminal status means 'ask again'."""
        if msg.job_id not in self.jobs and (stored := await self._stored_result(msg.job_id)) is not None:
            return stored
        entry = self._entry(msg.job_id)
        try:
            await asyncio.wait_for(entry.done.wait(), 5)
        except TimeoutError:
            pass
        if entry.result is not None:
            return entry.result
        return m.JobResultMessage(
            job_id=msg.job_id, job_name=entry.job_graph.job_name, status=entry.status,
            duration_ms=int((time.time() - entry.submitted_at) * 1000),
        )

    @rpc_method
    async def request_job_history(self, msg: m.JobIdMessage) -> m.JobList:
        entry = self._entry(msg.job_id)
        return m.JobList(
            jobs=[
                m.JobOverview(job_id=msg.job_id, job_name=cause or "", status=st, start_time_ms=int(ts * 1000), duration_ms=0)
                for st, ts, cause in entry.history
            ]
        )

    @rpc_method
    async def cancel_job(self, msg: m.JobIdMessage) -> m.Ack:
        entry = self._entry(msg.job_id)
        if entry.result is not None:
            return m.Ack(ok=False, message=f"job {msg.job_id} already ended {entry.result.status.name}")
        await asyncio.wrap_future(entry.job_master.run_async(entry.job_master.cancel(m.Empty())))
        return m.Ack()

    @rpc_method
    async def trigger_savepoint(self, msg: m.TriggerSavepoint) -> m.SavepointTriggerId:
        """Start a savepoint (or stop-with-savepoint); poll `request_savepoint_status` with the trigger id."""
        entry = self._entry(msg.job_id)
        if entry.result is not None:
            raise JobNotRunningError(f"job {msg.job_id} already ended {entry.result.status.name}: no savepoint")
        if entry.status is not JobStatus.RUNNING:
            raise JobNotRunningError(f"job {msg.job_id} is {entry.status.name}: savepoints need a RUNNING job")
        trigger_id = uuid.uuid4().hex
        entry.savepoints[trigger_id] = m.SavepointStatus(job_id=msg.job_id, trigger_id=trigger_id, status="IN_PROGRESS")
        asyncio.get_running_loop().create_task(self._run_savepoint(entry, trigger_id, msg))
        return m.SavepointTriggerId(job_id=msg.job_id, trigger_id=trigger_id)

    async def _run_savepoint(self, entry: JobEntry, trigger_id: str, msg: m.TriggerSavepoint) -> None:
        kind = "stop-with-savepoint" if msg.stop else "savepoint"
        try:
            # the JobMaster bounds it by the checkpoint timeout; this only guards against a lost reply
            loc: m.SavepointLocation = await self._job_master(entry).trigger_savepoint(msg, timeout=24 * 3600)
            entry.savepoints[trigger_id] = m.SavepointStatus(job_id=msg.job_id, trigger_id=trigger_id, status="COMPLETED", location=loc.location)
            log.info("[Dispatcher] job %s: %s completed at %s", msg.job_id, kind, loc.location)
        except Exception as e:  # noqa: BLE001 - reported to whoever polls the trigger
            entry.savepoints[trigger_id] = m.SavepointStatus(
                job_id=msg.job_id, trigger_id=trigger_id, status="FAILED", failure=m.ErrorInfo.from_exception(e)
            )
            log.warning("[Dispatcher] job %s: %s failed: %s", msg.job_id, kind, e)

    @rpc_method
    async def request_savepoint_status(self, msg: m.SavepointStatusRequest) -> m.SavepointStatus:
        entry = self._entry(msg.job_id)
        status = entry.savepoints.get(msg.trigger_id)
        if status is None:
            raise UnknownTriggerError(f"job {msg.job_id} has no savepoint trigger {msg.trigger_id!r}")
        return status

    @rpc_method
    async def list_jobs(self, msg: m.Empty | None = None) -> m.JobList:
        now = time.time()
        jobs = [
            m.JobOverview(
                job_id=jid, job_name=e.job_graph.job_name, status=e.status, start_time_ms=int(e.submitted_at * 1000),
                duration_ms=e.result.duration_ms if e.result else int((now - e.submitted_at) * 1000),
            )
            for jid, e in self.jobs.items()
        ]
        if self.ha is not None and self.leader_session is not None:
            # jobs that ended under an earlier leader (the job result store): a list after a failover
            # still shows a job that FAILED before it (the restore sensor acts on those)
            jobs += [
                m.JobOverview(job_id=r.job_id, job_name=r.job_name, status=r.status, start_time_ms=0, duration_ms=r.duration_ms)
                for r in await self._earlier_results()
            ]
        return m.JobList(jobs=jobs)

    async def _earlier_results(self) -> list[m.JobResultMessage]:
        assert self.ha is not None
        try:
            entries = await self._ha(lambda: self.ha.job_results.dirty_results() + self.ha.job_results.clean_results())
        except Exception as e:  # noqa: BLE001 - the list of this leader's jobs still stands
            log.warning("[Dispatcher] cannot read the job result store: %s", e)
            return []
        out = []
        for entry in entries[-self.retained_jobs:]:
            if entry.job_id in self.jobs:
                continue
            try:
                out.append(m.JobResultMessage.model_validate_json(entry.result_json))
            except ValueError:
                continue
        return out

    @rpc_method
    async def send_coordination_request(self, msg: m.CoordinationRequest) -> m.CoordinationResponse:
        entry = self._entry(msg.job_id)
        if entry.result is None:
            jm = self._job_master(entry)
            return await jm.handle_coordination_request(msg)
        # the job ended and its JobMaster stopped; coordinators keep their final results for clients
        coord = entry.job_master.coordinators.get(msg.node_id)
        if coord is None:
            raise UnknownJobError(f"job {msg.job_id} has no coordinator for operator {msg.node_id}")
        response = coord.handle_coordination_request(cloudpickle.loads(msg.payload))
        return m.CoordinationResponse(payload=cloudpickle.dumps(response))

    async def _from_job_master(self, msg: m.JobIdMessage, method: str) -> Any:
        """A running job's view from its JobMaster's thread; otherwise (not serving yet, busy, just
        ended or stopped) the newest view it published: never a read of its live state from here."""
        entry = self._entry(msg.job_id)
        if entry.result is None:
            try:
                return await getattr(self._job_master(entry), f"request_{method}")(m.Empty(), timeout=10)
            except Exception as e:  # noqa: BLE001 - just ended or not serving yet: the published view below
                log.debug("[Dispatcher] job %s: %s from its JobMaster failed: %s", msg.job_id, method, e)
        return entry.job_master.published(method)

    @rpc_method
    async def request_job_exceptions(self, msg: m.JobIdMessage) -> m.JobExceptionsMessage:
        return await self._from_job_master(msg, "job_exceptions")

    @rpc_method
    async def request_checkpoint_statistics(self, msg: m.JobIdMessage) -> m.CheckpointStatisticsMessage:
        return await self._from_job_master(msg, "checkpoint_statistics")

    @rpc_method
    async def request_job_resource_requirements(self, msg: m.JobIdMessage) -> m.JobResourceRequirements:
        entry = self._entry(msg.job_id)
        if entry.result is not None:
            raise JobNotRunningError(f"job {msg.job_id} already ended {entry.result.status.name}: it has no resource requirements")
        return await self._job_master(entry).request_resource_requirements(m.Empty(), timeout=10)

    @rpc_method
    async def update_job_resource_requirements(self, msg: m.JobResourceRequirements) -> m.Ack:
        entry = self._entry(msg.job_id)
        if entry.result is not None:
            raise JobNotRunningError(f"job {msg.job_id} already ended {entry.result.status.name}: its resource requirements cannot change")
        return await self._job_master(entry).update_resource_requirements(msg, timeout=10)

    @rpc_method
    async def request_job_details(self, msg: m.JobIdMessage) -> m.JobDetailsMessage:
        """A running job's details come from its JobMaster (with live metrics); an ended job's from its stopped JobMaster."""
        entry = self._entry(msg.job_id)
        details: m.JobDetailsMessage = await self._from_job_master(msg, "job_details")
        # the Dispatcher's view of status and its timeline is the client-facing one (it starts at CREATED)
        timestamps: dict[str, int] = {}
        for status, ts, _ in entry.history:
            timestamps.setdefault(status.value, int(ts * 1000))
        failure_ms = timestamps.get(JobStatus.FAILING.value) or timestamps.get(JobStatus.FAILED.value)
        end_ms = None
        if entry.status.is_globally_terminal:
            end_ms = timestamps.get(entry.status.value) or details.end_time_ms
        return details.model_copy(
            update={
                "status": entry.status,
                "start_time_ms": int(entry.submitted_at * 1000),
                "end_time_ms": end_ms,
                "status_timestamps_ms": timestamps,
                "error": entry.result.error if entry.result is not None else details.error,
                "failure_time_ms": failure_ms if (details.error is not None or (entry.result and entry.result.error)) else None,
            }
        )

    @rpc_method
    async def request_job_plan(self, msg: m.JobIdMessage) -> m.JobPlanMessage:
        """The submitted JobGraph's plan and picture (the dashboard's DAG)."""
        import json

        from runtime.graph.plan import plan_summary
        from runtime.graph.plan_render import to_svg

        graph = self._entry(msg.job_id).job_graph
        return m.JobPlanMessage(job_id=msg.job_id, summary_json=json.dumps(plan_summary(graph)), svg=to_svg(graph, live=True))

    @rpc_method
    async def request_cluster_overview(self, msg: m.Empty | None = None) -> m.ClusterOverviewMessage:
        counts = {JobStatus.FINISHED: 0, JobStatus.CANCELED: 0, JobStatus.FAILED: 0}
        running = 0
        for e in self.jobs.values():
            if e.status in counts:
                counts[e.status] += 1
            else:
                running += 1
        return m.ClusterOverviewMessage(
            jobs_running=running, jobs_finished=counts[JobStatus.FINISHED],
            jobs_cancelled=counts[JobStatus.CANCELED], jobs_failed=counts[JobStatus.FAILED],
        )
