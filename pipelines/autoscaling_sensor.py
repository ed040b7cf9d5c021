"""The autoscaling sensor: Flink's autoscaler rule (pipelines/autoscaling.py) applied from Dagster.

`millrace_autoscaling_sensor` looks at every RUNNING job of the session cluster (`millrace_session`)
that runs under the adaptive scheduler (or reactive mode): each vertex's busy share
(busyTimeMsPerSecond / 1000, over the interval since the previous job-details request) and
backpressure go to `decide`, with the settings of the `millrace_autoscaler` resource. When it
decides a change, the sensor returns a run of `apply_millrace_rescale`, whose one op sets each
vertex's resource requirements to 1..new parallelism (the adaptive scheduler rescales) and puts
the decision (job, from -> to per vertex, the reason) in the run log. Otherwise a SkipReason says
why, per job.

The cooldown counts from the latest of: the sensor's last decision for the job (kept in the cursor,
JSON {"last_change": {job id: epoch seconds}}), the job's newest rescale (whatever caused it: a
lost TaskManager, slots that appeared), its start and the newest deployment of a subtask (a
restart); times are the cluster's (`now` of the job details). A job that is not Executing with every subtask RUNNING is left alone, and so is one
whose requirements already ask for the decided parallelism (it waits for slots).

No `from __future__ import annotations` here: Dagster reads the Config classes' annotations.
"""
import json
from typing import Any

from dagster import (
    Config,
    ConfigurableResource,
    DefaultSensorStatus,
    Failure,
    OpExecutionContext,
    RunRequest,
    SensorEvaluationContext,
    SkipReason,
    job,
    op,
    sensor,
)
from pydantic import Field

from pipelines.autoscaling import AutoscalerSettings, ScalingDecision, VertexLoad, decide
from resources.millrace import MillraceClusterResource
from runtime.core.errors import MillraceError
from runtime.core.states import JobStatus

_DEFAULTS = AutoscalerSettings()
EXECUTING = "Executing"  # the adaptive scheduler's state while the job runs (not restarting or rescaling)


class MillraceAutoscalerResource(ConfigurableResource):
    """The autoscaling sensor's settings (Flink's job.autoscaler.* in spirit; see AutoscalerSettings)."""

    target_utilization: float = Field(
        default=_DEFAULTS.target_utilization, description="busy share (0..1] a vertex should run at: it needs ceil(parallelism x busy / this) subtasks"
    )
    utilization_boundary: float = Field(
        default=_DEFAULTS.utilization_boundary, description="no change while every vertex's busy share is within target +/- this"
    )
    min_parallelism: int = Field(default=_DEFAULTS.min_parallelism, description="never scale a job below this parallelism")
    max_parallelism: int = Field(default=_DEFAULTS.max_parallelism, description="never scale a job above this parallelism (mind the cluster's slots)")
    cooldown_s: float = Field(
        default=_DEFAULTS.cooldown_s, description="seconds after a job's start or last rescale in which it is not scaled again"
    )

    def settings(self) -> AutoscalerSettings:
        """The validated settings (a bad combination fails the sensor's evaluation, naming it)."""
        return AutoscalerSettings(
            target_utilization=self.target_utilization, utilization_boundary=self.utilization_boundary,
            min_parallelism=self.min_parallelism, max_parallelism=self.max_parallelism, cooldown_s=self.cooldown_s,
        )


class RescaleConfig(Config):
    job_id: str = Field(description="the Millrace job to rescale")
    job_name: str = Field(default="", description="its name, for the log")
    parallelism: dict[str, int] = Field(description="vertex id -> new parallelism (the upper bound; the lower bound is 1)")
    previous: dict[str, int] = Field(default_factory=dict, description="vertex id -> parallelism when the sensor decided, for the log")
    names: dict[str, str] = Field(default_factory=dict, description="vertex id -> vertex name, for the log")
    reason: str = Field(default="", description="why the sensor decided it")


def describe_change(config: RescaleConfig) -> str:
    return ", ".join(f"'{config.names.get(v, v)}' {config.previous.get(v, '?')} -> {p}" for v, p in config.parallelism.items())


@op(description="Set a Millrace job's per-vertex parallelism bounds to 1..N (the adaptive scheduler rescales it) and log why.")
def rescale_millrace_job(context: OpExecutionContext, config: RescaleConfig, millrace_session: MillraceClusterResource) -> dict[str, int]:
    change = describe_change(config)
    context.log.info(f"autoscaling Millrace job {config.job_id} '{config.job_name}': {change}; because {config.reason}")
    try:
        millrace_session.get_client().update_resource_requirements(
            config.job_id, {v: (1, p) for v, p in config.parallelism.items()}, context=context
        )
    except MillraceError as e:
        raise Failure(description=f"could not rescale Millrace job {config.job_id} '{config.job_name}' ({change}): {e}") from e
    context.add_output_metadata({
        "millrace_job_id": config.job_id, "millrace_job_name": config.job_name, "change": change, "reason": config.reason,
        "parallelism": max(config.parallelism.values(), default=0),
    })
    return dict(config.parallelism)


