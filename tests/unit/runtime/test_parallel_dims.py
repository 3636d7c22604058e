"""ParallelDims: layouts checked against nodes x ranks per node, with errors that say why."""

from __future__ import annotations

import pytest

from hpcflow.runtime.parallel_dims import ParallelDims, nearest_layouts, valid_layouts


@pytest.mark.parametrize(
    ("dp", "pp", "tp", "nodes", "per_node", "expected"),
    [
        pytest.param(2, 2, 2, 2, 4, (2, 2, 2), id="2x4-pp2-dp2-tp2"),
        pytest.param(-1, 2, 2, 2, 4, (2, 2, 2), id="2x4-dp-rest"),
        pytest.param(1, 2, 2, 1, 4, (1, 2, 2), id="1x4-after-spot-loss"),
        pytest.param(-1, 1, 1, 2, 2, (4, 1, 1), id="2x2-pure-dp"),
        pytest.param(1, 4, 2, 4, 2, (1, 4, 2), id="4x2-pp-spans-nodes"),
        pytest.param(-1, 2, 8, 4, 8, (2, 2, 8), id="4x8-tp-whole-node"),
        pytest.param(16, 1, 1, 2, 8, (16, 1, 1), id="2x8-pure-dp"),
        pytest.param(1, 1, 1, 1, 1, (1, 1, 1), id="single"),
    ],
)
def test_valid_layouts_are_accepted(dp, pp, tp, nodes, per_node, expected):
    dims = ParallelDims(dp, pp, tp, nodes * per_node, per_node)
    assert (dims.dp, dims.pp, dims.tp) == expected
    assert dims.degrees == {"pp": expected[1], "dp": expected[0], "tp": expected[2]}


@pytest.mark.parametrize(
    ("dp", "pp", "tp", "nodes", "per_node", "message"),
    [
        pytest.param(2, 2, 1, 2, 4, r"dp \* pp \* tp = 2 \* 2 \* 1 = 4, but the world size is 8",
                     id="product-too-small"),
        pytest.param(4, 2, 2, 2, 4, r"= 16, but the world size is 8", id="product-too-large"),
        pytest.param(1, 1, 8, 2, 4, r"tp=8 does not divide the 4 ranks per node", id="tp-spans-nodes"),
        pytest.param(3, 1, 4, 2, 6, r"tp=4 does not divide the 6 ranks per node", id="tp4-on-6-per-node"),
        pytest.param(-1, 3, 1, 2, 4, r"dp=-1 needs pp \* tp = 3 \* 1 = 3 to divide the world size 8",
                     id="rest-not-whole"),
        pytest.param(0, 1, 1, 1, 4, r"dp=0 must be at least 1, or -1", id="dp-zero"),
        pytest.param(1, 0, 1, 1, 4, r"pp=0 must be at least 1", id="pp-zero"),
        pytest.param(-2, 1, 1, 1, 4, r"dp=-2", id="dp-negative"),
    ],
)
def test_invalid_layouts_name_the_failing_rule(dp, pp, tp, nodes, per_node, message):
    with pytest.raises(ValueError, match=message):
        ParallelDims(dp, pp, tp, nodes * per_node, per_node)


def test_tp2_on_3_ranks_per_node_is_refused_even_when_the_product_fits():
    with pytest.raises(ValueError, match="tp=2 does not divide the 3 ranks per node") as err:
        ParallelDims(3, 1, 2, 6, 3)
    assert "would span nodes" in str(err.value)


def test_error_suggests_the_nearest_valid_layouts():
    with pytest.raises(ValueError) as err:
        ParallelDims(2, 2, 1, 8, 4)  # product 4, world 8
    text = str(err.value)
    assert "valid layouts nearest to it for 2 node(s) x 4 ranks:" in text
    # Doubling one degree fixes it; each suggestion is a real layout.
    assert "(dp=4, pp=2, tp=1)" in text and "(dp=2, pp=2, tp=2)" in text
    for dp, pp, tp in nearest_layouts(8, 4, 2, 2, 1):
        ParallelDims(dp, pp, tp, 8, 4)


def test_suggestions_never_split_tp_across_nodes():
    layouts = valid_layouts(8, 2)
    assert layouts and all(tp in (1, 2) and dp * pp * tp == 8 for dp, pp, tp in layouts)
    nearest = nearest_layouts(8, 2, 1, 1, 8)  # tp=8 on 2-rank nodes: tp capped at a node
    assert all(tp == 2 for _, _, tp in nearest) and (1, 4, 2) in nearest


def test_uneven_nodes_are_refused():
    with pytest.raises(ValueError, match="not a multiple of the ranks per node"):
        ParallelDims(-1, 1, 1, 6, 4)


@pytest.mark.parametrize(
    ("rank", "coords"),
    [
        pytest.param(0, {"pp": 0, "dp": 0, "tp": 0}, id="r0"),
        pytest.param(1, {"pp": 0, "dp": 0, "tp": 1}, id="tp-innermost"),
        pytest.param(2, {"pp": 0, "dp": 1, "tp": 0}, id="dp-next"),
        pytest.param(5, {"pp": 1, "dp": 0, "tp": 1}, id="pp-outermost"),
        pytest.param(7, {"pp": 1, "dp": 1, "tp": 1}, id="last"),
    ],
)
def test_coordinates_put_tp_innermost_and_pp_outermost(rank, coords):
    dims = ParallelDims(2, 2, 2, 8, 4)
    assert dims.coordinates(rank) == coords
    # A tp group (same pp, dp) lies within one node of 4 ranks.
    assert rank // 4 == (rank - coords["tp"]) // 4


def test_coordinates_reject_a_rank_outside_the_world():
    with pytest.raises(ValueError, match=r"rank 8 is not in \[0, 8\)"):
        ParallelDims(2, 2, 2, 8, 4).coordinates(8)


def test_sub_meshes_need_the_mesh_first():
    with pytest.raises(RuntimeError, match="build_mesh"):
        ParallelDims(1, 1, 1, 1, 1).mesh("dp")
