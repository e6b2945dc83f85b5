"""Tutorial 10 -- a PyPTO kernel as a PyTorch operator: register_op, nn.Module, torch.compile,
autograd, opcheck.

    python tutorials/10_torch_custom_op.py [--quick] [--reps N]

One idea: the model stays a PyTorch model. A fused tile op (bias + GELU in one pass over the
data) becomes the operator torch.ops.pypto.bias_gelu with one call; torch sees a real
torch.library op -- with a schema, a CPU kernel that runs PyPTO on the tensors' own memory, a
fake kernel for tracing and a backward -- so eager mode, torch.compile(fullgraph=True),
autograd and torch.library.opcheck all work on it, and so does torch.distributed (each rank
runs the op on its own shard; tests/torch_ops/test_distributed.py).
"""
import argparse
import sys
import warnings

try:
    import torch
except ImportError:
    torch = None

import pypto
import pypto.language as pl

SQRT_2_OVER_PI = 0.7978845608028654

# ----------------------------------------------------------------------------------------------
# 1. The fused op and its backward, as tile ops.
#
# bias_gelu(x, bias) = gelu(x + bias), tanh approximation. Eager torch runs it as several ops,
# each a pass over memory; the tile op computes it in one pass per tile. Its backward takes the
# op's inputs and the incoming gradient by name (x, bias, grad) and returns one gradient per
# input: d/dx, and d/dbias, which sums over the rows -- so the backward is a Python function
# that calls a second registered tile op (the elementwise part) and reduces with torch.
# ----------------------------------------------------------------------------------------------


@pypto.tile_op
def bias_gelu(x, bias):
    v = x + bias
    return 0.5 * v * (1.0 + pl.tanh(SQRT_2_OVER_PI * (v + 0.044715 * v * v * v)))


@pypto.tile_op
def bias_gelu_grad(x, bias, grad):
    v = x + bias
    t = pl.tanh(SQRT_2_OVER_PI * (v + 0.044715 * v * v * v))
    dv = SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * v * v)
    return grad * (0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * dv)


def register():
    """register_op makes torch.ops.pypto.<name>: schema (Tensor x, Tensor bias) -> Tensor
    from the tile op's parameters; the output's shape from PyPTO's own tiling of the op."""
    grad_op = pypto.register_op("bias_gelu_grad", bias_gelu_grad)

    def backward(x, bias, grad):
        dx = grad_op(x, bias, grad)
        return dx, dx.reshape(-1, bias.shape[-1]).sum(0)

    return pypto.register_op("bias_gelu", bias_gelu, backward=backward)


# ----------------------------------------------------------------------------------------------
# 2. A model that uses it, and the same model in plain torch.
# ----------------------------------------------------------------------------------------------

def make_models(hidden):
    class Block(torch.nn.Module):
        def __init__(self, fused):
            super().__init__()
            self.fc = torch.nn.Linear(hidden, hidden, bias=False)
            self.bias = torch.nn.Parameter(torch.randn(hidden) * 0.1)
            self.fused = fused

        def forward(self, x):
            h = self.fc(x)
            if self.fused:
                return torch.ops.pypto.bias_gelu(h, self.bias)
            return torch.nn.functional.gelu(h + self.bias, approximate="tanh")

    torch.manual_seed(0)
    ours, reference = Block(True), Block(False)
    reference.load_state_dict(ours.state_dict())
    return ours, reference


