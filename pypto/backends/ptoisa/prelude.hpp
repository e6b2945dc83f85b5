// PyPTO's host prelude for pto-isa's CPU simulator (compiled into the precompiled header).
//
// It adds only what the simulator lacks for the kernels PyPTO prints, each an A2/A3 intrinsic
// that ptoas emits and pto-isa's CPU backend (include/pto/common/cpu_stub.hpp) does not
// declare: the FFTS cross-core flags (set_ffts_base_addr, getFFTSMsg, ffts_cross_core_sync,
// wait_flag_dev; ptoas 0.60 calls the last two by their builtins' names, __builtin_cce_*) and
// ptoas 0.60's TCI and TCVT with a tmp tile. Their meaning follows pto-isa's NPU code
// (npu/a2a3/TSync.hpp, SyncAll.hpp, TCI.hpp): a message carries a mode (bits 4-5) and a flag id
// (bits 8-11); mode 0 synchronises every core of the launch (SYNCALL), mode 2 a cluster's
// cube core and its two vector cores (sub-blocks 0 and 1): a flag the cube sets reaches both,
// and the cube's wait ends when both have set theirs (npu/a2a3/TPush.hpp). Nothing in pto-isa
// is changed.
//
// A failed assert in the simulator (``-D__assert_fail=pypto_assert_fail``), a wait that can
// never be met and a TLOAD/TSTORE outside the launch's tensors end the block with an error
// the launch returns to Python, never abort() or a corrupted heap.
#pragma once
#include <atomic>
#include <chrono>
#include <csetjmp>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <condition_variable>
#include <atomic>
#include <chrono>
#include "pto/pto-inst.hpp"

namespace pypto_sim {
inline double f64(int64_t bits) { double d; std::memcpy(&d, &bits, 8); return d; }


struct Launch {                       // one launch's shared state
    uint32_t blocks = 1;
    double timeout_seconds = 10.0;
    std::mutex mutex;
    std::condition_variable changed;
    uint64_t arrived[16] = {};        // SYNCALL arrivals per flag id, over all launches' rounds
    uint32_t parties = 1;             // cores of a block that join a SYNCALL (a mixed kernel's
                                      // two vector cores)
    bool dead = false;
    const int64_t *tensors = nullptr; // [first byte, end) of each tensor argument; null: unchecked
    int64_t n_tensors = 0;
    const int64_t *stop_word = nullptr; // pypto's stop bits (backends/ascend/control.py)
    int64_t stop_mask = 0;            // the stop bits this launch obeys
    std::atomic<int64_t> stopped{0};  // the bits that stopped it
};

// Mode-2 flags in flight: to each vector core (sub-block), and from each to the cube.
struct Flags {
    uint32_t to_vector[2][16] = {};
    uint32_t to_cube[2][16] = {};

    // A set by core ``subblock`` (-1: the cube) of flag ``id``.
    void set(int subblock, unsigned id) {
        if (subblock < 0) { to_vector[0][id] += 1; to_vector[1][id] += 1; }
        else to_cube[subblock][id] += 1;
    }
    bool ready(int subblock, unsigned id) const {
        return subblock < 0 ? to_cube[0][id] > 0 && to_cube[1][id] > 0
                            : to_vector[subblock][id] > 0;
    }
    void take(int subblock, unsigned id) {
        if (subblock < 0) { to_cube[0][id] -= 1; to_cube[1][id] -= 1; }
        else to_vector[subblock][id] -= 1;
    }
};

struct Cluster {                      // a block whose cube and vector parts run at once
    Flags flags;                      // between its three threads
};

struct Core {                         // one host thread's view: the block it is running
    Launch *launch = nullptr;
    Cluster *cluster = nullptr;       // set when the block's other part runs on another thread
    int subblock = -1;                // the vector core (sub-block) running; -1: the cube
    Flags local_flags;                // mode-2 flags of a block whose parts run one by one
    uint64_t syncall_round[16] = {};  // how many SYNCALLs on each id this core has joined
    bool pending[16] = {};
    sigjmp_buf *abort_block = nullptr;
    char *error = nullptr;
    int error_len = 0;
    uintptr_t workspace[8][2] = {};   // this block's GM workspaces, [first byte, end)
    int workspaces = 0;

