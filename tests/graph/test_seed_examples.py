"""The seed article's examples, copied verbatim (only indented into test functions), checked
against numpy. Where a snippet uses names an earlier snippet or the article's prose defines
(``graph``, ``module``, ``ctx``, ``inputs``, ``compute``, ``weight``), the test defines them
first; snippets that need code the article never gives (Ascend C libraries, torch_npu,
``process_tile``...) are covered by the error tests instead."""
import numpy as np
import pytest

import pypto


@pytest.fixture(autouse=True)
def _cwd(tmp_path, monkeypatch):
    """The vector add demo writes vector_add.pto into the working directory."""
    monkeypatch.chdir(tmp_path)


def test_first_vector_add_graph_compiles():
    import pypto
    import numpy as np

    # 创建Tensor Graph
    graph = pypto.TensorGraph(name="vector_add")

    # 定义输入张量
    input_a = graph.placeholder(shape=(1024,), dtype=pypto.float16, name="input_a")
    input_b = graph.placeholder(shape=(1024,), dtype=pypto.float16, name="input_b")

    # 定义Tile级别的向量加法
    @pypto.tile_op
    def vector_add_tile(a_tile, b_tile):
        # Tile内部的向量加法，映射到Vector单元执行
        #  Vector单元支持FP16向量加法，单指令可处理256个元素
        return a_tile + b_tile

    # 将计算任务划分为Tile
    output = pypto.tile_map(vector_add_tile, [input_a, input_b], tile_size=256)

    # 编译生成Execution Graph
    exec_graph = pypto.compile(graph, target="ascend910b")

    a = np.random.default_rng(0).standard_normal(1024).astype(np.float16)
    b = np.random.default_rng(1).standard_normal(1024).astype(np.float16)
    got = exec_graph.run(pypto.Context(), {"input_a": a, "input_b": b}).to_numpy()
    np.testing.assert_array_equal(got, a + b)      # fp16 add rounds once, as numpy does
    assert output.shape == (1024,) and output.dtype == pypto.float16


def test_backend_and_context(capsys):
    import pypto

    # 检查后端是否可用
    backend = pypto.get_backend()
    print(f"Backend: {backend.name}")
    print(f"Device count: {backend.device_count}")

    # 创建设备上下文
    ctx = pypto.Context(device_id=0)
    print(f"Device 0: {ctx.device_name}")
    #  设备上下文管理NPU资源的分配和释放，避免资源泄漏

    out = capsys.readouterr().out
    assert "Device count: 1" in out and "Device 0:" in out


def test_vector_add_example_4096_tile_512(tmp_path, capsys):
    import pypto
    import numpy as np

    def vector_add_example():
        # 创建输入数据
        size = 4096
        a_np = np.random.randn(size).astype(np.float16)
        b_np = np.random.randn(size).astype(np.float16)

        # 创建Tensor Graph
        graph = pypto.TensorGraph(name="vector_add_demo")

        # 定义输入张量
        input_a = graph.placeholder(shape=(size,), dtype=pypto.float16, name="a")
        input_b = graph.placeholder(shape=(size,), dtype=pypto.float16, name="b")

        # 定义Tile操作
        @pypto.tile_op
        def add_tile(a, b):
            # 每个Tile处理512个元素
            #  512是昇腾910B Vector单元的最优处理粒度，充分利用SIMD能力
            return a + b

        # Tile映射
        output = pypto.tile_map(add_tile, [input_a, input_b], tile_size=512)

        # 编译
        module = pypto.compile(graph, target="ascend910b", output="vector_add.pto")

        # 创建运行时上下文
        ctx = pypto.Context(device_id=0)

        # 准备输入数据
        a_tensor = pypto.Tensor.from_numpy(a_np, ctx)
        b_tensor = pypto.Tensor.from_numpy(b_np, ctx)

        # 执行
        result = module.run(ctx, {"a": a_tensor, "b": b_tensor})

        # 验证结果
        expected = a_np + b_np
        result_np = result.to_numpy()

        # 检查精度
        max_error = np.max(np.abs(result_np - expected))
        print(f"Max error: {max_error}")
        #  FP16计算的误差范围通常在1e-3级别，验证时需要考虑数值精度
        assert max_error < 1e-2, f"Error too large: {max_error}"

        print("Vector add test passed!")

    vector_add_example()
    assert "Vector add test passed!" in capsys.readouterr().out
    pto = (tmp_path / "vector_add.pto").read_text()
    assert "pto.tadd" in pto and "pto.tload" in pto and "pto.tstore" in pto
    assert "cols=512" in pto                      # the tiles are the tile_size


