"""Network descriptions: the bundled networks and the file format's error messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from placement.costmodel.network import Layer, Network, bundled_networks, load_network, parse_network, read_network
from placement.errors import InvalidInstanceError, InvalidParameterError


def test_bundled_names():
    assert bundled_networks() == ("cifar-c", "lenet-c", "sfc", "vgg-a", "vgg-b", "vgg-c", "vgg-d", "vgg-e")


@pytest.mark.parametrize("name, layers, params", [
    # conv1 1·20·25 = 500, conv2 20·50·25 = 25,000, ip1 800·500 = 400,000, ip2 500·10 = 5,000
    ("lenet-c", 4, 430_500),
    # conv1 3·32·25 = 2,400, conv2 32·32·25 = 25,600, conv3 32·64·25 = 51,200, ip1 1024·64 = 65,536, ip2 640
    ("cifar-c", 5, 145_376),
    # 784·8192 + 2·8192² + 8192·10 = 6,422,528 + 134,217,728 + 81,920
    ("sfc", 4, 140_722_176),
    # VGG weights without biases: the paper's 133M/133M/134M/138M/144M less 11,944 / 12,008 / 12,008 /
    # 13,416 / 14,696 biases; e.g. VGG-A conv 9,217,728 + fc 102,760,448 + 16,777,216 + 4,096,000
    ("vgg-a", 11, 132_851_392),
    ("vgg-b", 13, 133_035_712),
    ("vgg-c", 16, 133_625_536),
    ("vgg-d", 16, 138_344_128),
    ("vgg-e", 19, 143_652_544),
])
def test_bundled_network_sizes(name, layers, params):
    network = load_network(name)
    assert len(network.layers) == layers
    assert network.parameters == params
    assert network.source


def test_conv_output_is_after_pooling():
    lenet = load_network("LeNet-C")     # names are case-insensitive
    conv2 = lenet.layers[1]
    assert (conv2.in_shape, conv2.out_shape, conv2.kernel) == ((20, 12, 12), (50, 4, 4), 5)
    assert conv2.output_elements(256) == 256 * 800 == lenet.layers[2].input_elements(256)
    vgg = load_network("vgg-c")
    assert [layer.kernel for layer in vgg.layers if layer.name in ("conv3_3", "conv4_3", "conv5_3")] == [1, 1, 1]


def test_read_network_file(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({"layers": [{"name": "c", "type": "conv", "in": [1, 4, 4], "out": [2, 2, 2],
                                            "kernel": 3}, {"name": "f", "type": "fc", "in": 8, "out": [3]}]}))
    network = load_network(str(path))
    assert network.name == "tiny"
    assert network.parameters == 1 * 2 * 9 + 8 * 3


def _error(doc) -> str:
    with pytest.raises(InvalidInstanceError) as info:
        parse_network(doc)
    return str(info.value)


@pytest.mark.parametrize("doc, message", [
    ([], "a network must be a JSON object, got array"),
    ({"format": "x"}, "unknown network format 'x'; expected 'placement-network/1'"),
    # as the file spells it (json.loads reads NaN and Infinity): it said "nan"
    ({"format": float("nan")}, "unknown network format NaN; expected 'placement-network/1'"),
    ({}, "missing field 'layers'"),
    ({"layers": {}}, "field 'layers' must be an array, got object"),
    ({"layers": None}, "field 'layers' must be an array, got null"),   # it said "missing field 'layers'"
    ({"layers": []}, "the network has no layers"),
    ({"layers": [{"name": "a", "type": "fc", "in": 2}]}, "layer 0: missing field 'out'"),
    # a field the reader does not know, where the one it needs is missing: named with the layer's fields
    ({"layers": [{"name": "a", "kind": "fc", "in": 10, "out": 4}]},
     "layer 0: missing field 'type' (it has 'kind', which a layer does not read; a layer's fields are name, type, "
     "in, out, kernel, note)"),
    ({"layers": [{"name": "a", "type": "pool", "in": 2, "out": 2}]},
     "layer 0 (a): unknown type 'pool'; expected fc or conv"),
    ({"layers": [{"name": "a", "type": "conv", "in": [1, 2, 2], "out": [1, 2, 2]}]},
     "layer 0 (a): missing field 'kernel'"),
    ({"layers": [{"name": "a", "type": "conv", "in": [1, 2], "out": [1, 2, 2], "kernel": 1}]},
     "layer 0 (a): 'in' of a conv layer must have 3 dimensions, got 2"),
    ({"layers": [{"name": "a", "type": "fc", "in": [2, 2], "out": 2}]},
     "layer 0 (a): 'in' of an fc layer must have 1 dimension, got 2"),   # it said "of a fc layer"
    ({"layers": [{"name": "a", "type": "fc", "in": 0, "out": 2}]},
     "layer 0 (a): 'in' must hold positive integers, got [0]"),
    ({"layers": [{"name": "a", "type": "fc", "in": 2.5, "out": 2}]},
     "layer 0 (a): field 'in' must be a positive integer or an array of them, got 2.5"),
    ({"layers": [{"name": "c", "type": "conv", "in": [1, 4, 4], "out": [2, 2, 2], "kernel": 1.5}]},
     "layer 0 (c): field 'kernel' must be a positive integer, got 1.5"),
    # a whole number past 2^53 written as a float was told it "must be a positive integer"
    ({"layers": [{"name": "a", "type": "fc", "in": 1e20, "out": 2}]},
     "layer 0 (a): field 'in' reads 1e+20, a number not written as an integer, 2^53 = 9007199254740992 or more, "
     "where a double does not hold every integer (what was written may have been rounded to another); write it as "
     "an integer"),
    ({"layers": [{"name": "c", "type": "conv", "in": [1, 4, 4], "out": [2, 2, 2], "kernel": 2.0 ** 53}]},
     "layer 0 (c): field 'kernel' reads 9007199254740992, a number not written as an integer, 2^53 = "
     "9007199254740992 or more, where a double does not hold every integer (what was written may have been rounded "
     "to another); write it as an integer"),
    ({"layers": [{"name": "a", "type": "fc", "in": 2, "out": 3}, {"name": "a", "type": "fc", "in": 3, "out": 1}]},
     "layer 1 (a): duplicate layer name 'a'"),
    ({"layers": [{"name": "a", "type": "fc", "in": 2, "out": 3}, {"name": "b", "type": "fc", "in": 4, "out": 1}]},
     "layer 1 (b): takes 4 per sample but layer 0 (a) gives 3"),
    ({"layers": [{"name": "c", "type": "conv", "in": [1, 4, 4], "out": [2, 2, 2], "kernel": 3},
                 {"name": "d", "type": "conv", "in": [2, 4, 1], "out": [2, 1, 1], "kernel": 1}]},
     "layer 1 (d): takes 2x4x1 (8 elements) per sample but layer 0 (c) gives 2x2x2 (8 elements)"),
    ({"layers": [{"name": "a", "type": "fc", "in": 2, "out": 3, "kernel": 3}]},
     "layer 0 (a): an fc layer has no kernel (got 3)"),
    # a kernel past the input padded by its own size on each side: 20 x 99999^2 weights of which at most
    # 55^2 per filter ever meet the input; it was planned
    ({"layers": [{"name": "c", "type": "conv", "in": [1, 28, 28], "out": [20, 12, 12], "kernel": 99999}]},
     "layer 0 (c): field 'kernel' is 99999, larger than its input (field 'in': 28x28) padded on each side by as "
     "much again (84x84); a kernel's side may be at most three times the input's height and width"),
    ({"layers": [{"name": "c", "type": "conv", "in": [1, 28, 2], "out": [1, 1, 1], "kernel": 7}]},
     "layer 0 (c): field 'kernel' is 7, larger than its input (field 'in': 28x2) padded on each side by as "
     "much again (84x6); a kernel's side may be at most three times the input's height and width"),
    # a blank name labels nothing; a misspelt field would be read as missing (kernel 1, or no layers)
    ({"layers": [{"name": "  ", "type": "fc", "in": 2, "out": 3}]}, "layer 0: field 'name' must be a non-blank string"),
    ({"layers": [{"name": "c", "type": "conv", "in": [1, 4, 4], "out": [2, 2, 2], "kernal": 3}]},
     "layer 0: unknown field 'kernal'; did you mean 'kernel'? (a field this like one the format reads is refused, "
     "not ignored)"),
    ({"layer": [{"name": "a", "type": "fc", "in": 2, "out": 3}]},
     "unknown field 'layer'; did you mean 'layers'? (a field this like one the format reads is refused, not ignored)"),
])
def test_bad_network_messages(doc, message):
    assert _error(doc) == message


def test_whole_numbers_written_as_floats_are_read_as_integers():
    # 3.0 was refused ("got number") where an instance file reads 1.0 as the integer 1
    from placement.costmodel.network import parse_network

    written = {"layers": [{"name": "c", "type": "conv", "in": [1.0, 4, 4], "out": [2, 2.0, 2], "kernel": 3.0},
                          {"name": "f", "type": "fc", "in": 8.0, "out": 2}]}
    exact = {"layers": [{"name": "c", "type": "conv", "in": [1, 4, 4], "out": [2, 2, 2], "kernel": 3},
                        {"name": "f", "type": "fc", "in": 8, "out": 2}]}
    assert parse_network(written) == parse_network(exact)
    assert [type(d) for d in parse_network(written).layers[0].in_shape] == [int, int, int]


def test_file_errors_name_the_file(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{")
    with pytest.raises(InvalidInstanceError, match=r"bad.json: malformed JSON at line 1, column 2"):
        read_network(path)
    path.write_text(json.dumps({"layers": []}))
    with pytest.raises(InvalidInstanceError, match=r"bad.json: the network has no layers$"):
        read_network(path)
    with pytest.raises(InvalidInstanceError, match=r"unknown network 'vgg-z': no such file, and no bundled network of "
                                            r"that name \(bundled: cifar-c, lenet-c, sfc, vgg-a"):
        load_network("vgg-z")


def test_a_kernel_up_to_three_times_its_input_is_read():
    """A 3x3 kernel on a 1x1 input (padding 1, as in a ResNet's last stage on a small image) is a layer of 9
    weights per filter pair; a kernel of the input's size or of three times it is read too."""
    for kernel, side in ((3, 1), (7, 7), (6, 2)):
        network = parse_network({"layers": [{"name": "c", "type": "conv", "in": [2, side, side],
                                              "out": [4, 1, 1], "kernel": kernel}]})
        assert network.parameters == 2 * 4 * kernel * kernel


def test_a_shape_given_as_a_list_matches_the_same_shape_as_a_tuple():
    # conv c gives 2x2x2 (a list) and conv d takes 2x2x2 (a tuple): the list never equalled the tuple, so
    # the chain was refused with "takes 2x2x2 (8 elements) per sample but layer 0 (c) gives 2x2x2 (8 elements)"
    network = Network("lists", [Layer("c", "conv", [1, 4, 4], [2, 2, 2], 3),
                                Layer("d", "conv", (2, 2, 2), (2, 1, 1), 1)])
    assert network.layers[0].out_shape == network.layers[1].in_shape == (2, 2, 2)
    assert network.parameters == 1 * 2 * 9 + 2 * 2 * 1   # A(W) = C_in·C_out·K²: 18 + 4


@pytest.mark.parametrize("build, message", [
    (lambda: Network("x", None), "the layers of a network must be a sequence of Layer objects, got NoneType"),
    (lambda: Network("x", "fc"), "the layers of a network must be a sequence of Layer objects, got str"),
    (lambda: Network("x", ("fc",)), "layer 0: must be a Layer, got str"),
    (lambda: Network("x", [Layer(None, "fc", (3,), (2,))]), "layer 0: its name must be a non-blank string, got None"),
    (lambda: Network("x", [Layer("", "fc", (3,), (2,))]), "layer 0: its name must be a non-blank string, got ''"),
    (lambda: Network("x", [Layer("a", "fc", 3, (2,))]),
     "layer 0 (a): 'in' must be a tuple of positive integers, got int"),
    (lambda: Network(None, [Layer("a", "fc", (3,), (2,))]), "the network's name must be a string, got NoneType"),
    (lambda: Network("x", [Layer("a", "fc", (3,), (2,))], 5), "the network's source must be a string, got int"),
])
def test_networks_built_in_python_are_refused_with_typed_errors(build, message):
    # these raised TypeError or AttributeError (or passed, for the names), not the package's error
    with pytest.raises(InvalidInstanceError) as info:
        build()
    assert str(info.value) == message


def test_an_empty_network_name_falls_back_to_the_file_name(tmp_path):
    # it was kept, and the report read "network   : 1 weighted layer ..."
    path = tmp_path / "tiny.json"
    for given in ("", "  "):
        path.write_text(json.dumps({"name": given, "layers": [{"name": "f", "type": "fc", "in": 3, "out": 2}]}))
        assert read_network(path).name == "tiny"


ROOT = Path(__file__).parent.parent
NOT_A_NETWORK = "not a network, which lists its 'layers'"


@pytest.mark.parametrize("document, what", [
    ({"maxSizePerFPGA": 1, "maxFPGAs": 1, "maxCPUs": 0, "nodes": [], "edges": []}, "an instance or a model file"),
    ({"fpgas": [{"nodes": [1, 2]}], "cpus": []}, "a plan"),
    ({"format": "placement-hypar/1", "network": "LeNet-c", "planners": []}, "a placement-hypar/1 document"),
    ({"tensor_cores": [1], "array_width": [64]}, "a design grid"),
    ({"models": ["gnmt-training"], "chips": [1, 2], "budgets": [[606.68, 300]]}, "a sweep specification"),
    ({"nodes": 4, "edges": 3, "device_types": []}, "a description of an instance"),
    # before: "layer 0: must be an object, got string", as a network whose layers are names
    ({"layers": ["embed", "h.0", "head"], "parts": [0, 2, 3]}, "DeepSpeed parts (a split's hand-off file)"),
    ({"valid": True, "violations": [], "value": 7.5}, "a verification verdict"),
], ids=["instance", "plan", "hypar output", "grid", "sweep", "instance description", "deepspeed parts", "verdict"])
def test_another_document_is_named_not_read_as_a_network_missing_its_layers(document, what):
    # before: "missing field 'layers'", and for hypar's own output "unknown field 'planners'; did you mean 'layers'?"
    assert _error(document) == f"the document is {what}, {NOT_A_NETWORK}"


def test_an_instance_given_to_hypar_is_named_as_one(capsys):
    from placement.cli import main

    path = ROOT / "instances" / "tiny" / "chain4.json"
    assert main(["hypar", str(path), "--accelerators", "4", "--batch", "32"]) == 2
    assert capsys.readouterr().err == f"error: {path}: the document is an instance or a model file, {NOT_A_NETWORK}\n"


@pytest.mark.parametrize("value, shown", [(5, "int"), (None, "NoneType"), (b"vgg-a", "bytes")])
def test_a_network_given_as_neither_a_name_nor_a_path_is_refused_with_a_typed_error(value, shown):
    # Path(5) raised "TypeError: expected str, bytes or os.PathLike object, not int"
    with pytest.raises(InvalidParameterError) as info:
        load_network(value)
    assert str(info.value) == f"name_or_path must be a network name or file path, not {shown}"
