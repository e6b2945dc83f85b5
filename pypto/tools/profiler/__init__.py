"""The profiler (public as ``pypto.profile``): every kernel launch while it is active, with
two clocks kept apart, measured host time and modelled NPU time (``report.py``).

::

    with pypto.Profiler() as prof:
        kernel[grid](x, y, out, n)
    print(prof.summary())
    prof.core_utilization, prof.kernels, prof.tiles
    prof.export_chrome_trace("trace.json")      # Perfetto / chrome://tracing
    prof.export_html("profile.html")            # one self-contained page (html.py)

    p = pypto.profile.Profiler(); p.start(); ...; p.stop(); report = p.report()

    pypto.enable_profiling(); ...; report = pypto.get_profiling_report()
    for op in report.operations: op.name, op.compute_time, op.memory_time

A running profiler is an entry of ``runtime.hooks.ACTIVE``, the list the launch paths test;
they record into it, and the cycle model runs when the profile is first read.
"""
from __future__ import annotations

# CUBE_PID_BASE and pto_program stay pypto.profile's (public) names, as before they moved out
from ...backends.ascend.chrome_trace import CUBE_PID_BASE  # noqa: F401
from ...runtime.hooks import ACTIVE, LOCK, pto_program  # noqa: F401
from .report import KernelProfile, OperationProfile, ProfileReport, TileProfile

__all__ = ["Profiler", "ProfileReport", "KernelProfile", "TileProfile", "OperationProfile",
           "enable_profiling", "disable_profiling", "get_profiling_report"]


class Profiler:
    """Records every kernel launch between ``start()`` and ``stop()`` (or inside ``with``).
    Its attributes read the current report: ``kernels``, ``tiles``, ``operations``,
    ``core_utilization``, ``summary()``, ``export_chrome_trace(path)``, ``export_html(path)``;
    ``graphs``: the graph modules run while it was active."""

    def __init__(self):
        self._records: list = []
        self._graphs: list = []
        self._report = None

    # -- lifetime --
    def start(self) -> "Profiler":
        with LOCK:
            if not any(p is self for p in ACTIVE):
                ACTIVE.append(self)
        return self

    def stop(self) -> "Profiler":
        with LOCK:
            for i, p in enumerate(ACTIVE):
                if p is self:
                    del ACTIVE[i]
                    break
        return self

    @property
    def active(self) -> bool:
        return any(p is self for p in ACTIVE)

    def __enter__(self) -> "Profiler":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def clear(self) -> None:
        self._records.clear()
        self._graphs.clear()
        self._report = None

    # -- reading --
    def report(self) -> ProfileReport:
        """The recorded launches so far, modelled (kept until a new launch is recorded)."""
        if self._report is None or len(self._report.launches) != len(self._records):
            self._report = ProfileReport(self._records)
        return self._report

    @property
    def kernels(self) -> list[KernelProfile]:
        return self.report().kernels

    @property
    def tiles(self) -> list[TileProfile]:
        return self.report().tiles

    @property
    def operations(self) -> list[OperationProfile]:
        return self.report().operations

    @property
    def core_utilization(self) -> float:
        return self.report().core_utilization

    def summary(self) -> str:
        return self.report().summary()

    def export_chrome_trace(self, path) -> str:
        return self.report().export_chrome_trace(path)

    @property
    def graphs(self) -> list:
        return list(self._graphs)

    def export_html(self, path, graphs=None, title: str = "PyPTO profile") -> str:
        """Write the profile as one self-contained HTML page (no network needed to open it):
        per-kernel summary, swim lanes per core and pipe, roofline, on-chip memory, and the
        modelled schedule of ``graphs`` (default: the graph modules run while recording);
        returns the path."""
        graphs = self._graphs if graphs is None else list(graphs)
        return self.report().export_html(path, graphs, title)

    def __repr__(self) -> str:
        state = "active" if self.active else "stopped"
        return f"<pypto.Profiler {state}, {len(self._records)} launch(es)>"


# -- the seed's module-level API --------------------------------------------------------------

_global: Profiler | None = None


def enable_profiling() -> Profiler:
    """Start recording every launch into the module-level profiler (a fresh one unless it is
    already enabled); read it with ``get_profiling_report()``."""
    global _global
    if _global is None or not _global.active:
        _global = Profiler()
    return _global.start()


def disable_profiling() -> None:
    """Stop recording; ``get_profiling_report()`` still returns what was recorded."""
    if _global is not None:
        _global.stop()


def get_profiling_report() -> ProfileReport:
    """The report of the launches since ``enable_profiling()`` (empty if it was never
    called): ``summary()``, ``operations`` (``name``, ``compute_time``, ``memory_time`` in ms
    of modelled NPU time), ``kernels``, ``tiles``, ``core_utilization``."""
    return _global.report() if _global is not None else ProfileReport([])