def _matmul_snippet():
    """The matmul snippet, verbatim; returns what later snippets use."""
    # 查看编译后的PTO指令
    import pypto

    graph = pypto.TensorGraph(name="simple_matmul")
    a = graph.placeholder(shape=(128, 64), dtype=pypto.float16)
    b = graph.placeholder(shape=(64, 128), dtype=pypto.float16)

    @pypto.tile_op
    def matmul_tile(a_tile, b_tile):
        # 矩阵乘法Tile
        #  Cube单元支持16x16的矩阵乘法，Tile大小应为其整数倍
        return pypto.matmul(a_tile, b_tile)

    output = pypto.tile_map(matmul_tile, [a, b], tile_size=(16, 16))

    # 编译并查看IR
    module = pypto.compile(graph, target="ascend910b", emit_ir=True)

    # 打印Tile Graph IR
    print("=== Tile Graph IR ===")
    print(module.tile_graph_ir)

    # 打印PTO虚拟指令
    print("\n=== PTO Instructions ===")
    print(module.pto_instructions)
    return graph, module


def test_matmul_emit_ir(capsys):
    graph, module = _matmul_snippet()
    ir = module.tile_graph_ir
    # the tile graph: nodes, tilings, tile counts, dependencies
    assert 'tile graph "simple_matmul"' in ir
    assert "%a: float16[128, 64]" in ir and "%b: float16[64, 128]" in ir   # inferred names
    assert "%matmul_tile: float32[128, 128] = tile_map(matmul_tile, [%a, %b], " \
           "tile_size=(16, 16)" in ir
    assert "tiles: 8 x 8 = 64 tile(s) of (16, 16)" in ir
    assert "%a: tile (16, 64) at (16*i, 0)   [follows output axis 0, whole]" in ir
    assert "%b: tile (64, 16) at (0, 16*j)   [whole, follows output axis 1]" in ir
    assert "depends on: inputs only; cube" in ir
    # each kernel's generated source and Tile IR
    assert "r0 = matmul_tile(x0, x1)" in ir
    assert "tile.matmul" in ir and "tile<16x64xf16, left>" in ir
    pto = module.pto_instructions
    assert "pto.tmatmul" in pto and "loc=left" in pto and "loc=acc" in pto
    assert pto in capsys.readouterr().out
    a = np.random.default_rng(0).standard_normal((128, 64)).astype(np.float16)
    b = np.random.default_rng(1).standard_normal((64, 128)).astype(np.float16)
    got = module.run(pypto.Context(), {"a": a, "b": b}).to_numpy()
    assert got.dtype == np.float32           # pypto.matmul of fp16 accumulates in fp32
    np.testing.assert_allclose(got, a.astype(np.float32) @ b.astype(np.float32),
                               rtol=1e-5, atol=1e-4)


def test_compile_options():
    graph, _ = _matmul_snippet()
    # 控制编译优化选项
    module = pypto.compile(
        graph,
        target="ascend910b",
        options={
            "tile_fusion": True,       # 启用Tile融合
            "layout_opt": True,        # 启用内存布局优化
            "loop_unroll": False,      # 禁用循环展开（调试用）
        }
    )
    #  Tile融合可以减少Tile间的同步开销，但会增加单个Tile的计算复杂度
    assert module.options == {"tile_fusion": True, "layout_opt": True, "loop_unroll": False,
                              "autotune": True}
    a = np.ones((128, 64), np.float16)
    b = np.full((64, 128), 0.5, np.float16)
    np.testing.assert_array_equal(module.run(pypto.Context(), {"a": a, "b": b}).to_numpy(),
                                  np.full((128, 128), 32.0, np.float32))


def test_multi_core_example_under_the_profiler(capsys):
    import pypto
    import numpy as np

    def multi_core_example():
        # 创建大规模计算任务
        size = 65536  # 64K元素
        a_np = np.random.randn(size).astype(np.float16)
        b_np = np.random.randn(size).astype(np.float16)

        graph = pypto.TensorGraph(name="multi_core_add")
        input_a = graph.placeholder(shape=(size,), dtype=pypto.float16)
        input_b = graph.placeholder(shape=(size,), dtype=pypto.float16)

        @pypto.tile_op
        def add_tile(a, b):
            return a + b

        # 设置多核执行策略
        output = pypto.tile_map(
            add_tile,
            [input_a, input_b],
            tile_size=1024,
            parallel_strategy="auto"  # 自动选择最优并行策略
        )

        module = pypto.compile(graph, target="ascend910b")

        ctx = pypto.Context(device_id=0)
        a_tensor = pypto.Tensor.from_numpy(a_np, ctx)
        b_tensor = pypto.Tensor.from_numpy(b_np, ctx)

        # 执行并查看核利用率
        with pypto.Profiler() as prof:
            result = module.run(ctx, {"input_a": a_tensor, "input_b": b_tensor})

        print(f"Core utilization: {prof.core_utilization}")
        #  核利用率反映了并行效率，理想值应接近100%

        return result

    np.random.seed(7)
    result = multi_core_example()
    np.random.seed(7)
    a_np = np.random.randn(65536).astype(np.float16)
    b_np = np.random.randn(65536).astype(np.float16)
    np.testing.assert_array_equal(result.to_numpy(), a_np + b_np)
    line = [ln for ln in capsys.readouterr().out.splitlines() if "Core utilization" in ln][0]
    assert 0.0 < float(line.split(": ")[1]) <= 1.0


