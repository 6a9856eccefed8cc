"""runtime/peak.py: the FMA peak measured once per machine and thread count, then cached."""

import json
import shutil

import pytest
from tilecraft.runtime import peak


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(peak.PEAK_ENVIRONMENT, raising=False)
    return tmp_path


@pytest.mark.skipif(shutil.which("cc") is None, reason="the probe is built with the host C compiler")
def test_measured_once_then_read_from_the_cache(cache, monkeypatch):
    monkeypatch.setattr(peak, "ITERATIONS", 2_000_000)  # a short loop: the figure is not checked here
    first = peak.fma_peak_gflops(1)
    assert first is not None and first > 0.5  # any machine with a C compiler retires this much
    stored = json.loads((cache / "fma-peak.json").read_text())
    assert stored == {peak.machine_key(1): first}

    def measure_again(threads):
        raise AssertionError("measured again although cached")

    monkeypatch.setattr(peak, "measure_fma_peak", measure_again)
    assert peak.fma_peak_gflops(1) == first


def test_a_corrupt_cache_is_measured_again(cache, monkeypatch):
    (cache / "fma-peak.json").write_text("{not json")
    monkeypatch.setattr(peak, "measure_fma_peak", lambda threads: 42.0)
    assert peak.fma_peak_gflops(2) == 42.0
    assert json.loads((cache / "fma-peak.json").read_text()) == {peak.machine_key(2): 42.0}


def test_the_thread_count_is_part_of_the_key(cache, monkeypatch):
    monkeypatch.setattr(peak, "measure_fma_peak", lambda threads: 10.0 * threads)
    assert (peak.fma_peak_gflops(1), peak.fma_peak_gflops(2)) == (10.0, 20.0)
    assert peak.machine_key(1) != peak.machine_key(2)


@pytest.mark.parametrize("value, expected", [("123.5", 123.5), ("0", None), ("fast", None)])
def test_the_environment_overrides_the_measurement(cache, monkeypatch, value, expected):
    monkeypatch.setenv(peak.PEAK_ENVIRONMENT, value)
    monkeypatch.setattr(peak, "measure_fma_peak", lambda threads: pytest.fail("measured despite the override"))
    assert peak.fma_peak_gflops(2) == expected


def test_no_compiler_means_no_figure(cache, monkeypatch):
    monkeypatch.setenv("CC", "no-such-compiler")
    assert peak.fma_peak_gflops(1) is None
    assert not (cache / "fma-peak.json").exists()
