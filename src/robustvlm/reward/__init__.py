"""robustvlm.reward: multimodal reward models that do not ride text-only shortcuts.

- `losses`: Bradley-Terry, text-only and shortcut-aware (SFC-weighted) losses, one registry;
- `task`: reward training as a task of the one training loop;
- `scoring`: rewards of preference pairs, with the image or without it (the views).
"""