@pytest.fixture
def add_module():
    """A compiled vector add and its inputs, as the profiling snippets assume exist."""
    graph = pypto.TensorGraph(name="profiled_add")
    x = graph.placeholder(shape=(8192,), dtype=pypto.float32)
    y = graph.placeholder(shape=(8192,), dtype=pypto.float32)

    @pypto.tile_op
    def add_tile(a, b):
        return a + b

    pypto.tile_map(add_tile, [x, y], tile_size=1024)
    module = pypto.compile(graph, target="ascend910b")
    ctx = pypto.Context(device_id=0)
    rng = np.random.default_rng(0)
    inputs = {"x": rng.standard_normal(8192, dtype=np.float32),
              "y": rng.standard_normal(8192, dtype=np.float32)}
    yield module, ctx, inputs
    pypto.disable_profiling()


def test_enable_profiling_report(add_module, capsys):
    module, ctx, inputs = add_module
    import pypto

    # 启用性能分析
    pypto.enable_profiling()

    # 运行程序
    result = module.run(ctx, inputs)

    # 获取性能报告
    report = pypto.get_profiling_report()
    print(report.summary())

    # 查看各阶段耗时
    for op in report.operations:
        print(f"{op.name}: compute={op.compute_time}ms, memory={op.memory_time}ms")
    #  性能报告显示每个算子的计算和访存时间比例，帮助定位瓶颈

    np.testing.assert_array_equal(result.to_numpy(), inputs["x"] + inputs["y"])
    assert [k.name for k in report.kernels] == ["profiled_add_add_tile"]
    names = {op.name for op in report.operations}
    assert {"tload", "tadd", "tstore"} <= names
    assert "tadd: compute=" in capsys.readouterr().out


def test_profile_profiler_start_stop_report(add_module, capsys):
    module, ctx, inputs = add_module
    import pypto.tools.profiler

    # 启用性能分析
    prof = pypto.profile.Profiler()
    prof.start()

    # 运行程序
    result = module.run(ctx, inputs)

    # 停止分析
    prof.stop()

    # 查看报告
    report = prof.report()
    for tile in report.tiles:
        print(f"{tile.name}: {tile.time_ms}ms, {tile.flops} FLOPS")
    #  性能分析报告显示每个Tile的计算量与时间，识别瓶颈Tile

    np.testing.assert_array_equal(result.to_numpy(), inputs["x"] + inputs["y"])
    assert len(report.tiles) == 8                  # 8192 / 1024: one block per tile
    assert sum(t.flops for t in report.tiles) == 8192
    assert "FLOPS" in capsys.readouterr().out


def test_memory_analyze_graph(capsys):
    graph, _ = _matmul_snippet()
    import pypto.tools.memory

    # 内存分析
    mem_report = pypto.memory.analyze(graph)
    print(f"Peak memory: {mem_report.peak_memory / 1e6} MB")
    print(f"Memory efficiency: {mem_report.efficiency}%")
    #  内存分析帮助优化显存占用，特别是大模型场景

    # L1 holds a (16, 64) and a (64, 16) fp16 panel, L0A/L0B a copy each, L0C the fp32 tile
    assert mem_report.peak_memory["L1"] == 2 * 16 * 64 * 2
    assert mem_report.peak_memory["L0A"] == mem_report.peak_memory["L0B"] == 16 * 64 * 2
    assert mem_report.peak_memory["L0C"] == 16 * 16 * 4
    assert 0 < mem_report.efficiency <= 100
    assert mem_report.global_memory == 128 * 64 * 2 * 2 + 128 * 128 * 4
    assert "Peak memory: 0.009216 MB" in capsys.readouterr().out


