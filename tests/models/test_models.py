"""Model layer: tiny offline VLMs, loading, trainable parts, answer-only logits."""

from __future__ import annotations

import io

import pytest
import torch
import torch.distributed as dist
from PIL import Image
from torch.nn.parallel import DistributedDataParallel
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    Qwen2VLConfig,
    Qwen2VLForConditionalGeneration,
)

from robustvlm.data.collate import VLMCollator
from robustvlm.data.records import Example
from robustvlm.errors import ConfigError
from robustvlm.model_ref import ModelRef
from robustvlm.models import (
    AnswerModel,
    answer_outputs,
    build_tiny_vlm,
    configure_trainable,
    count_parameters,
    find_parts,
    get_backbone,
    get_lm_head,
    load_vlm,
    model_inputs,
)

KINDS = ("idefics3", "llava")


def png_bytes(colour) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (48, 40), colour).save(buf, "PNG")
    return buf.getvalue()


EXAMPLES = [
    Example("a", png_bytes((200, 0, 0)), "What colour is the shape?", "red", "general"),
    Example("b", None, "Read the text.", "the quick brown fox", "ocr"),
    Example("c", png_bytes((0, 0, 200)), "Which shape?", "a square", "chart"),
]
ENVS = {"general": 0, "ocr": 1, "chart": 2}


@pytest.fixture(scope="module", params=KINDS)
def tiny(request, tiny_vlms):
    model, processor = tiny_vlms(request.param)
    return model, processor, VLMCollator(processor, ENVS)(EXAMPLES)


def tiny_qwen2_vl() -> tuple[Qwen2VLForConditionalGeneration, dict]:
    """A config-built Qwen2-VL (its processor needs torchvision) and a hand-made batch."""
    config = Qwen2VLConfig(
        text_config=dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, bos_token_id=None,
                         eos_token_id=None, rope_parameters={"rope_type": "default",
                         "rope_theta": 1e4, "mrope_section": [2, 2, 4]}),
        vision_config=dict(depth=1, embed_dim=16, hidden_size=32, num_heads=2, mlp_ratio=2,
                           patch_size=4, spatial_merge_size=2, temporal_patch_size=2),
        image_token_id=60, video_token_id=61, vision_start_token_id=62, vision_end_token_id=63,
    )
    torch.manual_seed(0)
    model = Qwen2VLForConditionalGeneration(config)
    ids = torch.randint(0, 50, (2, 12))
    ids[:, 1], ids[:, 2:6], ids[:, 6] = 62, 60, 63  # 4x4 patches merged 2x2 -> 4 image tokens
    labels = torch.full_like(ids, -100)
    labels[0, 8:], labels[1, 10:] = ids[0, 8:], ids[1, 10:]
    batch = dict(
        input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels, env=torch.tensor([1, 0]),
        pixel_values=torch.randn(32, 3 * 2 * 4 * 4), image_grid_thw=torch.tensor([[1, 4, 4]] * 2),
        mm_token_type_ids=(ids == 60).long(),
    )
    return model, batch


