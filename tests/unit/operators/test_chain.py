import traceback

import pytest

from yarnflink.common.records import Batch
from yarnflink.operators import specs as S
from yarnflink.operators.chain import ChainError, OperatorChain

from .helpers import ListOutput, desc, make_ctx


def ctx_factory(names):
    def f(name):
        names.append(name)
        return make_ctx(name)

    return f


def drive(chain):
    chain.open()
    if chain.is_source:
        for b in chain.source_batches():
            chain.push(b)
    chain.end_input()
    chain.close()


def test_chain_with_branch_fans_out_to_successors_and_networks():
    log = []
    a, b, c = ListOutput(log, "A"), ListOutput(log, "B"), ListOutput(log, "C")
    descs = [
        desc(1, S.CollectionSourceSpec([1, 2, 3, 4]), chained=[2]),
        desc(2, S.MapSpec(lambda x: x * 10), chained=[3, 4], datasets=["dsC"]),
        desc(3, S.FilterSpec(lambda x: x > 20), datasets=["dsA"]),
        desc(4, S.MapSpec(lambda x: -x), datasets=["dsB"]),
    ]
    opened = []
    chain = OperatorChain(descs, {"dsA": a, "dsB": b, "dsC": c}, ctx_factory(opened))
    assert chain.is_source
    drive(chain)
    assert a.rows == [30, 40]
    assert b.rows == [-10, -20, -30, -40]
    assert c.rows == [10, 20, 30, 40]
    assert a.ended == b.ended == c.ended == 1
    assert opened[-1] == descs[0].name  # opened tail first, head last
    # network outputs end only after all data was emitted
    ends = [i for i, e in enumerate(log) if e[0] == "end"]
    assert sorted(log[i] for i in ends) == [("end", "A"), ("end", "B"), ("end", "C")]
    assert min(ends) > max(i for i, e in enumerate(log) if e[0] == "emit")


def test_batch_reduce_results_reach_network_before_its_end():
    out = ListOutput()
    descs = [
        desc(1, S.ReduceSpec(lambda x, y: (x[0], x[1] + y[1]), S.KeySelectorSpec(field=0), "BATCH"), chained=[2]),
        desc(2, S.MapSpec(lambda t: f"{t[0]}={t[1]}"), datasets=["ds"]),
    ]
    chain = OperatorChain(descs, {"ds": out}, ctx_factory([]))
    assert not chain.is_source
    chain.open()
    chain.push(Batch.from_rows([("a", 1), ("b", 2), ("a", 3)]))
    assert out.rows == []
    chain.end_input()
    chain.end_input()  # idempotent
    chain.close()
    assert out.rows == ["a=4", "b=2"] and out.ended == 1


def test_each_operator_ends_once_in_topological_order():
    log = []
    descs = [
        desc(1, S.MapSpec(lambda x: x), chained=[3, 2]),
        desc(2, S.MapSpec(lambda x: x), datasets=["x"]),
        desc(3, S.MapSpec(lambda x: x), datasets=["y"]),
    ]
    chain = OperatorChain(descs, {"x": ListOutput(), "y": ListOutput()}, ctx_factory([]))
    for nid, op in chain.operators.items():
        orig = op.end_input

        def wrapped(nid=nid, orig=orig):
            log.append(nid)
            orig()

        op.end_input = wrapped
    chain.open()
    chain.push(Batch.from_rows([1]))
    chain.end_input()
    assert log == [1, 3, 2]


def user_function_that_fails(x):
    if x == 3:
        raise ValueError("boom at 3")
    return x


def test_user_exception_propagates_with_traceback():
    descs = [
        desc(1, S.SequenceSourceSpec(1, 5), chained=[2]),
        desc(2, S.MapSpec(user_function_that_fails), datasets=["d"]),
    ]
    chain = OperatorChain(descs, {"d": ListOutput()}, ctx_factory([]))
    chain.open()
    with pytest.raises(ValueError, match="boom at 3") as info:
        for b in chain.source_batches():
            chain.push(b)
    frames = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
    assert frames[-1] == "user_function_that_fails"
    chain.close()


CLOSED: list = []


class ClosingFn:
    def __init__(self, name, fail):
        self.name, self.fail = name, fail

    def open(self, rc):
        pass

    def map(self, v):
        return v

    def close(self):
        CLOSED.append(self.name)
        if self.fail:
            raise RuntimeError(self.name)


def test_close_closes_all_and_reraises_first_error():
    CLOSED.clear()
    descs = [desc(1, S.MapSpec(ClosingFn("a", True)), chained=[2]), desc(2, S.MapSpec(ClosingFn("b", True)))]
    chain = OperatorChain(descs, {}, ctx_factory([]))
    chain.open()
    with pytest.raises(RuntimeError, match="^a$"):
        chain.close()
    assert CLOSED == ["a", "b"]
    chain.close()  # idempotent
    assert CLOSED == ["a", "b"]


def test_invalid_chains():
    with pytest.raises(ChainError, match="no network output"):
        OperatorChain([desc(1, S.MapSpec(str), datasets=["zz"])], {}, ctx_factory([]))
    with pytest.raises(ChainError, match="unknown node"):
        OperatorChain([desc(1, S.MapSpec(str), chained=[9])], {}, ctx_factory([]))
    with pytest.raises(ChainError, match="not reachable"):
        OperatorChain([desc(1, S.MapSpec(str)), desc(2, S.MapSpec(str))], {}, ctx_factory([]))
    with pytest.raises(TypeError):
        OperatorChain([desc(1, S.MapSpec(str))], {}, ctx_factory([])).source_batches()
