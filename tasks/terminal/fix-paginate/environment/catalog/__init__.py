"""A tiny product catalogue."""
