"""The roofline cost model and the device catalogue (placement.costmodel.roofline)."""

from __future__ import annotations

import json

import pytest

from placement.costmodel.roofline import (Platform, bundled_catalogue, find_device, load_catalogue, make_platform,
                                          parse_catalogue, roofline_ms, transfer_ms)
from placement.errors import InvalidInstanceError, InvalidParameterError


def test_bundled_catalogue_holds_the_datasheet_figures():
    cat = bundled_catalogue()
    assert {"h100", "a100", "a100-40gb", "v100", "epyc-7763"} <= set(cat)
    h100 = cat["h100"]
    # H100 SXM datasheet: BF16 Tensor Core 1,979 TFLOPS with sparsity -> 989.5 dense; 3.35 TB/s; 80 GB.
    assert (h100.kind, h100.peak("bf16"), h100.peak("fp32")) == ("accelerator", 989.5e12, 67e12)
    assert (h100.memory_bandwidth, h100.memory) == (3.35e12, 80 * 2**30)
    # PCIe Gen5 128 GB/s and NVLink 900 GB/s, both directions together -> half each way.
    assert (h100.link_bandwidth(), h100.link_bandwidth("nvlink")) == (64e9, 450e9)
    assert cat["a100"].peak("fp16") == 312e12 and cat["a100"].memory_bandwidth == 2.039e12
    assert cat["a100-40gb"].memory_bandwidth == 1.555e12
    assert cat["v100"].peak("fp16") == 125e12 and cat["v100"].memory_bandwidth == 900e9
    epyc = cat["epyc-7763"]
    # 64 cores x 2.45 GHz x 32 FP32 FLOPs per cycle; 8 channels of DDR4-3200.
    assert (epyc.kind, epyc.peak("fp32"), epyc.memory_bandwidth) == ("cpu", 64 * 2.45e9 * 32, 8 * 25.6e9)
    assert all(spec.sources for spec in cat.values())
    # per-kernel overhead: 5 µs on the GPUs (launch and eager dispatch, cited in the catalogue), 30 µs on
    # the CPU (calibrated by benchmarks/torch_costs.py on this machine)
    assert [cat[d].op_overhead for d in ("h100", "a100", "a100-40gb", "v100", "epyc-7763")] == [5e-6] * 4 + [3e-5]
    assert all(any("overhead" in source for source in spec.sources) for spec in cat.values())


def test_roofline_is_the_larger_of_compute_and_memory_time():
    h100 = bundled_catalogue()["h100"]
    # compute-bound: 989.5e9 FLOPs in bf16 at 989.5 TFLOP/s = 1 ms; 1 MB at 3.35 TB/s is far less
    assert roofline_ms(989.5e9, 1e6, h100, "bf16") == 1e3 * (989.5e9 / 989.5e12)
    # memory-bound: 3.35e9 bytes at 3.35 TB/s = 1 ms; 1 GFLOP is far less
    assert roofline_ms(1e9, 3.35e9, h100, "fp32") == 1e3 * (3.35e9 / 3.35e12)
    # no FLOPs: no peak needed, even for a type the device lacks
    assert roofline_ms(0, 900e6, bundled_catalogue()["v100"], "bf16") == 1e3 * (900e6 / 900e9)
    assert transfer_ms(64e6, 64e9) == 1e3 * (64e6 / 64e9)


def test_each_kernel_adds_the_device_overhead():
    h100 = bundled_catalogue()["h100"]
    # a tiny add: 1,000 FLOPs and 12 kB take 3.6 ns of roofline; one kernel adds 5 µs
    assert roofline_ms(1e3, 12e3, h100, "fp32", 1) == 1e3 * (12e3 / 3.35e12 + 5e-6)
    # a view launches nothing: no overhead; a backward matmul launches two kernels
    assert roofline_ms(0, 0, h100, "fp32", 0) == 0.0
    assert roofline_ms(989.5e9, 0, h100, "bf16", 2) == 1e3 * (1.0e-3 + 2 * 5e-6)
    # a device without the field pays none
    bare = parse_catalogue({"devices": {"x": {"kind": "cpu", "peak_flops": {"fp32": 1e12},
                                              "memory_bandwidth": 1e11, "memory": 1}}})["x"]
    assert bare.op_overhead == 0.0 and roofline_ms(1e6, 0, bare, "fp32", 3) == 1e3 * 1e6 / 1e12


