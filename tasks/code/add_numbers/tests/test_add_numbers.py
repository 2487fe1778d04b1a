import pytest
from solution import add_numbers


@pytest.mark.parametrize("numbers, expected", [([1, 2, 3], 6), ([], 0), ([10], 10), ([-1, -2], -3)])
def test_sums(numbers, expected):
    assert add_numbers(numbers) == expected


def test_sum_of_ints_is_an_int():
    assert isinstance(add_numbers([1, 2]), int)
