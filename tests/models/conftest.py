"""Shared input of the model tests: a picture to ask about."""

from __future__ import annotations

import pytest
from PIL import Image


@pytest.fixture(scope="session")
def image() -> Image.Image:
    """A red square on a white 40 x 40 page (the `reward_inputs` question asks its colour)."""
    img = Image.new("RGB", (40, 40), (255, 255, 255))
    img.paste((200, 20, 20), (10, 10, 30, 30))
    return img