    void add_workspace(const void *data, size_t bytes) {   // (entry.py resets the count)
        if (workspaces == 8) return;  // (PyPTO prints at most a few)
        workspace[workspaces][0] = reinterpret_cast<uintptr_t>(data);
        workspace[workspaces++][1] = reinterpret_cast<uintptr_t>(data) + bytes;
    }
};

inline thread_local Core core;

// Ends the block: the first error of the launch is kept for Python.
[[noreturn]] inline void fail(const char *text) {
    {   // the lock is released before longjmp, which runs no destructors
        static std::mutex first_error;
        std::lock_guard<std::mutex> lock(first_error);
        if (core.error != nullptr && core.error[0] == '\0')
            std::snprintf(core.error, core.error_len, "%s", text);
    }
    siglongjmp(*core.abort_block, 1);
}

// Ctrl-C and interpreter exit: the control block's stop bits that the launch obeys,
// polled at every loop's back edge of the kernel (entry.py puts the calls there) and while a
// block waits for another; a stopped block ends like a failed one.
inline int64_t stop_bits() {
    const Launch *l = core.launch;
    if (l == nullptr || l->stop_word == nullptr) return 0;
    return __atomic_load_n(l->stop_word, __ATOMIC_RELAXED) & l->stop_mask;
}

inline void poll() {
    if (const int64_t bits = stop_bits()) {
        core.launch->stopped.fetch_or(bits);
        fail("stopped");
    }
}

// Waits wake this often to poll, and give up after the launch's timeout without progress.
constexpr auto WAIT_SLICE = std::chrono::milliseconds(20);

inline bool quiet_for(const Launch &l, std::chrono::steady_clock::time_point since) {
    return std::chrono::steady_clock::now() - since >
           std::chrono::duration<double>(l.timeout_seconds);
}

// A fault in a block (an access outside a tensor, an integer trap) ends that block with an
// error instead of the process: handlers installed for the duration of a launch. A fault in
// a thread that runs no block goes to the handler that was there before.
struct FaultHandlers {
    static constexpr int signals[3] = {SIGSEGV, SIGBUS, SIGFPE};
    struct sigaction saved[3];

    static void on_fault(int sig, siginfo_t *, void *) {
        if (core.abort_block == nullptr) {          // not a simulated core: as before
            std::signal(sig, SIG_DFL);
            std::raise(sig);
            return;
        }
        const char *what = sig == SIGFPE ? "an arithmetic trap (SIGFPE)" : sig == SIGBUS
            ? "a bus error (SIGBUS)" : "an access outside the tensors and buffers (SIGSEGV)";
        if (core.error != nullptr && core.error[0] == '\0')
            std::snprintf(core.error, core.error_len, "pto-isa CPU simulator: %s", what);
        siglongjmp(*core.abort_block, 2);
    }

    FaultHandlers() {
        struct sigaction act {};
        act.sa_sigaction = on_fault;
        act.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&act.sa_mask);
        for (int i = 0; i < 3; ++i) sigaction(signals[i], &act, &saved[i]);
    }
    ~FaultHandlers() {
        for (int i = 0; i < 3; ++i) sigaction(signals[i], &saved[i], nullptr);
    }
};


