"""Render one page of a product listing."""

from catalog.pagination import page_count, paginate


def render_page(names: list[str], page: int, per_page: int = 10) -> str:
    pages = max(page_count(len(names), per_page), 1)
    shown = paginate(sorted(names), page, per_page)
    return f"Page {page} of {pages}: " + ", ".join(shown)
