"""Problem model: graph, device catalogue, validation."""

from placement.model.problem import (ACCELERATOR, CPU, DeviceType, Edge, Node, Problem,
                                     make_two_type_problem, validate)

__all__ = ["ACCELERATOR", "CPU", "DeviceType", "Edge", "Node", "Problem", "make_two_type_problem", "validate"]
