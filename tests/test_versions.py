"""``nn/versions.weights_key``: the one use of PyTorch's tensor version counter, what the token
cache and the int8 weights key on. A PyTorch release that stops bumping it on in-place changes
would serve stale vectors; these checks fail first."""

import torch

from spacy_elmo.nn.versions import weights_key


def _linear() -> torch.nn.Linear:
    torch.manual_seed(0)
    return torch.nn.Linear(4, 3)


def test_the_key_stays_while_nothing_changes():
    layer = _linear()
    key = weights_key(layer.parameters())
    with torch.no_grad():
        layer(torch.ones(2, 4))
    assert weights_key(layer.parameters()) == key


def test_in_place_updates_change_the_key():
    layer = _linear()
    key = weights_key(layer.parameters())
    with torch.no_grad():
        layer.weight.mul_(2.0)  # in place, as by hand
    after_mul = weights_key(layer.parameters())
    assert after_mul != key
    layer.load_state_dict(_linear().state_dict())  # copies into the same tensors
    after_load = weights_key(layer.parameters())
    assert after_load != after_mul and layer.weight.data_ptr() == after_load[0][1]
    layer(torch.ones(2, 4)).sum().backward()
    torch.optim.SGD(layer.parameters(), lr=0.1).step()
    assert weights_key(layer.parameters()) != after_load


def test_moved_cast_or_replaced_weights_change_the_key():
    layer = _linear()
    key = weights_key(layer.parameters())
    assert weights_key(layer.double().parameters()) != key
    layer = _linear()
    layer.weight = torch.nn.Parameter(layer.weight.detach().clone())
    assert weights_key(layer.parameters()) != key
