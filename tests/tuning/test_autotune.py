"""@pypto.autotune: the winner is the config the cycle model itself ranks fastest, skipped
configs say why, results persist across processes, and Triton's hooks mean what they mean."""
import json
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.backends.ascend.model.launch import model_kernel
from pypto.tuning import AutotuneError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pypto.jit
def scale(x, out, n, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    for s in range(pid * BLOCK, n, BLOCK * pl.num_programs(0)):
        pl.store(out, offsets=(s,), value=pl.load(x, offsets=(s,), shape=(BLOCK,)) * 3.0)


@pypto.jit
def accumulate(x, out, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    t = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    pl.store(out, offsets=(pid * BLOCK,), value=t, atomic="add")


@pypto.jit
def bump(x, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    pl.store(x, offsets=(pid * BLOCK,), value=pl.load(x, offsets=(pid * BLOCK,),
                                                       shape=(BLOCK,)) + 1.0)


BLOCKS = (256, 2048, 8192, 65536)      # the last overflows the UB


def _tuned(**options):
    return pypto.autotune([pypto.Config({"BLOCK": b}) for b in BLOCKS], key=["n"],
                          **options)(scale)


def test_winner_is_what_the_model_ranks_fastest(fresh_cache):
    kernel = _tuned()
    n = 48 * 8192
    x, out = np.random.rand(n).astype(np.float32), np.zeros(n, np.float32)
    kernel(x, out, n)
    np.testing.assert_array_equal(out, x * np.float32(3))
    report = kernel.report
    modelled = {b: model_kernel(scale, None, x, out, n, BLOCK=b).time_ms for b in BLOCKS[:3]}
    assert kernel.best_config.kwargs["BLOCK"] == min(modelled, key=modelled.get)
    for trial, b in zip(report.trials, BLOCKS):
        if b in modelled:
            assert trial.time_ms == pytest.approx(modelled[b], rel=1e-9)
    last = report.trials[-1]
    assert last.time_ms is None
    assert last.skipped == ("BufferOverflow: UB (vec) overflow on ascend910b1: the kernel needs "
                            "262144 bytes at once but the buffer holds 188416")
    assert "BLOCK: 65536" in str(report) and "<- best" in str(report)


@pytest.mark.heavy
def test_a_new_key_tunes_again_and_the_same_key_does_not(fresh_cache):
    kernel = _tuned()
    for n in (4096, 4096, 8192):
        x, out = np.ones(n, np.float32), np.zeros(n, np.float32)
        kernel(x, out, n)
        assert np.all(out == 3)
    assert len(kernel._memo) == 2


def test_compile_seconds_count_failing_compiles(fresh_cache, monkeypatch):
    kernel = _tuned(cache_results=False)
    compile_for_real = kernel.fn.compile

    def slow(**values):                       # only the config that fails is slow
        time.sleep(1.0 if values["BLOCK"] == 65536 else 0)
        return compile_for_real(**values)

    monkeypatch.setattr(kernel.fn, "compile", slow)
    x = np.ones(2048, np.float32)
    kernel(x, np.zeros_like(x), 2048)
    assert kernel.report.trials[-1].skipped is not None      # 65536 overflows after its sleep
    assert kernel.report.compile_seconds >= 1.0


def test_callable_grid_sees_the_chosen_meta_parameters(fresh_cache):
    @pypto.autotune([pypto.Config({"BLOCK": 128}), pypto.Config({"BLOCK": 1024})], key=["n"])
    @pypto.jit
    def add_one(x, out, n, BLOCK: pl.constexpr):
        pid = pl.program_id(0)
        pl.store(out, offsets=(pid * BLOCK,),
                 value=pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,)) + 1.0)

    n = 5000
    x, out = np.arange(n, dtype=np.float32), np.zeros(n, np.float32)
    add_one[lambda META: (pl.cdiv(n, META["BLOCK"]),)](x, out, n)
    np.testing.assert_array_equal(out, x + 1)


def test_no_config_runs_is_one_error_listing_all(fresh_cache):
    kernel = pypto.autotune([pypto.Config({"BLOCK": 65536}), pypto.Config({"BLOCK": 131072})],
                            key=["n"])(scale)
    x = np.ones(1024, np.float32)
    with pytest.raises(AutotuneError, match=r"no config can run(.|\n)*BLOCK: 65536, "
                                            r"num_stages: 1: BufferOverflow: .*UB \(vec\) "
                                            r"overflow(.|\n)*BLOCK: 131072"):
        kernel(x, np.zeros_like(x), 1024)


def test_reset_to_zero_matters_for_an_atomic_kernel(fresh_cache):
    configs = [pypto.Config({"BLOCK": 256}), pypto.Config({"BLOCK": 512})]
    x = np.random.rand(4096).astype(np.float32)
    grid = lambda META: (4096 // META["BLOCK"],)
    options = dict(key=[], objective="host", warmup=1, rep=2)
    plain = pypto.autotune(configs, **options)(accumulate)
    out = np.zeros_like(x)
    plain[grid](x, out)
    assert not np.allclose(out, x)          # every timed launch added into out
    reset = pypto.autotune(configs, reset_to_zero=["out"], cache_results=False,
                           **options)(accumulate)
    out = np.zeros_like(x)
    reset[grid](x, out)
    np.testing.assert_allclose(out, x)


def test_under_npu_nothing_runs_so_nothing_is_reset_restored_or_hooked(fresh_cache):
    hooked = []
    configs = [pypto.Config({"BLOCK": b}, pre_hook=lambda args: hooked.append(1))
               for b in (256, 512)]
    x = np.ones(4096, np.float32)
    grid = lambda META: (4096 // META["BLOCK"],)
    kernel = pypto.autotune(configs, key=[], reset_to_zero=["out"])(accumulate)
    out = np.full_like(x, 5.0)
    kernel[grid](x, out)
    assert np.all(out == 6) and not kernel.report.cached     # the user's 5, plus one launch
    kernel[grid](x, out)
    assert np.all(out == 7)
    assert len(hooked) == 2                                   # the two launches, no sweep's
    bumped = pypto.autotune(configs[:1] + [pypto.Config({"BLOCK": 1024})], key=[],
                            restore_value=["x"])(bump)
    y = np.full(4096, 5.0, np.float32)
    bumped[grid](y)
    assert np.all(y == 6)


def test_restore_value_undoes_the_sweeps_writes(fresh_cache):
    configs = [pypto.Config({"BLOCK": 256}), pypto.Config({"BLOCK": 1024})]
    kernel = pypto.autotune(configs, key=[], objective="host", restore_value=["x"], warmup=1,
                            rep=2)(bump)
    x = np.zeros(4096, np.float32)
    kernel[lambda META: (4096 // META["BLOCK"],)](x)
    assert np.all(x == 1)                    # the final launch only


def test_prune_configs_by(fresh_cache):
    seen = []
    kernel = pypto.autotune(
        [pypto.Config({"BLOCK": b}) for b in BLOCKS], key=["n"],
        prune_configs_by={"early_config_prune": lambda cs, args: [c for c in cs
                                                                  if c.kwargs["BLOCK"] < 65536],
                          "perf_model": lambda **kw: seen.append(kw["BLOCK"]) or kw["BLOCK"],
                          "top_k": 2})(scale)
    x = np.ones(2048, np.float32)
    kernel(x, np.zeros_like(x), 2048)
    assert sorted(seen) == [256, 2048, 8192]
    assert [t.config for t in kernel.report.trials] == ["BLOCK: 256, num_stages: 1",
                                                        "BLOCK: 2048, num_stages: 1"]
    assert len(kernel.report.pruned) == 2


def test_bad_names_are_refused_when_decorating():
    with pytest.raises(ValueError, match=r"a config names \['BLOK'\], which are not "
                                         r"parameters of scale"):
        pypto.autotune([pypto.Config({"BLOK": 1})], key=["n"])(scale)
    with pytest.raises(ValueError, match=r"key= names \['m'\]"):
        pypto.autotune([pypto.Config({"BLOCK": 1})], key=["m"])(scale)
    with pytest.raises(ValueError, match="no num_stages parameter"):
        pypto.autotune([pypto.Config({"BLOCK": 1}, num_stages=2)], key=["n"])(scale)
    with pytest.raises(TypeError, match="goes above @pypto.jit"):
        pypto.autotune([pypto.Config({"BLOCK": 1})], key=["n"])(lambda x: x)
    with pytest.raises(ValueError, match="objective='gpu'"):
        pypto.autotune([pypto.Config({"BLOCK": 1})], key=["n"], objective="gpu")(scale)
    with pytest.raises(ValueError, match="1 or 2"):
        pypto.Config({"BLOCK": 1}, num_stages=3)


def test_a_config_naming_a_runtime_parameter_is_refused_when_decorating():
    with pytest.raises(ValueError, match=r"pypto.Config\(\{'BLOCK': 256, 'n': 1024\}, "
                                         r"num_stages=1\) sets \['n'\], which are not "
                                         r"pl.constexpr parameters of scale \(its constexpr "
                                         r"parameters: BLOCK\)"):
        pypto.autotune([pypto.Config({"BLOCK": 256}), pypto.Config({"BLOCK": 256, "n": 1024})],
                       key=[])(scale)


def test_passing_a_tuned_parameter_is_refused(fresh_cache):
    kernel = _tuned()
    x = np.ones(64, np.float32)
    with pytest.raises(ValueError, match="BLOCK are chosen by @pypto.autotune"):
        kernel(x, np.zeros_like(x), 64, BLOCK=64)


@pytest.mark.heavy
def test_log_and_progress_bar(fresh_cache, monkeypatch, capsys):
    monkeypatch.setenv("PYPTO_LOG", "autotune")
    kernel = _tuned(progress=True)
    x = np.ones(3000, np.float32)
    kernel(x, np.zeros_like(x), 3000)
    err = capsys.readouterr().err
    assert "[pypto autotune] autotune scale [n=3000, float32, float32]" in err
    assert "autotune scale: " in err and "config" in err          # tqdm's bar
    kernel2 = _tuned(progress=False, cache_results=False)
    kernel2(x, np.zeros_like(x), 3000)
    assert "autotune scale: " not in capsys.readouterr().err
    monkeypatch.setenv("PYPTO_PROGRESS", "1")      # the switch progress=None follows
    _tuned(cache_results=False)(x, np.zeros_like(x), 3000)
    assert "autotune scale: " in capsys.readouterr().err


@pytest.mark.heavy
def test_disk_cache_serves_a_new_process_and_can_be_off(fresh_cache):
    script = textwrap.dedent("""
        import json, sys, numpy as np, pypto
        from tests.tuning.test_autotune import _tuned
        kernel = _tuned(cache_results=sys.argv[1] == "1")
        x = np.ones(6000, np.float32)
        kernel(x, np.zeros_like(x), 6000)
        print(json.dumps({"cached": kernel.report.cached,
                          "best": kernel.best_config.kwargs["BLOCK"]}))
    """)
    env = {**os.environ, "PYTHONPATH": ROOT, "PYPTO_CACHE_DIR": str(fresh_cache)}

    def run(cache):
        out = subprocess.run([sys.executable, "-c", script, cache], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])

    first, second = run("1"), run("1")
    assert (first["cached"], second["cached"]) == (False, True)
    assert first["best"] == second["best"]
    assert run("0")["cached"] is False                  # the switch: never read nor written
    entries = os.listdir(fresh_cache / "autotune")
    assert len(entries) == 1 and entries[0].endswith(".json")


def test_report_plot(tmp_path, fresh_cache):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed")
    kernel = _tuned()
    x = np.ones(1000, np.float32)
    kernel(x, np.zeros_like(x), 1000)
    path = kernel.report.plot(str(tmp_path / "sweep.png"))
    assert os.path.getsize(path) > 1000