// A TLOAD/TSTORE whose window is not inside one of the launch's tensors (or the block's
// workspace) ends the block. The CPU simulator accesses host memory directly, so such a window
// (a .pto bug: on the chip it reads or writes outside the tensor too) faulted only when it was
// far off; one just before or after a tensor read or wrote the neighbouring heap, and the
// process aborted later in free(). "tensor #k" is named by Python (engine.py).
template <class Global>
inline void check_window(Global &g, const char *op) {
    if (core.launch == nullptr || core.launch->tensors == nullptr) return;
    int64_t low = 0, high = 0;                      // element offsets from data()
    for (int d = 0; d < 5; ++d) {
        const int64_t n = g.GetShape(d), s = g.GetStride(d);
        if (n <= 0) return;                         // an empty window touches nothing
        (s < 0 ? low : high) += (n - 1) * s;
    }
    const int64_t size = int64_t(sizeof(typename Global::RawDType));
    const int64_t base = int64_t(reinterpret_cast<intptr_t>(g.data()));
    const int64_t first = base + low * size, end = base + (high + 1) * size;
    const Launch &l = *core.launch;
    for (int64_t k = 0; k < l.n_tensors; ++k)
        if (first >= l.tensors[2 * k] && end <= l.tensors[2 * k + 1]) return;
    for (int w = 0; w < core.workspaces; ++w)
        if (uint64_t(first) >= core.workspace[w][0] && uint64_t(end) <= core.workspace[w][1])
            return;
    int64_t nearest = -1, distance = INT64_MAX;
    for (int64_t k = 0; k < l.n_tensors; ++k) {
        const int64_t d = first < l.tensors[2 * k] ? l.tensors[2 * k] - first
                        : first >= l.tensors[2 * k + 1] ? first - l.tensors[2 * k + 1] + 1 : 0;
        if (d < distance) { distance = d; nearest = k; }
    }
    char text[512];
    if (nearest < 0)
        std::snprintf(text, sizeof text, "pto-isa CPU simulator: %s of %lld bytes outside the "
                      "tensors and buffers of the launch", op, (long long)(end - first));
    else
        std::snprintf(text, sizeof text, "pto-isa CPU simulator: %s of bytes %lld..%lld of "
                      "tensor #%lld (which has %lld), outside the tensors and buffers of the "
                      "launch: a window the .pto places outside its tensor", op,
                      (long long)(first - l.tensors[2 * nearest]),
                      (long long)(end - 1 - l.tensors[2 * nearest]), (long long)nearest,
                      (long long)(l.tensors[2 * nearest + 1] - l.tensors[2 * nearest]));
    fail(text);
}

}  // namespace pypto_sim

extern "C" inline void pypto_assert_fail(const char *expr, const char *file, unsigned line,
                                         const char *) noexcept {
    char text[512];
    std::snprintf(text, sizeof text, "pto-isa CPU simulator assertion failed: %s (%s:%u)", expr,
                  file, line);
    pypto_sim::fail(text);
}

