"""Hidden checks of the catalog pagination fix."""

import sys

import pytest

sys.path.insert(0, "/app")

from catalog.listing import render_page  # noqa: E402
from catalog.pagination import page_count, paginate  # noqa: E402


@pytest.mark.parametrize(("total", "per_page", "pages"), [(0, 10, 0), (1, 10, 1), (10, 10, 1), (11, 10, 2), (25, 7, 4)])
def test_page_count(total, per_page, pages):
    assert page_count(total, per_page) == pages


def test_every_item_on_exactly_one_page():
    items = list(range(23))
    pages = [paginate(items, p, 5) for p in range(1, page_count(len(items), 5) + 1)]
    assert [x for page in pages for x in page] == items
    assert paginate(items, 6, 5) == []


def test_invalid_arguments_still_rejected():
    with pytest.raises(ValueError):
        paginate([1, 2], 0, 1)
    with pytest.raises(ValueError):
        page_count(3, 0)


def test_render_last_page():
    names = [f"item{i:02d}" for i in range(12)]
    assert render_page(names, 2, 5) == "Page 2 of 3: item05, item06, item07, item08, item09"
