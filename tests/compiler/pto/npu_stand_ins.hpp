// What the chip's toolchain has and the cost model's copy of pto-isa lacks, for npu-check's
// build (tests/compiler/pto/test_conformance.py). Neither is a chip rule (pto-oracle README:
// "not covered by the cost model's list, not illegal"):
// - bisheng's builtins for the FFTS cross-core flags, which ptoas 0.60 calls by these names
//   (0.27 called the wrappers the cost model stubs);
// - pto_instr.hpp's TCI with a tmp tile (include/pto/common/pto_instr.hpp), which the cost
//   model's pto_instr.hpp leaves out; it calls the chip's own TCI_IMPL (npu/a2a3/TCI.hpp), so
//   that implementation's static_asserts still check the instruction.
#include "pto/pto-inst.hpp"
#define __builtin_cce_ffts_cross_core_sync(pipe, msg) ffts_cross_core_sync(pipe, msg)
#define __builtin_cce_wait_flag_dev(id) wait_flag_dev(id)
namespace pto {
template <typename TileData, typename TileDataTmp, typename T, int descending, typename... WaitEvents>
PTO_INST RecordEvent TCI(TileData& dst, T start, TileDataTmp& tmp, WaitEvents&... events)
{
    TCI_IMPL<TileData, TileDataTmp, T, descending>(dst, start, tmp);
    return {};
}
}  // namespace pto