// Float division by zero. pto-isa's CPU simulator asserts that a divisor is not zero
// (include/pto/cpu/ElementOp.h: OP_DIV, OP_REM, OP_FMOD, OP_RECIP, OP_RSQRT, OP_RDIVS), for
// floats too; the chip's vector unit divides as IEEE 754 does (x / 0 = ±inf, 0 / 0 = NaN), and
// PyPTO's programs rely on it (a floor division tests the sign of 1 / remainder). These
// specialisations are the simulator's own code without the assertion, for the float types.
namespace pto {
#define PYPTO_IEEE_DIVISION(T)                                                                  \
    template <> struct ElementOpCal<T, ElementOp::OP_DIV> {                                     \
        static void apply(T &d, T &a, T &b, size_t) { d = a / b; }                              \
        static void apply(T &d, const T &a, const T &b) { d = a / b; }                          \
    };                                                                                          \
    template <> struct ElementOpCal<T, ElementOp::OP_REM> {                                     \
        static void apply(T &d, T &a, T &b, size_t) {                                           \
            d = static_cast<T>(std::fmod(static_cast<double>(a), static_cast<double>(b)));      \
        }                                                                                       \
    };                                                                                          \
    template <> struct ElementOpCal<T, ElementOp::OP_FMOD> {                                    \
        static void apply(T &d, T &a, T &b, size_t) {                                           \
            d = static_cast<T>(std::fmod(static_cast<double>(a), static_cast<double>(b)));      \
        }                                                                                       \
    };                                                                                          \
    template <> struct ElementOpCal<T, ElementOp::OP_RECIP> {                                   \
        static void apply(T &d, T &s) { d = 1 / s; }                                            \
    };                                                                                          \
    template <> struct ElementOpCal<T, ElementOp::OP_RSQRT> {                                   \
        static void apply(T &d, T &s) { d = static_cast<T>(1.0 / std::sqrt(static_cast<double>(s))); } \
    };                                                                                          \
    template <> struct ElementOpCal<T, ElementOp::OP_RDIVS> {                                   \
        static void apply(T &d, T &s, T &scalar, size_t) { d = scalar / s; }                    \
    };
PYPTO_IEEE_DIVISION(float)
PYPTO_IEEE_DIVISION(half)        // (bfloat16_t is half here: engine.py refuses bf16 kernels)
#undef PYPTO_IEEE_DIVISION

// Rounding a float to an integral value of the same type. The chip's TCVT f32 -> f32 with a
// round mode is vconv_f322f32{r,a,f,c,z} (npu/a2a3/TCvt.hpp): floor, ceil, ... in place. The
// simulator's float -> float conversion (cpu/TCvt.hpp, convert_value) ignores the mode and
// copies, so pl.floor, pl.ceil, pl.round and everything built on them (sin, cos: their
// argument reduction) came out wrong. These apply the mode, as its float -> int path does.
template <> inline float convert_value<float, float>(float v, RoundMode mode) {
    return static_cast<float>(applyRoundingToIntegral(static_cast<double>(v), mode));
}
template <> inline half convert_value<half, half>(half v, RoundMode mode) {
    return static_cast<half>(applyRoundingToIntegral(static_cast<double>(v), mode));
}

// A load into part of a tile. The chip's DMA writes only the window (npu/a2a3/TLoad.hpp and
// common/arch/memory/tload_common.hpp: with PadValue::Null, ubPad = 0, no fill), so what a
// kernel put in the rest of the tile before the load (PyPTO's texpands of a pad value) stays.
// The simulator's TLOAD (cpu/TLoad.hpp, TLOAD_TILE_IMPL) first fills the whole tile with the
// pad value, 0 for Null, and loses it. This overload (more specialised than pto_instr.hpp's
// TLOAD, which takes wait events too) keeps every element outside the window, as the chip does.
template <typename TileData, typename GlobalData>
    requires(!is_conv_tile_v<TileData> && TileData::PadVal == PadValue::Null &&
             !IsTwinType<typename TileData::DType>())
PTO_INST RecordEvent TLOAD(TileData &dst, GlobalData &src) {
    pypto_sim::check_window(src, "TLOAD");
    using T = typename TileData::DType;
    const size_t rows = dst.GetValidRow(), cols = dst.GetValidCol();
    std::vector<std::pair<size_t, T>> outside;
    for (size_t r = 0; r < size_t(TileData::Rows); ++r)
        for (size_t c = 0; c < size_t(TileData::Cols); ++c)
            if (r >= rows || c >= cols) {
                const size_t at = GetTileElementOffset<TileData>(r, c);
                outside.emplace_back(at, dst.data()[at]);
            }
    TLOAD_IMPL(dst, src);
    for (const auto &[at, value] : outside) dst.data()[at] = value;
    return {};
}

// Every other TLOAD, and the TSTOREs ptoas emits (plain, and with an atomic mode), with their
// window checked (pypto_sim::check_window); more specialised than pto_instr.hpp's, which take
// wait events too, and otherwise the same.
template <typename TileData, typename GlobalData>
    requires(!(!is_conv_tile_v<TileData> && TileData::PadVal == PadValue::Null &&
               !IsTwinType<typename TileData::DType>()))
PTO_INST RecordEvent TLOAD(TileData &dst, GlobalData &src) {
    pypto_sim::check_window(src, "TLOAD");
    TLOAD_IMPL(dst, src);
    return {};
}

template <typename TileData, typename GlobalData>
PTO_INST RecordEvent TSTORE(GlobalData &dst, TileData &src) {
    pypto_sim::check_window(dst, "TSTORE");
    TSTORE_IMPL<TileData, GlobalData, AtomicType::AtomicNone>(dst, src);
    return {};
}

template <typename TileData, typename GlobalData, AtomicType atomicType>
PTO_INST RecordEvent TSTORE(GlobalData &dst, TileData &src) {
    pypto_sim::check_window(dst, "TSTORE");
    TSTORE_IMPL<TileData, GlobalData, atomicType>(dst, src);
    return {};
}

// ptoas 0.60's TCI(dst, start, tmp): the NPU's vector implementation (npu/a2a3/TCI.hpp) needs
// scratch; the simulator's scalar loop (cpu/TCI.hpp) does not, and has no such overload.
template <typename TileData, typename TileDataTmp, typename T, int descending>
PTO_INTERNAL void TCI_IMPL(TileData &dst, T start, TileDataTmp &) {
    TCI_IMPL<TileData, T, descending>(dst, start);
}

// ptoas 0.60's narrowing TCVT(dst, src, tmp, mode, satMode): the NPU's (npu/a2a3/TCvt.hpp)
// converts through the scratch tile; the simulator's converts directly and has no such
// overload. Same conversion as without tmp.
template <typename TileDataD, typename TileDataS, typename TmpTileData>
    requires requires { TmpTileData::Loc; }
PTO_INTERNAL void TCVT_IMPL(TileDataD &dst, TileDataS &src, TmpTileData &, RoundMode mode,
                            SaturationMode satMode, bool needSetCtrl = true) {
    TCVT_IMPL(dst, src, mode, satMode, needSetCtrl);
}
template <typename TileDataD, typename TileDataS, typename TmpTileData>
    requires requires { TmpTileData::Loc; }
PTO_INTERNAL void TCVT_IMPL(TileDataD &dst, TileDataS &src, TmpTileData &, RoundMode mode,
                            bool needSetCtrl = true) {
    TCVT_IMPL(dst, src, mode, SaturationMode::OFF, needSetCtrl);
}
}  // namespace pto