def timed(fn, reps):
    """Median seconds of ``reps`` calls after one warm-up call, with PyPTO's own helper."""
    return pypto.testing.do_bench(fn, reps=reps) / 1e3


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--reps", type=int, default=20)
    args = p.parse_args(argv)
    if torch is None:
        print("torch: not installed -- this tutorial needs it: pip install -e '.[torch]'")
        return
    op = register()
    shapes = [(256, 1024)] if args.quick else [(1024, 1024), (4096, 1024), (2048, 4096)]

    # -- 3. eager: same numbers as torch ---------------------------------------------------
    x = torch.randn(64, 1024)
    ours, reference = make_models(1024)
    err = (ours(x) - reference(x)).abs().max().item()
    print(f"eager model, PyPTO op vs torch's gelu: max |difference| = {err:.2e}")

    # -- 4. autograd, gradcheck, opcheck -----------------------------------------------------
    ours(x).square().sum().backward()
    reference(x).square().sum().backward()
    gerr = max((a.grad - b.grad).abs().max().item()
               for a, b in zip(ours.parameters(), reference.parameters()))
    print(f"gradients of every parameter vs torch's autograd: max |difference| = {gerr:.2e}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)      # float32, not float64
        ok = torch.autograd.gradcheck(op, (torch.randn(4, 8, requires_grad=True),
                                           torch.randn(8, requires_grad=True)),
                                      eps=1e-3, atol=2e-3, rtol=2e-3)
    print(f"torch.autograd.gradcheck(bias_gelu) (float32, eps 1e-3): {ok}")
    for name, check in (("bias_gelu", (op, (torch.randn(8, 64, requires_grad=True),
                                            torch.randn(64, requires_grad=True)))),
                        ("bias_gelu_grad", (torch.ops.pypto.bias_gelu_grad.default,
                                            (torch.randn(8, 64), torch.randn(64),
                                             torch.randn(8, 64))))):
        print(f"torch.library.opcheck({name}): {torch.library.opcheck(*check)}")

    # -- 5. torch.compile traces through the op: no graph break --------------------------------
    compiled_ours = torch.compile(ours, fullgraph=True)
    err = (compiled_ours(x) - reference(x)).abs().max().item()
    print(f"torch.compile(model, fullgraph=True) with the PyPTO op: max |difference| = "
          f"{err:.2e}")

    # -- 6. timing --------------------------------------------------------------------------
    print()
    print(f"median of {args.reps} on this host; torch threads: {torch.get_num_threads()}")
    print("the op alone: bias + GELU")
    print(f"{'shape':>12}  {'torch eager':>11}  {'PyPTO op':>9}  {'inductor':>9}  {'ratio':>6}")
    with torch.no_grad():
        for rows, hidden in shapes:
            h, b = torch.randn(rows, hidden), torch.randn(hidden)
            eager = lambda h, b: torch.nn.functional.gelu(h + b, approximate="tanh")
            fused = torch.compile(eager, fullgraph=True)
            t = [timed(lambda f=f: f(h, b), args.reps) for f in (eager, op, fused)]
            print(f"{f'{rows}x{hidden}':>12}  {t[0] * 1e3:9.3f}ms  {t[1] * 1e3:7.3f}ms  "
                  f"{t[2] * 1e3:7.3f}ms  {t[0] / t[1]:5.2f}x")
        print("ratio: torch eager / PyPTO (> 1: PyPTO faster). Eager torch makes a pass over "
              "memory per op (add, then GELU's own); the PyPTO op reads x and bias once and "
              "writes once; inductor fuses the two as well.")
        print()
        print("the model's forward: Linear (torch's matmul, the same in every column), then "
              "bias + GELU")
        print(f"{'shape':>12}  {'torch eager':>11}  {'PyPTO op':>9}  {'compiled torch':>14}  "
              f"{'compiled PyPTO':>14}")
        for rows, hidden in shapes:
            ours, reference = make_models(hidden)
            x = torch.randn(rows, hidden)
            models = (reference, ours, torch.compile(reference, fullgraph=True),
                      torch.compile(ours, fullgraph=True))
            t = [timed(lambda m=m: m(x), args.reps) for m in models]
            print(f"{f'{rows}x{hidden}':>12}  {t[0] * 1e3:9.3f}ms  {t[1] * 1e3:7.3f}ms  "
                  f"{t[2] * 1e3:12.3f}ms  {t[3] * 1e3:12.3f}ms")
        print("compiled PyPTO: torch.compile around the model, the PyPTO op kept as one opaque "
              "call (fullgraph: no graph break); the Linear dominates these times.")


if __name__ == "__main__":
    main(sys.argv[1:])