# ---- tiny models and loading ---------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_tiny_model_is_small_seeded_and_consistent(kind):
    model, processor = build_tiny_vlm(kind, seed=3)
    trainable, total = count_parameters(model)
    assert trainable == total and 300_000 < total < 2_000_000
    assert model.config.get_text_config().vocab_size == len(processor.tokenizer) <= 1024
    same, _ = build_tiny_vlm(kind, seed=3)
    other, _ = build_tiny_vlm(kind, seed=4)
    for (name, p), q in zip(model.named_parameters(), same.parameters()):
        assert torch.equal(p, q), name
    assert any(not torch.equal(p, r) for p, r in zip(model.parameters(), other.parameters()))
    batch = VLMCollator(processor, ENVS)(EXAMPLES)
    n_image = int((batch["input_ids"][0] == processor.image_token_id).sum())
    if kind == "idefics3":  # (image_size / patch_size)^2 / scale_factor^2
        assert n_image == model.model.image_seq_len == (64 // 8) ** 2 // 2**2
    model(**model_inputs(batch))  # image features fill the image tokens


def test_tiny_tokenizer_learns_the_corpus():
    word = "zyxwvutsrqponm"
    _, plain = build_tiny_vlm("llava")
    _, taught = build_tiny_vlm("llava", corpus=[f"answer {word}"] * 50)
    assert len(taught.tokenizer(word)["input_ids"]) < len(plain.tokenizer(word)["input_ids"])


def test_tiny_overrides_and_errors():
    model, _ = build_tiny_vlm("idefics3", text_num_attention_heads=2, vision_num_hidden_layers=1)
    assert model.config.text_config.num_attention_heads == 2
    assert len(model.model.vision_model.encoder.layers) == 1
    with pytest.raises(ConfigError, match="no_such_thing"):
        build_tiny_vlm("llava", no_such_thing=1)
    with pytest.raises(ConfigError, match="patch_size"):
        build_tiny_vlm("idefics3", vision_patch_size=24)
    with pytest.raises(ConfigError, match="tiny:llava"):
        load_vlm(ModelRef.parse("tiny:nope"))
    with pytest.raises(ConfigError, match="tiny_options"):
        load_vlm(ModelRef.parse("some/model"), tiny_options={"seed": 1})


def test_missing_model_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot load"):
        load_vlm(ModelRef.folder(tmp_path / "absent"))


@pytest.mark.parametrize("kind", KINDS)
def test_save_and_load_round_trip(kind, tmp_path):
    model, processor = load_vlm(ModelRef.tiny(kind), tiny_options={"seed": 1}, corpus=["a blue square"])
    model.save_pretrained(tmp_path)
    processor.save_pretrained(tmp_path)
    loaded, loaded_processor = load_vlm(ModelRef.folder(tmp_path))
    assert type(loaded) is type(model)
    assert type(loaded_processor.image_processor) is type(processor.image_processor)  # PIL backend
    batch = VLMCollator(processor, ENVS)(EXAMPLES)
    again = VLMCollator(loaded_processor, ENVS)(EXAMPLES)
    for key in ("input_ids", "labels", "attention_mask", "pixel_values"):
        assert torch.equal(batch[key], again[key]), key
    model.eval(), loaded.eval()
    with torch.no_grad():
        expected = model(**model_inputs(batch)).logits
        assert torch.equal(loaded(**model_inputs(again)).logits, expected)


def test_load_vlm_dtype():
    model, _ = load_vlm(ModelRef.parse("tiny:llava"), dtype=torch.bfloat16)
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}


# ---- trainable parts -----------------------------------------------------------------------


def families():
    yield build_tiny_vlm("idefics3")[0], "model.vision_model", "model.connector", "model.text_model"
    yield build_tiny_vlm("llava")[0], "model.vision_tower", "model.multi_modal_projector", "model.language_model"
    yield tiny_qwen2_vl()[0], "model.visual", "model.visual.merger", "model.language_model"


@pytest.mark.parametrize("family", list(families()), ids=["idefics3", "llava", "qwen2_vl"])
def test_paper_mode_freezes_exactly_the_vision_encoder(family):
    model, vision, projector, decoder = family
    configure_trainable(model, mode="paper")
    names = {n: p for n, p in model.named_parameters()}
    in_vision = {n for n in names if n.startswith(vision + ".") and not n.startswith(projector + ".")}
    assert in_vision and any(n.startswith(projector + ".") for n in names)
    for name, p in names.items():
        assert p.requires_grad == (name not in in_vision), name
    expected = sum(p.numel() for n, p in names.items() if n not in in_vision)
    assert count_parameters(model) == (expected, sum(p.numel() for p in names.values()))
    assert find_parts(model).decoder_path == decoder
    configure_trainable(model, mode="full")
    assert all(p.requires_grad for p in model.parameters())


@pytest.mark.parametrize("family", list(families()), ids=["idefics3", "llava", "qwen2_vl"])
def test_lora_adapts_only_the_text_decoder(family):
    model, _, _, decoder = family
    total_before = count_parameters(model)[1]
    peft_model = configure_trainable(model, mode="lora", lora={"r": 4, "alpha": 8, "target_modules": None})
    trainable = [n for n, p in peft_model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n and f".{decoder}.layers." in n for n in trainable)
    assert {n.split(".lora_")[0].rsplit(".", 1)[-1] for n in trainable} == {
        "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    n_lora, total = count_parameters(peft_model)
    assert n_lora == sum(p.numel() for n, p in peft_model.named_parameters() if "lora_" in n)
    assert total == total_before + n_lora


def test_lora_options_and_errors():
    model = build_tiny_vlm("llava")[0]
    peft_model = configure_trainable(
        model, mode="lora", lora={"r": 2, "target_modules": ["q_proj"], "modules_to_save": ["multi_modal_projector"]}
    )
    trainable = {n for n, p in peft_model.named_parameters() if p.requires_grad}
    assert any("q_proj.lora_A" in n for n in trainable) and not any("v_proj" in n for n in trainable)
    assert any("multi_modal_projector" in n for n in trainable)
    with pytest.raises(ConfigError, match="PEFT"):
        configure_trainable(peft_model, mode="full")
    with pytest.raises(ConfigError, match="rank"):
        configure_trainable(build_tiny_vlm("llava")[0], mode="lora", lora={"rank": 4})
    with pytest.raises(ConfigError, match="mode"):
        configure_trainable(model, mode="half")
    paper = configure_trainable(build_tiny_vlm("llava")[0], mode="paper", lora={"r": 4})  # lora unread
    assert not any("lora_" in n for n, _ in paper.named_parameters())
    with pytest.raises(ConfigError, match="LoRA"):
        configure_trainable(build_tiny_vlm("llava")[0], mode="lora", lora={"target_modules": r"nothing\.here"})
    text_only = LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32,
                                             num_hidden_layers=1, num_attention_heads=2))
    with pytest.raises(ConfigError, match="vision encoder"):
        configure_trainable(text_only, mode="paper")


