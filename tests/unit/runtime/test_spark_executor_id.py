"""Finding a TaskManager's Spark executor from (fake) process command lines."""
from __future__ import annotations

from runtime.deploy.spark_executor import (
    DRIVER_EXECUTOR_ID,
    UNKNOWN_EXECUTOR_ID,
    SparkExecutorLocation,
    describe_executor,
    find_spark_executor,
    parse_executor_description,
    proc_cmdline,
    proc_parent,
)

JAVA = "/usr/lib/jvm/java-17-openjdk-amd64/bin/java"
PYTHON = "/work/main/.venv/bin/python"
EXECUTOR = [
    JAVA, "-cp", "/spark/conf:/spark/jars/*", "-Xmx1024M", "-Dspark.driver.port=40123",
    "org.apache.spark.executor.CoarseGrainedExecutorBackend",
    "--driver-url", "spark://CoarseGrainedScheduler@127.0.0.1:40123", "--executor-id", "1",
    "--hostname", "127.0.0.1", "--cores", "1", "--app-id", "app-20260101000000-0000",
    "--worker-url", "spark://Worker@127.0.0.1:43281", "--resourceProfileId", "0",
]
DRIVER = [
    JAVA, "-cp", "/spark/conf:/spark/jars/*", "-Xmx1g", "org.apache.spark.deploy.SparkSubmit",
    "--conf", "spark.master=local[2]", "--conf", "spark.driver.host=127.0.0.2", "pyspark-shell",
]
WORKER = [JAVA, "-cp", "/spark/jars/*", "org.apache.spark.deploy.worker.Worker", "spark://127.0.0.1:7077", "--host", "127.0.0.1"]


def _tree(chain: list[list[str]]) -> tuple[dict[int, list[str]], dict[int, int]]:
    """pids 100, 101, ... from leaf to root: chain[0] is the Python worker, each next its parent."""
    cmdlines = {100 + i: argv for i, argv in enumerate(chain)}
    parents = {100 + i: 100 + i + 1 for i in range(len(chain))}
    return cmdlines, parents


def _find(chain: list[list[str]]) -> SparkExecutorLocation:
    cmdlines, parents = _tree(chain)
    return find_spark_executor(100, cmdlines.get, parents.get, default_host="myhost")


def test_python_worker_under_a_cluster_executor_finds_its_id_host_and_jvm() -> None:
    chain = [[PYTHON, "-m", "pyspark.daemon"], [PYTHON, "-m", "pyspark.daemon"], EXECUTOR, WORKER]
    loc = _find(chain)
    assert (loc.executor_id, loc.host, loc.jvm_pid) == ("1", "127.0.0.1", 102)
    assert not loc.is_driver


def test_yarn_and_kubernetes_backends_and_equals_form_are_recognised() -> None:
    yarn = [JAVA, "org.apache.spark.executor.YarnCoarseGrainedExecutorBackend", "--executor-id", "7", "--hostname", "node-3.example"]
    k8s = [JAVA, "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend", "--executor-id=12", "--hostname=10.1.2.3"]
    assert _find([[PYTHON], yarn]).model_dump() == {"executor_id": "7", "host": "node-3.example", "jvm_pid": 101}
    assert _find([[PYTHON], k8s]).model_dump() == {"executor_id": "12", "host": "10.1.2.3", "jvm_pid": 101}


def test_local_mode_tasks_run_in_the_driver_with_its_configured_host() -> None:
    loc = _find([[PYTHON, "-m", "pyspark.daemon"], [PYTHON], DRIVER, ["/bin/bash"]])
    assert (loc.executor_id, loc.host, loc.jvm_pid) == (DRIVER_EXECUTOR_ID, "127.0.0.2", 102)
    assert loc.is_driver
    # without spark.driver.host on the command line: this machine's name
    bare = [a for a in DRIVER if "driver.host" not in a]
    assert _find([[PYTHON], bare]).host == "myhost"


def test_a_java_process_that_is_no_executor_is_skipped_and_a_missing_chain_is_unknown() -> None:
    # the worker daemon is java but neither executor nor driver; nothing above it either
    loc = _find([[PYTHON], WORKER, ["/sbin/init"]])
    assert (loc.executor_id, loc.host, loc.jvm_pid) == (UNKNOWN_EXECUTOR_ID, "myhost", None)
    # a process that vanished mid-walk (no cmdline, no parent) ends the walk
    assert find_spark_executor(5, lambda pid: None, lambda pid: None).executor_id == UNKNOWN_EXECUTOR_ID
    # a flag value that looks like an executor backend in a non-java process is not trusted
    assert _find([["/bin/sh", "-c", "echo CoarseGrainedExecutorBackend --executor-id 3"]]).executor_id == UNKNOWN_EXECUTOR_ID


def test_a_parent_cycle_does_not_loop_forever() -> None:
    loc = find_spark_executor(10, {10: [PYTHON], 11: [PYTHON]}.get, {10: 11, 11: 10}.get)
    assert loc.executor_id == UNKNOWN_EXECUTOR_ID


def test_description_round_trips_and_other_text_is_not_parsed() -> None:
    loc = SparkExecutorLocation(executor_id="1", host="127.0.0.1", jvm_pid=9)
    text = describe_executor(loc, stage_id=3, task_attempt_id=7, attempt=0)
    assert text == "executor 1 on 127.0.0.1 (stage 3 task 7 attempt 0)"
    back = parse_executor_description(text)
    assert back is not None and (back.executor_id, back.host) == ("1", "127.0.0.1")
    assert parse_executor_description(describe_executor(SparkExecutorLocation(executor_id="driver", host="h"))).is_driver
    assert parse_executor_description(None) is None
    assert parse_executor_description("stage 3 task 7 (attempt 0)") is None


def test_proc_readers_see_this_process() -> None:
    import os

    argv = proc_cmdline(os.getpid())
    assert argv is not None and "python" in os.path.basename(argv[0])
    assert proc_parent(os.getpid()) == os.getppid()
    assert proc_cmdline(2**22 + 12345) is None and proc_parent(2**22 + 12345) is None
