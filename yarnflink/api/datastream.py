"""DataStream, KeyedStream and DataStreamSink: PyFlink's DataStream vocabulary.

Every transformation method returns a new ``DataStream`` for one new operator; the operator's
properties (``set_parallelism``, ``name``, ``uid``, ``slot_sharing_group``, ``disable_chaining``,
``start_new_chain``, ``set_max_parallelism``) are set on that returned stream and return it, so
calls can be chained. Partitioning methods (``key_by``, ``rebalance``, ``shuffle``,
``broadcast``, ``forward``, ``rescale``) return a view whose next operator gets that partitioning;
such a view has no operator of its own, so operator properties cannot be set on it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from yarnflink.api.broadcast import BroadcastConnectedStream, BroadcastStream, check_descriptors
from yarnflink.api.common import SlotSharingGroup, UnsupportedFeatureError
from yarnflink.api.connected import ConnectedStreams
from yarnflink.api.connectors import DiscardingSink, FileSink
from yarnflink.api.transformations import Input, Transformation
from yarnflink.api.typed import SideOutputsFunction, typed
from yarnflink.api.window_adapters import (
    AllWindowedStream,
    CountTumblingWindowAssigner,
    DynamicEventTimeSessionWindows,
    count_windowed,
    session_windowed,
)
from yarnflink.api.windowing import WindowedStream
from yarnflink.common.records import get_field
from yarnflink.common.row import Row
from yarnflink.common.typeinfo import PickledBytesTypeInfo, RowTypeInfo, Types, check_type_info
from yarnflink.jobgraph.jobgraph import MAX_PARALLELISM_LIMIT
from yarnflink.operators.specs import (
    AggregateSpec,
    CollectSinkSpec,
    FilterSpec,
    FlatMapSpec,
    KeySelectorSpec,
    MapBatchesSpec,
    MapSpec,
    PrintSinkSpec,
    ProcessSpec,
    ReduceSpec,
    SparkSpec,
)
from yarnflink.operators.watermarks import TimestampsAndWatermarksSpec, WatermarkStrategy
from yarnflink.operators.windows import OutputTag, SideOutputSelectSpec
from yarnflink.streaming.graph import ChainingStrategy

if TYPE_CHECKING:
    from yarnflink.api.environment import StreamExecutionEnvironment


#: "the input's type" (``_then``'s default; None means untyped)
_SAME: Any = object()


# ----------------------------------------------------------------------------- validation
def _describe(obj: Any) -> str:
    return f"{type(obj).__name__} {obj!r}" if not callable(obj) else type(obj).__name__


def resolve_function(func: Any, method: str, interface: str, op: str) -> Any:
    """Validate a user function: a callable, or an instance implementing the PyFlink interface
    (e.g. a ``MapFunction`` with ``map``). Returned as is: the operator calls the method and, for
    rich functions, ``open``/``close`` (``yarnflink.operators.keys.unwrap_function``)."""
    if isinstance(func, type) and hasattr(func, method):
        # a MapFunction subclass instead of an instance (a plain class like str is a callable)
        raise TypeError(f"{op}() needs a function or an instance of {interface}, got the class {func.__name__}")
    m = getattr(func, method, None)
    if (m is not None and callable(m)) or callable(func):
        return func
    raise TypeError(f"{op}() needs a function or a {interface}, got {_describe(func)}")


def check_field(value: Any, op: str) -> int | str:
    """A field reference: a tuple position (int >= 0) or a field / column name (str)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(
            f"{op}(): the field must be a tuple position (int >= 0) or a field name (str), "
            f"got {type(value).__name__} {value!r}"
        )
    if isinstance(value, int) and value < 0:
        raise ValueError(f"{op}(): the tuple position must be >= 0, got {value}")
    if isinstance(value, str) and not value:
        raise ValueError(f"{op}(): the field name must not be empty")
    return value


