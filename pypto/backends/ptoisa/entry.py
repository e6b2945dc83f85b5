"""The host entry of a kernel on pto-isa's CPU simulator, generated as C++ beside the code
``ptoas`` emitted.

``ptoas`` turns each ``func.func`` of the ``.pto`` into ``[__global__] AICORE void name(...)``
with the same parameters in the same order. The entry, ``pypto_run``, calls those functions
once per block with the simulator's execution context set (``get_block_idx()`` is the block,
``get_block_num()`` the grid), the blocks spread over host threads. Each thread is one
simulated core: pto-isa keeps UB, L1 and L0 per thread. A mixed kernel's block runs its cube
function, then its vector function, on one thread (the cube hands its tiles over first, as on
the host engine), unless its parts hand tiles both ways or inside a loop
(``parts_run_together``): then the vector function runs on a second thread beside the cube's,
their flags met through the block's ``Cluster``; a kernel with a SYNCALL runs every block on
its own thread at once.

The arguments arrive as one ``int64`` slot per scalar parameter of the ``.pto`` (tensor
pointers, dynamic dims and strides, scalars, the hidden grid extents), which ``slot_plan``
describes for the Python side, and each tensor argument's byte bounds, which every TLOAD/TSTORE
window must lie in (``prelude.hpp``, ``check_window``); the per-core parameters (the
cross-core FFTS base, the GM workspace of a cube/vector split) are made here, per thread.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ...compiler.pto.spelling import FFTS_PARAM, GRID_PARAMS
from ..ascend.control import EXIT_BIT, EXITING, IN_FLIGHT, INTERRUPTED, SIGINT_BIT, STOP
from ...compiler.pto.program import WORKSPACE

# ptoas 0.27 prints every function ``AICORE void f(...)``; 0.60 prints those carrying
# ``pto.entry`` (PyPTO's, from 0.60 on) ``extern "C" __global__ AICORE void f(...)``.
_PTO_FUNC = re.compile(r"func\.func @(\w+)\((.*?)\) attributes \{([^{}]*)\}")
_KIND = re.compile(r"pto\.kernel_kind = #pto\.kernel_kind<(\w+)>")
_CXX_FUNC = re.compile(r"(?:extern \"C\" )?(?:__global__ )?AICORE void (\w+)\((.*?)\) \{")
_EXTERN_C = re.compile(r'^extern "C" (?=(?:__global__ )?AICORE void )', re.M)


@dataclass(frozen=True)
class Slot:
    """What one ``int64`` argument slot carries: ``kind`` is "ptr", "dim", "stride", "int",
    "float" (an f64's bits) or "grid"; ``name`` the kernel parameter, ``index`` the axis."""
    kind: str
    name: str
    index: int = 0


@dataclass(frozen=True)
class Function:
    name: str
    kind: str             # "vector" or "cube"
    params: list          # (pto name, C++ type)


def functions(pto_text: str, cpp_text: str) -> list[Function]:
    """The kernel's functions, their ``.pto`` parameter names paired with ptoas's C++ types."""
    cxx = {m.group(1): _split(m.group(2)) for m in _CXX_FUNC.finditer(cpp_text)}
    out = []
    for m in _PTO_FUNC.finditer(pto_text):
        kind = _KIND.search(m.group(3))
        if kind is None:
            continue
        name, kind = m.group(1), kind.group(1)
        names = [p.split(":")[0].strip()[1:] for p in _split(m.group(2))]
        types = [re.sub(r"\s*\bv\d+$", "", p) for p in cxx[name]]
        if len(names) != len(types):
            raise ValueError(f"{name}: the .pto has {len(names)} parameters, ptoas's C++ "
                             f"{len(types)}")
        out.append(Function(name, kind, list(zip(names, types))))
    return out


def _split(params: str) -> list[str]:
    return [p.strip() for p in params.split(",") if p.strip()]


def slot_plan(funcs: list[Function], scalars: dict) -> list[Slot]:
    """The slots Python fills, once each, in first-use order over the functions; ``scalars``
    maps each scalar parameter to "int" or "float"."""
    plan, seen = [], set()
    for f in funcs:
        for name, _ in f.params:
            if name in seen or name == FFTS_PARAM or name.startswith(WORKSPACE):
                continue
            seen.add(name)
            plan.append(_slot(name, scalars))
    return plan


def _slot(name: str, scalars: dict) -> Slot:
    if name in GRID_PARAMS:
        return Slot("grid", name, GRID_PARAMS.index(name))
    if name in scalars:
        return Slot(scalars[name], name)
    m = re.fullmatch(r"(\w+)_([ds])(\d+)", name)
    if m and m.group(1) not in scalars:
        return Slot("dim" if m.group(2) == "d" else "stride", m.group(1), int(m.group(3)))
    return Slot("ptr", name)


def parts_run_together(pto_text: str) -> bool:
    """Whether a mixed kernel's vector part signals its cube part, or a hand-off happens
    inside a loop: then running the cube part to its end first would wait forever or
    overwrite a workspace slot not read yet (``compiler/pto/passes/split.py``)."""
    if "kernel_kind<vector>" not in pto_text or "kernel_kind<cube>" not in pto_text:
        return False
    vector = pto_text[pto_text.index("kernel_kind<vector>"):]
    if "kernel_kind<cube>" in vector:
        vector = vector[:vector.index("kernel_kind<cube>")]
    return "pto.sync.set" in vector or re.search(r"^ {6,}pto\.sync\.", pto_text, re.M) is not None


def source(cpp_text: str, funcs: list[Function], plan: list[Slot], workspaces: dict,
           namespace: str = "pypto_kernel", entry: str = "pypto_run",
           together: bool = False) -> str:
    """ptoas's code and its entry ``entry``, inside ``namespace`` so that several kernels can
    share one translation unit. ``workspaces`` maps each workspace parameter to the bytes of
    one block's slot: as on the chip, the launch allocates one workspace for all its blocks
    and passes every block the same pointer (the ``.pto`` indexes it by the block), and each
    block may touch its own slot only. A mixed kernel's vector function runs twice a block,
    as the cluster's two vector cores (sub-blocks 0 and 1, ``compiler/pto/subblocks.py``);
    ``together`` runs the three at once (``parts_run_together``), else one by one."""
    index = {s.name if s.kind in ("ptr", "int", "float", "grid") else
             f"{s.name}_{s.kind[0]}{s.index}": i for i, s in enumerate(plan)}
    names = sorted(workspaces)
    calls = {f.kind: f"{f.name}({', '.join(_argument(n, ty, index, names) for n, ty in f.params)});"
             for f in funcs}
    mixed = len(calls) == 2
    if mixed and together:
        body = ["cluster = Cluster{};", "core.cluster = &cluster;"]
        body += [f"partner[{s}] = std::thread([&, b, owner = &core] {{ run_part(launch, cluster, "
                 f"*owner, uint32_t(b), {s}, error, error_len, failed, [&] {{ "
                 f"{calls['vector']} }}); }});" for s in (0, 1)]
        body += [calls["cube"], "partner[0].join();", "partner[1].join();",
                 "core.cluster = nullptr;"]
    elif mixed:           # the cube hands over first
        body = [calls["cube"]]
        body += [f"pto::cpu_sim::set_execution_context(uint32_t(b), {s}, 2); core.subblock = {s}; "
                 f"{calls['vector']}" for s in (0, 1)]
        body += ["core.subblock = -1;"]
    else:
        body = list(calls.values())
    ws_slots = "".join(f"    const int64_t ws_bytes_{i} = {workspaces[n]};\n"
                       for i, n in enumerate(names))
    ws_alloc = "".join(f"    std::vector<int64_t> ws_{i};\n" for i in range(len(names)))
    ws_sized = "".join(f"        ws_{i}.resize(size_t((blocks * {workspaces[n]} + 7) / 8));\n"
                       for i, n in enumerate(names))
    ws_ranges = "".join(f"        core.add_workspace(ws[{i}] + b * ws_bytes_{i}, "
                        f"size_t(ws_bytes_{i}));\n" for i in range(len(names)))
    kernel = polled(_EXTERN_C.sub("", cpp_text))   # extern "C": each namespace's f one f
    return _TEMPLATE.format(kernel=kernel, slots=ws_slots, alloc=ws_alloc, sized=ws_sized,
                            ranges=ws_ranges, pointers=", ".join(
                                f"reinterpret_cast<char *>(ws_{i}.data())"
                                for i in range(len(names))) or "nullptr",
                            calls="\n".join("        " + c for c in body),
                            parties=2 if mixed else 1, namespace=namespace, entry=entry,
                            interrupted=INTERRUPTED, exiting=EXITING, in_flight=IN_FLIGHT,
                            stop=STOP, exit_bit=EXIT_BIT, sigint_bit=SIGINT_BIT)


_LOOP_HEAD = re.compile(r"^(\s*)(for \(.*\) \{|label\d+:)$", re.M)


def polled(cpp_text: str) -> str:
    """ptoas's C++ with a poll of the stop bits (``pypto_sim::poll``: Ctrl-C, exit) at the
    top of every ``for`` body and at every label (EmitC's while loops jump back to one)."""
    return _LOOP_HEAD.sub(lambda m: f"{m.group(1)}{m.group(2)} pypto_sim::poll();",
                          cpp_text)


def _argument(name: str, cxx_type: str, index: dict, workspaces: list) -> str:
    if name == FFTS_PARAM:
        return f"reinterpret_cast<{cxx_type}>(ffts)"
    if name.startswith(WORKSPACE):        # the launch's one allocation, the same for all
        return f"reinterpret_cast<{cxx_type}>(ws[{workspaces.index(name)}])"
    slot = f"slots[{index[name]}]"
    if cxx_type.endswith("*"):
        return f"reinterpret_cast<{cxx_type}>({slot})"
    if cxx_type in ("float", "double", "half", "bfloat16_t"):
        return f"({cxx_type})pypto_sim::f64({slot})"
    return f"({cxx_type}){slot}"


_TEMPLATE = """#include <thread>
#include <vector>
namespace {namespace} {{
using namespace pypto_sim;
{kernel}

{slots}
// Runs blocks first, first + stride, ... below blocks on this thread; false on an error.
// ws: the launch's GM workspaces (a slot of ws_bytes_<i> per block).
static bool run_blocks(Launch &launch, const int64_t *slots, char *const *ws, int64_t first,
                       int64_t stride, char *error, int error_len, std::atomic<bool> &failed) {{
    (void)ws;
    int64_t ffts[256] = {{}};
    Cluster cluster;                 // a block's parts on three threads (together=True)
    std::thread partner[2];
    sigjmp_buf abort_block;
    core = Core{{}};
    struct Forget {{ ~Forget() {{ core = Core{{}}; }} }} forget;   // no dangling jump target
    core.launch = &launch;
    core.abort_block = &abort_block;
    core.error = error;
    core.error_len = error_len;
    for (int64_t b = first; b < launch.blocks; b += stride) {{
        if (failed.load()) return false;
        pto::cpu_sim::set_execution_context(uint32_t(b), 0, 1);
        core.workspaces = 0;         // this block's slots only
{ranges}
        if (sigsetjmp(abort_block, 1) != 0) {{
            failed.store(true);
            {{
                std::lock_guard<std::mutex> lock(launch.mutex);
                launch.dead = true;
                launch.changed.notify_all();
            }}
            for (std::thread &p : partner)              // their waits end: the launch is dead
                if (p.joinable()) p.join();
            return false;
        }}
        pypto_sim::poll();                          // a block of a huge grid stops here
        char what[512] = "";
        try {{
{calls}
        }} catch (const std::exception &e) {{
            std::snprintf(what, sizeof what, "pto-isa CPU simulator: %s", e.what());
        }} catch (...) {{
            std::snprintf(what, sizeof what, "pto-isa CPU simulator: an unknown C++ exception");
        }}
        if (what[0] != '\\0') fail(what);     // outside the handler: longjmp skips no catch
        core.local_flags = Flags{{}};
    }}
    pto::cpu_sim::reset_execution_context();
    return true;
}}
}}  // namespace {namespace}

// 0: done; 4: a block failed (the reason in error); {interrupted} / {exiting}: stopped by
// Ctrl-C / the interpreter's exit. tensors: [first byte, end) of each tensor argument, which
// TLOAD/TSTORE may touch (prelude.hpp, check_window). control: pypto's control block (or
// null), whose stop bits in stop_mask the launch obeys (backends/ascend/control.py).
extern "C" __attribute__((visibility("default")))
int {entry}(const int64_t *slots, const int64_t *tensors, int64_t n_tensors, int64_t blocks,
              int64_t threads, double timeout_seconds, char *error, int64_t error_len,
              int64_t *control, int64_t stop_mask) {{
    using namespace pypto_sim;
    using {namespace}::run_blocks;
    struct InFlight {{                          // counted while it runs, as native launches
        int64_t *control;
        explicit InFlight(int64_t *c) : control(c) {{
            if (control) __atomic_add_fetch(&control[{in_flight}], 1, __ATOMIC_SEQ_CST);
        }}
        ~InFlight() {{ if (control) __atomic_sub_fetch(&control[{in_flight}], 1, __ATOMIC_RELEASE); }}
    }} in_flight(control);
    if (control && (__atomic_load_n(&control[{stop}], __ATOMIC_SEQ_CST) & {exit_bit})) return {exiting};
    if (control && (stop_mask & {sigint_bit}))  // an earlier Ctrl-C stopped an earlier launch
        __atomic_and_fetch(&control[{stop}], ~int64_t({sigint_bit}), __ATOMIC_SEQ_CST);
    static std::mutex one_launch_at_a_time;     // get_block_num() is this library's global
    std::lock_guard<std::mutex> serial(one_launch_at_a_time);
    error[0] = '\\0';
    if (blocks <= 0) return 0;
    pto::cpu_sim::EnsureRuntimeInitialized();
    pto::cpu_sim::runtime_config().num_cores = uint32_t(blocks);
    FaultHandlers handlers;                     // a faulting block ends, not the process
    Launch launch;
    launch.blocks = uint32_t(blocks);
    launch.timeout_seconds = timeout_seconds;
    launch.tensors = tensors;
    launch.n_tensors = n_tensors;
    launch.stop_word = control ? control + {stop} : nullptr;
    launch.stop_mask = stop_mask;
    launch.parties = {parties};
{alloc}    try {{                                       // one GM workspace for the launch
{sized}    }} catch (const std::bad_alloc &) {{
        std::snprintf(error, size_t(error_len), "pto-isa CPU simulator: the GM workspace of "
                      "%lld blocks does not fit in this host's memory", (long long)blocks);
        return 4;
    }}
    char *const ws[] = {{{pointers}}};
    std::atomic<bool> failed{{false}};
    const int len = int(error_len);
    if (threads <= 1) {{
        run_blocks(launch, slots, ws, 0, 1, error, len, failed);
    }} else {{
        std::vector<std::thread> workers;
        for (int64_t t = 0; t < threads; ++t)
            workers.emplace_back([&, t] {{ run_blocks(launch, slots, ws, t, threads, error, len, failed); }});
        for (auto &w : workers) w.join();
    }}
    if (const int64_t bits = launch.stopped.load())
        return (bits & {exit_bit}) ? {exiting} : {interrupted};
    return failed.load() ? 4 : 0;
}}
"""
