"""Money formatting."""


def fmt_amt(cents: int, currency: str = "EUR") -> str:
    """12345 -> 'EUR 123.45'; negative amounts in parentheses: -500 -> 'EUR (5.00)'."""
    sign = cents < 0
    whole, frac = divmod(abs(cents), 100)
    body = f"{whole:,}.{frac:02d}"
    return f"{currency} ({body})" if sign else f"{currency} {body}"
