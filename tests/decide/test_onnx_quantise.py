"""The int8 build of the first start says nothing a user cannot act on."""

from __future__ import annotations

import logging

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from jevserve.decide.onnx_build import _quantise_int8


def test_quantising_prints_no_advice_about_pre_processing(tmp_path, caplog):
    # an outside tester's first `make run` printed onnxruntime's "Please consider to run pre-processing before
    # quantization", with a link to an image-classification example, twice
    weights = numpy_helper.from_array(np.random.default_rng(0).random((64, 64), dtype=np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])], [weights],
    )  # fmt: skip
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "fp32.onnx")
    with caplog.at_level(logging.WARNING):
        _quantise_int8(tmp_path / "fp32.onnx", tmp_path / "int8.onnx")
        logging.warning("a warning of its own still shows")  # the filter is the quantiser's only
    assert (tmp_path / "int8.onnx").stat().st_size > 0
    messages = [r.getMessage() for r in caplog.records]
    assert not any("pre-processing" in m for m in messages) and "a warning of its own still shows" in messages