@job(description="Apply one decision of the autoscaling sensor: new parallelism bounds for a Millrace job's vertices.")
def apply_millrace_rescale() -> None:
    rescale_millrace_job()


def vertex_loads(details: dict[str, Any]) -> list[VertexLoad] | str:
    """Each vertex's load from job details (Flink's keys), or why the job cannot be judged now."""
    state = details.get("scheduler-state")
    if state != EXECUTING:
        return f"the scheduler is {state or 'not running it'}, not {EXECUTING}"
    loads = []
    for v in details.get("vertices") or []:
        running = int((v.get("tasks") or {}).get("RUNNING", 0))
        if running < int(v["parallelism"]):
            return f"'{v['name']}' has {running} of {v['parallelism']} subtasks RUNNING"
        loads.append(VertexLoad(
            vertex_id=str(v["id"]), name=str(v["name"]), parallelism=int(v["parallelism"]),
            busy=float(v.get("busyTimeMsPerSecond", 0)) / 1000.0, backpressured=float(v.get("backpressure-ratio", 0.0)),
            max_parallelism=int(v.get("maxParallelism", 128)),
        ))
    return loads


def last_change(details: dict[str, Any], decided: float | None) -> float | None:
    """Epoch seconds of the newest of: the sensor's last decision, the job's last rescale, its start
    and the newest deployment of any of its subtasks (a restart after a failure redeploys them; a
    task's first busy figure covers its start-up)."""
    times = [t for t in (decided,) if t is not None]
    times += [r["timestamp"] / 1000.0 for r in details.get("rescales") or []]
    starts = [details.get("start-time", -1)] + [s.get("start-time", -1) for v in details.get("vertices") or [] for s in v.get("subtasks") or []]
    times += [int(t) / 1000.0 for t in starts if t is not None and int(t) > 0]
    return max(times, default=None)


def rescale_request(details: dict[str, Any], loads: list[VertexLoad], decision: ScalingDecision, now: float) -> RunRequest:
    jid = str(details["jid"])
    current = {v.vertex_id: v.parallelism for v in loads}
    direction = "up" if max(decision.parallelism.values()) > max(current.values()) else "down"
    config = {
        "job_id": jid, "job_name": str(details.get("name", "")), "parallelism": decision.parallelism, "previous": current,
        "names": {v.vertex_id: v.name for v in loads}, "reason": decision.reason,
    }
    return RunRequest(
        run_key=f"autoscale-{jid}-{int(now * 1000)}",
        run_config={"ops": {"rescale_millrace_job": {"config": config}}},
        tags={"millrace/job_id": jid, "millrace/autoscale": direction},
    )


@sensor(
    job=apply_millrace_rescale,
    minimum_interval_seconds=30,
    default_status=DefaultSensorStatus.STOPPED,
    description="Scales each adaptive Millrace job of the session cluster to its load (busy time per vertex, Flink's autoscaler rule).",
)
def millrace_autoscaling_sensor(
    context: SensorEvaluationContext, millrace_session: MillraceClusterResource, millrace_autoscaler: MillraceAutoscalerResource
) -> Any:
    settings = millrace_autoscaler.settings()
    state = json.loads(context.cursor) if context.cursor else {}
    decided: dict[str, float] = dict(state.get("last_change", {}))
    client = millrace_session.get_client()
    running = [j for j in client.list_jobs() if j["state"] == JobStatus.RUNNING.name]
    requests: list[RunRequest] = []
    skipped: list[str] = []
    for j in running:
        jid = str(j["jid"])
        try:
            details = client.job_details(jid)
        except MillraceError as e:  # it ended meanwhile, or the cluster is busy: next time
            skipped.append(f"{jid}: no details ({e})")
            continue
        if details.get("scheduler", "default") == "default":
            skipped.append(f"{jid} '{details.get('name')}': default scheduler (fixed parallelism)")
            continue
        loads = vertex_loads(details)
        if isinstance(loads, str):
            skipped.append(f"{jid} '{details.get('name')}': {loads}")
            continue
        now = int(details.get("now", 0)) / 1000.0
        decision = decide(loads, settings, now, last_change(details, decided.get(jid)))
        busy = ", ".join(f"'{v.name}' p={v.parallelism} busy {v.busy:.0%} backpressured {v.backpressured:.0%}" for v in loads)
        if not decision.change:
            skipped.append(f"{jid} '{details.get('name')}': {decision.reason} ({busy})")
            continue
        bounds = client.resource_requirements(jid)
        if all(bounds.get(v, (1, 0))[1] == p for v, p in decision.parallelism.items()):
            skipped.append(f"{jid} '{details.get('name')}': already asked for {decision.parallelism} ({busy}); waiting for slots")
            continue
        context.log.info(f"Millrace job {jid} '{details.get('name')}': {decision.reason} ({busy})")
        decided[jid] = now
        requests.append(rescale_request(details, loads, decision, now))
    alive = {str(j["jid"]) for j in running}
    context.update_cursor(json.dumps({"last_change": {jid: t for jid, t in decided.items() if jid in alive}}))
    for line in skipped:
        context.log.info(line)
    if requests:
        return requests
    return SkipReason("; ".join(skipped) if skipped else "no RUNNING job on the session cluster")
