"""The random-draw oracle (spec/dt-random.md): the chance bounds DT-RAND-4 compares by, the
supports of DT-RAND-3, and the single-device draw of DT-RAND-7."""

from __future__ import annotations

import torch

from conformance.oracle import dt_random


def test_parts_are_compared_only_where_a_correct_draw_repeats_below_two_to_the_minus_forty():
    # float32 rand: an element takes one value with chance 1.5 * 2^-23, two elements 2^-44.
    assert not dt_random.parts_comparable("rand", [], "float32", 1)
    assert dt_random.parts_comparable("rand", [], "float32", 2)
    assert dt_random.parts_comparable("rand", [], "float64", 1)
    assert not dt_random.parts_comparable("rand", [], "bfloat16", 5)
    assert dt_random.parts_comparable("rand", [], "bfloat16", 6)
    # A fair mask: 2^-m.
    assert not dt_random.parts_comparable("bernoulli_", [0.5], "float32", 39)
    assert dt_random.parts_comparable("bernoulli_", [0.5], "float32", 40)
    assert dt_random.parts_comparable("dropout", [0.5], "float32", 40)
    # A certain outcome, or no element: never.
    assert not dt_random.parts_comparable("bernoulli_", [1.0], "float32", 10**6)
    assert not dt_random.parts_comparable("dropout", [0.0], "float32", 10**6)
    assert not dt_random.parts_comparable("rand", [], "float64", 0)


def test_values_are_required_distinct_only_for_small_float64_continuous_draws():
    # float64 rand: 1.5 * 2^-52 a pair, so n (n - 1) / 2 pairs stay within 2^-40 up to n = 74.
    assert dt_random.values_comparable("rand", [], "float64", 74)
    assert not dt_random.values_comparable("rand", [], "float64", 75)
    assert not dt_random.values_comparable("rand", [], "float32", 2)
    assert not dt_random.values_comparable("bernoulli_", [0.5], "float64", 2)


def test_a_value_outside_its_distributions_support_is_found():
    value = torch.tensor([0.0, 0.5, 1.0, 1.5])
    assert dt_random.outside_support("rand", [], value, None, []).tolist() == [0, 0, 0, 1]
    assert dt_random.outside_support("uniform_", [-2.0, 3.0], value * 2, None, []).any() == 0
    bits = torch.tensor([0.0, 1.0, 0.5])
    assert dt_random.outside_support("bernoulli_", [0.2], bits, None, []).tolist() == [0, 0, 1]
    assert dt_random.outside_support("normal_", [], torch.tensor([1e30, torch.inf]), None,
                                     []).tolist() == [0, 1]  # fmt: skip


def test_a_dropout_element_is_zero_or_its_input_scaled():
    x = torch.tensor([1.0, 2.0, 3.0])
    good = torch.tensor([0.0, 4.0, 6.0])
    assert not dt_random.outside_support("dropout", [0.5], good, x, []).any()
    wrong = torch.tensor([2.0, 2.0, float("nan")])  # unscaled, and 0 * -inf of a max part
    assert dt_random.outside_support("dropout", [0.5], wrong, x, []).tolist() == [0, 1, 1]


def test_re_summed_partial_parts_may_round_within_the_partition_bound():
    # Three parts of 0.7 / 3 in float32 re-sum to 0.7 within an ulp or so, not exactly.
    part = torch.tensor([0.7], dtype=torch.float32) / 3
    value = part + part + part
    assert not dt_random.outside_support("uniform_", [0.0, 0.7], value, None, [3]).any()
    assert dt_random.outside_support("uniform_", [0.0, 0.6], value, None, [3]).all()


def test_the_single_device_draw_is_torchs_after_the_seed_and_leaves_the_drivers_generator():
    before = torch.random.get_rng_state()
    drawn, after = dt_random.single_device("rand", [], [4], "float32", 0, None, torch.device("cpu"))
    torch.manual_seed(0)
    assert torch.equal(drawn, torch.rand(4))
    assert torch.equal(after, torch.rand(8))
    torch.random.set_rng_state(before)
    drawn, _ = dt_random.single_device("dropout", [0.5], [4], "float32", 1, torch.ones(4),
                                       torch.device("cpu"))  # fmt: skip
    torch.manual_seed(1)
    assert torch.equal(drawn, torch.nn.functional.dropout(torch.ones(4), 0.5))
    assert torch.equal(torch.random.get_rng_state(), torch.get_rng_state())