def test_a_missing_data_type_is_an_error_not_a_substitute():
    v100 = bundled_catalogue()["v100"]
    with pytest.raises(InvalidParameterError) as err:
        roofline_ms(1.0, 0.0, v100, "bf16")
    assert str(err.value) == ("dtype must be one of the data types with a peak FLOP/s on device 'v100' "
                              "(NVIDIA Tesla V100 SXM2 32GB): 'fp64', 'fp32', 'fp16', not 'bf16'")
    assert err.value.parameter == "dtype"


def test_user_catalogues_add_and_replace_devices(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"devices": {
        "tiny-gpu": {"model": "Tiny", "kind": "accelerator", "peak_flops": {"fp32": 1e12}, "memory_bandwidth": 1e11,
                     "memory": 2**30, "links": {"pcie": 8e9}, "default_link": "pcie"},
        "h100": {"model": "H100 derated", "kind": "accelerator", "peak_flops": {"fp32": 50e12},
                 "memory_bandwidth": 3e12, "memory": 80 * 2**30, "links": {"pcie": 64e9}, "default_link": "pcie"}}}))
    cat = load_catalogue([path])
    assert cat["tiny-gpu"].peak("fp32") == 1e12 and cat["tiny-gpu"].link_bandwidth() == 8e9
    assert cat["h100"].model == "H100 derated"          # replaced
    assert cat["v100"].model == "NVIDIA Tesla V100 SXM2 32GB"  # kept
    assert find_device(cat, "TINY-GPU").id == "tiny-gpu"
    platform = make_platform("tiny-gpu", "epyc-7763", 2, 0, catalogues=[path])
    assert (platform.accelerator_memory, platform.link_bandwidth) == (2**30, 8e9)


@pytest.mark.parametrize("entry, message", [
    ({"kind": "gpu"}, "device 'x': field 'kind' must be one of accelerator, cpu, got 'gpu'"),
    ({"kind": "cpu", "peak_flops": {"fp33": 1}}, "device 'x': peak_flops has unknown data type 'fp33' "
                                                 "(known: fp64, fp32, tf32, fp16, bf16, fp8)"),
    ({"kind": "cpu", "peak_flops": {}}, "device 'x': field 'peak_flops' must give at least one data type"),
    ({"kind": "cpu", "peak_flops": {"fp32": -1}}, "device 'x': peak_flops: field 'fp32' must be positive and "
                                                  "finite, got -1"),
    ({"kind": "cpu", "peak_flops": {"fp32": 1}, "memory": 1}, "device 'x': missing field 'memory_bandwidth'"),
    ({"kind": "cpu", "peak_flops": {"fp32": 1}, "memory_bandwidth": 1, "memory": 1, "op_overhead": -1e-6},
     "device 'x': field 'op_overhead' must be non-negative and finite, got -1e-06"),
    ({"kind": "cpu", "peak_flops": {"fp32": 1}, "memory_bandwidth": 1, "memory": 1, "op_overhead": "5us"},
     "device 'x': field 'op_overhead' must be a number, got string"),
    ({"kind": "accelerator", "peak_flops": {"fp32": 1}, "memory_bandwidth": 1, "memory": 1},
     "device 'x': an accelerator needs 'links' and a 'default_link' (transfer costs use them)"),
    ({"kind": "accelerator", "peak_flops": {"fp32": 1}, "memory_bandwidth": 1, "memory": 1, "links": {"a": 1},
      "default_link": "b"}, "device 'x': field 'default_link' must name one of its links ('a'), got 'b'"),
    # as JSON spells it: it read "default_link True is not one of its links"
    ({"kind": "accelerator", "peak_flops": {"fp32": 1}, "memory_bandwidth": 1, "memory": 1, "links": {},
      "default_link": True}, "device 'x': field 'default_link' must name one of its links (none), got true"),
    # ignored, a misspelt overhead left every kernel free
    ({"kind": "cpu", "peak_flops": {"fp32": 1}, "memory_bandwidth": 1, "memory": 1, "op_overheads": 5e-6},
     "device 'x': unknown field 'op_overheads'; did you mean 'op_overhead'? (a field this like one the format reads "
     "is refused, not ignored)"),
])
def test_bad_catalogue_entries_name_the_device_and_field(tmp_path, entry, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"devices": {"x": entry}}))
    with pytest.raises(InvalidInstanceError) as err:
        load_catalogue([path])
    assert str(err.value) == f"{path}: {message}"


