"""Does a VLM read a label mapping from its context? Two demonstrations of two classes, labelled
with words the demonstrations alone define (alpha / beta / gamma / delta, drawn per trial), then a
query picture of one of the two classes; accuracy of the greedy answer (chance 0.5). This is the
form a third of the model zoo's interleaved tuning samples take (workflows.zoo.data._interleaved).

    python tools/icl_defined_labels.py MODEL DATA [--trials 200] [--domain clean] [--seed 0]

DATA is an image-folder suite ROOT/DOMAIN/CLASS/*.png with at least 20 pictures per class. A
measurement script for docs/results/zoo-in-context.md, not a documented command.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import torch
from transformers import AutoModelForImageTextToText, AutoProcessor

from robustvlm.data.images import load_image
from robustvlm.data.loaders import load_examples
from robustvlm.models.zoo_recipes import resolve_model_name

WORDS = ("alpha", "beta", "gamma", "delta")


def _turns(pictures: int, question: str, answers: list[str]) -> list[dict]:
    messages: list[dict] = []
    for i in range(pictures):
        messages.append({"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question}]})
        if i < len(answers):
            messages.append({"role": "assistant", "content": [{"type": "text", "text": answers[i]}]})
    return messages


def _trial(by_class: dict[str, list[Any]], rng: np.random.Generator, t: int) -> tuple[list[Any], list[str], str]:
    """Pictures (2 demos then the query), the demos' labels, and the right answer."""
    names = sorted(by_class)
    a, b = (names[i] for i in rng.choice(len(names), 2, replace=False))
    words = [str(w) for w in rng.permutation(WORDS)[:2]]
    demos = [(by_class[a][t % 10], words[0]), (by_class[b][t % 10], words[1])]
    if rng.random() < 0.5:
        demos.reverse()
    query_class, answer = (a, words[0]) if t % 2 == 0 else (b, words[1])
    query = by_class[query_class][10 + t % (len(by_class[query_class]) - 10)]
    return [d for d, _ in demos] + [query], [w for _, w in demos], answer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("data")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--domain", default="clean")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    path = resolve_model_name(args.model)
    processor = AutoProcessor.from_pretrained(path)
    model = AutoModelForImageTextToText.from_pretrained(path).eval()
    by_class: dict[str, list[Any]] = {}
    for ex in load_examples(args.data, verbose=False):
        if ex.env == args.domain:
            by_class.setdefault(ex.target, []).append(ex)
    rng = np.random.default_rng(args.seed)
    right = valid = 0
    for t in range(args.trials):
        pictures, labels, answer = _trial(by_class, rng, t)
        question = f"What is shown in this image? Answer with one of: {', '.join(sorted(labels))}."
        text = processor.apply_chat_template(_turns(3, question, labels), add_generation_prompt=True)
        batch = processor(text=[text], images=[load_image(ex.image) for ex in pictures], return_tensors="pt")
        with torch.no_grad():
            out = model.generate(**batch, max_new_tokens=4, do_sample=False)
        reply = processor.tokenizer.decode(out[0, batch["input_ids"].shape[1]:], skip_special_tokens=True)
        right += reply.strip().startswith(answer)
        valid += reply.strip().startswith(tuple(labels))
    print(f"{args.model}: defined-label accuracy {right}/{args.trials} = {right / args.trials:.3f} "
          f"(chance 0.5); replies that are one of the two labels: {valid}/{args.trials}")


if __name__ == "__main__":
    main()
