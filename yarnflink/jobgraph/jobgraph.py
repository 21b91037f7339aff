"""JobGraph: the logical, parallel dataflow a client submits to the Dispatcher.

A JobVertex is one operator chain; an IntermediateDataSet is the result one vertex produces for one
downstream edge; a JobEdge connects a data set to the consuming vertex with a partitioning.
Operators' user code travels as opaque cloudpickled bytes (``OperatorDescriptor.spec``), which the
master never unpickles: only TaskExecutors do.

The JSON form (``to_json`` / ``from_json``) is what ``POST /jobs`` takes. ``from_json`` validates
every field and raises ``JobGraphError`` naming the first problem it finds.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field
from typing import Any

PARTITIONINGS = ("forward", "rebalance", "shuffle", "broadcast", "hash", "rescale")
#: Partitionings that send a record to the same consumer on every run (seed 000's region rule).
DETERMINISTIC_PARTITIONINGS = frozenset({"forward", "broadcast", "hash"})
RESULT_TYPES = ("PIPELINED_BOUNDED", "BLOCKING")
RUNTIME_MODES = ("STREAMING", "BATCH")
MAX_VERTICES = 10_000
MAX_PARALLELISM_LIMIT = 32_768  # Flink's upper bound for max parallelism (2^15)
SLOT_SHARING_GROUP_RESOURCES = frozenset({"cpuCores", "taskHeapMemoryMB", "taskOffHeapMemoryMB", "managedMemoryMB"})


class JobGraphError(ValueError):
    """A JobGraph (usually from a REST body) is malformed; the message names the field."""


def new_id() -> str:
    return uuid.uuid4().hex


@dataclass
class OperatorDescriptor:
    node_id: int
    name: str
    kind: str
    spec: bytes  # cloudpickle of a yarnflink.operators.specs.*Spec
    uid: str | None = None
    chained_outputs: list[int] = field(default_factory=list)  # node ids in the same vertex
    output_datasets: list[str] = field(default_factory=list)  # IntermediateDataSet ids


@dataclass
class JobVertex:
    id: str
    name: str
    parallelism: int
    max_parallelism: int
    operators: list[OperatorDescriptor]  # head operator first
    slot_sharing_group: str = "default"
    #: False when no operator of the vertex set its parallelism and the job set no default
    #: (``set_parallelism``): the AdaptiveBatch scheduler may then decide it. JSON
    #: ``parallelismConfigured``, true when absent.
    parallelism_configured: bool = True

    @property
    def head(self) -> OperatorDescriptor:
        return self.operators[0]


@dataclass
class IntermediateDataSet:
    id: str
    producer: str  # JobVertex id
    result_type: str = "PIPELINED_BOUNDED"


@dataclass
class JobEdge:
    source: str  # IntermediateDataSet id
    target: str  # JobVertex id
    partitioning: str
    key_selector: bytes | None = None  # cloudpickle of KeySelectorSpec, for "hash"


@dataclass
class JobGraph:
    job_id: str
    job_name: str
    vertices: list[JobVertex]  # topological order
    datasets: list[IntermediateDataSet]
    edges: list[JobEdge]
    runtime_mode: str = "STREAMING"
    config: dict[str, str] = field(default_factory=dict)
    #: slot sharing group name -> its resources (``cpuCores``, ``taskHeapMemoryMB``,
    #: ``taskOffHeapMemoryMB``, ``managedMemoryMB``), for the groups declared with resources
    slot_sharing_groups: dict[str, dict[str, float]] = field(default_factory=dict)

    # ------------------------------------------------------------------ navigation
    def vertex(self, vertex_id: str) -> JobVertex:
        for v in self.vertices:
            if v.id == vertex_id:
                return v
        raise KeyError(vertex_id)

    def dataset(self, dataset_id: str) -> IntermediateDataSet:
        for d in self.datasets:
            if d.id == dataset_id:
                return d
        raise KeyError(dataset_id)

    def inputs_of(self, vertex_id: str) -> list[JobEdge]:
        return [e for e in self.edges if e.target == vertex_id]

    def outputs_of(self, vertex_id: str) -> list[tuple[IntermediateDataSet, JobEdge]]:
        out: list[tuple[IntermediateDataSet, JobEdge]] = []
        for d in self.datasets:
            if d.producer == vertex_id:
                out.extend((d, e) for e in self.edges if e.source == d.id)
        return out

    def sources(self) -> list[JobVertex]:
        return [v for v in self.vertices if not self.inputs_of(v.id)]

    # ------------------------------------------------------------------ JSON
    def to_json(self) -> dict[str, Any]:
        return {
            "jobId": self.job_id,
            "jobName": self.job_name,
            "runtimeMode": self.runtime_mode,
            "config": dict(self.config),
            "slotSharingGroups": {k: dict(v) for k, v in self.slot_sharing_groups.items()},
            "vertices": [
                {
                    "id": v.id,
                    "name": v.name,
                    "parallelism": v.parallelism,
                    "maxParallelism": v.max_parallelism,
                    "slotSharingGroup": v.slot_sharing_group,
                    **({} if v.parallelism_configured else {"parallelismConfigured": False}),
                    "operators": [
                        {
                            "nodeId": o.node_id,
                            "name": o.name,
                            "kind": o.kind,
                            "uid": o.uid,
                            "spec": base64.b64encode(o.spec).decode("ascii"),
                            "chainedOutputs": list(o.chained_outputs),
                            "outputDatasets": list(o.output_datasets),
                        }
                        for o in v.operators
                    ],
                }
                for v in self.vertices
            ],
            "datasets": [{"id": d.id, "producer": d.producer, "resultType": d.result_type} for d in self.datasets],
            "edges": [
                {
                    "source": e.source,
                    "target": e.target,
                    "partitioning": e.partitioning,
                    "keySelector": (
                        base64.b64encode(e.key_selector).decode("ascii") if e.key_selector is not None else None
                    ),
                }
                for e in self.edges
            ],
        }

    @staticmethod
    def from_json(data: Any) -> JobGraph:
        return _Parser().job_graph(data)


class _Parser:
    """Validating reader of the JSON form; every error names the path of the bad field."""

    def job_graph(self, data: Any) -> JobGraph:
        d = self._obj(data, "jobGraph")
        job_id = self._id(d, "jobId", "jobGraph")
        vertices_raw = self._list(d, "vertices", "jobGraph")
        if not vertices_raw:
            raise JobGraphError("jobGraph.vertices must not be empty: the job defines no operators")
        if len(vertices_raw) > MAX_VERTICES:
            raise JobGraphError(f"jobGraph.vertices has {len(vertices_raw)} entries (limit {MAX_VERTICES})")
        vertices = [self.vertex(v, f"vertices[{i}]") for i, v in enumerate(vertices_raw)]
        datasets = [self.dataset(x, f"datasets[{i}]") for i, x in enumerate(self._list(d, "datasets", "jobGraph"))]
        edges = [self.edge(x, f"edges[{i}]") for i, x in enumerate(self._list(d, "edges", "jobGraph"))]
        mode = self._str(d, "runtimeMode", "jobGraph", default="STREAMING")
        if mode not in RUNTIME_MODES:
            raise JobGraphError(f"jobGraph.runtimeMode must be one of {RUNTIME_MODES}, got {mode!r}")
        config = d.get("config", {})
        if not isinstance(config, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in config.items()
        ):
            raise JobGraphError("jobGraph.config must be an object of string keys and string values")
        graph = JobGraph(
            job_id=job_id,
            job_name=self._str(d, "jobName", "jobGraph"),
            vertices=vertices,
            datasets=datasets,
            edges=edges,
            runtime_mode=mode,
            config=dict(config),
            slot_sharing_groups=self.slot_sharing_groups(d.get("slotSharingGroups", {})),
        )
        validate_topology(graph)
        return graph

    @staticmethod
    def slot_sharing_groups(data: Any) -> dict[str, dict[str, float]]:
        if not isinstance(data, dict):
            raise JobGraphError("jobGraph.slotSharingGroups must be an object of group name -> resources")
        out: dict[str, dict[str, float]] = {}
        for name, res in data.items():
            path = f"jobGraph.slotSharingGroups[{name!r}]"
            if not isinstance(res, dict) or not set(res) <= SLOT_SHARING_GROUP_RESOURCES:
                raise JobGraphError(f"{path} must be an object with keys among {sorted(SLOT_SHARING_GROUP_RESOURCES)}")
            for k, v in res.items():
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1e12:
                    raise JobGraphError(f"{path}.{k} must be a number >= 0, got {v!r}")
            out[str(name)] = {k: float(v) for k, v in res.items()}
        return out

    def vertex(self, data: Any, path: str) -> JobVertex:
        d = self._obj(data, path)
        parallelism = self._int(d, "parallelism", path, minimum=1)
        max_par = self._int(d, "maxParallelism", path, minimum=1)
        if max_par > MAX_PARALLELISM_LIMIT:
            raise JobGraphError(f"{path}.maxParallelism must be at most {MAX_PARALLELISM_LIMIT}")
        if parallelism > max_par:
            raise JobGraphError(f"{path}.parallelism ({parallelism}) is larger than its maxParallelism ({max_par})")
        ops_raw = self._list(d, "operators", path)
        if not ops_raw:
            raise JobGraphError(f"{path}.operators must not be empty")
        return JobVertex(
            id=self._id(d, "id", path),
            name=self._str(d, "name", path),
            parallelism=parallelism,
            max_parallelism=max_par,
            operators=[self.operator(o, f"{path}.operators[{i}]") for i, o in enumerate(ops_raw)],
            slot_sharing_group=self._str(d, "slotSharingGroup", path, default="default"),
            parallelism_configured=self._parallelism_configured(d, path),
        )

    @staticmethod
    def _parallelism_configured(d: dict[str, Any], path: str) -> bool:
        value = d.get("parallelismConfigured", True)
        if not isinstance(value, bool):
            raise JobGraphError(f"{path}.parallelismConfigured must be true or false, got {value!r}")
        return value

    def operator(self, data: Any, path: str) -> OperatorDescriptor:
        d = self._obj(data, path)
        uid = d.get("uid")
        if uid is not None and not isinstance(uid, str):
            raise JobGraphError(f"{path}.uid must be a string or null")
        chained = d.get("chainedOutputs", [])
        if not isinstance(chained, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in chained):
            raise JobGraphError(f"{path}.chainedOutputs must be a list of integers")
        outs = d.get("outputDatasets", [])
        if not isinstance(outs, list) or not all(isinstance(x, str) for x in outs):
            raise JobGraphError(f"{path}.outputDatasets must be a list of strings")
        return OperatorDescriptor(
            node_id=self._int(d, "nodeId", path, minimum=0),
            name=self._str(d, "name", path),
            kind=self._str(d, "kind", path),
            spec=self._b64(d, "spec", path),
            uid=uid,
            chained_outputs=list(chained),
            output_datasets=list(outs),
        )

    def dataset(self, data: Any, path: str) -> IntermediateDataSet:
        d = self._obj(data, path)
        rt = self._str(d, "resultType", path, default="PIPELINED_BOUNDED")
        if rt not in RESULT_TYPES:
            raise JobGraphError(f"{path}.resultType must be one of {RESULT_TYPES}, got {rt!r}")
        return IntermediateDataSet(id=self._id(d, "id", path), producer=self._id(d, "producer", path), result_type=rt)

    def edge(self, data: Any, path: str) -> JobEdge:
        d = self._obj(data, path)
        p = self._str(d, "partitioning", path)
        if p not in PARTITIONINGS:
            raise JobGraphError(f"{path}.partitioning must be one of {PARTITIONINGS}, got {p!r}")
        ks = None
        if d.get("keySelector") is not None:
            ks = self._b64(d, "keySelector", path)
        if p == "hash" and ks is None:
            raise JobGraphError(f"{path}.keySelector is required for hash partitioning")
        return JobEdge(
            source=self._id(d, "source", path), target=self._id(d, "target", path), partitioning=p, key_selector=ks
        )

    # ------------------------------------------------------------------ primitives
    @staticmethod
    def _obj(data: Any, path: str) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise JobGraphError(f"{path} must be a JSON object, got {type(data).__name__}")
        return data

    @staticmethod
    def _list(d: dict[str, Any], key: str, path: str) -> list[Any]:
        v = d.get(key)
        if not isinstance(v, list):
            raise JobGraphError(f"{path}.{key} must be a list")
        return v

    @staticmethod
    def _str(d: dict[str, Any], key: str, path: str, default: str | None = None) -> str:
        v = d.get(key, default)
        if not isinstance(v, str) or not v:
            raise JobGraphError(f"{path}.{key} must be a non-empty string")
        if len(v) > 4096:
            raise JobGraphError(f"{path}.{key} is longer than 4096 characters")
        return v

    def _id(self, d: dict[str, Any], key: str, path: str) -> str:
        v = self._str(d, key, path)
        if len(v) != 32 or any(c not in "0123456789abcdef" for c in v):
            raise JobGraphError(f"{path}.{key} must be 32 lowercase hex characters, got {v!r}")
        return v

    @staticmethod
    def _int(d: dict[str, Any], key: str, path: str, minimum: int) -> int:
        v = d.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
            raise JobGraphError(f"{path}.{key} must be an integer >= {minimum}, got {v!r}")
        return v

    @staticmethod
    def _b64(d: dict[str, Any], key: str, path: str) -> bytes:
        v = d.get(key)
        if not isinstance(v, str):
            raise JobGraphError(f"{path}.{key} must be a base64 string")
        try:
            return base64.b64decode(v.encode("ascii"), validate=True)
        except (ValueError, UnicodeEncodeError) as e:
            raise JobGraphError(f"{path}.{key} is not valid base64: {e}") from None


def validate_topology(graph: JobGraph) -> None:
    """References resolve, ids are unique, vertices are in topological order, forward edges
    connect equal parallelism, and every non-source vertex has an input."""
    vids = [v.id for v in graph.vertices]
    if len(set(vids)) != len(vids):
        raise JobGraphError("jobGraph.vertices contains duplicate ids")
    dids = [d.id for d in graph.datasets]
    if len(set(dids)) != len(dids):
        raise JobGraphError("jobGraph.datasets contains duplicate ids")
    position = {v: i for i, v in enumerate(vids)}
    by_id = {v.id: v for v in graph.vertices}
    datasets = {d.id: d for d in graph.datasets}
    for d in graph.datasets:
        if d.producer not in position:
            raise JobGraphError(f"dataset {d.id} names unknown producer vertex {d.producer}")
    consumed: set[str] = set()
    for i, e in enumerate(graph.edges):
        if e.source not in datasets:
            raise JobGraphError(f"edges[{i}].source names unknown dataset {e.source}")
        if e.target not in position:
            raise JobGraphError(f"edges[{i}].target names unknown vertex {e.target}")
        if e.source in consumed:
            raise JobGraphError(f"edges[{i}]: dataset {e.source} is consumed by more than one edge")
        consumed.add(e.source)
        producer = datasets[e.source].producer
        if position[producer] >= position[e.target]:
            raise JobGraphError(
                f"edges[{i}] goes from vertex {producer} to {e.target}, against topological order (cycle?)"
            )
        if e.partitioning == "forward" and by_id[producer].parallelism != by_id[e.target].parallelism:
            raise JobGraphError(
                f"edges[{i}]: forward partitioning needs equal parallelism, got "
                f"{by_id[producer].parallelism} and {by_id[e.target].parallelism}"
            )
    for d in graph.datasets:
        if d.id not in consumed:
            raise JobGraphError(f"dataset {d.id} has no consumer edge")
    for v in graph.vertices:
        node_ids = {o.node_id for o in v.operators}
        for o in v.operators:
            for c in o.chained_outputs:
                if c not in node_ids:
                    raise JobGraphError(f"vertex {v.id}: operator {o.node_id} chains to unknown node {c}")
            for ds in o.output_datasets:
                if ds not in datasets or datasets[ds].producer != v.id:
                    raise JobGraphError(f"vertex {v.id}: operator {o.node_id} writes unknown dataset {ds}")
