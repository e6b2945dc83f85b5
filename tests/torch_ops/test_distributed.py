"""A registered PyPTO op inside a torch.distributed job: two ranks on this machine (gloo over
loopback) take one data-parallel step, and their averaged gradients equal a single-process
step on the whole batch."""
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from .ops import torch

dist = pytest.importorskip("torch.distributed")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                    reason="this torch build has no gloo backend")
def test_two_rank_data_parallel_step_matches_one_process(tmp_path):
    from .distributed_step import gradients, model_and_batch
    out = tmp_path / "grads.npz"
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()),
           "WORLD_SIZE": "2", "GLOO_SOCKET_IFNAME": "lo", "PYTHONPATH": ROOT}
    ranks = [subprocess.Popen([sys.executable, "-m", "tests.torch_ops.distributed_step",
                               str(out)], cwd=ROOT, env={**env, "RANK": str(r)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for r in range(2)]
    logs = [p.communicate(timeout=300)[0].decode() for p in ranks]
    assert [p.returncode for p in ranks] == [0, 0], "\n".join(logs)

    model, x, y = model_and_batch()
    torch.nn.functional.mse_loss(model(x), y).backward()
    expected = gradients(model)
    got = np.load(out)
    for name, grad in expected.items():
        np.testing.assert_allclose(got[name.replace(".", "_")], grad, rtol=1e-5, atol=1e-6)
