"""VLMCollator: answer-only labels, padding sides, env ids, images, bad input."""

from __future__ import annotations

import io

import pytest
import torch
from PIL import Image

from robustvlm.data.collate import IGNORE_INDEX, VLMCollator
from robustvlm.data.records import Example
from robustvlm.errors import ConfigError, DataError
from robustvlm.models.tiny import build_tiny_vlm

KINDS = ("idefics3", "llava")
END = "<|im_end|>"


def png_bytes(colour=(200, 30, 30), size=(40, 30)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, "PNG")
    return buf.getvalue()


def examples() -> list[Example]:
    return [
        Example("a", png_bytes(), "What colour is the shape?", "red", "general", source="d.jsonl"),
        Example("b", None, "Say something.", "hello there friend", "ocr", source="d.jsonl"),
        Example("c", png_bytes((0, 0, 255)), "Which shape?", "a blue square", "unseen", source="d.jsonl"),
    ]


@pytest.fixture(scope="module", params=KINDS)
def processor(request, tiny_vlms):
    return tiny_vlms(request.param)[1]


def labelled(batch, i):
    row = batch["labels"][i]
    return row[row != IGNORE_INDEX]


def test_labels_decode_to_target_plus_end_token(processor):
    batch = VLMCollator(processor, {"general": 0, "ocr": 1})(examples())
    tok = processor.tokenizer
    for i, ex in enumerate(examples()):
        ids = labelled(batch, i)
        assert tok.decode(ids) == ex.target + END
        # labelled tokens are the last real tokens and match the input ids there
        n_real = int(batch["attention_mask"][i].sum())
        assert torch.equal(batch["input_ids"][i, n_real - len(ids): n_real], ids)
        assert ids.tolist() == tok(ex.target + END, add_special_tokens=False)["input_ids"]


def test_image_prompt_and_padding_tokens_are_unlabelled(processor):
    batch = VLMCollator(processor, {})(examples())
    image_id = processor.image_token_id
    is_image = batch["input_ids"] == image_id
    assert is_image[0].sum() == 16 and is_image[1].sum() == 0 and is_image[2].sum() == 16
    assert (batch["labels"][is_image] == IGNORE_INDEX).all()
    assert (batch["labels"][batch["attention_mask"] == 0] == IGNORE_INDEX).all()
    n_labelled = (batch["labels"] != IGNORE_INDEX).sum()
    n_expected = sum(len(processor.tokenizer(e.target + END)["input_ids"]) for e in examples())
    assert n_labelled == n_expected


def test_train_pads_right_generation_pads_left_with_the_same_prompt(processor):
    exs = examples()
    train = VLMCollator(processor, {})(exs)
    gen = VLMCollator(processor, {}, train=False)(exs)
    assert "labels" not in gen
    for i in range(len(exs)):
        t_mask, g_mask = train["attention_mask"][i].bool(), gen["attention_mask"][i].bool()
        n_t, n_g = int(t_mask.sum()), int(g_mask.sum())
        assert t_mask[:n_t].all() and not t_mask[n_t:].any()  # right padding
        assert g_mask[-n_g:].all() and not g_mask[: len(g_mask) - n_g].any()  # left padding
        prompt = gen["input_ids"][i][g_mask]
        assert processor.tokenizer.decode(prompt).endswith("<|im_start|>assistant\n")
        assert torch.equal(train["input_ids"][i][t_mask][:n_g], prompt)  # train = prompt + reply
    assert (gen["input_ids"][gen["attention_mask"] == 0] == processor.tokenizer.pad_token_id).all()


def test_env_ids_and_record_ids(tiny_vlms):
    processor = tiny_vlms("llava")[1]
    batch = VLMCollator(processor, {"general": 3, "ocr": 1})(examples())
    assert batch["env"].dtype == torch.long
    assert batch["env"].tolist() == [3, 1, -1]
    assert batch["ids"] == ["a", "b", "c"]


def test_text_only_batch_has_no_pixels(processor):
    batch = VLMCollator(processor, {})([examples()[1]])
    assert "pixel_values" not in batch
    assert processor.tokenizer.decode(labelled(batch, 0)) == "hello there friend" + END


def test_images_go_through_the_loader_with_source_and_record(tiny_vlms):
    processor = tiny_vlms("idefics3")[1]
    calls = []

    def loader(ref, *, source, record):
        calls.append((source, record))
        return Image.new("RGB", (64, 64))

    VLMCollator(processor, {}, image_loader=loader)(examples())
    assert calls == [("d.jsonl", "a"), ("d.jsonl", "c")]
    bad = Example("broken", b"not an image", "q", "t", "general", source="bad.jsonl")
    with pytest.raises(DataError, match=r"bad\.jsonl \[broken\]"):
        VLMCollator(processor, {})([bad])


def test_max_length_cuts_the_reply_and_rejects_long_prompts(tiny_vlms):
    processor = tiny_vlms("llava")[1]
    ex = examples()[1]
    full = VLMCollator(processor, {})([ex])
    n = full["input_ids"].shape[1]
    cut = VLMCollator(processor, {}, max_length=n - 2)([ex])
    assert cut["input_ids"].shape[1] == n - 2
    assert torch.equal(labelled(cut, 0), labelled(full, 0)[:-2])
    n_prompt = int((full["labels"][0] == IGNORE_INDEX).sum())
    with pytest.raises(DataError, match=r"d\.jsonl \[b\].*max_length"):
        VLMCollator(processor, {}, max_length=n_prompt)([ex])


def test_eos_is_appended_when_the_template_writes_no_end_token():
    processor = build_tiny_vlm("llava")[1]
    processor.chat_template = (  # LLaVA-1.5 style: "USER: <image>\nq ASSISTANT: a " and no end token
        "{% for m in messages %}{{ m['role'].upper() }}: {% for c in m['content'] %}"
        "{% if c['type'] == 'image' %}<image>\n{% else %}{{ c['text'] }} {% endif %}"
        "{% endfor %}{% endfor %}{% if add_generation_prompt %}ASSISTANT:{% endif %}"
    )
    batch = VLMCollator(processor, {})(examples()[:1])
    ids = labelled(batch, 0)
    assert ids[-1] == processor.tokenizer.eos_token_id
    assert processor.tokenizer.decode(ids) == " red" + END


def test_template_that_is_not_prompt_plus_reply_is_a_config_error():
    processor = build_tiny_vlm("llava")[1]
    processor.chat_template = (
        "{% for m in messages %}{{ m['role'] }}{% endfor %}{% if add_generation_prompt %}X{% endif %}"
    )
    with pytest.raises(ConfigError, match="record b"):
        VLMCollator(processor, {})(examples()[1:2])


def test_empty_batch_is_a_data_error(processor):
    with pytest.raises(DataError):
        VLMCollator(processor, {})([])
