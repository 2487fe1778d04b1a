from confkit.flat import flatten, unflatten

__all__ = ["flatten", "unflatten"]
