"""Configs that ship with the package (the demo)."""
