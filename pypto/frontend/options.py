"""CANN's option groups (``runtime_options``, ``host_options``, ...), ``RunMode`` and
``pypto.options`` scopes.

Options are data: each group lists the keys CANN 0.2.0 documents (docs/api/config) or
configures (``framework/src/interface/configs/tile_fwk_config.json`` at r0.2.0). A known
key is accepted and, unless PyPTO acts on it (``run_mode``), has no effect here, which the
docs page says; an unknown key is warned about by name, never silently dropped.
"""
from __future__ import annotations

import contextlib
import enum
import warnings


class RunMode(enum.IntEnum):
    """``pypto.RunMode``: where CANN runs a kernel. Here both run on the host (NPU: once said)."""
    NPU = 0
    SIM = 1


# group -> the keys CANN 0.2.0 documents for it
KNOWN = {
    "runtime_options": {"run_mode", "device_sched_mode", "stitch_function_max_num",
                        "valid_shape_optimize", "ready_on_host_tensors",
                        "stitch_function_inner_memory", "stitch_function_outcast_memory",
                        "stitch_function_num_initial", "stitch_cfgcache_size",
                        "stitch_function_num_step", "stitch_function_size",
                        "triple_stream_sched"},
    "host_options": {"compile_stage", "compile_monitor_enable", "compile_timeout",
                     "compile_timeout_stage", "compile_monitor_print_interval"},
    "codegen_options": {"support_dynamic_aligned"},
    "pass_options": {"pg_skip_partition", "pg_upper_bound", "vec_nbuffer_setting",
                     "cube_l1_reuse_setting", "cube_nbuffer_setting", "sg_set_scope",
                     "copyout_resolve_coalescing", "mg_copyin_upper_bound",
                     "mg_vec_parallel_lb", "pg_lower_bound", "pg_parallel_lower_bound"},
    "verify_options": {"enable_pass_verify", "pass_verify_save_tensor",
                       "pass_verify_save_tensor_dir", "pass_verify_pass_filter",
                       "pass_verify_error_tol"},
    "debug_options": {"compile_debug_mode", "runtime_debug_mode"},
    "operation_options": set(),
}


class UnknownOptionWarning(UserWarning):
    """An option key CANN 0.2.0 does not have: accepted, but it does nothing."""


def check_group(group: str, value, where: str) -> dict:
    """``value`` as a dict of options of ``group``; unknown keys warned about by name."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError(f"{where}: {group} must be a dict of options, got {value!r}")
    for key in value:
        if key not in KNOWN[group]:
            warnings.warn(f"{where}: {group}[{key!r}] is not an option CANN PyPTO 0.2.0 "
                          f"has; it has no effect (known: {', '.join(sorted(KNOWN[group]))})",
                          UnknownOptionWarning, stacklevel=4)
    return dict(value)


def run_mode_of(runtime_options: dict) -> RunMode:
    """The ``run_mode`` of a ``runtime_options`` dict (default SIM: there is no NPU here)."""
    mode = runtime_options.get("run_mode", RunMode.SIM)
    try:
        return RunMode(int(mode))
    except (TypeError, ValueError):
        raise ValueError(f"runtime_options['run_mode'] = {mode!r}: use pypto.RunMode.NPU or "
                         "pypto.RunMode.SIM (or 0 / 1)") from None


class Scope:
    """The tile shapes and options in force: the kernel's own, inside ``pypto.options``."""

    def __init__(self):
        self.stack = [{}]

    def get(self, key, default=None):
        for frame in reversed(self.stack):
            if key in frame:
                return frame[key]
        return default


SCOPE = Scope()
_FIELDS = ("name", "vec_tile_shapes", "cube_tile_shapes", "conv_tile_shapes", "matrix_size")


@contextlib.contextmanager
def _scoped(settings):
    SCOPE.stack.append(settings)
    try:
        yield
    finally:
        SCOPE.stack.pop()


class options(contextlib.ContextDecorator):  # noqa: N801 - CANN's spelling
    """``pypto.options(...)``: option groups and tile shapes for a ``with`` block or a function."""

    def __init__(self, name=None, **groups):
        settings = {"name": name}
        for key, value in groups.items():
            if key in KNOWN:
                settings.update(check_group(key, value, "pypto.options"))
            elif key in _FIELDS:
                settings[key] = value
            else:
                raise TypeError(f"pypto.options({key}=...): not one of CANN's option groups "
                                f"({', '.join(sorted(KNOWN) + list(_FIELDS[1:]))})")
        if settings.get("vec_tile_shapes") is not None:
            settings["vec_tile_shapes"] = tuple(settings["vec_tile_shapes"])
        self.settings = {k: v for k, v in settings.items() if v is not None}
        self._cm = None

    def __enter__(self):
        self._cm = _scoped(self.settings)
        return self._cm.__enter__()

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)


def set_options(**groups) -> None:
    """``pypto.set_options(runtime_options=..., ...)``: checked like jit's, kept globally."""
    for key, value in groups.items():
        if key not in KNOWN:
            raise TypeError(f"pypto.set_options({key}=...): not one of CANN's option groups "
                            f"({', '.join(sorted(KNOWN))})")
        SCOPE.stack[0].update(check_group(key, value, "pypto.set_options"))
