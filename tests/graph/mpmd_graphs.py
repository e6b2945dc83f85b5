"""Graphs shared by the Execution Graph and MPMD tests."""
import numpy as np

import pypto


@pypto.tile_op
def mm(a, b):
    return pypto.matmul(a, b)


@pypto.tile_op
def bias_gelu(x, bias):
    y = x + bias
    return 0.5 * y * (1.0 + pypto.tanh(0.7978845608 * (y + 0.044715 * y * y * y)))


@pypto.tile_op
def softmax(t):
    e = pypto.exp(t - pypto.max(t, axis=1, keepdims=True))
    return e / pypto.sum(e, axis=1, keepdims=True)


@pypto.tile_op
def add(a, b):
    return a + b


@pypto.tile_op
def colsum(t):
    return pypto.sum(t, axis=0, keepdims=True)


def three_node(m=256, k=256, n=256, mt=(128, 128), vt=None, st=None, strategy="auto"):
    """matmul -> bias + GELU -> row softmax (the issue's graph, at any size); by default
    GELU tiles are (32, 256) and softmax tiles whole rows of 8192 elements in all; every node
    launched as ``strategy`` says."""
    vt, st = vt or (32, min(n, 256)), st or (max(1, 8192 // n), n)
    g = pypto.TensorGraph(name="three")
    a = g.placeholder((m, k), pypto.float16)
    b = g.placeholder((k, n), pypto.float16)
    bias = g.placeholder((1, n), pypto.float32)
    c = pypto.tile_map(mm, [a, b], tile_size=mt, parallel_strategy=strategy)
    h = pypto.tile_map(bias_gelu, [c, bias], tile_size=vt, parallel_strategy=strategy)
    pypto.tile_map(softmax, [h], tile_size=st, parallel_strategy=strategy)
    return g


def three_node_inputs(m=256, k=256, n=256, seed=0):
    rng = np.random.default_rng(seed)
    return {"a": (rng.standard_normal((m, k)) * 0.1).astype(np.float16),
            "b": (rng.standard_normal((k, n)) * 0.1).astype(np.float16),
            "bias": rng.standard_normal((1, n)).astype(np.float32)}


def add_then_colsum(rows, cols, tile, out_tile):
    g = pypto.TensorGraph(name="g")
    x = g.placeholder((rows, cols), pypto.float32)
    y = g.placeholder((rows, cols), pypto.float32)
    s = pypto.tile_map(add, [x, y], tile_size=tile)
    pypto.tile_map(colsum, [s], tile_size=(1, out_tile))
    return g
