"""StreamExecutionEnvironment: configuration, parallelism defaults, executor protocol."""

import cloudpickle
import pytest

from yarnflink import RuntimeExecutionMode, StreamExecutionEnvironment
from yarnflink.api import environment
from yarnflink.api.common import ExecutorNotConfiguredError, JobExecutionResult, ProgramAbortException
from yarnflink.api.environment import (
    PlanCaptureExecutor,
    get_default_executor,
    set_default_executor,
    set_fallback_executor_factory,
)
from yarnflink.common.config import ConfigError, Configuration
from yarnflink.jobgraph.jobgraph import JobGraph
from yarnflink.operators.specs import CollectSinkSpec


class FakeExecutor:
    def __init__(self, configuration=None, records=()):
        self.configuration = configuration
        self.calls = []
        self.records = list(records)
        self.closed = False

    def execute(self, job_graph, attached):
        self.calls.append(("execute", job_graph, attached))
        return JobExecutionResult(job_id=job_graph.job_id, job_name=job_graph.job_name, net_runtime_ms=5)

    def execute_async(self, job_graph):
        self.calls.append(("execute_async", job_graph))
        return "client"

    def execute_and_collect(self, job_graph):
        self.calls.append(("collect", job_graph))
        executor = self

        class It:
            def __iter__(self):
                return iter(executor.records)

            def close(self):
                executor.closed = True

        return It()


@pytest.fixture(autouse=True)
def no_default_executor():
    previous = set_default_executor(None)
    fallback = environment._fallback_factory  # importing pyflink installs the embedded cluster
    set_fallback_executor_factory(None)
    yield
    set_default_executor(previous)
    set_fallback_executor_factory(fallback)


def test_without_an_executor_the_fallback_factory_makes_one_and_keeps_it():
    made = []

    def factory():
        made.append(FakeExecutor(configuration={"parallelism.default": "2"}))
        return made[-1]

    set_fallback_executor_factory(factory)
    env = StreamExecutionEnvironment.get_execution_environment()
    assert env.get_parallelism() == 2 and get_default_executor() is made[0]
    env.from_sequence(1, 2).print()
    env.execute()
    StreamExecutionEnvironment.get_execution_environment().from_sequence(1, 2).print()
    assert len(made) == 1 and made[0].calls[0][0] == "execute"


def test_execute_without_executor_tells_the_user_to_use_yarnflink_run():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_sequence(1, 2).print()
    with pytest.raises(ExecutorNotConfiguredError, match="yarnflink run job.py"):
        env.execute()
    with pytest.raises(ExecutorNotConfiguredError):
        env.from_sequence(1, 2).execute_and_collect()


def test_get_execution_environment_uses_the_context_executor_and_its_configuration():
    ex = FakeExecutor(configuration={"parallelism.default": "3"})
    assert set_default_executor(ex) is None
    assert get_default_executor() is ex
    env = StreamExecutionEnvironment.get_execution_environment()
    assert env.get_parallelism() == 3
    env.from_sequence(1, 2).print()
    result = env.execute("my job")
    (kind, jg, attached) = ex.calls[0]
    assert kind == "execute" and attached is True
    assert isinstance(jg, JobGraph) and jg.job_name == "my job"
    assert [v.parallelism for v in jg.vertices] == [3]
    assert result.get_job_id() == jg.job_id and result.get_net_runtime() == 5


def test_executor_configuration_may_be_a_configuration_object_and_env_overrides_it():
    ex = FakeExecutor(configuration=Configuration({"parallelism.default": 2}))
    set_default_executor(ex)
    env = StreamExecutionEnvironment.get_execution_environment({"parallelism.default": 5})
    assert env.get_parallelism() == 5
    assert ex.configuration.get("parallelism.default") == 2  # not mutated


def test_detached_execution_passes_attached_false():
    ex = FakeExecutor(configuration={"execution.attached": "false"})
    env = StreamExecutionEnvironment(executor=ex)
    env.from_sequence(1, 2).print()
    env.execute()
    assert ex.calls[0][2] is False


def test_execute_clears_the_operators_like_flink():
    ex = FakeExecutor()
    env = StreamExecutionEnvironment(executor=ex)
    env.from_sequence(1, 2).print()
    env.execute()
    with pytest.raises(RuntimeError, match="no operators defined"):
        env.execute()


def test_reusing_a_stream_after_execute_reincludes_its_inputs():
    ex = FakeExecutor()
    env = StreamExecutionEnvironment(executor=ex)
    s = env.from_sequence(1, 2).map(str)
    s.print()
    env.execute()
    s.filter(bool)
    env.execute()
    assert ex.calls[1][1].vertices[0].name == "Source: Sequence -> Map -> Filter"