def key_selector_spec(key: Any) -> KeySelectorSpec:
    if isinstance(key, KeySelectorSpec):
        return key
    if isinstance(key, (int, str)) and not isinstance(key, bool):
        return KeySelectorSpec(field=check_field(key, "key_by"))
    if isinstance(key, type) and hasattr(key, "get_key"):
        raise TypeError(f"key_by() needs a KeySelector instance, got the class {key.__name__}")
    if callable(getattr(key, "get_key", None)) or callable(key):
        return KeySelectorSpec(fn=key)
    raise TypeError(
        "key_by() needs a field (tuple position int >= 0 or field name str), a function "
        f"record -> key, or a KeySelector, got {_describe(key)}"
    )


def check_parallelism(p: Any, what: str) -> int:
    if isinstance(p, bool) or not isinstance(p, int):
        raise TypeError(f"{what}: parallelism must be an integer, got {type(p).__name__} {p!r}")
    if p < 1:
        raise ValueError(f"{what}: parallelism must be at least 1, got {p}")
    return p


def check_max_parallelism(p: Any, what: str) -> int:
    if isinstance(p, bool) or not isinstance(p, int):
        raise TypeError(f"{what}: max parallelism must be an integer, got {type(p).__name__} {p!r}")
    if not 1 <= p <= MAX_PARALLELISM_LIMIT:
        raise ValueError(f"{what}: max parallelism must be between 1 and {MAX_PARALLELISM_LIMIT}, got {p}")
    return p


# ----------------------------------------------------------------------------- operator settings
class _OperatorSettings:
    """Per-operator properties, shared by DataStream (its operator) and DataStreamSink."""

    _env: StreamExecutionEnvironment
    _t: Transformation

    def _op(self, method: str) -> Transformation:
        return self._t

    def _label(self) -> str:
        return f"operator '{self._t.display_name()}'"

    def set_parallelism(self, parallelism: int) -> Any:
        t = self._op("set_parallelism")
        check_parallelism(parallelism, f"set_parallelism() of {self._label()}")
        if t.max_parallelism is not None and parallelism > t.max_parallelism:
            raise ValueError(
                f"set_parallelism() of {self._label()}: parallelism {parallelism} is larger than its "
                f"max parallelism {t.max_parallelism}"
            )
        t.parallelism = parallelism
        return self

    def get_parallelism(self) -> int:
        t = self._op("get_parallelism")
        return t.parallelism if t.parallelism is not None else self._env.get_parallelism()

    def set_max_parallelism(self, max_parallelism: int) -> Any:
        t = self._op("set_max_parallelism")
        check_max_parallelism(max_parallelism, f"set_max_parallelism() of {self._label()}")
        if t.parallelism is not None and t.parallelism > max_parallelism:
            raise ValueError(
                f"set_max_parallelism() of {self._label()}: max parallelism {max_parallelism} is smaller "
                f"than its parallelism {t.parallelism}"
            )
        t.max_parallelism = max_parallelism
        return self

    def force_non_parallel(self) -> Any:
        t = self._op("force_non_parallel")
        t.parallelism = 1
        t.max_parallelism = 1
        return self

    def name(self, name: str) -> Any:
        t = self._op("name")
        if not isinstance(name, str) or not name.strip():
            raise TypeError(f"name() of {self._label()}: the name must be a non-empty string, got {name!r}")
        t.name = name
        return self

    def get_name(self) -> str:
        return self._op("get_name").name

    def uid(self, uid: str) -> Any:
        t = self._op("uid")
        if not isinstance(uid, str) or not uid.strip():
            raise TypeError(f"uid() of {self._label()}: the uid must be a non-empty string, got {uid!r}")
        t.uid = uid
        return self

    def slot_sharing_group(self, slot_sharing_group: str | SlotSharingGroup) -> Any:
        t = self._op("slot_sharing_group")
        if isinstance(slot_sharing_group, SlotSharingGroup):
            t.slot_sharing_group = slot_sharing_group.name
            t.slot_sharing_group_spec = slot_sharing_group
        elif isinstance(slot_sharing_group, str) and slot_sharing_group.strip():
            t.slot_sharing_group = slot_sharing_group
            t.slot_sharing_group_spec = None
        else:
            raise TypeError(
                f"slot_sharing_group() of {self._label()}: expected a non-empty name or a "
                f"SlotSharingGroup, got {slot_sharing_group!r}"
            )
        return self

    def disable_chaining(self) -> Any:
        self._op("disable_chaining").chaining_strategy = ChainingStrategy.NEVER
        return self

    def start_new_chain(self) -> Any:
        self._op("start_new_chain").chaining_strategy = ChainingStrategy.HEAD
        return self


