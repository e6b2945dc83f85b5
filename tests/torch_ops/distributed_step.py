"""One data-parallel training step of a model with a PyPTO op, as one rank of a
torch.distributed job (gloo, loopback). Run by test_distributed.py as

    python -m tests.torch_ops.distributed_step OUT.npz     (RANK, WORLD_SIZE, MASTER_* set)

Each rank takes its share of the batch; DistributedDataParallel averages the gradients;
rank 0 saves them. ``model_and_batch`` is shared with the single-process reference."""
import os
import sys

import numpy as np
import torch

from .ops import GELU


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 1)

    def forward(self, x):
        return self.fc2(GELU(self.fc1(x)))


def model_and_batch():
    torch.manual_seed(0)
    model = Model()
    x, y = torch.randn(8, 16), torch.randn(8, 1)
    return model, x, y


def gradients(model) -> dict:
    return {name: p.grad.numpy().copy() for name, p in model.named_parameters()}


def main(path):
    import torch.distributed as dist
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    model, x, y = model_and_batch()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    share = x.shape[0] // world
    rows = slice(rank * share, (rank + 1) * share)
    loss = torch.nn.functional.mse_loss(ddp(x[rows]), y[rows])
    loss.backward()
    if rank == 0:
        np.savez(path, **{k.replace(".", "_"): v for k, v in gradients(model).items()})
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
