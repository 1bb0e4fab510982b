"""The per-doc output object: shapes and msgpack round trips."""

import numpy as np
import pytest
import srsly

from spacy_elmo.doc_output import ElmoOutput


def test_msgpack_round_trip_inside_other_data():
    rng = np.random.default_rng(0)
    layers = rng.standard_normal((3, 4, 6)).astype(np.float32)
    output = ElmoOutput(layers.mean(axis=0), layers)
    data = srsly.msgpack_loads(srsly.msgpack_dumps({"a": [output, ElmoOutput.empty(0, 6)]}))
    restored, empty = data["a"]
    assert isinstance(restored, ElmoOutput)
    np.testing.assert_array_equal(restored.vectors, output.vectors)
    np.testing.assert_array_equal(restored.layers, layers)
    assert empty.vectors.shape == (0, 6) and empty.layers is None


def test_shapes_are_checked():
    with pytest.raises(ValueError, match="layers must be"):
        ElmoOutput(np.zeros((4, 6), np.float32), np.zeros((3, 5, 6), np.float32))
    with pytest.raises(ValueError, match="vectors must be"):
        ElmoOutput(np.zeros(6, np.float32))
