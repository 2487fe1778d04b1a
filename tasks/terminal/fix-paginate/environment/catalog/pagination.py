"""Split sequences into pages. Pages are numbered from 1."""


def page_count(total: int, per_page: int) -> int:
    """How many pages `total` items fill, `per_page` at a time."""
    if per_page <= 0:
        raise ValueError("per_page must be positive")
    return total // per_page


def paginate(items: list, page: int, per_page: int) -> list:
    """The items on page `page` (1-based); an empty list past the last page."""
    if page < 1:
        raise ValueError("page numbers start at 1")
    start = page * per_page
    return list(items[start:start + per_page])
