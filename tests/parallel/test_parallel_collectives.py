"""`parallel.collectives` reads kinds, result shapes and bytes from optimized HLO text."""

from __future__ import annotations

from calclip_jax.parallel.collectives import Collective, collectives, summary

OP_NAME = 'metadata={op_name="jit(step)/layers_0/attn/o_proj/dot_general"}'
HLO = f"""
  %all-reduce.1 = f32[6,11,32]{{2,1,0}} all-reduce(%x), replica_groups=[2,4]<=[8], {OP_NAME}
  %all-reduce.2 = (f32[], bf16[64,32]{{1,0}}) all-reduce(%a, %b), channel_id=2, to_apply=%add
  %all-gather-start = (f32[4,32]{{1,0}}, f32[32,32]{{1,0}}) all-gather-start(%w), dimensions={{0}}
  %all-gather-done = f32[32,32]{{1,0}} all-gather-done(%all-gather-start)
  ROOT %reduce-scatter.3 = s32[8]{{0}} reduce-scatter(%c), dimensions={{0}}
  %fusion = f32[6,11,32]{{2,1,0}} fusion(%all-reduce.1), kind=kLoop, calls=%fused
"""


def test_kinds_shapes_and_bytes():
    found = collectives(HLO)
    assert [c.kind for c in found] == ["all-reduce", "all-reduce", "all-gather", "reduce-scatter"]
    assert found[0].arrays == (("f32", (6, 11, 32)),)
    assert found[0].op_name.endswith("o_proj/dot_general")
    assert found[1].result_bytes == 4 + 64 * 32 * 2
    assert found[2].arrays == (("f32", (32, 32)),)  # the async start's result, not its operand
    assert found[0].has_dim({11}) and not found[0].has_dim({48})
    assert summary(found)["all-reduce"] == {"count": 2, "bytes": 6 * 11 * 32 * 4 + 4 + 4096}
    assert Collective("all-gather", (("f8e4m3fn", (2, 3)),)).result_bytes == 6