# ----------------------------------------------------------------------------- DataStream
class DataStream(_OperatorSettings):
    """A stream of records produced by one operator (optionally with a pending partitioning)."""

    def __init__(
        self,
        env: StreamExecutionEnvironment,
        transformation: Transformation,
        partitioning: str | None = None,
        key_selector: KeySelectorSpec | None = None,
    ):
        self._env = env
        self._t = transformation
        self._partitioning = partitioning
        self._key_selector = key_selector

    def _op(self, method: str) -> Transformation:
        if self._partitioning is not None:
            raise TypeError(
                f"{method}() cannot be applied to the result of {self._partitioning_call()}: that "
                "only sets how records reach the next operator; call it on the operator before the "
                "partitioning (or on the next one)"
            )
        return self._t

    def _partitioning_call(self) -> str:
        return "key_by()" if self._partitioning == "hash" else f"{self._partitioning}()"

    def get_execution_environment(self) -> StreamExecutionEnvironment:
        return self._env

    # ------------------------------------------------------------------ plumbing
    def _input(self) -> Input:
        return Input(self._t, self._partitioning, self._key_selector)

    def _add(self, name: str, spec: Any, role: str = "operator") -> Transformation:
        return self._env._add_transformation(name, spec, role, [self._input()])

    def _then(self, name: str, spec: Any, output_type: Any = _SAME) -> DataStream:
        """The stream of a new operator; its records keep this stream's type unless
        ``output_type`` (None: untyped) says otherwise."""
        t = self._add(name, spec)
        t.output_type = self._t.output_type if output_type is _SAME else output_type
        return DataStream(self._env, t)

    def get_type(self) -> Any:
        """The records' type information (``Types.PICKLED_BYTE_ARRAY()`` when none was given)."""
        t = self._t.output_type
        return t if t is not None else Types.PICKLED_BYTE_ARRAY()

    def _view(self, partitioning: str) -> DataStream:
        return DataStream(self._env, self._t, partitioning)

    # ------------------------------------------------------------------ transformations
    def map(self, func: Any, output_type: Any = None) -> DataStream:
        """One output record per input record. ``func``: a callable or a MapFunction.
        ``output_type`` (``Types.ROW_NAMED(...)``, ``Types.TUPLE(...)``) makes the results
        records of that type (see ``yarnflink.common.typeinfo``)."""
        out = check_type_info(output_type, "map()")
        fn = typed(resolve_function(func, "map", "MapFunction", "map"), "map", out, single=True)
        return self._then("Map", MapSpec(fn=fn), out)

    def flat_map(self, func: Any, output_type: Any = None) -> DataStream:
        """Zero or more output records per input: ``func`` returns an iterable or is a generator."""
        out = check_type_info(output_type, "flat_map()")
        fn = typed(resolve_function(func, "flat_map", "FlatMapFunction", "flat_map"), "flat_map", out, single=False)
        return self._then("Flat Map", FlatMapSpec(fn=fn), out)

    def filter(self, func: Any) -> DataStream:
        """Keep records for which ``func`` returns true."""
        return self._then("Filter", FilterSpec(fn=resolve_function(func, "filter", "FilterFunction", "filter")))

    def map_batches(self, func: Callable[[Any], Any]) -> DataStream:
        """Vectorized map: ``func(pyarrow.RecordBatch) -> RecordBatch | Table``."""
        if not callable(func) or isinstance(func, type):
            raise TypeError(f"map_batches() needs a function RecordBatch -> RecordBatch, got {_describe(func)}")
        return self._then("Map Batches", MapBatchesSpec(fn=func), None)

    def transform_spark(self, fn: Callable[[Any], Any], schema: Any = None) -> DataStream:
        """A Spark step: ``fn(pyspark.sql.DataFrame) -> DataFrame`` runs in the TaskExecutor's
        SparkSession on this subtask's input (BATCH: all of it at once; STREAMING: per micro-batch,
        see ``spark.micro-batch.max-rows`` / ``max-delay``). ``schema``: a pyspark StructType or a
        DDL string (``"word STRING, n BIGINT"``) naming and typing the record fields by position;
        by default the records' Arrow schema. Result columns ``f0..fn`` give tuples downstream,
        ``f0`` alone scalars, other names dicts."""
        if not callable(fn) or isinstance(fn, type):
            raise TypeError(f"transform_spark() needs a function DataFrame -> DataFrame, got {_describe(fn)}")
        return self._then("Spark Transform", SparkSpec(fn=fn, schema=_spark_schema(schema, "transform_spark")), None)

    def spark_sql(self, query: str, schema: Any = None) -> DataStream:
        """A Spark step running ``query`` with this subtask's input as the view ``input``
        (``"SELECT word, count(*) AS n FROM input GROUP BY word"``); otherwise as ``transform_spark``."""
        if not isinstance(query, str) or not query.strip():
            raise TypeError(f"spark_sql() needs a non-empty SQL query string, got {query!r}")
        return self._then("Spark SQL", SparkSpec(query=query, schema=_spark_schema(schema, "spark_sql")), None)

    def process(self, func: Any, output_type: Any = None) -> DataStream:
        """``func``: a ProcessFunction (``process_element(value, ctx)``) or a callable."""
        out = check_type_info(output_type, "process()")
        fn = SideOutputsFunction(_process_function(func), "process_element", out)
        t = self._add("Process", ProcessSpec(fn=fn))
        t.output_type = out
        return ProcessStream(self._env, t, fn)

    # ------------------------------------------------------------------ event time (yarnflink.api.windowing)
    def assign_timestamps_and_watermarks(self, watermark_strategy: Any) -> DataStream:
        """Give records timestamps and emit watermarks: a ``WatermarkStrategy``."""
        if not isinstance(watermark_strategy, WatermarkStrategy):
            raise TypeError(
                f"assign_timestamps_and_watermarks() needs a WatermarkStrategy, got {_describe(watermark_strategy)}"
            )
        return self._then("Timestamps/Watermarks", TimestampsAndWatermarksSpec(watermark_strategy))

    def get_side_output(self, output_tag: Any) -> DataStream:
        """The records this operator sent to the side output ``output_tag`` (an ``OutputTag``)."""
        if not isinstance(output_tag, OutputTag):
            raise TypeError(f"get_side_output() needs an OutputTag, got {type(output_tag).__name__} {output_tag!r}")
        producer = self._side_output_producer()
        t = self._env._add_transformation(
            f"Side Output '{output_tag.tag_id}'", SideOutputSelectSpec(output_tag.tag_id), "operator", [Input(producer)]
        )
        t.parallelism = producer.parallelism
        t.output_type = check_type_info(output_tag.type_info, "OutputTag")
        return DataStream(self._env, t)

    def _side_output_producer(self) -> Transformation:
        return self._op("get_side_output")

    def _stream_of(self, t: Transformation, with_side_outputs: bool = False) -> DataStream:
        """The stream of operator ``t`` (added after this one); ``with_side_outputs``: its main output
        goes through a chained selector that drops the side records (see ``SideOutputStream``)."""
        if not with_side_outputs:
            return DataStream(self._env, t)
        main_t = self._env._add_transformation("Main Output", SideOutputSelectSpec(None), "operator", [Input(t)])
        main_t.output_type = t.output_type
        return SideOutputStream(self._env, main_t, t)

    # ------------------------------------------------------------------ partitioning
    def key_by(self, key_selector: Any, key_type: Any = None) -> KeyedStream:
        """Partition by key: a field (tuple position or field name) or a function record -> key
        (or a KeySelector). The next operator receives the records over a hash edge."""
        return KeyedStream(self._env, self._t, key_selector_spec(key_selector))

    def rebalance(self) -> DataStream:
        """Round-robin over all downstream subtasks."""
        return self._view("rebalance")

    def shuffle(self) -> DataStream:
        """Uniformly random downstream subtask per record."""
        return self._view("shuffle")

    def broadcast(self, broadcast_state_descriptor: Any = None, *more: Any) -> Any:
        """Every record to every downstream subtask. With MapStateDescriptors, a
        ``BroadcastStream`` with those broadcast states, to connect a stream to
        (``yarnflink.api.broadcast``)."""
        if broadcast_state_descriptor is not None:
            return BroadcastStream(self._view("broadcast"), check_descriptors((broadcast_state_descriptor, *more)))
        if more:
            raise TypeError("broadcast(): the first MapStateDescriptor is None")
        return self._view("broadcast")

    def forward(self) -> DataStream:
        """Subtask i to subtask i; needs equal parallelism (checked when the graph is built)."""
        return self._view("forward")

    def rescale(self) -> DataStream:
        """Round-robin over a local subset of downstream subtasks."""
        return self._view("rescale")

    # ------------------------------------------------------------------ sinks
    def sink_to(self, sink: FileSink | DiscardingSink) -> DataStreamSink:
        if isinstance(sink, DiscardingSink):
            return DataStreamSink(self._env, self._add("Discarding Sink", sink.to_spec(), "sink"))
        if not isinstance(sink, FileSink):
            raise TypeError(f"sink_to() needs a FileSink or DiscardingSink, got {_describe(sink)}")
        stream: DataStream = self
        type_info = self._t.output_type
        if sink.format == "text" and _prints_differently(type_info):
            # Encoder.simple_string_encoder() writes typed records as Flink's toString
            stream = self._then("Map", MapSpec(fn=type_info.to_string), Types.STRING())
        elif sink.format in ("parquet", "csv") and isinstance(type_info, RowTypeInfo):
            stream = self._then("Map", MapSpec(fn=_row_as_dict), None)  # Rows -> columns named as the fields
        return DataStreamSink(self._env, stream._add("File Sink", sink.to_spec(), "sink"))

    def print(self, sink_identifier: str | None = None) -> DataStreamSink:
        """Print each record on the TaskExecutor's stdout (``"{subtask+1}> "`` prefix if the
        parallelism is > 1; ``sink_identifier`` prefixes the line as in Flink)."""
        if sink_identifier is not None and not isinstance(sink_identifier, str):
            raise TypeError(f"print() sink_identifier must be a string, got {_describe(sink_identifier)}")
        stream = self
        type_info = self._t.output_type
        if isinstance(type_info, RowTypeInfo):
            # PyFlink formats Rows in Python before its Java print sink: +I[BERLIN,54.5]
            stream = self._then("Map", MapSpec(fn=type_info.print_string), Types.STRING())
        elif _prints_differently(type_info):
            # other typed records print as Flink's Java toString does: (hi,1), true, 1.0E7
            stream = self._then("Map", MapSpec(fn=type_info.to_string), Types.STRING())
        spec = PrintSinkSpec(prefix=sink_identifier)
        return DataStreamSink(self._env, stream._add("Print to Std. Out", spec, "sink"))

    def union(self, *streams: DataStream) -> DataStream:
        """The records of this stream and ``streams`` in one stream (all of one environment), through
        a pass-through operator with one input per stream (Flink's union needs no operator)."""
        for s in streams:
            if not isinstance(s, DataStream):
                raise TypeError(f"union() needs DataStreams, got {_describe(s)}")
            if s._env is not self._env:
                raise ValueError("union(): the streams must belong to the same StreamExecutionEnvironment")
        inputs = [self._input(), *(s._input() for s in streams)]
        t = self._env._add_transformation("Union", MapSpec(fn=_identity), "operator", inputs)
        types = {s._t.output_type for s in (self, *streams)}
        t.output_type = types.pop() if len(types) == 1 else None
        return DataStream(self._env, t)

    # ------------------------------------------------------------------ refused (Java-only) calls
    def add_sink(self, sink_func: Any) -> Any:
        raise UnsupportedFeatureError(
            "DataStream.add_sink()",
            "it takes a Java SinkFunction",
            "ds.sink_to(FileSink...) for files, ds.print(), ds.execute_and_collect(), or a Spark step "
            "(ds.transform_spark) that writes where Spark can",
        )

    def window_all(self, window_assigner: Any) -> AllWindowedStream:
        """Windows of the whole stream, in one subtask (``yarnflink.api.window_adapters``)."""
        return AllWindowedStream(self, window_assigner)

    def connect(self, ds: Any) -> Any:
        """Two streams into one operator with a function per input (``CoMapFunction``,
        ``CoFlatMapFunction``, ``KeyedCoProcessFunction``; ``yarnflink.api.connected``); with a
        ``BroadcastStream`` (``rules.broadcast(descriptor)``), a ``BroadcastConnectedStream``
        (``yarnflink.api.broadcast``)."""
        if isinstance(ds, BroadcastStream):
            if ds.input_stream._env is not self._env:
                raise ValueError("connect(): the streams must belong to the same StreamExecutionEnvironment")
            return BroadcastConnectedStream(self, ds, (DataStream, ProcessStream))
        if not isinstance(ds, DataStream):
            raise TypeError(f"connect() needs a DataStream or a BroadcastStream, got {_describe(ds)}")
        if ds._env is not self._env:
            raise ValueError("connect(): the streams must belong to the same StreamExecutionEnvironment")
        return ConnectedStreams(self, ds, DataStream)

    def partition_custom(self, partitioner: Any, key_selector: Any) -> Any:
        raise UnsupportedFeatureError(
            "DataStream.partition_custom()",
            "custom partitioners are not implemented",
            "key_by(key_selector) (hash partitioning), or rebalance() / shuffle() / broadcast()",
        )

    def execute_and_collect(self, job_execution_name: str | None = None, limit: int | None = None) -> Any:
        """Run the job (with every other operator of the environment, as Flink does) and return
        an iterator over this stream's records; with ``limit``, a list of at most that many."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise ValueError(f"execute_and_collect(): limit must be an integer >= 0, got {limit!r}")
        self._add("Collect", CollectSinkSpec(), "sink")
        return self._env._execute_and_collect(job_execution_name, limit)


class _By:
    """The reduce function of ``min_by`` / ``max_by``: keeps the earlier record on ties (Flink's default)."""

    def __init__(self, field: int | str, smaller: bool):
        self.field = field
        self.smaller = smaller

    def __call__(self, kept: Any, new: Any) -> Any:
        a, b = get_field(kept, self.field), get_field(new, self.field)
        return new if (b < a if self.smaller else b > a) else kept


def _identity(record: Any) -> Any:
    return record


def _prints_differently(type_info: Any) -> bool:
    """Whether records of this type print otherwise than ``str(record)`` (untyped and STRING
    records print as they are)."""
    if type_info is None or isinstance(type_info, PickledBytesTypeInfo):
        return False
    return type_info != Types.STRING()


def _row_as_dict(record: Any) -> Any:
    return record.as_dict() if isinstance(record, Row) and record.get_field_names() is not None else record


def _spark_schema(schema: Any, op: str) -> Any:
    """None, a DDL string or a pyspark StructType (checked without importing pyspark)."""
    if schema is None or (isinstance(schema, str) and schema.strip()):
        return schema
    if not isinstance(schema, str) and isinstance(getattr(schema, "fields", None), list):
        return schema
    raise TypeError(
        f"{op}(): schema must be a pyspark StructType or a DDL string such as "
        f"'word STRING, n BIGINT', got {_describe(schema)}"
    )


def _process_function(func: Any) -> Any:
    if isinstance(func, type) and hasattr(func, "process_element"):
        raise TypeError(f"process() needs a ProcessFunction instance or a function, got the class {func.__name__}")
    if callable(getattr(func, "process_element", None)) or callable(func):
        return func
    raise TypeError(f"process() needs a function or a ProcessFunction (with process_element), got {_describe(func)}")


class KeyedStream(DataStream):
    """A stream partitioned by key (``key_by``); its next operator gets a hash edge. Keyed
    operators: ``reduce``, ``sum``, ``min``, ``max``, ``process``."""

    def __init__(self, env: StreamExecutionEnvironment, transformation: Transformation, key_selector: KeySelectorSpec):
        super().__init__(env, transformation, "hash", key_selector)

    def _op(self, method: str) -> Transformation:
        raise TypeError(
            f"{method}() is not supported on a KeyedStream: key_by() creates no operator; call "
            f"{method}() on the operator before key_by() or on the keyed operator after it"
        )

    def get_key_selector(self) -> KeySelectorSpec:
        assert self._key_selector is not None
        return self._key_selector

    def reduce(self, func: Any) -> DataStream:
        """Combine the records of each key: ``func(accumulated, new) -> accumulated``.
        STREAMING emits the updated value per record; BATCH the final value per key."""
        fn = resolve_function(func, "reduce", "ReduceFunction", "reduce")
        # the results are records of this stream's type, as PyFlink's serializer makes them (a
        # FLOAT field a 32-bit float, a tuple on a ROW stream a Row)
        fn = typed(fn, "reduce", self._t.output_type, single=True)
        return self._then("Keyed Reduce", ReduceSpec(fn=fn, key_selector=self.get_key_selector()))

    def _aggregate(self, agg: str, field: Any) -> DataStream:
        f = check_field(field, agg)
        return self._then(
            "Keyed Aggregation",
            AggregateSpec(agg=agg, field=f, key_selector=self.get_key_selector()),  # type: ignore[arg-type]
        )

    def sum(self, position_to_sum: int | str = 0) -> DataStream:
        """Running sum of a field per key (tuple position or field name)."""
        return self._aggregate("sum", position_to_sum)

    def min(self, position_to_min: int | str = 0) -> DataStream:
        return self._aggregate("min", position_to_min)

    def max(self, position_to_max: int | str = 0) -> DataStream:
        return self._aggregate("max", position_to_max)

    def min_by(self, position_to_min_by: int | str = 0) -> DataStream:
        """Per key, the record with the smallest field so far (the first of equal ones)."""
        f = check_field(position_to_min_by, "min_by")
        return self._then("Keyed Reduce", ReduceSpec(fn=_By(f, smaller=True), key_selector=self.get_key_selector()))

    def max_by(self, position_to_max_by: int | str = 0) -> DataStream:
        """Per key, the record with the largest field so far (the first of equal ones)."""
        f = check_field(position_to_max_by, "max_by")
        return self._then("Keyed Reduce", ReduceSpec(fn=_By(f, smaller=False), key_selector=self.get_key_selector()))

    def process(self, func: Any, output_type: Any = None) -> DataStream:
        """``func``: a KeyedProcessFunction (state, timers) or a callable."""
        out = check_type_info(output_type, "process()")
        fn = SideOutputsFunction(_process_function(func), "process_element", out)
        t = self._add("KeyedProcess", ProcessSpec(fn=fn, key_selector=self.get_key_selector()))
        t.output_type = out
        return ProcessStream(self._env, t, fn)

    def window(self, window_assigner: Any) -> Any:
        """Keyed windows: ``window(TumblingEventTimeWindows.of(Time.seconds(5)))`` then
        ``reduce`` / ``aggregate`` / ``process`` / ``apply`` (a ``WindowedStream``); session
        windows with a dynamic gap run as an adapter (``yarnflink.api.window_adapters``)."""
        if isinstance(window_assigner, DynamicEventTimeSessionWindows):
            return session_windowed(self, window_assigner)
        if isinstance(window_assigner, CountTumblingWindowAssigner):
            return count_windowed(self, window_assigner.size, window_assigner.slide)
        return WindowedStream(self, window_assigner)

    def count_window(self, size: int, slide: int = 0) -> Any:
        """Windows of ``size`` records per key, every ``slide`` records (default: ``size``,
        tumbling); incomplete windows do not fire."""
        return count_windowed(self, size, slide)


class SideOutputStream(DataStream):
    """The main output of an operator with side outputs: operator settings apply to the
    producing operator (and to the chained selector, so that they stay chained).

    Side outputs without graph support: an operator with side outputs emits side records wrapped in
    ``SideOutputRecord`` in its one output stream; its main output is that stream through a chained
    ``SideOutputSelectOperator`` that drops them, and ``get_side_output(tag)`` adds one that keeps
    (and unwraps) the records of that tag. The selector is only added when a side output is declared.
    """

    def __init__(self, env: Any, main: Transformation, producer: Transformation):
        super().__init__(env, main)
        self._producer = producer

    def _side_output_producer(self) -> Transformation:
        return self._producer

    def _both(self, method: str, *args: Any) -> Any:
        getattr(DataStream(self._env, self._producer), method)(*args)
        getattr(DataStream(self._env, self._t), method)(*args)
        return self

    def set_parallelism(self, parallelism: int) -> Any:
        return self._both("set_parallelism", parallelism)

    def set_max_parallelism(self, max_parallelism: int) -> Any:
        return self._both("set_max_parallelism", max_parallelism)

    def force_non_parallel(self) -> Any:
        return self._both("force_non_parallel")

    def slot_sharing_group(self, slot_sharing_group: Any) -> Any:
        return self._both("slot_sharing_group", slot_sharing_group)

    def name(self, name: str) -> Any:
        DataStream(self._env, self._producer).name(name)
        return self

    def uid(self, uid: str) -> Any:
        DataStream(self._env, self._producer).uid(uid)
        DataStream(self._env, self._t).uid(f"{uid}-main-output")
        return self

    def disable_chaining(self) -> Any:
        DataStream(self._env, self._producer).disable_chaining()
        return self

    def start_new_chain(self) -> Any:
        DataStream(self._env, self._producer).start_new_chain()
        return self


class ProcessStream(DataStream):
    """The stream of a process function, whose ``yield output_tag, value`` results go to side
    outputs (PyFlink's way). The main output needs a selector that drops side records only once a
    side output is asked for: ``get_side_output`` adds it and moves the main output's consumers
    so far onto it; results for tags nobody asked for are dropped (``SideOutputsFunction.wanted``)."""

    def __init__(self, env: Any, producer: Transformation, fn: SideOutputsFunction):
        super().__init__(env, producer)
        self._fn = fn
        self._main: Transformation | None = None

    def _input(self) -> Input:
        return Input(self._main) if self._main is not None else super()._input()

    def _output(self) -> Transformation:
        return self._main if self._main is not None else self._t

    def key_by(self, key_selector: Any, key_type: Any = None) -> KeyedStream:
        return KeyedStream(self._env, self._output(), key_selector_spec(key_selector))

    def _view(self, partitioning: str) -> DataStream:
        return DataStream(self._env, self._output(), partitioning)

    def get_side_output(self, output_tag: Any) -> DataStream:
        if not isinstance(output_tag, OutputTag):
            raise TypeError(f"get_side_output() needs an OutputTag, got {type(output_tag).__name__} {output_tag!r}")
        if self._main is None:
            main = self._env._add_transformation(
                "Main Output", SideOutputSelectSpec(None), "operator", [Input(self._t)]
            )
            main.parallelism, main.max_parallelism = self._t.parallelism, self._t.max_parallelism
            main.output_type = self._t.output_type
            for other in self._env._transformations:
                if other is not main:
                    for i in other.inputs:
                        if i.transformation is self._t:
                            i.transformation = main
            self._main = main
        self._fn.wanted.add(output_tag.tag_id)
        return super().get_side_output(output_tag)

    def _with_main(self, method: str, *args: Any) -> Any:
        getattr(DataStream(self._env, self._t), method)(*args)
        if self._main is not None:
            getattr(DataStream(self._env, self._main), method)(*args)
        return self

    def set_parallelism(self, parallelism: int) -> Any:
        return self._with_main("set_parallelism", parallelism)

    def set_max_parallelism(self, max_parallelism: int) -> Any:
        return self._with_main("set_max_parallelism", max_parallelism)

    def force_non_parallel(self) -> Any:
        return self._with_main("force_non_parallel")

    def slot_sharing_group(self, slot_sharing_group: Any) -> Any:
        return self._with_main("slot_sharing_group", slot_sharing_group)


class DataStreamSink(_OperatorSettings):
    """A sink (``sink_to``, ``print``); its properties can be set like an operator's."""

    def __init__(self, env: StreamExecutionEnvironment, transformation: Transformation):
        self._env = env
        self._t = transformation


__all__ = ["DataStream", "KeyedStream", "DataStreamSink"]
