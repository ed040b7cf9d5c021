"""Dagster jobs that operate a long-running streaming job on a session cluster.

`submit_live_activity_job` submits pipelines/jobs/live_activity.py detached and returns once the
cluster accepted it (the job runs on after the Dagster run ends); `cancel_live_activity_job`
cancels the running job(s) with that name. Both use the `millrace_session` resource (mode
session: MILLRACE_URL / MILLRACE_TOKEN, or the cluster file of `millrace cluster start`).
"""
from dagster import Config, Failure, OpExecutionContext, job, op
from pydantic import Field

from pipelines.jobs import live_activity
from resources.millrace import MillraceClusterResource
from runtime.api.datastream import StreamExecutionEnvironment


class LiveActivityConfig(Config):
    name: str = Field(default=live_activity.JOB_NAME, description="Millrace job name (what cancel_live_activity_job looks for)")
    rate: int = Field(default=200, ge=1, description="events per second")
    segments: int = Field(default=10, ge=1, description="user segments (keys)")
    window_ms: int = Field(default=10_000, ge=1, description="tumbling window size in ms")
    parallelism: int = Field(default=1, ge=1, description="parallelism of the Millrace job")
    replace_running: bool = Field(
        default=False, description="cancel a running job of the same name first; otherwise such a job makes this run fail"
    )


class CancelByNameConfig(Config):
    name: str = Field(default=live_activity.JOB_NAME, description="cancel every running Millrace job with this name")


@op(description="Submit the live_activity streaming job to the session cluster, detached; returns its job id.")
def submit_live_activity(context: OpExecutionContext, config: LiveActivityConfig, millrace_session: MillraceClusterResource) -> str:
    running = millrace_session.running_jobs(config.name)
    if running and not config.replace_running:
        raise Failure(
            description=f"Millrace job '{config.name}' is already running as {', '.join(running)}: "
            "cancel it first (cancel_live_activity_job) or set replace_running: true"
        )
    if running:
        millrace_session.cancel_by_name(config.name, context=context)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(config.parallelism)
    live_activity.build(env, config.rate, config.segments, config.window_ms)
    submitted = millrace_session.submit(env.get_job_graph(config.name), detached=True, context=context)
    status = millrace_session.status(submitted.job_id)
    context.add_output_metadata({"millrace_job_id": submitted.job_id, "millrace_job_name": config.name, "status": status.name})
    return submitted.job_id


@op(description="Cancel the running Millrace job(s) with the configured name on the session cluster.")
def cancel_live_activity(context: OpExecutionContext, config: CancelByNameConfig, millrace_session: MillraceClusterResource) -> list[str]:
    outcome = millrace_session.cancel_by_name(config.name, context=context)
    if not outcome:
        context.log.warning(f"no running Millrace job called '{config.name}': nothing to cancel")
    context.add_output_metadata({"cancelled": ", ".join(f"{jid} ({st})" for jid, st in outcome.items()) or "none"})
    return list(outcome)


@job(description="Submit the long-running live_activity streaming job to the session cluster (detached).")
def submit_live_activity_job() -> None:
    submit_live_activity()


@job(description="Cancel the live_activity streaming job on the session cluster, by name.")
def cancel_live_activity_job() -> None:
    cancel_live_activity()
