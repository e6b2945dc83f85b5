"""Tutorial 16 -- a mixture-of-experts layer: top-k routing, gather, per-expert FFN, scatter-add.

    python tutorials/16_moe.py [--quick] [--reps N]

One idea: each token is sent to the K of E experts its router scores highest, and its output
is the routing-weighted sum of those experts' FFNs. Two kernels: a router (a matmul, then
pl.topk and a softmax of the chosen logits) and the experts (per expert: gather its tokens'
rows, two matmuls, scatter-add the weighted rows back into the output).
"""
import argparse

import numpy as np

import pypto
import pypto.language as pl
from pypto.backends.ascend.model.launch import model_kernel

# ----------------------------------------------------------------------------------------------
# 1. The router: logits = x @ w_router on the cube (fp16 in, fp32 out), then on the vector
#    unit pl.topk(logits, K) gives each token's K best experts (values and int32 positions,
#    largest first) and a softmax over those K values gives the routing weights. The matmul
#    result reaches the vector unit through global memory (tutorial 12 says more).
#
# 2. Dispatch. The experts kernel wants, per expert, the list of (token, weight) pairs routed
#    to it. Building it is a compaction (a sort of the T*K choices by expert); a kernel cannot
#    turn a tile element into a loop bound or an offset (docs/language.md, "Limits"), so that
#    bookkeeping is numpy's here, on T*K small integers: a (E, C) table of token indices, C a
#    multiple of BLOCK_T at least the busiest expert's load. Unused slots hold T: an index
#    past the tensor's end, which pl.gather reads as zeros and pl.scatter drops, so they need
#    no mask.
#
# 3. The experts: program (e, b) takes slots [b*BLOCK_T, (b+1)*BLOCK_T) of expert e:
#        rows = pl.gather(x, idx, axis=0)             its tokens' rows, (BLOCK_T, H) fp16
#        h    = relu(rows @ w1[e])                    (BLOCK_T, F): cube, then vector
#        y    = h.to(fp16) @ w2[e]                    (BLOCK_T, H): the cube again
#        pl.scatter(out, idx, y * weight, axis=0, reduce="add")
#    The gathered rows and h are vector results fed to the cube: each goes through global
#    memory (vector store, cross-core flag, load into L1), placed by the compiler. Two
#    experts may add into the same token's row at once, which reduce="add" makes atomic.
#    Weights are (E*H, F) and (E*F, H) rank-2 views, expert e's rows starting at e*H / e*F.
# ----------------------------------------------------------------------------------------------


@pypto.jit
def router_kernel(x, w_router, ids, weights, BLOCK_T: pl.constexpr, H: pl.constexpr,
                  E: pl.constexpr, K: pl.constexpr):
    t0 = pl.program_id(0) * BLOCK_T
    logits = pl.matmul(pl.load(x, offsets=(t0, 0), shape=(BLOCK_T, H)),
                       pl.load(w_router, offsets=(0, 0), shape=(H, E)))
    top, chosen = pl.topk(logits, K)                     # (BLOCK_T, K), largest first
    e = pl.exp(top - pl.max(top, axis=1, keepdims=True))
    pl.store(ids, offsets=(t0, 0), value=chosen)
    pl.store(weights, offsets=(t0, 0), value=e / pl.sum(e, axis=1, keepdims=True))


@pypto.jit
def experts_kernel(x, w1, w2, table, table_weights, out, C, BLOCK_T: pl.constexpr,
                   H: pl.constexpr, F: pl.constexpr):
    e = pl.program_id(0)
    slot = e * C + pl.program_id(1) * BLOCK_T            # row of the (E*C, 1) tables
    idx = pl.broadcast_to(pl.load(table, offsets=(slot, 0), shape=(BLOCK_T, 1)), (BLOCK_T, H))
    rows = pl.gather(x, idx, axis=0)                     # zeros for unused slots (index T)
    h = pl.relu(pl.matmul(rows, pl.load(w1, offsets=(e * H, 0), shape=(H, F))))
    y = pl.matmul(h.to(pl.float16), pl.load(w2, offsets=(e * F, 0), shape=(F, H)))
    weight = pl.load(table_weights, offsets=(slot, 0), shape=(BLOCK_T, 1))
    pl.scatter(out, idx, y * weight, axis=0, reduce="add")


BLOCK_T = 16


