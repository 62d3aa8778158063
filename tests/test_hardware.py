"""Hardware presets against the public figures of the IPU datasheets (docs/references.md)."""

from __future__ import annotations

import pytest

from ipu_tune.config import HostConfig, SystemConfig
from ipu_tune.errors import IpuTuneError
from ipu_tune.hardware import HOST, IPUS, MACHINES, HostSpec, make_system, system_from_config

# Reference table: FP16 / FP32 peak (TFLOP/s), tiles, In-Processor-Memory (MiB).
PEAKS = {"mk1": (124.5, 31.1), "mk2": (250.0, 62.5), "bow": (350.0, 87.0)}


@pytest.mark.parametrize("name", ["mk1", "mk2", "bow"])
def test_peaks_match_the_reference(name: str) -> None:
    ipu = IPUS[name]
    fp16, fp32 = PEAKS[name]
    assert ipu.peak_flops_per_s(True) / 1e12 == pytest.approx(fp16, rel=0.01)
    assert ipu.peak_flops_per_s(False) / 1e12 == pytest.approx(fp32, rel=0.01)
    # fp16 is 4x fp32 on the AMP units (seed guide 4.6; IPU datasheets).
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
    assert HOST.network_bytes_per_s == 25e9  # 2 x 100 GbE RoCE
    assert HOST.cpu_cores == 128  # 2 x 64-core AMD EPYC 7742


def test_machines_and_fabric_match_the_reference() -> None:
    """IPU-M2000 / Bow-2000: 4 IPUs, 2 x 100 GbE to the host and 2 x 100 GbE GW-Links per
    machine, IPU-Link domains of up to 64 IPUs; poplibs' 15 ns sync latency per hop."""
    for name in ("mk2", "bow"):
        m = MACHINES[name]
        assert m.ipus_per_machine == 4 and m.ipu_link_domain_ipus == 64
        assert m.host_port_bytes_per_s == m.gw_link_bytes_per_s == 2 * 100e9 / 8
        assert m.sync_latency_per_hop_s == 15e-9
    assert MACHINES["mk2"].name == "IPU-M2000" and MACHINES["bow"].name == "Bow-2000"
    for n, machines, pods in ((2, 1, 1), (16, 4, 1), (64, 16, 1), (128, 32, 2), (256, 64, 4)):
        s = make_system("mk2", n)
        assert (s.machines, s.pods) == (machines, pods), n
        assert s.machine is MACHINES["mk2"]


def test_system_host_section_overrides_the_server() -> None:
    cfg = SystemConfig(ipu="bow", num_ipus=64, hosts=4,
                       host=HostConfig(cpu_cores=32, network_bytes_per_s=1e10))
    s = system_from_config(cfg)
    assert (s.hosts, s.host.cpu_cores, s.host.network_bytes_per_s) == (4, 32, 1e10)
    assert s.machine is MACHINES["bow"] and s.pods == 1
    assert system_from_config(SystemConfig()).host == HOST


def test_c600_is_the_mk2_chip_at_1_5_ghz_in_its_server() -> None:
    """C600 PCIe card: one Mk2 GC200 at 1.5 GHz (the IPU-M2000 runs it at 1.33 GHz), linked to
    its server by PCIe Gen4 x16 (32 GB/s per direction), no gateway or network leg."""
    c600, mk2 = IPUS["c600"], IPUS["mk2"]
    assert c600.peak_flops_per_s(True) == pytest.approx(
        mk2.peak_flops_per_s(True) * 1.5 / 1.33, rel=1e-6)
    assert c600.sram_bytes == mk2.sram_bytes
    assert c600.host_link_bytes_per_s == 2 * mk2.host_link_bytes_per_s  # x16 vs x8
    s = system_from_config(SystemConfig(ipu="c600", num_ipus=1))
    assert s.machine is MACHINES["c600"] and s.machine.in_server
    assert s.machine.ipus_per_machine == 1 and (s.machines, s.pods) == (1, 1)
    assert not MACHINES["mk2"].in_server and not MACHINES["bow"].in_server


@pytest.mark.parametrize("name", ["bow", "c600"])
def test_gc200_tiles_at_another_clock_move_the_mk2s_bytes_per_cycle(name: str) -> None:
    """The Bow IPU and the C600 are the Mk2's GC200 tiles: SRAM and on-chip exchange move as
    many bytes per cycle as on a Mk2, whatever a datasheet's rounded TB/s says."""
    ipu, mk2 = IPUS[name], IPUS["mk2"]
    for rate in ("sram_bytes_per_s", "exchange_bytes_per_s"):
        assert getattr(ipu, rate) / ipu.clock_hz == pytest.approx(
            getattr(mk2, rate) / mk2.clock_hz, rel=1e-9)


def test_servers_default_to_one_per_pod16_as_the_presets_build_them() -> None:
    from ipu_tune.config import load_config, system_preset, typed

    for num_ipus, servers in ((1, 1), (16, 1), (32, 2), (64, 4), (256, 16)):
        assert system_from_config(SystemConfig(num_ipus=num_ipus)).hosts == servers
    # A system given by its size alone is the POD preset of that size, servers included.
    for preset in ("pod16", "pod64", "pod128", "bow_pod256"):
        named = typed(SystemConfig, system_preset(preset))
        sized = SystemConfig(ipu=named.ipu, num_ipus=named.num_ipus)
        assert system_from_config(sized) == system_from_config(named)
    # A config file may name the preset as the command line does (`system: pod64`).
    loaded = load_config({"system": "pod64", "plan": {"replication_factor": 64}}).system
    assert loaded == typed(SystemConfig, system_preset("pod64"))
    # Given servers are kept: one server may feed a POD64.
    assert system_from_config(SystemConfig(num_ipus=64, hosts=1)).hosts == 1
    # A preset resized on the command line follows the rule: `system=pod16 system.num_ipus=64`.
    from ipu_tune.config import compose

    for preset, num_ipus, servers in (("pod16", 64, 4), ("mk2", 32, 2), ("bow_pod64", 16, 1)):
        cfg = compose([f"system={preset}", f"system.num_ipus={num_ipus}"])
        assert cfg.system.servers == servers, preset
