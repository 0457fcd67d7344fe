"""The accelerator template: a chip's parameters, its area and its thermal design power (TDP).

Model
-----
A chip is DRAM (bandwidth :data:`DRAM_BYTES_PER_S`, capacity :data:`DRAM_BYTES`) feeding a
global buffer of ``buffer_mb`` MB of SRAM, which feeds ``tensor_cores`` systolic arrays of
``array_width × array_depth`` multiply-accumulate units (MACs) and ``vector_cores`` vector units of
``vector_lanes`` lanes each, all at the clock :data:`CLOCK_HZ`, on 16-bit data. Chips of a pipeline
exchange activations over a link of :data:`LINK_BYTES_PER_S`. ::

    area(d) = AREA_FIXED_MM2 + MACs(d)·AREA_PER_MAC_MM2 + lanes(d)·AREA_PER_LANE_MM2
              + buffer_mb·AREA_PER_MB_MM2
    TDP(d)  = POWER_FIXED_W + DRAM_POWER_W + area(d)·LEAKAGE_W_PER_MM2
              + CLOCK_HZ·(MACs(d)·ENERGY_PER_MAC_J + lanes(d)·ENERGY_PER_LANE_OP_J)
              + buffer_mb·SRAM_W_PER_MB

with ``MACs(d) = tensor_cores·array_width·array_depth`` and ``lanes(d) = vector_cores·vector_lanes``:
the TDP is the power with every unit busy every cycle and DRAM streaming at full bandwidth.
The TDP is rounded to a multiple of :data:`POWER_QUANTUM_W` (2^-10 W), so that sums of TDPs over
a pipeline's chips are exact in floating point.

Sources
-------
The clock, the data width, the DRAM bandwidth and the area budget are the setting of WHAM
(M. Adnan, A. Phanishayee, J. Kulkarni, P. J. Nair, D. Mahajan, "Workload-Aware Hardware
Accelerator Mining for Distributed Deep Learning Training", arXiv:2404.14632, 2024), which are
those of Google's TPUv2 (N. P. Jouppi et al., "A domain-specific supercomputer for training deep
neural networks", CACM 63(7), 2020: 700 MHz, 16 GiB HBM at 700 GB/s, two cores with one 128×128
MXU each, 16 nm). The per-unit areas and energies below are this package's estimates for a 16 nm
process (stated as such at each constant), chosen so that a TPUv2-like design (2 × 128×128
arrays, 32 MB of buffer) fits the 606.68 mm² budget with room for the rest of the chip; they are
parameters of a model, not measurements, and every figure the package reports is relative to them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from placement.problem.memory_fit import as_written

#: Clock (Hz): WHAM's setting (arXiv:2404.14632), TPUv2's clock.
CLOCK_HZ = 700e6
#: Bytes per element: WHAM's 16-bit data.
ELEMENT_BYTES = 2
#: DRAM bandwidth (bytes/s): WHAM's setting, TPUv2's HBM.
DRAM_BYTES_PER_S = 700e9
#: DRAM capacity per chip (bytes): TPUv2's 16 GiB of HBM (Jouppi et al. 2020).
DRAM_BYTES = 16 * 2**30
#: Chip-to-chip link bandwidth per direction (bytes/s): estimate, of the order of one TPUv2 inter-core link.
LINK_BYTES_PER_S = 62.5e9
#: WHAM's per-chip area budget (mm²).
AREA_BUDGET_MM2 = 606.68

#: Area of what every design has: HBM PHYs, chip-to-chip links, control (mm²; estimate).
AREA_FIXED_MM2 = 100.0
#: Area of one 16-bit MAC with its systolic-array registers (mm²; estimate for 16 nm).
AREA_PER_MAC_MM2 = 0.0065
#: Area of one vector lane: an FP32 ALU and its register file slice (mm²; estimate for 16 nm).
AREA_PER_LANE_MM2 = 0.02
#: Area of 1 MB of buffer SRAM with its banks' periphery (mm²; estimate for 16 nm).
AREA_PER_MB_MM2 = 1.2

#: Power of the fixed logic (W; estimate).
POWER_FIXED_W = 10.0
#: DRAM interface power at full bandwidth: 700 GB/s at about 6 pJ/bit for HBM (W; estimate).
DRAM_POWER_W = DRAM_BYTES_PER_S * 8 * 6e-12
#: Leakage per mm² of die (W/mm²; estimate).
LEAKAGE_W_PER_MM2 = 0.05
#: Energy of one 16-bit MAC with its operand movement in the array (J; estimate for 16 nm).
ENERGY_PER_MAC_J = 5e-12
#: Energy of one vector-lane operation (J; estimate).
ENERGY_PER_LANE_OP_J = 10e-12
#: Power of 1 MB of buffer SRAM at full access rate, leakage included (W/MB; estimate).
SRAM_W_PER_MB = 0.3
#: Buffer bandwidth per MB of SRAM: one 64-byte bank port per MB (bytes per cycle; estimate).
BUFFER_BYTES_PER_CYCLE_PER_MB = 64.0
#: The TDP is a multiple of this (W), so that sums of TDPs are exact.
POWER_QUANTUM_W = 2.0 ** -10

#: The parameters of a design, in the order of :class:`Design`'s fields and of a grid file's keys.
PARAMETERS = ("tensor_cores", "array_width", "array_depth", "vector_cores", "vector_lanes", "buffer_mb")


@dataclass(frozen=True, order=True)
class Design:
    """One chip design of the template (module docstring): counts and sizes of its units."""

    tensor_cores: int
    array_width: int
    array_depth: int
    vector_cores: int
    vector_lanes: int
    buffer_mb: float

    @property
    def macs(self) -> int:
        return self.tensor_cores * self.array_width * self.array_depth

    @property
    def lanes(self) -> int:
        return self.vector_cores * self.vector_lanes

    @property
    def area_mm2(self) -> float:
        return area_mm2(self)

    @property
    def tdp_w(self) -> float:
        return tdp_w(self)

    @property
    def label(self) -> str:
        """A short name, e.g. ``tc2x128x128-vc2x128-buf32``: tensor cores × width × depth, vector cores ×
        lanes, buffer MB (every digit it needs: the label names one design, and the placement of a
        co-design names its chips by their labels)."""
        buffer = repr(float(self.buffer_mb))
        return (f"tc{self.tensor_cores}x{self.array_width}x{self.array_depth}-vc{self.vector_cores}x"
                f"{self.vector_lanes}-buf{buffer[:-2] if buffer.endswith('.0') else buffer}")

    def as_dict(self) -> dict:
        """The parameters, with the derived area (mm²) and TDP (W)."""
        out = {name: getattr(self, name) for name in PARAMETERS}
        out.update(label=self.label, area_mm2=self.area_mm2, tdp_w=self.tdp_w)
        return out


def area_mm2(design: Design) -> float:
    """The chip's area (mm²) by the model of the module docstring: the float nearest its exact value
    on the constants as written, so that a budget equal to a design's area holds it (their
    floating-point sum was one unit in the last place above the budget for 183 of 10,000 designs)."""
    return _area(design.macs, design.lanes, float(design.buffer_mb))


@functools.lru_cache(maxsize=65536)
def _area(macs: int, lanes: int, buffer_mb: float) -> float:
    return float(as_written(AREA_FIXED_MM2) + macs * as_written(AREA_PER_MAC_MM2)
                 + lanes * as_written(AREA_PER_LANE_MM2) + as_written(buffer_mb) * as_written(AREA_PER_MB_MM2))


def tdp_w(design: Design) -> float:
    """The chip's thermal design power (W) by the model of the module docstring, a multiple of
    :data:`POWER_QUANTUM_W`."""
    power = (POWER_FIXED_W + DRAM_POWER_W + area_mm2(design) * LEAKAGE_W_PER_MM2
             + CLOCK_HZ * (design.macs * ENERGY_PER_MAC_J + design.lanes * ENERGY_PER_LANE_OP_J)
             + design.buffer_mb * SRAM_W_PER_MB)
    return round(power / POWER_QUANTUM_W) * POWER_QUANTUM_W
