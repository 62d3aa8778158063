"""Hardware presets against the public figures of shared/reference/ipu-hardware.md."""

from __future__ import annotations

import pytest

from ipu_tune.errors import IpuTuneError
from ipu_tune.hardware import HOST, IPUS, HostSpec, make_system

# Reference table: FP16 / FP32 peak (TFLOP/s), tiles, In-Processor-Memory (MiB).
PEAKS = {"mk1": (124.5, 31.1), "mk2": (250.0, 62.5), "bow": (350.0, 87.0)}


@pytest.mark.parametrize("name", ["mk1", "mk2", "bow"])
def test_peaks_match_the_reference(name: str) -> None:
    ipu = IPUS[name]
    fp16, fp32 = PEAKS[name]
    assert ipu.peak_flops_per_s(True) / 1e12 == pytest.approx(fp16, rel=0.01)
    assert ipu.peak_flops_per_s(False) / 1e12 == pytest.approx(fp32, rel=0.01)
    # fp16 is 4x fp32 on the AMP units (seed guide 4.6; reference table).
    assert ipu.peak_flops_per_s(True) == 4 * ipu.peak_flops_per_s(False)


def test_sram_per_ipu() -> None:
    assert IPUS["mk1"].sram_bytes / 2**20 == pytest.approx(304, rel=0.001)
    assert IPUS["mk2"].sram_bytes / 2**20 == pytest.approx(897, rel=0.001)
    assert IPUS["mk2"].sram_bytes_per_tile == 624 * 1024  # seed guide: S_tile = 624 kB
    assert IPUS["mk2"].tiles == IPUS["bow"].tiles == 1472 and IPUS["mk1"].tiles == 1216


def test_make_system_checks_its_arguments() -> None:
    s = make_system("mk2", 16, hosts=4)
    assert s.ipu is IPUS["mk2"] and s.num_ipus == 16 and s.hosts == 4 and s.host is HOST
    with pytest.raises(IpuTuneError, match=r"system.ipu"):
        make_system("mk3", 1)
    with pytest.raises(IpuTuneError, match=r"system.hosts"):
        make_system("mk2", 2, hosts=3)
    with pytest.raises(IpuTuneError, match=r"system.num_ipus"):
        make_system("mk2", 0)


def test_host_rates_default_to_the_calibrated_constants() -> None:
    assert HOST.preprocess_s_per_sample is None and HOST.call_overhead_s is None
    assert HostSpec(preprocess_s_per_sample=1e-3).preprocess_s_per_sample == 1e-3
    assert HOST.host_to_ipu_bytes_per_s == 25e9  # 2 x 100 GbE RoCE per IPU-M2000
