"""IPU, machine (IPU-Fabric) and host-server presets with sourced constants
(IPU datasheets and papers: docs/references.md).

Each figure names its status there: read (stated by a source), derived (arithmetic on read
figures) or estimate (no public figure; calibration settles it). Units live in the names.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from ipu_tune.config import SystemConfig, host_servers
from ipu_tune.errors import bad_value

__all__ = [
    "HOST",
    "IPUS",
    "MACHINES",
    "HostSpec",
    "IpuSpec",
    "MachineSpec",
    "System",
    "make_system",
    "system_from_config",
]

KIB = 1024
GB = 1e9


@dataclass(frozen=True)
class IpuSpec:
    name: str
    tiles: int  # read: Graphcore product pages; Jia et al. 2019
    sram_bytes_per_tile: int  # Mk1 read (Jia et al.); Mk2 read (seed guide: S_tile = 624 kB)
    clock_hz: float  # Mk1 derived; Mk2/Bow read (MLPerf system descriptions)
    fp16_flops_per_cycle_per_tile: int  # derived: FP16 peak / (tiles x clock)
    fp32_flops_per_cycle_per_tile: int  # derived: FP32 peak / (tiles x clock)
    sram_bytes_per_s: float  # read (Bow estimate)
    exchange_bytes_per_s: float  # on-chip exchange; Mk2 read, others estimate
    host_link_bytes_per_s: float  # PCIe path of one IPU to its host/gateway
    streaming_memory_bytes_per_s: float  # estimate: bounded by PCIe Gen4 x8, per direction
    memory_bank_bytes: int  # read: PopVision glossary
    # One IPU-Link, one direction (a link's printed figure counts both): what a ring hop and a
    # pipeline stage's copy to its neighbour move at, per link they use.
    ipu_link_bytes_per_s: float
    worker_threads_per_tile: int = 6  # read
    # estimate: elements of input the AMP loads per cycle, 64 bits (4 fp16 or 2 fp32; the
    # poplibs AMP vertices' input load). Its conv units are its MACs per cycle over this.
    amp_input_load_bits: int = 64

    @property
    def sram_bytes(self) -> int:
        return self.tiles * self.sram_bytes_per_tile

    def peak_flops_per_s(self, fp16: bool) -> float:
        per_tile = (self.fp16_flops_per_cycle_per_tile if fp16
                    else self.fp32_flops_per_cycle_per_tile)
        return per_tile * self.tiles * self.clock_hz

    def amp_conv_units(self, fp16: bool, half_partials: bool) -> int:
        """Output channels of one convolution group the AMP computes at once, its conv units
        (derived: MACs per cycle per tile / input elements per load; Mk2: 16 at FP16.16,
        8 with float partials, which halve the MACs (AI-Float, seed hands-on), 8 at FP32).
        A conv group with fewer output channels leaves the rest idle."""
        flops = (self.fp16_flops_per_cycle_per_tile if fp16
                 else self.fp32_flops_per_cycle_per_tile)
        macs = flops // 2 // (1 if half_partials or not fp16 else 2)
        return max(1, macs // (self.amp_input_load_bits // (16 if fp16 else 32)))


IPUS: dict[str, IpuSpec] = {
    "mk1": IpuSpec(
        name="mk1",
        tiles=1216,
        sram_bytes_per_tile=256 * KIB,
        clock_hz=1.6e9,
        fp16_flops_per_cycle_per_tile=64,
        fp32_flops_per_cycle_per_tile=16,
        sram_bytes_per_s=45e12,
        exchange_bytes_per_s=7.7e12,
        host_link_bytes_per_s=16 * GB,  # PCIe Gen3 x16
        streaming_memory_bytes_per_s=12 * GB,  # estimate: host memory over PCIe Gen3
        memory_bank_bytes=32 * KIB,
        # derived: "3 links of 64 GB/s between the 2 IPUs of a C2 card" (ipu-hardware.md), both
        # directions, so 32 GB/s a link a direction
        ipu_link_bytes_per_s=32 * GB,
    ),
    "mk2": IpuSpec(
        name="mk2",
        tiles=1472,
        sram_bytes_per_tile=624 * KIB,
        clock_hz=1.33e9,
        fp16_flops_per_cycle_per_tile=128,
        fp32_flops_per_cycle_per_tile=32,
        sram_bytes_per_s=47.5e12,
        exchange_bytes_per_s=8e12,
        host_link_bytes_per_s=16 * GB,  # PCIe Gen4 x8 to the gateway, per IPU
        streaming_memory_bytes_per_s=16 * GB,  # estimate
        memory_bank_bytes=16 * KIB,
        # read: poplibs' IPU cost model (lib/poplibs_test/Util.cpp), 128 Gbit/s a link; 10 links
        # x 2 directions x 16 GB/s are the 320 GB/s an IPU of the reference table
        ipu_link_bytes_per_s=16 * GB,
    ),
    "bow": IpuSpec(
        name="bow",
        tiles=1472,
        sram_bytes_per_tile=624 * KIB,
        clock_hz=1.85e9,
        fp16_flops_per_cycle_per_tile=128,
        fp32_flops_per_cycle_per_tile=32,
        # derived: the Mk2 figures x the clock ratio, as the C600's: the Bow IPU's tiles are the
        # GC200's, so per cycle they move what a Mk2 tile moves (the ~65 and ~11 TB/s the
        # reference gives are these, rounded down).
        sram_bytes_per_s=47.5e12 * 1.85 / 1.33,
        exchange_bytes_per_s=8e12 * 1.85 / 1.33,
        host_link_bytes_per_s=16 * GB,
        streaming_memory_bytes_per_s=16 * GB,  # estimate
        memory_bank_bytes=16 * KIB,
        # estimate: the Mk2's links (the Bow-2000's printed "512 Gbps per link" is doubtful in
        # ipu-hardware.md and no other source gives Bow's)
        ipu_link_bytes_per_s=16 * GB,
    ),
    # The C600 PCIe card: one Mk2 GC200 in a host's PCIe slot, clocked at 1.5 GHz (read:
    # ByteMLPerf's IPU report, bytedance/ByteMLPerf byte_mlperf/reports/IPU/, and Graphcore's
    # C600 product brief); the chip is the Mk2's, so its per-cycle figures are. The bandwidths
    # that run on the IPU's clock scale with it.
    "c600": IpuSpec(
        name="c600",
        tiles=1472,  # read: the Mk2 GC200
        sram_bytes_per_tile=624 * KIB,  # read: the Mk2 GC200
        clock_hz=1.5e9,  # read
        fp16_flops_per_cycle_per_tile=128,  # derived as Mk2: 282.6 TFLOP/s fp16 at 1.5 GHz
        fp32_flops_per_cycle_per_tile=32,
        sram_bytes_per_s=47.5e12 * 1.5 / 1.33,  # derived: the Mk2 figure x the clock ratio
        exchange_bytes_per_s=8e12 * 1.5 / 1.33,  # derived: the Mk2 figure x the clock ratio
        # derived: PCIe Gen4 x16 straight to the host, 64 GB/s both ways, 32 GB/s per direction
        host_link_bytes_per_s=32 * GB,
        streaming_memory_bytes_per_s=32 * GB,  # estimate: host memory over that link
        memory_bank_bytes=16 * KIB,  # read: the Mk2 GC200
        ipu_link_bytes_per_s=16 * GB,  # read: the Mk2 GC200's links (poplibs, as "mk2")
    ),
}


@dataclass(frozen=True)
class MachineSpec:
    """The IPU-Machine an IPU comes in and the IPU-Fabric joining machines
    (IPU-M2000 / Bow-2000 datasheets, docs/references.md)."""

    name: str
    # read: an IPU-M2000 / Bow-2000 holds 4 IPUs (a Mk1 C2 card 2).
    ipus_per_machine: int
    # read: IPU-Links join the machines of an IPU-Link domain of up to 64 IPUs (an IPU-POD64);
    # larger systems are PODs joined over GW-Links (Mk1: estimate, 8 C2 cards of an IPU-Server).
    ipu_link_domain_ipus: int
    # read: each machine reaches its host over 2 x 100 GbE RoCE, ~12.5 GB/s per port.
    host_port_bytes_per_s: float
    # read: 2 x 100 GbE GW-Links per machine join IPU-Link domains (PODs); derived 25 GB/s.
    gw_link_bytes_per_s: float
    # estimate: one GW-Link collective step (a RoCE round trip through the gateways); no public
    # figure: two PCIe legs and a 100 GbE RoCE round trip through the gateways, ~10 us.
    gw_link_step_latency_s: float = 10e-6
    # read: poplibs' IPU cost model (lib/poplibs_test/Util.cpp): sync latency 15 ns per hop.
    sync_latency_per_hop_s: float = 15e-9
    # A PCIe card sits in its host server: its PCIe link is the whole host path (no gateway,
    # no network leg between the server and the IPUs).
    in_server: bool = False


# Machines by IPU generation.
MACHINES: dict[str, MachineSpec] = {
    # Mk1: a C2 card in a host (read: PCIe Gen3 x16 to it); no GW-Links, so the figure for
    # joining domains is an estimate (one 100 GbE port of the host).
    "mk1": MachineSpec("C2 card", ipus_per_machine=2, ipu_link_domain_ipus=16,
                       host_port_bytes_per_s=16 * GB, gw_link_bytes_per_s=12.5 * GB),
    "mk2": MachineSpec("IPU-M2000", ipus_per_machine=4, ipu_link_domain_ipus=64,
                       host_port_bytes_per_s=25 * GB, gw_link_bytes_per_s=25 * GB),
    "bow": MachineSpec("Bow-2000", ipus_per_machine=4, ipu_link_domain_ipus=64,
                       host_port_bytes_per_s=25 * GB, gw_link_bytes_per_s=25 * GB),
    # C600: one IPU per card, its PCIe Gen4 x16 link is the card's host port (derived: 32 GB/s
    # per direction, no gateway). estimate: IPU-Link cables join up to 8 cards (C600 product
    # brief); no GW-Links, so joining domains is an estimate (one 100 GbE port of the host).
    "c600": MachineSpec("C600 card", ipus_per_machine=1, ipu_link_domain_ipus=8,
                        host_port_bytes_per_s=32 * GB, gw_link_bytes_per_s=12.5 * GB,
                        in_server=True),
}


@dataclass(frozen=True)
class HostSpec:
    """One host server feeding IPU-Machines; PopRun instances (`plan.host_instances`) share its
    cores and network bandwidth.

    The host-pipeline rates left at None take the calibrated defaults of the simulator
    (`ipu_tune.simulator.DEFAULT_CONSTANTS`, fitted to the seed tutorial's measured rates); set
    them to describe a faster or slower host.
    """

    # CPU cores for the loader workers and the instances' own processes. estimate: the host
    # servers of Graphcore's MLPerf systems, dual AMD EPYC 7742 (2 x 64 cores).
    cpu_cores: int = 128
    # Network bandwidth from the server to the IPU-Machines it feeds. estimate: one dual-port
    # 100 GbE RoCE NIC, 2 x 12.5 GB/s (the machines' host ports are 100 GbE RoCE).
    network_bytes_per_s: float = 25 * GB
    # Load + augment one sample on one worker (seed: decode, flip, resize, PILToTensor).
    preprocess_s_per_sample: float | None = None
    # Host dtype conversion + normalisation per input element (skipped by 8-bit I/O).
    convert_s_per_element: float | None = None
    # Host-device round trip per model call and instance, amortised by device iterations.
    call_overhead_s: float | None = None


HOST = HostSpec()


@dataclass(frozen=True)
class System:
    """What the hardware is: IPUs in their machines, how many, and the host servers."""

    ipu: IpuSpec
    num_ipus: int
    hosts: int = 1  # host servers
    host: HostSpec = HOST
    machine: MachineSpec = MACHINES["mk2"]

    @property
    def machines(self) -> int:
        return max(1, -(-self.num_ipus // self.machine.ipus_per_machine))

    @property
    def pods(self) -> int:
        """IPU-Link domains (PODs) the IPUs span; PODs talk over GW-Links."""
        return max(1, -(-self.num_ipus // self.machine.ipu_link_domain_ipus))


def make_system(ipu: str, num_ipus: int, hosts: int | None = None,
                host: HostSpec = HOST) -> System:
    """A preset IPU (`IPUS`) times `num_ipus` in its machines (`MACHINES`), fed by `hosts`
    host servers (1..num_ipus; None: one per 16 IPUs, as `system.hosts: null`)."""
    if ipu not in IPUS:
        raise bad_value("system.ipu", ipu, "allowed: " + ", ".join(IPUS), IPUS)
    if num_ipus < 1:
        raise bad_value("system.num_ipus", num_ipus, "must be >= 1")
    hosts = host_servers(num_ipus, hosts)
    if not 1 <= hosts <= num_ipus:
        raise bad_value("system.hosts", hosts, f"must be in 1..system.num_ipus={num_ipus}")
    return System(ipu=IPUS[ipu], num_ipus=num_ipus, hosts=hosts, host=host,
                  machine=MACHINES[ipu])


def system_from_config(cfg: SystemConfig) -> System:
    """The `system:` section of a config as a `System` (`system.host` overrides the server)."""
    host = cfg.host
    return _system(cfg.ipu, cfg.num_ipus, cfg.servers, host.cpu_cores, host.network_bytes_per_s)


# Memoised (the System is frozen): a study builds every trial's case on the same system, and
# `evaluate` builds one per call. typed=True: 1 and 1.0 are not the same key.
@lru_cache(maxsize=256, typed=True)
def _system(ipu: str, num_ipus: int, hosts: int, cpu_cores: int | None,
            network_bytes_per_s: float | None) -> System:
    host = HOST
    if cpu_cores is not None:
        host = replace(host, cpu_cores=int(cpu_cores))
    if network_bytes_per_s is not None:
        host = replace(host, network_bytes_per_s=float(network_bytes_per_s))
    return make_system(ipu, num_ipus, hosts, host)