def test_other_catalogue_fields_are_ignored():
    entry = {"kind": "cpu", "peak_flops": {"fp32": 1e12}, "memory_bandwidth": 1e11, "memory": 2 ** 30}
    noted = parse_catalogue({"devices": {"x": {**entry, "vendor": "ACME", "notes": ["a test device"]}}})
    assert noted == parse_catalogue({"devices": {"x": entry}})


def test_catalogue_file_errors(tmp_path):
    with pytest.raises(InvalidInstanceError, match="no such file"):
        load_catalogue([tmp_path / "missing.json"])
    path = tmp_path / "list.json"
    path.write_text("[]")
    with pytest.raises(InvalidInstanceError) as err:
        load_catalogue([path])
    assert str(err.value) == f"{path}: a device catalogue must be a JSON object, got array"


def test_platform_checks_kinds_counts_and_links():
    cat = bundled_catalogue()
    with pytest.raises(InvalidParameterError, match="^accelerator must be an accelerator, not device 'epyc-7763' "
                                                    "\\(a cpu\\)$"):
        Platform(cat["epyc-7763"], cat["epyc-7763"], 1, 1)
    with pytest.raises(InvalidParameterError, match="^cpu must be a CPU, not device 'h100' \\(an accelerator\\)$"):
        Platform(cat["h100"], cat["h100"], 1, 1)
    with pytest.raises(InvalidParameterError, match="^cpus must be a non-negative integer, not -1$"):
        Platform(cat["h100"], cat["epyc-7763"], 1, -1)
    with pytest.raises(InvalidParameterError, match="^accelerators must be at least 1 when there are no CPUs: a "
                                                    "platform needs at least one device$"):
        Platform(cat["h100"], cat["epyc-7763"], 0, 0)
    with pytest.raises(InvalidParameterError, match="^link must be a link of device 'h100' \\(links: 'pcie', "
                                                    "'nvlink'\\), not 'ethernet'$"):
        Platform(cat["h100"], cat["epyc-7763"], 1, 0, link="ethernet")
    with pytest.raises(InvalidParameterError, match="^accelerator must name a device of the catalogue \\(a100, "
                                                    "a100-40gb, epyc-7763, h100, v100\\), not 'tpu'$"):
        make_platform("tpu")
    with pytest.raises(InvalidParameterError, match="^cpu must name a device of the catalogue"):
        make_platform(cpu="xeon")
    with pytest.raises(InvalidParameterError, match="^device must name a device of the catalogue"):
        find_device(cat, "xeon")