# ---- answer-only logits --------------------------------------------------------------------


def assert_matches_labels_loss(model, batch):
    """answer_outputs CE == the built-in labels= loss, and so are the gradients."""
    params = [p for p in model.parameters() if p.requires_grad]
    out = answer_outputs(model, batch)
    ours = out.token_ce().mean()
    ours_grads = torch.autograd.grad(ours, params, allow_unused=True)
    ref = model(**model_inputs(batch), labels=batch["labels"]).loss
    ref_grads = torch.autograd.grad(ref, params, allow_unused=True)
    assert abs(ours.item() - ref.item()) < 1e-5
    for g, r in zip(ours_grads, ref_grads):
        assert (g is None) == (r is None)
        if g is not None:
            torch.testing.assert_close(g, r, atol=1e-6, rtol=1e-4)
    return out


def test_answer_outputs_match_the_labels_loss_and_gradients(tiny):
    model, _, batch = tiny
    out = assert_matches_labels_loss(model, batch)
    next_labels = batch["labels"][:, 1:]
    keep = next_labels != -100
    n, vocab = int(keep.sum()), model.config.get_text_config().vocab_size
    assert out.logits.shape == (n, vocab) and out.logits.dtype == torch.float32
    assert torch.equal(out.targets, next_labels[keep])
    assert out.example.tolist() == [i for i in range(3) for _ in range(int(keep[i].sum()))]
    assert torch.equal(out.env, batch["env"][out.example])
    with torch.no_grad():
        hidden = get_backbone(model)(**model_inputs(batch)).last_hidden_state
    torch.testing.assert_close(out.hidden, hidden[:, :-1][keep])
    assert out.classifier is get_lm_head(model).weight
    torch.testing.assert_close(out.logits, out.hidden @ out.classifier.T)


def test_lm_head_only_sees_answer_positions(tiny):
    model, _, batch = tiny
    rows = []
    handle = get_lm_head(model).register_forward_hook(lambda m, inp, out: rows.append(inp[0].shape))
    try:
        answer_outputs(model, batch)
    finally:
        handle.remove()
    assert rows == [torch.Size([int((batch["labels"][:, 1:] != -100).sum()), model.config.get_text_config().hidden_size])]


def test_answer_outputs_qwen2_vl():
    model, batch = tiny_qwen2_vl()
    out = assert_matches_labels_loss(model, batch)
    assert out.env.tolist() == [1] * 4 + [0] * 2  # labels at 8..11 and 10..11


def test_answer_outputs_through_peft(tiny):
    model, _, batch = tiny
    rebuilt = type(model)(model.config)
    rebuilt.load_state_dict(model.state_dict())
    peft_model = configure_trainable(rebuilt, mode="lora", lora={"r": 4, "dropout": 0.0})
    for name, p in peft_model.named_parameters():  # LoRA B starts at zero: make adapters matter
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.1)
    out = assert_matches_labels_loss(peft_model, batch)
    plain = answer_outputs(model, batch)
    assert not torch.allclose(out.logits, plain.logits)  # the adapters are active


def test_env_defaults_to_minus_one_and_labels_are_required(tiny):
    model, _, batch = tiny
    no_env = {k: v for k, v in batch.items() if k != "env"}
    assert (answer_outputs(model, no_env).env == -1).all()
    with pytest.raises(ConfigError, match="labels"):
        answer_outputs(model, model_inputs(batch))


def test_ddp_needs_the_answer_model_wrapper(tmp_path):
    model, processor = build_tiny_vlm("llava")
    batch = VLMCollator(processor, ENVS)(EXAMPLES)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        with pytest.raises(ConfigError, match="AnswerModel"):
            answer_outputs(DistributedDataParallel(model), batch)
        wrapped = DistributedDataParallel(AnswerModel(model))
        torch.testing.assert_close(wrapped(batch).logits, answer_outputs(model, batch).logits)
    finally:
        dist.destroy_process_group()
