"""The character CNN (``spacy_elmo.nn.char_cnn``): highway and token encoder, checked against the
formulas written out in NumPy."""

from __future__ import annotations

import numpy as np
import torch

from spacy_elmo import batch_to_ids
from spacy_elmo.chars import MAX_CHARS_PER_TOKEN, tokens_to_ids
from spacy_elmo.nn.char_cnn import CharacterEncoder, Highway


def test_highway_is_bilm_tf_formula():
    torch.manual_seed(0)
    highway = Highway(4)
    x = torch.randn(3, 4)
    w, b = highway.linear.weight.detach().numpy(), highway.linear.bias.detach().numpy()
    transform = x.numpy() @ w[:4].T + b[:4]
    carry = 1 / (1 + np.exp(-(x.numpy() @ w[4:].T + b[4:])))
    expected = carry * np.maximum(transform, 0) + (1 - carry) * x.numpy()
    np.testing.assert_allclose(highway(x).detach().numpy(), expected, rtol=1e-5, atol=1e-6)


def _encoder(activation: str = "relu") -> CharacterEncoder:
    torch.manual_seed(0)
    return CharacterEncoder(embedding_dim=3, filters=[(1, 4), (3, 5)], n_highway=1, output_dim=6, activation=activation)


def test_encoder_maps_tokens_to_vectors_of_output_dim():
    encoder = _encoder()
    ids = torch.from_numpy(tokens_to_ids(["ELMo", "reads", "characters"]))
    assert ids.shape == (3, MAX_CHARS_PER_TOKEN)
    vectors = encoder(ids)
    assert vectors.shape == (3, 6)
    assert encoder(ids[:0]).shape == (0, 6)


def test_a_token_vector_does_not_depend_on_its_neighbours():
    """Context-independent: the same token gives the same vector in any batch."""
    encoder = _encoder("tanh")
    alone = encoder(torch.from_numpy(tokens_to_ids(["bank"])))
    among = encoder(torch.from_numpy(tokens_to_ids(["a-very-long-token-indeed", "bank"])))
    torch.testing.assert_close(alone[0], among[1], rtol=0, atol=1e-6)


def test_trimming_padding_positions_is_exact():
    """The encoder convolves only the positions that can change the max; the full 50 give the
    same result (max-pooling over every window, as bilm-tf)."""
    encoder = _encoder()
    ids = torch.from_numpy(batch_to_ids([["short", "words"]])[0])
    embedded = encoder.char_embedding(ids).transpose(1, 2)
    pooled = torch.cat([torch.relu(conv(embedded).amax(dim=-1)) for conv in encoder.convolutions], -1)
    expected = encoder.projection(encoder.highways[0](pooled))
    torch.testing.assert_close(encoder(ids), expected, rtol=0, atol=1e-6)


def test_chunked_with_int8_each_token_gets_the_vector_it_gets_alone_bit_for_bit():
    """``chunked``: every convolution on CHUNK_ROWS tokens of one length bucket, so that with
    int8 (whose products are integer) a token's vector does not change in its last bits with
    the tokens beside it, whatever their number and order; the same numbers as the batch at
    once, up to float rounding."""
    from spacy_elmo.nn.char_cnn import CHUNK_ROWS
    from spacy_elmo.nn.int8 import int8_products

    encoder = _encoder("tanh")
    words = [f"w{i}" * (1 + i % 9) for i in range(2 * CHUNK_ROWS + 5)] + ["", "🙂", "x" * 80]
    ids = torch.from_numpy(tokens_to_ids(words))
    with torch.no_grad(), int8_products():
        alone = torch.cat([encoder(ids[i : i + 1], chunked=True) for i in range(len(words))])
        for order in (torch.arange(len(words)), torch.randperm(len(words), generator=torch.Generator().manual_seed(0))):
            assert torch.equal(encoder(ids[order], chunked=True), alone[order])
        torch.testing.assert_close(encoder(ids), alone, rtol=0, atol=1e-5)
    with torch.no_grad():
        torch.testing.assert_close(encoder(ids, chunked=True), encoder(ids), rtol=0, atol=1e-5)


def test_the_max_that_trains_gives_amaxs_values_and_gradients(monkeypatch):
    """With a gradient the pooling is ``max`` with its indices (a faster backward); ``amax``, which
    splits a gradient among tied positions, is the independent formulation. Tokens with repeated
    characters and trailing padding (windows that tie exactly): the same vectors and the same
    gradients for every parameter."""
    import spacy_elmo.nn.char_cnn as char_cnn

    ids = torch.from_numpy(tokens_to_ids(["the", "aaaa", "a", "elephant", "ssss!"]))
    upstream = torch.randn(len(ids), 6, generator=torch.Generator().manual_seed(1))
    results = []
    for pooling in ("max", "amax"):
        if pooling == "amax":
            monkeypatch.setattr(char_cnn, "_max_over_positions", lambda x: x.amax(dim=-1))
        encoder = _encoder()
        vectors = encoder(ids)
        (vectors * upstream).sum().backward()
        results.append([vectors.detach()] + [p.grad.clone() for p in encoder.parameters()])
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert results[0][1].abs().sum() > 0  # the char embeddings did get gradients