#define FFTS_MODE_VAL 0x2          // npu/a2a3/TSync.hpp: cube <-> vector of one cluster
inline void set_ffts_base_addr(uint64_t) {}

inline uint16_t getFFTSMsg(uint16_t mode, uint16_t event_id, uint16_t base = 0x1) {
    return (base & 0xf) + ((mode & 0x3) << 4) + ((event_id & 0xf) << 8);
}

inline void ffts_cross_core_sync(pipe_t, uint64_t message) {
    using namespace pypto_sim;
    const unsigned mode = (message >> 4) & 0x3, id = (message >> 8) & 0xf;
    if (mode != 0 && core.cluster != nullptr) {      // to the parts on the other threads
        Launch &l = *core.launch;
        std::lock_guard<std::mutex> lock(l.mutex);
        core.cluster->flags.set(core.subblock, id);
        l.changed.notify_all();
        return;
    }
    if (mode != 0) {                  // to the other kind of core of this cluster
        core.local_flags.set(core.subblock, id);
        return;
    }
    Launch &l = *core.launch;         // SYNCALL: arrive now, wait in wait_flag_dev
    std::lock_guard<std::mutex> lock(l.mutex);
    l.arrived[id] += 1;
    core.syncall_round[id] += 1;
    core.pending[id] = true;
    l.changed.notify_all();
}

inline void wait_flag_dev(int64_t id_);

// ptoas 0.60 calls the compiler builtins behind bisheng's ffts_cross_core_sync / wait_flag_dev
// (the NPU headers call those wrappers, npu/a2a3/TSync.hpp): the same meaning.
inline void __builtin_cce_ffts_cross_core_sync(pipe_t pipe, uint64_t message) {
    ffts_cross_core_sync(pipe, message);
}
inline void __builtin_cce_wait_flag_dev(int64_t id) { wait_flag_dev(id); }

