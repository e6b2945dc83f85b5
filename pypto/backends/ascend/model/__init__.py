"""The NPU model: how long a PTO program would take on the target's AI Cores.

Users without an NPU still need to know which pipe bounds their kernel, how busy the cores are
and what double buffering or more cores would buy. The model answers from the real PTO program
(the ``.pto`` the compiler emits) and the real launch arguments, with the numbers of
``targets.CostModel`` (shared/reference/ascend910b.md, "Cycle model parameters"), in four steps
from the bottom up:

* ``costs``: one tile instruction's cost from its opcode, tile shapes, dtypes and locations
  (``instruction_cycles``, ``gm_bursts``, ``dispatch_cycles``).
* ``memory``: the L2 in front of the HBM (LRU by bytes over the launch's GM windows), both
  shared by the active cores (``GlobalMemory``).
* ``block``: one block's program part on one core's pipes, control flow executed for real
  (``PartTimeline``, ``BlockEnv``, ``BlockTrace``).
* ``launch``: the grid's blocks scheduled onto the cores, HBM shared between the active ones,
  cross-core flags and barriers honoured (``model_launch``, ``model_block``, ``model_kernel``,
  ``simulate_block``).
* ``tasks``: the tasks of a whole graph (MPMD) scheduled on the AIV and AIC cores at once.
"""