def test_debug_enable_breakpoint_run(capsys):
    import pypto.tools.debug

    @pypto.jit
    def compute(x):             # the article never defines compute; any tile function does
        return x * 2.0

    graph = pypto.TensorGraph(name="debugged")
    x_in = graph.placeholder(shape=(1000,), dtype=pypto.float32, name="x")
    inputs = {"x": np.arange(1000, dtype=np.float32)}
    try:
        # 启用调试模式
        pypto.debug.enable()

        # 设置断点
        @pypto.tile_op
        def debug_tile(x):
            pypto.debug.breakpoint()  # 执行到此暂停
            result = compute(x)
            return result

        pypto.tile_map(debug_tile, [x_in], tile_size=256)

        # 运行调试
        pypto.debug.run(graph, inputs)
        #  断点调试可以在Tile边界暂停，检查数据状态
    finally:
        pypto.debug.disable()
    snaps = pypto.debug.snapshots
    assert [s.tile for s in snaps] == [(0,), (1,), (2,), (3,)]
    for s in snaps:
        i = s.tile[0]
        want = np.zeros(256, np.float32)
        valid = min(256, 1000 - 256 * i)
        want[:valid] = np.arange(256 * i, 256 * i + valid)     # past the end: padding
        np.testing.assert_array_equal(s.tiles["x"], want)
        assert s.location.endswith(f"test_seed_examples.py:{debug_tile.source.first_line + 2}")
    out = capsys.readouterr().out
    assert out.count("[pypto.debug] breakpoint at") == 4


@pytest.fixture
def fresh_default_graph():
    return pypto.graph.reset_default_graph()


@pytest.mark.heavy
def test_nc1hwc0_placeholder(fresh_default_graph):
    import pypto
    import numpy as np

    # 指定输入布局为NC1HWC0
    input_tensor = pypto.placeholder(
        shape=(1, 16, 224, 224, 16),  # C1=16, C0=16
        dtype=pypto.float16,
        layout="NC1HWC0"
    )
    assert input_tensor.name == "input_tensor" and input_tensor.layout == "NC1HWC0"
    # the article never defines `weight`: a 1x1 convolution from its 256 channels to 32, in
    # the cube's weight layout (FRACTAL_Z: (C1*KH*KW, Cout/16, 16, C0))
    weight = pypto.placeholder(shape=(16, 2, 16, 16), dtype=pypto.float16, layout="FRACTAL_Z")

    # 编译时自动推断输出布局
    output = pypto.conv2d(input_tensor, weight)
    assert output.layout == "NC1HWC0" and output.shape == (1, 2, 224, 224, 16)
    module = pypto.compile(fresh_default_graph)
    assert [k.name for k in module.kernels] == ["default_conv2d"]


def test_barrier_and_fused_tile_ops():
    # 使用Barrier同步
    @pypto.tile_op
    def sync_example(a, b):
        # 第一阶段计算
        temp = a * 2

        # 等待所有核完成第一阶段
        pypto.barrier()

        # 第二阶段计算
        result = temp + b
        #  Barrier确保所有核都完成前一阶段后再进入下一阶段，避免数据竞争
        return result

    # 减少同步示例
    @pypto.tile_op
    def fused_tile(a, b, c):
        # 将多个操作融合在一个Tile内
        temp = a + b
        result = temp * c
        # 无需中间同步，数据保持在寄存器
        return result
    #  融合减少中间数据的全局内存访问和同步等待

    graph = pypto.TensorGraph(name="sync_and_fused")
    a = graph.placeholder(shape=(65536,), dtype=pypto.float32)
    b = graph.placeholder(shape=(65536,), dtype=pypto.float32)
    c = graph.placeholder(shape=(65536,), dtype=pypto.float32)
    s = pypto.tile_map(sync_example, [a, b], tile_size=1024)
    f = pypto.tile_map(fused_tile, [s, b, c], tile_size=1024)
    module = pypto.compile(graph, target="ascend910b")
    # 64 tiles, all blocks must meet at the barrier: 48 blocks, 2 rounds each
    first, second = module.kernels
    assert (first.form, first.grid, first.tuning) == ("uniform", (48,), None)
    # the other's launch form is the tuner's (parallel_strategy="auto"), as modelled fastest
    assert second.tuning.best.time_ms == min(t.time_ms for t in second.tuning.trials)
    rng = np.random.default_rng(3)
    x, y, z = (rng.standard_normal(65536, dtype=np.float32) for _ in range(3))
    got = module.run(pypto.Context(), {"a": x, "b": y, "c": z}).to_numpy()
    np.testing.assert_array_equal(got, (x * 2 + y + y) * z)
