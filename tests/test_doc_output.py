"""The per-doc output object: shapes and msgpack round trips."""

import numpy as np
import pytest
import srsly

from spacy_elmo.doc_output import MSGPACK_KEY, ElmoOutput


def _output() -> ElmoOutput:
    layers = np.random.default_rng(0).standard_normal((3, 4, 6)).astype(np.float32)
    weights = np.array([0.2, 0.3, 0.5], np.float32)
    vectors = np.tensordot(weights * np.float32(2.0), layers, axes=(0, 0))
    return ElmoOutput(6, vectors, layers, weights, 2.0)


def test_msgpack_round_trip_leaves_the_vectors_to_the_tensor():
    """The encoding keeps layers and mix, not the vectors: doc.tensor carries those."""
    output = _output()
    data = srsly.msgpack_loads(srsly.msgpack_dumps({"a": [output, ElmoOutput.empty(0, 6)]}))
    restored, empty = data["a"]
    assert isinstance(restored, ElmoOutput)
    assert restored.vectors is None
    np.testing.assert_array_equal(restored.layers, output.layers)
    assert restored.gamma == 2.0 and restored.width == 6
    assert empty.layers is None


def test_vectors_come_from_the_tensor_or_from_the_layers():
    output = _output()
    tensor = output.vectors + 1  # a doc.tensor of the right shape wins: it is what spaCy reads
    from_tensor = srsly.msgpack_loads(srsly.msgpack_dumps(output))
    np.testing.assert_array_equal(from_tensor.vectors_for(tensor, 4), tensor)
    from_layers = srsly.msgpack_loads(srsly.msgpack_dumps(output))  # DocBin: empty tensor
    np.testing.assert_array_equal(from_layers.vectors_for(np.zeros((0,), np.float32), 4), output.vectors)
    no_layers = ElmoOutput(6, output.vectors, None, output.layer_weights, 2.0)
    lost = srsly.msgpack_loads(srsly.msgpack_dumps(no_layers))
    assert lost.vectors_for(np.zeros((0,), np.float32), 4) is None


def test_shapes_are_checked():
    with pytest.raises(ValueError, match="layers must have 4 tokens"):
        ElmoOutput(6, np.zeros((4, 6), np.float32), np.zeros((3, 5, 6), np.float32))
    with pytest.raises(ValueError, match="vectors must be"):
        ElmoOutput(6, np.zeros(6, np.float32))


def test_the_older_encoding_still_decodes():
    """Docs saved before the vectors moved to doc.tensor carried them in user_data."""
    output = _output()
    old = {MSGPACK_KEY: {"vectors": output.vectors, "layers": output.layers}}
    restored = srsly.msgpack_loads(srsly.msgpack_dumps(old))
    assert restored.width == 6
    np.testing.assert_array_equal(restored.vectors_for(np.zeros((0,), np.float32), 4), output.vectors)
