"""Shared-prefix option scoring vs K full sequences, measured side by side in one run.

A tiny random Idefics3 (text width 384, 4 layers by default; a vision tower of width 128) scores
K = 5 options of the same questions both ways: `score_options` (image + question once, cache
shared by K rows) and `score_options(..., shared_prefix=False)` (K full sequences as one batch,
the harness way). Image tokens = (image_size / 16)^2: 64 at the default 128x128, 256 at 256x256. The two
are timed in alternation, each repeat scoring every question once with each; the script
reports the median time per question of each, the median and range of the per-repeat speed-up
and the largest absolute difference of the option log-likelihoods. One CPU thread.

    python benchmarks/option_scoring.py [--repeats 9] [--questions 4] [--width 384] [--layers 4] [--image-size 128]
"""

from __future__ import annotations

import argparse
import io

import torch
from PIL import Image
from shared_prefix_bench import (
    add_model_arguments,
    bench_vlm,
    print_shared_vs_separate,
    time_shared_vs_separate,
)

from robustvlm.multiple_choice.build import MCQuestion
from robustvlm.multiple_choice.generative import encode_prefix, score_options
from robustvlm.multiple_choice.prompts import GENERATIVE_PROMPTS

OPTIONS = ["golden retriever", "tabby cat", "red fox", "grey wolf", "brown bear"]


def make_question(i: int, image_size: int) -> MCQuestion:
    buf = io.BytesIO()
    Image.effect_noise((image_size, image_size), 40 + i).convert("RGB").save(buf, format="PNG")
    options = OPTIONS[i:] + OPTIONS[:i]
    return MCQuestion(id=f"q{i}", image=buf.getvalue(), question="", options=options, answer=0,
                      source="bench", dataset_class="x", prompt=GENERATIVE_PROMPTS[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--questions", type=int, default=4)
    add_model_arguments(parser)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model, processor = bench_vlm(args, OPTIONS)
    model.eval()
    questions = [make_question(i % len(OPTIONS), args.image_size) for i in range(args.questions)]
    prefix_ids = encode_prefix(processor, questions[0])["input_ids"]
    n_image = int((prefix_ids == model.config.image_token_id).sum())
    max_diff = 0.0
    for q in questions:  # warm-up and accuracy check
        shared, separate = score_options(model, processor, q), score_options(model, processor, q, shared_prefix=False)
        max_diff = max(max_diff, *(abs(a - b) for a, b in zip(shared.sum + shared.mean, separate.sum + separate.mean)))
    timings = time_shared_vs_separate(
        lambda shared: [score_options(model, processor, q, shared_prefix=shared) for q in questions],
        args.repeats, len(questions))
    params = sum(p.numel() for p in model.parameters())
    print(f"model: tiny idefics3, {params / 1e6:.1f}M parameters; prefix {prefix_ids.shape[1]} tokens "
          f"({n_image} image tokens); K = {len(OPTIONS)} options")
    print_shared_vs_separate(timings, "question")
    print(f"max |loglik difference| : {max_diff:.2e} nats (sums and means)")


if __name__ == "__main__":
    main()
