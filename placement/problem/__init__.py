"""Instance model: graph, device catalogue, validation."""

from placement.problem.instance import (ACCELERATOR, CPU, DeviceType, Edge, Node, Instance,
                                     make_two_type_problem, validate)

__all__ = ["ACCELERATOR", "CPU", "DeviceType", "Edge", "Node", "Instance", "make_two_type_problem", "validate"]
