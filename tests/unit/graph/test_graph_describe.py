import json

from yarnflink import StreamExecutionEnvironment
from yarnflink.streaming.describe import describe_job_graph, job_graph_summary_json


def build():
    e = StreamExecutionEnvironment()
    s = e.from_sequence(1, 10).map(lambda x: (x % 2, x)).slot_sharing_group("ssg1")
    s.key_by(0).sum(1).set_parallelism(2).set_max_parallelism(64).print().set_parallelism(2)
    return e.get_job_graph("desc job")


def test_describe_lists_vertices_operators_and_edges():
    jg = build()
    text = describe_job_graph(jg)
    assert "Job 'desc job' (STREAMING)" in text
    assert "Vertex 1: Source: Sequence" in text
    assert "Vertex 2: Map" in text
    assert "Vertex 3: Keyed Aggregation -> Sink: Print to Std. Out" in text
    assert "max parallelism:    64" in text
    assert "slot sharing group: ssg1" in text
    assert "--HASH-->" in text and "--FORWARD-->" in text
    for v in jg.vertices:
        assert v.id in text


def test_summary_json_has_flinks_plan_shape():
    jg = build()
    plan = job_graph_summary_json(jg)
    json.dumps(plan)
    assert plan["jid"] == jg.job_id and plan["name"] == "desc job" and plan["type"] == "STREAMING"
    nodes = plan["nodes"]
    assert [n["id"] for n in nodes] == [v.id for v in jg.vertices]
    assert nodes[0]["inputs"] == []
    assert nodes[2]["inputs"] == [
        {"num": 0, "id": nodes[1]["id"], "ship_strategy": "HASH", "exchange": "pipelined_bounded"}
    ]
    assert nodes[1]["inputs"][0]["ship_strategy"] == "FORWARD"
    assert nodes[2]["parallelism"] == 2 and nodes[2]["max_parallelism"] == 64
    assert nodes[2]["operator"] == nodes[2]["description"] == "Keyed Aggregation -> Sink: Print to Std. Out"
    assert nodes[1]["slot_sharing_group"] == "ssg1"
