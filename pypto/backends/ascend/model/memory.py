"""Global memory as the cores see it: the chip's L2 in front of the HBM, both shared by the
active cores.

The 910B's L2 (``Target.l2_mib``: 192 MiB on b1-b3, 96 on b4) holds what any core read or
wrote recently; a read it holds is served at the L2's bandwidth (``Target.l2_gbps``), a miss
at the HBM's (``Target.hbm_gbps``), each shared by the cores active at the time. Without it a
GEMM whose 24 cores re-read the same operand panels (pto-isa's, 3.4 TB/s into the cores at
6144^3, twice the HBM) cannot be modelled.

The rule (a reuse-distance estimate, LRU by bytes):

* The unit is a **window**: one transfer's (tensor, offsets, valid shape). A later transfer of
  the same window of the same tensor (another block's, or the same block's on a later pass)
  hits if fewer than ``l2`` bytes of other windows were touched since (LRU by bytes); windows
  that only overlap count as different (a miss: the estimate errs slow). A mixed kernel's GM
  workspace is one window per cluster: the cube writes 128-row tiles that each AIV reads
  back in slices of its own rows.
* Loads and stores both touch: a store allocates its window (the L2 is write-back), so what a
  block writes and another reads back (a cube -> vector hand-off through a GM workspace, a
  producer -> consumer task) is a hit. A store goes at the L2's rate; the dirty bytes it or a
  load later pushes out of the L2 are written back to the HBM, charged to the transfer that
  evicts them (so a kernel streaming more than the L2 pays the HBM for its writes too).
  Blocks are simulated one after another, so the evictions would all fall on the blocks
  simulated last (row softmax 8192 x 4096: its last cores twice as long as its first),
  which on the chip share them with every core running then: a launch that evicts dirty
  bytes is modelled a second time with them spread evenly over every byte moved
  (``writeback``: dirty bytes evicted per byte transferred, from the first run). What is
  still dirty at the launch's end is written back during the next launch; a launch repeated
  (as a benchmark or a model's layer runs it) pays for its own, so the floor below counts it.
* Accesses are seen in the order the model simulates them: block after block in launch order,
  each block's in program order (blocks that signal each other interleave by time). Blocks of
  one wave that read the same window all but the first find it in the L2, as the chip's
  merged misses do.

* A miss waits for the HBM, whose bandwidth goes to the cores missing at that moment, not to
  every active core: ``miss_share`` (the fraction of the active cores missing at once) is the
  launch's miss rate in bytes. The model simulates block after block, so the first blocks
  would find every window missing and pay the HBM at 1/active speed for what, on the chip,
  all the blocks of a wave fetch once together; ``launch.model_launch`` therefore models a
  launch that mostly hits (hit rate above ``REPLAY_HIT_RATE``) a second time with the first
  run's miss rate as ``miss_share`` (a streaming launch, whose every core misses, runs once).
* Bandwidth goes to the transfers in flight, each GM pipe of a core (MTE2, MTE3, FIX) a
  requester. In the first run a transfer takes as many cycles longer as the core's other GM
  transfers run beside it (``block.PartTimeline._shared_with``); the second uses the first
  run's average, ``streams``: the GM pipes' busy cycles over the cores'
  time (a flash-attention cluster's cube streams K, V and P in while FIX streams S and PV
  out, nearly two requesters, while its AIVs move data a third of their time).

* **Conservation**: however the cores' shares were estimated, no launch moves more bytes than
  the HBM and the L2 carry in its time. ``floor_cycles`` is that bound (the HBM's bytes: the
  misses and every dirty byte, evicted or left; the L2's: every byte moved) and
  ``launch.model_launch`` stretches a launch to it: the per-core shares above are estimates
  made block by block (a core's load and store can each be granted a full share), and a
  streaming kernel's figure must never beat its bytes over the HBM's bandwidth.

One ``GlobalMemory`` lives for one launch (``launch.model_launch``) or one task of a graph run
(``launch.model_block``; each task starts with a cold L2, and ``tasks.schedule`` holds the run
to the sum of its tasks' traffic, ``traffic_floor``); it starts empty (cold): a kernel's
inputs come from the HBM once.
"""
from __future__ import annotations

