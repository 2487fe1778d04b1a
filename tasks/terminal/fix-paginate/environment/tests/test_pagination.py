from catalog.listing import render_page
from catalog.pagination import page_count, paginate


def test_first_page_starts_at_first_item():
    assert paginate(list("abcdef"), 1, 4) == list("abcd")


def test_partial_last_page_is_counted():
    assert page_count(5, 2) == 3


def test_render():
    assert render_page(["pear", "apple", "fig"], 1, 2) == "Page 1 of 2: apple, fig"