inline void wait_flag_dev(int64_t id_) {
    using namespace pypto_sim;
    const unsigned id = unsigned(id_) & 0xf;
    if (core.pending[id]) {           // every block of the launch must reach this round
        Launch &l = *core.launch;
        std::unique_lock<std::mutex> lock(l.mutex);
        const uint64_t needed = core.syncall_round[id] * l.blocks * l.parties;
        uint64_t seen = l.arrived[id];
        auto last_change = std::chrono::steady_clock::now();
        while (l.arrived[id] < needed && !l.dead) {
            l.changed.wait_for(lock, pypto_sim::WAIT_SLICE);
            if (pypto_sim::stop_bits()) { lock.unlock(); pypto_sim::poll(); lock.lock(); }
            if (l.arrived[id] != seen) {
                seen = l.arrived[id];
                last_change = std::chrono::steady_clock::now();
            } else if (pypto_sim::quiet_for(l, last_change)) {
                l.dead = true;
                l.changed.notify_all();
            }
        }
        core.pending[id] = false;
        if (l.arrived[id] < needed) {
            lock.unlock();
            fail("deadlock: a SYNCALL (pl.barrier) that not every block reaches");
        }
        return;
    }
    if (core.cluster != nullptr) {    // until the other part sets it
        Launch &l = *core.launch;
        std::unique_lock<std::mutex> lock(l.mutex);
        Flags &flags = core.cluster->flags;
        const int me = core.subblock;
        const auto since = std::chrono::steady_clock::now();
        while (!flags.ready(me, id) && !l.dead) {
            l.changed.wait_for(lock, pypto_sim::WAIT_SLICE);
            if (pypto_sim::stop_bits()) { lock.unlock(); pypto_sim::poll(); lock.lock(); }
            if (!flags.ready(me, id) && pypto_sim::quiet_for(l, since)) {
                l.dead = true;
                l.changed.notify_all();
            }
        }
        if (!flags.ready(me, id)) {
            lock.unlock();
            fail(me < 0 ? "deadlock: wait_flag_dev on a cross-core flag that not both vector "
                          "cores of the cluster set"
                        : "deadlock: wait_flag_dev on a cross-core flag the cluster's cube "
                          "never set");
        }
        flags.take(me, id);
        return;
    }
    if (!core.local_flags.ready(core.subblock, id))
        fail("deadlock: wait_flag_dev on a cross-core flag that no core of this cluster set");
    core.local_flags.take(core.subblock, id);
}

namespace pypto_sim {
// One part of a block (its vector function, while its cube function runs on the launching
// thread) on a thread of its own: a mixed kernel whose parts hand tiles both ways, or inside
// loops, needs both running at once, as the cluster's two cores do. A failure ends the part
// and marks the launch dead, so the other part's waits end too.
template <class Part>
inline void run_part(Launch &launch, Cluster &cluster, const Core &owner, uint32_t block,
                     int subblock, char *error, int error_len, std::atomic<bool> &failed,
                     Part part) {
    sigjmp_buf abort_block;
    core = Core{};
    std::memcpy(core.workspace, owner.workspace, sizeof core.workspace);   // shared with it
    core.workspaces = owner.workspaces;
    core.launch = &launch;
    core.cluster = &cluster;
    core.abort_block = &abort_block;
    core.error = error;
    core.error_len = error_len;
    core.subblock = subblock;
    pto::cpu_sim::set_execution_context(block, uint32_t(subblock), 2);
    if (sigsetjmp(abort_block, 1) != 0) {
        failed.store(true);
        std::lock_guard<std::mutex> lock(launch.mutex);
        launch.dead = true;
        launch.changed.notify_all();
        core = Core{};
        return;
    }
    char what[512] = "";
    try {
        part();
    } catch (const std::exception &e) {
        std::snprintf(what, sizeof what, "pto-isa CPU simulator: %s", e.what());
    } catch (...) {
        std::snprintf(what, sizeof what, "pto-isa CPU simulator: an unknown C++ exception");
    }
    if (what[0] != '\0') fail(what);
    core = Core{};
}
}  // namespace pypto_sim
