"""Shared-prefix reward scoring of K candidates vs scoring each as its own sequence.

A tiny random Idefics3 reward model (text width 384, 4 layers; vision tower width 128) scores K
candidate responses to one image + query, both ways, in alternation in one process:
`candidate_rewards` (image + query run once; its key/value cache serves the K responses as one
right-padded batch) and `candidate_rewards(..., shared_prefix=False)` (K full sequences prompt +
response as one batch, the image encoded K times). Image tokens = (image_size / 16)^2. Reports the
median time per prompt of each, the median and range of the per-repeat speed-up, and the largest
absolute reward difference. One CPU thread.

    python benchmarks/reward_scoring.py [--k 16] [--repeats 7] [--prompts 3] [--image-size 128]
"""

from __future__ import annotations

import argparse

import torch
from PIL import Image
from shared_prefix_bench import (
    add_model_arguments,
    bench_vlm,
    print_shared_vs_separate,
    time_shared_vs_separate,
)

from robustvlm.data.collate import chat_messages
from robustvlm.data.synth.preferences import (
    COLOURS,
    COUNT_WORDS,
    FILLERS,
    KINDS,
    statement,
    with_phrase,
)
from robustvlm.models.loglik import encode_prompt
from robustvlm.models.reward import RewardModel, candidate_rewards

QUERY = "Describe the image."


def candidates(k: int) -> list[str]:
    """K different statements, half of them with a filler phrase (10 to 14 tokens)."""
    out = []
    for i in range(k):
        text = statement(KINDS[i % 4], COLOURS[(i // 4) % 4], 1 + i % 3)
        out.append(with_phrase(text, FILLERS[i % 4]) if i % 2 else text)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--prompts", type=int, default=3)
    add_model_arguments(parser)
    args = parser.parse_args()
    torch.set_num_threads(1)
    texts = candidates(args.k)
    vlm, processor = bench_vlm(args, [QUERY, *texts, *COUNT_WORDS])
    torch.manual_seed(0)
    model = RewardModel(vlm).eval()
    with torch.no_grad():
        model.head.weight.mul_(100)  # rewards of order 1, so the tolerance is not met trivially
    images = [Image.effect_noise((args.image_size, args.image_size), 30 + 10 * i).convert("RGB")
              for i in range(args.prompts)]
    prefix = encode_prompt(processor, chat_messages(QUERY, image=True), images[:1])["input_ids"]
    n_image = int((prefix == vlm.config.image_token_id).sum())
    max_diff, scale = 0.0, 0.0
    for image in images:  # warm-up and accuracy check
        shared = candidate_rewards(model, processor, QUERY, texts, image=image)
        separate = candidate_rewards(model, processor, QUERY, texts, image=image, shared_prefix=False)
        max_diff = max(max_diff, *(abs(a - b) for a, b in zip(shared, separate)))
        scale = max(scale, *(abs(a) for a in separate))
    timings = time_shared_vs_separate(
        lambda shared: [candidate_rewards(model, processor, QUERY, texts, image=image, shared_prefix=shared)
                        for image in images],
        args.repeats, len(images))
    params = sum(p.numel() for p in model.parameters())
    print(f"model: tiny idefics3 reward model, {params / 1e6:.1f}M parameters; prompt {prefix.shape[1]} tokens "
          f"({n_image} image tokens); K = {args.k} candidates; torch {torch.__version__}, 1 thread")
    print_shared_vs_separate(timings, "prompt", " (target >= 3x)")
    print(f"max |reward difference| : {max_diff:.2e} (rewards up to {scale:.2f} in magnitude; target <= 1e-4)")


if __name__ == "__main__":
    main()
