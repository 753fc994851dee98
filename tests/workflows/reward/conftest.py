"""The reward-model folder the reward workflow tests score with."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def reward_folder(tmp_path_factory, tiny_vlms):
    """A reward-model folder (`save_reward_model`) of the session's tiny Idefics3 with a new head,
    trained with the standard loss as far as its metadata says; tests only read it."""
    from robustvlm.models.reward import RewardModel, save_reward_model

    vlm, processor = tiny_vlms("idefics3")
    folder = tmp_path_factory.mktemp("rm") / "final"
    save_reward_model(RewardModel(vlm), processor, folder, meta={"loss": "standard"})
    return folder