def test_device_ids_are_case_insensitive_in_catalogue_files(tmp_path):
    entry = {"kind": "accelerator", "peak_flops": {"fp32": 1e12}, "memory_bandwidth": 1e11, "memory": 2**30,
             "links": {"pcie": 8e9}, "default_link": "pcie"}
    both = tmp_path / "both.json"
    both.write_text(json.dumps({"devices": {"acc": {**entry, "model": "mine"}, "ACC": {**entry, "model": "other"}}}))
    with pytest.raises(InvalidInstanceError) as err:   # find_device(..., "acc") picked 'ACC', the last one read
        load_catalogue([both])
    assert str(err.value) == (f"{both}: devices 'acc' and 'ACC' differ only in case; device ids are "
                              "case-insensitive, so which one is meant is not clear")
    upper = tmp_path / "upper.json"
    upper.write_text(json.dumps({"devices": {"H100": {**entry, "model": "H100 derated"}}}))
    cat = load_catalogue([upper])
    assert "h100" not in cat and cat["H100"].model == "H100 derated"
    assert find_device(cat, "h100").model == "H100 derated"
    lower = tmp_path / "lower.json"
    lower.write_text(json.dumps({"devices": {"h100": {**entry, "model": "H100 again"}}}))
    assert [spec.model for key, spec in load_catalogue([upper, lower]).items() if key.lower() == "h100"] == [
        "H100 again"]


@pytest.mark.parametrize("device_id", ["", "  ", " acc"])
def test_a_device_id_no_lookup_can_name_is_refused(tmp_path, device_id):
    # an empty id was read, and listed among the devices as '(, a100, ...'
    entry = {"kind": "accelerator", "peak_flops": {"fp32": 1e12}, "memory_bandwidth": 1e11, "memory": 2**30,
             "links": {"pcie": 8e9}, "default_link": "pcie"}
    path = tmp_path / "cat.json"
    path.write_text(json.dumps({"devices": {device_id: entry}}))
    with pytest.raises(InvalidInstanceError) as err:
        load_catalogue([path])
    assert str(err.value) == (f"{path}: device id {device_id!r} is no name to look up: give it a non-empty id "
                              "without leading or trailing spaces")


def test_platform_parameters_of_the_wrong_type_are_named(tmp_path):
    cat = bundled_catalogue()
    with pytest.raises(InvalidParameterError) as err:   # a TypeError from math.isfinite
        Platform(cat["h100"], cat["epyc-7763"], 1, 0, memory="80GiB")
    assert str(err.value) == "memory must be a finite non-negative number of bytes or None, not '80GiB'"
    with pytest.raises(InvalidParameterError) as err:   # accepted: a memory of 1 byte
        Platform(cat["h100"], cat["epyc-7763"], 1, 0, memory=True)
    assert str(err.value) == "memory must be a finite non-negative number of bytes or None, not True"
    with pytest.raises(InvalidParameterError) as err:   # an AttributeError from str.lower
        make_platform(accelerator=3)
    assert str(err.value) == ("accelerator must name a device of the catalogue (a100, a100-40gb, epyc-7763, h100, "
                              "v100), not 3")
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"devices": {}}))
    with pytest.raises(InvalidParameterError) as err:   # read as the files named by each of its characters
        make_platform(catalogues=str(path))
    assert str(err.value) == f"catalogues must be a list of catalogue files, not the one path {str(path)!r}: " \
                             f"give [{str(path)!r}]"
    assert make_platform(catalogues=[path], memory=2**30).accelerator_memory == 2**30


CPU_ENTRY = {"kind": "cpu", "peak_flops": {"fp32": 1e12}, "memory_bandwidth": 1e11, "memory": 2**30}


@pytest.mark.parametrize("given, shown", [("placement-devices/2", "'placement-devices/2'"), (7, "7"), (None, "null"),
                                          ("placement-plans/1", "'placement-plans/1'")])
def test_a_catalogue_that_says_another_format_is_refused(tmp_path, given, shown):
    # the field was ignored: a file of another version of the format was read as this one
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"format": given, "devices": {"x": CPU_ENTRY}}))
    with pytest.raises(InvalidInstanceError) as err:
        load_catalogue([path])
    assert str(err.value) == f"{path}: field 'format' must be 'placement-devices/1', got {shown}"