def test_execute_async_returns_the_executors_client():
    ex = FakeExecutor()
    env = StreamExecutionEnvironment(executor=ex)
    env.from_sequence(1, 2).print()
    assert env.execute_async("a") == "client"
    assert ex.calls[0][0] == "execute_async"


def test_execute_and_collect_adds_a_collect_sink():
    ex = FakeExecutor(records=[1, 2, 3])
    env = StreamExecutionEnvironment(executor=ex)
    it = env.from_sequence(1, 3).map(str).execute_and_collect()
    assert list(it) == [1, 2, 3]
    jg = ex.calls[0][1]
    assert jg.vertices[0].name == "Source: Sequence -> Map -> Sink: Collect"
    assert isinstance(cloudpickle.loads(jg.vertices[0].operators[-1].spec), CollectSinkSpec)


def test_execute_and_collect_with_limit_returns_a_list_and_closes():
    ex = FakeExecutor(records=[1, 2, 3])
    env = StreamExecutionEnvironment(executor=ex)
    assert env.from_sequence(1, 3).execute_and_collect(limit=2) == [1, 2]
    assert ex.closed
    with pytest.raises(ValueError, match="limit"):
        env.from_sequence(1, 3).execute_and_collect(limit=-1)


def test_plan_capture_executor_captures_and_aborts():
    cap = PlanCaptureExecutor({"parallelism.default": "2"})
    set_default_executor(cap)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_sequence(1, 2).print()
    with pytest.raises(ProgramAbortException):
        try:
            env.execute("captured")
        except Exception:  # user code must not swallow the abort
            pytest.fail("ProgramAbortException must not be an Exception")
    assert cap.job_graph.job_name == "captured"
    assert cap.job_graph.vertices[0].parallelism == 2


def test_parallelism_default_and_env_parallelism_capture_like_flink():
    env = StreamExecutionEnvironment(configuration={"parallelism.default": "4"})
    assert env.get_parallelism() == 4
    a = env.from_sequence(1, 2)  # no explicit env parallelism yet: the configured default
    env.set_parallelism(2)
    b = a.map(str)  # created after set_parallelism(2)
    env.set_parallelism(3)
    sg = env.get_stream_graph()
    assert [sg.nodes[1].parallelism, sg.nodes[2].parallelism] == [4, 2]
    assert b.get_parallelism() == 2


def test_default_parallelism_is_one():
    env = StreamExecutionEnvironment()
    env.from_sequence(1, 2)
    assert env.get_parallelism() == 1
    assert env.get_job_graph().vertices[0].parallelism == 1


def test_runtime_mode_setting():
    env = StreamExecutionEnvironment()
    assert env.get_runtime_mode() is RuntimeExecutionMode.STREAMING
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    assert env.get_config().get("execution.runtime-mode") == "BATCH"
    env.set_runtime_mode("automatic")
    assert env.get_runtime_mode() is RuntimeExecutionMode.AUTOMATIC
    assert env.resolved_runtime_mode() == "BATCH"
    with pytest.raises(ConfigError, match="expected one of STREAMING, BATCH, AUTOMATIC"):
        env.set_runtime_mode("MICROBATCH")


def test_configuration_access():
    env = StreamExecutionEnvironment()
    env.get_config().set("pipeline.max-parallelism", 256)
    assert env.get_max_parallelism() == 256
    env.configure({"execution.buffer-timeout": "5 ms"})
    assert env.get_buffer_timeout() == 5
    env.set_buffer_timeout(20)
    assert env.get_config().get_string("execution.buffer-timeout") == "20 ms"
    with pytest.raises(ConfigError, match="did you mean 'parallelism.default'"):
        env.configure({"paralelism.default": 2})
    with pytest.raises(TypeError):
        env.configure([("parallelism.default", 2)])


def test_job_name_from_pipeline_name_or_default():
    env = StreamExecutionEnvironment()
    env.from_sequence(1, 2)
    assert env.get_job_graph().job_name == "yarnflink Streaming Job"
    env.configure({"pipeline.name": "nightly"})
    assert env.get_job_graph().job_name == "nightly"
    assert env.get_job_graph("explicit").job_name == "explicit"


def test_get_job_graph_without_operators_is_an_error():
    with pytest.raises(RuntimeError, match="no operators defined"):
        StreamExecutionEnvironment().get_job_graph()


def test_get_execution_plan_is_json():
    import json

    env = StreamExecutionEnvironment()
    env.from_sequence(1, 2).print()
    plan = json.loads(env.get_execution_plan())
    assert plan["nodes"][0]["operator"] == "Source: Sequence -> Sink: Print to Std. Out"
