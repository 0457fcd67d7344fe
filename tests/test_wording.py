"""Counts in reports read as English: one of a thing is singular (`1 block evaluated`, not `1 blocks`)."""

from __future__ import annotations

from placement.wording import counted, rounded_duration


def test_counted_nouns():
    assert counted(1, "block evaluated") == "1 block evaluated"
    assert counted(2, "block evaluated") == "2 blocks evaluated"
    assert counted(0, "level") == "0 levels"
    assert counted(12345, "ideal") == "12,345 ideals"
    assert counted(1, "micro-batch", "micro-batches") == "1 micro-batch"
    assert counted(3, "micro-batch", "micro-batches") == "3 micro-batches"
    # a first word ending in a hiss takes "es" (it gave "micro-batchs" unless the plural was given)
    assert [counted(2, word) for word in ("micro-batch", "pass run", "box", "mesh")] == \
        ["2 micro-batches", "2 passes run", "2 boxes", "2 meshes"]


def test_rounded_durations():
    assert [rounded_duration(s) for s in (0.4, 40, 119.4, 720, 7199, 12600)] == \
        ["0 s", "40 s", "119 s", "12 min", "120 min", "3.5 h"]


def test_a_solve_of_one_block_says_so():
    """A one-node instance is solved by evaluating one block: its one node on the accelerator."""
    import placement
    from placement.report.solution import format_summary

    problem = placement.load({"maxSizePerFPGA": 10, "maxFPGAs": 1, "maxCPUs": 0,
                              "nodes": [{"id": 1, "supportedOnFpga": 1, "fpgaLatency": 2.0, "cpuLatency": 5.0,
                                         "isBackwardNode": 0, "size": 1}], "edges": []})
    result = placement.solve(problem, method="dp")
    summary = format_summary(problem, result)
    assert result.stats["blocks_evaluated"] == 1 and "1 block evaluated" in summary, summary