def test_a_catalogue_gives_its_format_or_none(tmp_path):
    """As a plan file: the bundled file says its format, the documented example of a user's file does not."""
    from pathlib import Path
    import re

    from placement.costmodel.roofline import CATALOGUE_FORMAT

    root = Path(__file__).resolve().parents[1]
    assert json.loads((root / "placement" / "costmodel" / "devices.json").read_text())["format"] == CATALOGUE_FORMAT
    assert parse_catalogue({"format": CATALOGUE_FORMAT, "devices": {"x": CPU_ENTRY}}) == parse_catalogue(
        {"devices": {"x": CPU_ENTRY}})
    (example,) = [block for block in re.findall(r"^```json\n(.*?)^```", (root / "docs" / "pytorch.md").read_text(),
                                                flags=re.S | re.M) if '"my-gpu"' in block]
    assert "format" not in json.loads(example) and list(parse_catalogue(json.loads(example))) == ["my-gpu"]


@pytest.mark.parametrize("document, what", [
    ({"format": "placement-plan/1", "devices": [{"type": "accelerator", "nodes": [1]}]}, "a plan"),
    ({"maxFPGAs": 1, "maxCPUs": 0, "maxSizePerFPGA": 1, "nodes": [], "edges": []}, "an instance or a model file"),
    ({"format": "megatron", "split": "E|L", "notes": [], "warnings": [], "order": None},
     "a split (the hand-off form of a plan)"),
    ({"status": "optimal", "objective": "throughput", "value": 727.7, "designs": [], "plan": [], "chips": 2},
     "a co-design result"),
    ({"format": "placement-network/1", "name": "SFC", "layers": []}, "a placement-network/1 document"),
], ids=["plan", "instance", "split", "co-design result", "network"])
def test_another_document_given_as_a_catalogue_is_named(tmp_path, document, what):
    # before: "a device catalogue needs an object field 'devices' (id -> device)", and a plan's format was ignored
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(document))
    with pytest.raises(InvalidInstanceError) as err:
        load_catalogue([path])
    assert str(err.value) == (f"{path}: the document is {what}, not a device catalogue, which has an object "
                              "'devices' (id -> device)")


def test_numpy_counts_are_the_counts_they_hold():
    """accelerators=np.int64(4) was refused as 'must be a non-negative integer, not np.int64(4)', where every other
    count of the package takes numpy's integers."""
    import numpy as np

    platform = make_platform("h100", "epyc-7763", accelerators=np.int64(4), cpus=np.int32(1))
    assert (platform.accelerators, platform.cpus) == (4, 1)
    assert type(platform.accelerators) is int and type(platform.cpus) is int


@pytest.mark.parametrize("catalogues, message", [
    (None, "catalogues must be a list of catalogue files, not NoneType"),
    (3, "catalogues must be a list of catalogue files, not int"),
    ([None], "catalogues must list catalogue file paths, not NoneType")])
def test_catalogues_that_are_no_list_of_files_are_refused_by_name(catalogues, message):
    """None as the catalogues, or as one of them, ended make_platform in a TypeError ('NoneType' object is not
    iterable; expected str, bytes or os.PathLike object)."""
    with pytest.raises(InvalidParameterError) as error:
        make_platform("h100", "epyc-7763", catalogues=catalogues)
    assert str(error.value) == message


def test_a_misspelt_keyword_of_make_platform_names_the_one_meant():
    """docs/pytorch.md calls make_platform from Python: it said only 'got an unexpected keyword argument', where
    placement.solve names the keyword meant."""
    with pytest.raises(TypeError) as error:
        make_platform("h100", "epyc-7763", accelerators=4, catalogue=["devices.json"])
    assert str(error.value) == "make_platform() got an unexpected keyword argument 'catalogue'; did you mean " \
                               "'catalogues'?"