from collections import OrderedDict

from ....target import Target

MIB = 1024 ** 2
REPLAY_HIT_RATE = 0.5       # a launch hitting more than this is modelled again (above)


class GlobalMemory:
    """The L2's contents (window -> [bytes, dirty]) in LRU order, and the bytes read from it
    and from the HBM so far; ``miss_share``: the fraction of the active cores that share the
    HBM's bandwidth; ``streams``: the GM transfers a core has in flight on average (None: a
    transfer shares the core's bandwidth with the others only while they overlap)."""

    def __init__(self, target: Target, miss_share: float = 1.0, streams: float | None = None,
                 writeback: float | None = None):
        self.target = target
        self.miss_share = miss_share
        self.streams = streams
        self.writeback = writeback
        self.moved = self.written_back = 0     # bytes transferred / dirty bytes evicted
        self.capacity = target.l2_mib * MIB
        self.lines: OrderedDict = OrderedDict()
        self.held = 0
        self.hits = self.misses = 0            # bytes read from the L2 / from the HBM

    def _touch(self, key, nbytes: int, dirty: bool) -> tuple[bool, int]:
        """(hit, dirty bytes evicted to make room)."""
        line = self.lines.get(key)
        if line is not None:
            self.lines.move_to_end(key)
            line[1] = line[1] or dirty
            return True, 0
        self.lines[key] = [nbytes, dirty]
        self.held += nbytes
        evicted = 0
        while self.held > self.capacity and len(self.lines) > 1:
            _, (size, was_dirty) = self.lines.popitem(last=False)
            self.held -= size
            evicted += size if was_dirty else 0
        return False, evicted

    def access(self, key, nbytes: int, store: bool) -> tuple[int, int]:
        """One transfer of ``nbytes`` on window ``key``: (bytes at the L2's rate, bytes at the
        HBM's rate), written-back evictions included."""
        if not nbytes:
            return 0, 0
        hit, evicted = self._touch(key, nbytes, store)
        self.moved += nbytes
        self.written_back += evicted
        if self.writeback is not None:
            evicted = round(nbytes * self.writeback)
        if store:
            return nbytes, evicted
        if hit:
            self.hits += nbytes
            return nbytes, evicted
        self.misses += nbytes
        return 0, nbytes + evicted

    def cycles(self, l2_bytes: int, hbm_bytes: int, active_cores: int) -> float:
        """The least time, in cycles, these bytes take at this core's shares of the L2's
        bandwidth (shared by ``active_cores``) and the HBM's (shared by the missing ones)."""
        t = self.target
        cycle = t.clock_ghz * 1e9
        l2 = t.l2_gbps * 1e9 / max(1, active_cores) / cycle
        hbm = t.hbm_gbps * 1e9 / max(1.0, active_cores * self.miss_share) / cycle
        return l2_bytes / l2 + hbm_bytes / hbm

    def dirty(self) -> int:
        """Bytes still dirty in the L2 (written back by whatever runs next)."""
        return sum(size for size, was_dirty in self.lines.values() if was_dirty)

    def traffic(self) -> tuple:
        """(HBM bytes: misses, write-backs and what is left dirty; every byte moved)."""
        return self.misses + self.written_back + self.dirty(), self.moved

    def floor_cycles(self) -> float:
        """The least time, in cycles, the launch's traffic takes on the whole chip: its HBM
        bytes at the HBM's bandwidth, or every byte moved at the L2's, whichever is longer."""
        return traffic_floor(self.target, *self.traffic())

    def hit_rate(self) -> float:
        read = self.hits + self.misses
        return self.hits / read if read else 0.0


def traffic_floor(target, hbm_bytes: float, moved_bytes: float) -> float:
    """The least cycles ``hbm_bytes`` take at the HBM's bandwidth and ``moved_bytes`` at the
    L2's, whichever is longer."""
    cycle = target.clock_ghz * 1e9
    return max(hbm_bytes / (target.hbm_gbps * 1e9 / cycle),
               moved_bytes / (target.l2_gbps * 1e9 / cycle))