def route(x, w_router, K):
    T, H = x.shape
    ids, weights = np.empty((T, K), np.int32), np.empty((T, K), np.float32)
    router_kernel[(pl.cdiv(T, BLOCK_T),)](x, w_router, ids, weights, BLOCK_T=BLOCK_T, H=H,
                                          E=w_router.shape[1], K=K)
    return ids, weights


def dispatch(ids, weights, E):
    """The (E*C, 1) token and weight tables (section 2), and C."""
    T = ids.shape[0]
    expert, token = ids.ravel(), np.repeat(np.arange(T, dtype=np.int32), ids.shape[1])
    order = np.argsort(expert, kind="stable")
    counts = np.bincount(expert, minlength=E)
    C = max(BLOCK_T, -(-int(counts.max()) // BLOCK_T) * BLOCK_T)
    table = np.full((E, C), T, np.int32)
    table_weights = np.zeros((E, C), np.float32)
    slot = np.arange(expert.size) - np.repeat(np.cumsum(counts) - counts, counts)
    table[expert[order], slot] = token[order]
    table_weights[expert[order], slot] = weights.ravel()[order]
    return table.reshape(E * C, 1), table_weights.reshape(E * C, 1), C


def experts_launch(x, w1, w2, table, table_weights, out, C):
    E, H, F = w1.shape
    grid = (E, C // BLOCK_T)
    args = (x, w1.reshape(E * H, F), w2.reshape(E * F, H), table, table_weights, out, C)
    return grid, args, dict(BLOCK_T=BLOCK_T, H=H, F=F)


def moe(x, w_router, w1, w2, K):
    """The layer: (T, H) fp16 tokens -> (T, H) fp32; also the routing it chose."""
    ids, weights = route(x, w_router, K)
    table, table_weights, C = dispatch(ids, weights, w_router.shape[1])
    out = np.zeros(x.shape, np.float32)                  # scatter-add accumulates into it
    grid, args, meta = experts_launch(x, w1, w2, table, table_weights, out, C)
    experts_kernel[grid](*args, **meta)
    return out, ids, weights


def check_routing(x, w_router, ids, weights):
    """The chosen experts are a top-k of the fp32 logits (up to near-ties, whose order the
    summation order may flip) and the weights their softmax."""
    logits = x.astype(np.float32) @ w_router.astype(np.float32)
    chosen = np.take_along_axis(logits, ids, axis=1)
    kth = np.sort(logits, axis=1)[:, -ids.shape[1]][:, None]
    assert np.all(chosen >= kth - 1e-3), "a routed expert is not among the top k"
    e = np.exp(chosen - chosen.max(axis=1, keepdims=True))
    np.testing.assert_allclose(weights, e / e.sum(axis=1, keepdims=True), rtol=1e-3, atol=1e-4)


def reference(x, w1, w2, ids, weights):
    """numpy, for the routing given: out[t] = sum_k weights[t, k] * FFN_{ids[t, k]}(x[t]),
    with h rounded to fp16 as the kernel feeds it to the second matmul."""
    out = np.zeros(x.shape, np.float32)
    x32 = x.astype(np.float32)
    for k in range(ids.shape[1]):
        for e in np.unique(ids[:, k]):
            rows = ids[:, k] == e
            h = np.maximum(x32[rows] @ w1[e].astype(np.float32), 0).astype(np.float16)
            out[rows] += weights[rows, k, None] * (h.astype(np.float32) @ w2[e].astype(np.float32))
    return out


def torch_reference(torch, x, w1, w2, ids, weights):
    """The same layer in torch: per expert, index_select its tokens, the FFN, index_add_."""
    xt, out = torch.from_numpy(x).float(), torch.zeros(x.shape)
    for e in range(w1.shape[0]):
        token, k = np.nonzero(ids == e)
        if token.size == 0:
            continue
        t = torch.from_numpy(token)
        h = torch.relu(xt[t] @ torch.from_numpy(w1[e]).float()).half().float()
        y = h @ torch.from_numpy(w2[e]).float()
        out.index_add_(0, t, y * torch.from_numpy(weights[token, k])[:, None])
    return out.numpy()


def make_layer(rng, T, H, F, E):
    def normal(*shape, scale=1.0):
        return (rng.standard_normal(shape, dtype=np.float32) * scale).astype(np.float16)
    return (normal(T, H), normal(H, E), normal(E, H, F, scale=H ** -0.5),
            normal(E, F, H, scale=F ** -0.5))


def import_torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def fmt(seconds):
    return f"{seconds * 1e6:.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def main():
    parser = argparse.ArgumentParser(description="PyPTO tutorial 16: mixture of experts")
    parser.add_argument("--reps", type=int, default=5, help="timed repetitions (default 5)")
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    args = parser.parse_args()
    torch = import_torch()
    rng = np.random.default_rng(0)
    E, K = 8, 2

    # --- correctness: a token count that is not a multiple of BLOCK_T -----------------------
    T, H, F = (40, 16, 32) if args.quick else (100, 64, 128)
    x, w_router, w1, w2 = make_layer(rng, T, H, F, E)
    out, ids, weights = moe(x, w_router, w1, w2, K)
    check_routing(x, w_router, ids, weights)
    tolerance = dict(rtol=1e-3, atol=1e-3)       # fp32 sums in another order; h in fp16
    np.testing.assert_allclose(out, reference(x, w1, w2, ids, weights), **tolerance)
    if torch is not None:
        np.testing.assert_allclose(out, torch_reference(torch, x, w1, w2, ids, weights),
                                   **tolerance)
    print(f"{T} tokens, H={H}, F={F}, {E} experts, top-{K}: tokens per expert "
          f"{np.bincount(ids.ravel(), minlength=E).tolist()}; matches numpy"
          + (" and torch" if torch is not None else " (torch absent)"))

    # --- the experts kernel's program --------------------------------------------------------
    table, table_weights, C = dispatch(ids, weights, E)
    grid, kargs, meta = experts_launch(x, w1, w2, table, table_weights, out, C)
    compiled = experts_kernel.compile(*kargs, **meta)
    print(f"experts kernel: kind={compiled.metadata['kind']}, grid {grid} (expert, slot "
          f"block), capacity C={C}; its cross-core hand-offs, cube part then vector part:")
    for line in compiled.asm["pto"].splitlines():
        if "pto.sync." in line:
            print("   ", line.strip())

    # --- timing: host, and modelled NPU per kernel ------------------------------------------
    # The cycle model steps through the gather's and scatter's element loops one element at a
    # time (seconds per thousand blocks' elements), hence the small sizes.
    # (--quick times the layer checked above: no new compiles.)
    layers = [(x, w_router, w1, w2)] if args.quick else [make_layer(rng, 256, 64, 128, E)]
    rows = []
    for x, w_router, w1, w2 in layers:
        (T, H), F = x.shape, w1.shape[2]
        host = pypto.testing.do_bench(lambda: moe(x, w_router, w1, w2, K), reps=args.reps) / 1e3
        t_numpy = pypto.testing.do_bench(
            lambda: reference(x, w1, w2, *route(x, w_router, K)), reps=args.reps) / 1e3
        out, ids, weights = moe(x, w_router, w1, w2, K)
        np.testing.assert_allclose(out, reference(x, w1, w2, ids, weights), **tolerance)
        table, table_weights, C = dispatch(ids, weights, E)
        npu_router = model_kernel(router_kernel, (pl.cdiv(T, BLOCK_T),), x, w_router, ids,
                                  weights, BLOCK_T=BLOCK_T, H=H, E=E, K=K).time_ms / 1e3
        grid, kargs, meta = experts_launch(x, w1, w2, table, table_weights, out, C)
        npu_experts = model_kernel(experts_kernel, grid, *kargs, **meta).time_ms / 1e3
        rows.append((f"T={T} H={H} F={F}", fmt(host), fmt(t_numpy), fmt(npu_router),
                     fmt(npu_experts)))
    print(f"\nMoE layer, {E} experts, top-{K}, median of {args.reps}; numpy: the reference "
          "loop (with PyPTO's routing); NPU: cycle model of ascend910b1 (modelled)")
    headers = ("size", "PyPTO", "numpy", "NPU router", "NPU experts")
    widths = [max(len(r[i]) for r in rows + [headers]) for i in range(len(headers))]
    for r in [headers] + rows:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths)))
    # The experts' modelled time is mostly the gather and the scatter: A2/A3 has no GM gather,
    # so each element is a one-element transfer (docs/language.md, "Indexed memory access").


if __name__ == "__main__":
    main()
