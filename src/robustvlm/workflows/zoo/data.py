"""Pretraining data of the model zoo: real Fashion-MNIST training images with generated text.

Only the training split is read (`load_fashion_mnist("train")`); the test split is for held-out
accuracy and the shifted styles (rotation, colour, noise, inversion) never appear. An image is
drawn as the `fashion` suite's `clean` domain draws it (a 64x64 RGB frame, the scan at 48x48);
an augmented pool (`training_pool(..., augmented=True)`) passes it through `data.augment`, whose
distribution keeps every evaluation shift out (its rule).

- captions (`caption`): the class name in varied templates, for dual encoders and connector
  alignment;
- instruction samples (`instruction_sample`): lettered K-way questions answered "<letter>.
  <class>" (the form `mc eval` scores), open questions answered by a class name, groups of
  classes, yes/no questions, comparisons of two pictures, and interleaved sequences of 1-3
  demonstrations then a query (the form `icl` prompts), each a `ChatSample` for
  `ChatSampleCollator`;
- defined-label sequences (`defined_label_sample`): one demonstration of each of 2-4 classes,
  labelled with words drawn per sequence (`LABEL_WORDS`), then a query picture of one of them:
  the answer is defined only by the demonstrations; `context_tuning_sample` mixes them with the
  instruction samples; `defined_label_episode` adds several labelled queries per sequence (and a
  text-only control that names each class in words), for `robustvlm zoo probe-context`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image

from robustvlm.data.augment import augment
from robustvlm.data.collate import VLMCollator
from robustvlm.data.real_images import FASHION_CLASSES, load_fashion_mnist
from robustvlm.data.synth.domains import FASHION_STYLES, scan_ink
from robustvlm.errors import DataError
from robustvlm.multiple_choice.prompts import GENERATIVE_PROMPTS, format_question

CAPTION_TEMPLATES = (
    "a photo of a {c}.", "a picture of a {c}.", "a {c}.", "an image of a {c}.", "a photo of the {c}.",
    "a black and white photo of a {c}.", "a small picture of a {c}.", "{c}",
)
QUESTIONS = (*GENERATIVE_PROMPTS, "What is shown in the picture?", "Which item is this?")
#: Groups of Fashion-MNIST classes for group questions.
GROUPS = {
    "top": ("t-shirt", "pullover", "coat", "shirt"),
    "footwear": ("sandal", "sneaker", "ankle boot"),
    "other": ("trouser", "dress", "bag"),
}
GROUP_OF = {c: g for g, members in GROUPS.items() for c in members}
#: Answer words that only demonstrations define (no class is named so in any other sample).
LABEL_WORDS = ("alpha", "beta", "gamma", "delta")
DESCRIBE = ("Describe the picture.", "What does the image show?", "Caption this image.")
SOURCE = "Fashion-MNIST training split"


def render(scan: np.ndarray) -> Image.Image:
    """A uint8 (28, 28) scan drawn as the `fashion` suite's clean domain (64x64 RGB)."""
    return FASHION_STYLES["clean"](scan_ink(scan), np.random.default_rng(0))


@dataclass(frozen=True)
class ImagePool:
    """Labelled scans: uint8 images (N, 28, 28), int64 labels (N,); with `augment_rng`, every
    picture is drawn through `data.augment` from that stream (its own, so the samples drawn are
    those of the same pool without it)."""

    images: np.ndarray
    labels: np.ndarray
    augment_rng: np.random.Generator | None = None

    def __len__(self) -> int:
        return len(self.labels)

    def picture(self, i: int) -> Image.Image:
        clean = render(self.images[i])
        return clean if self.augment_rng is None else augment(clean, self.augment_rng)

    def draw(self, rng: np.random.Generator, label: int | None = None) -> int:
        """A random index (of class `label` when given)."""
        if label is None:
            return int(rng.integers(len(self)))
        return int(rng.choice(np.flatnonzero(self.labels == label)))


def training_pool(n_images: int | None, seed: int, augmented: bool = False) -> ImagePool:
    """`n_images` training-split scans (all 60,000 when None), a seeded class-stratified draw;
    `augmented`: pictures drawn through `data.augment` (a stream seeded by `seed`)."""
    images, labels = load_fashion_mnist("train")
    stream = np.random.default_rng([seed, 977]) if augmented else None
    if n_images is None or n_images >= len(labels):
        return ImagePool(images, labels, stream)
    rng = np.random.default_rng([seed, 31])
    per_class = np.array_split(np.arange(n_images), len(FASHION_CLASSES))
    chosen = np.concatenate([rng.choice(np.flatnonzero(labels == c), len(part), replace=False)
                             for c, part in enumerate(per_class)])
    return ImagePool(images[np.sort(chosen)], labels[np.sort(chosen)], stream)


def heldout_pool(n_images: int) -> ImagePool:
    """The first `n_images` of Fashion-MNIST's test split (held out of every recipe)."""
    images, labels = load_fashion_mnist("test")
    return ImagePool(images[:n_images], labels[:n_images])


def caption(label: int, rng: np.random.Generator) -> str:
    """A caption of class `label` in a random template."""
    return str(rng.choice(CAPTION_TEMPLATES)).format(c=FASHION_CLASSES[label])


def ten_way_question(question: str = GENERATIVE_PROMPTS[0]) -> str:
    """The held-out question: every class as a lettered option, in label order."""
    return format_question(question, FASHION_CLASSES)


@dataclass
class ChatSample:
    """One training conversation: `messages` (the last a user turn; one image entry per image),
    its `images` in order and the assistant's `target` (labelled), and `label_replies`: which
    earlier assistant messages (0-based among the assistant messages) are labelled as well."""

    id: str
    messages: list[dict]
    images: list[Image.Image]
    target: str
    env: str = "pretrain"
    source: str = SOURCE
    meta: dict[str, Any] = field(default_factory=dict)
    label_replies: tuple[int, ...] = ()


def user_turn(text: str, n_images: int = 1) -> dict:
    return {"role": "user", "content": [*({"type": "image"} for _ in range(n_images)), {"type": "text", "text": text}]}


def assistant_turn(text: str) -> dict:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def alignment_sample(pool: ImagePool, rng: np.random.Generator, uid: str) -> ChatSample:
    """A picture and a request for its caption."""
    i = pool.draw(rng)
    return ChatSample(uid, [user_turn(str(rng.choice(DESCRIBE)))], [pool.picture(i)], caption(pool.labels[i], rng))


def _lettered(label: int, rng: np.random.Generator) -> tuple[str, str]:
    k = int(rng.integers(2, len(FASHION_CLASSES) + 1))
    others = rng.permutation([c for c in range(len(FASHION_CLASSES)) if c != label])[: k - 1]
    options = [FASHION_CLASSES[c] for c in rng.permutation([label, *others])]
    if rng.random() < 0.5:  # the held-out question's own layout: all classes in label order
        options = list(FASHION_CLASSES)
    answer = options.index(FASHION_CLASSES[label])
    return format_question(str(rng.choice(QUESTIONS)), options), f"{'ABCDEFGHIJ'[answer]}. {options[answer]}"


def _open(label: int, rng: np.random.Generator) -> tuple[str, str]:
    names = ", ".join(FASHION_CLASSES)
    return f"{rng.choice(QUESTIONS)} Answer with one of: {names}.", FASHION_CLASSES[label]


def _group(label: int, rng: np.random.Generator) -> tuple[str, str]:
    return ("Is the item a top, footwear or other? Answer with one word.", GROUP_OF[FASHION_CLASSES[label]])


def _yes_no(label: int, rng: np.random.Generator) -> tuple[str, str]:
    asked = label if rng.random() < 0.5 else int(rng.choice([c for c in range(10) if c != label]))
    return f"Is this a {FASHION_CLASSES[asked]}? Answer yes or no.", "yes" if asked == label else "no"


SINGLE_IMAGE_TASKS = (_lettered, _lettered, _lettered, _open, _group, _yes_no)


def named_instruction_sample(pool: ImagePool, rng: np.random.Generator, uid: str) -> ChatSample:
    """A single-image question of `instruction_sample` in text: the picture replaced by its class
    named in words ("Item: coat. <question>", the layout of the named defined-label episodes), no
    image; for a language model pretrained before it sees pictures."""
    label = int(pool.labels[pool.draw(rng)])
    text, answer = SINGLE_IMAGE_TASKS[int(rng.integers(len(SINGLE_IMAGE_TASKS)))](label, rng)
    return ChatSample(uid, [user_turn(named_item(label, text), 0)], [], answer)


def named_item(label: int, text: str) -> str:
    """`text` after the class `label` named in words: "Item: <class>. <text>"."""
    return f"Item: {FASHION_CLASSES[label]}. {text}"


def instruction_sample(pool: ImagePool, rng: np.random.Generator, uid: str) -> ChatSample:
    """One varied instruction sample: a single-image question (7 in 10; half of them lettered),
    a two-picture comparison (3 in 20) or an interleaved sequence of demonstrations then a query
    (3 in 20)."""
    kind = rng.random()
    if kind < 0.7:
        i = pool.draw(rng)
        text, answer = SINGLE_IMAGE_TASKS[int(rng.integers(len(SINGLE_IMAGE_TASKS)))](int(pool.labels[i]), rng)
        return ChatSample(uid, [user_turn(text)], [pool.picture(i)], answer)
    if kind < 0.85:
        return _comparison(pool, rng, uid)
    return _interleaved(pool, rng, uid)


def _comparison(pool: ImagePool, rng: np.random.Generator, uid: str) -> ChatSample:
    first = pool.draw(rng)
    same = rng.random() < 0.5
    label = int(pool.labels[first])
    other = label if same else int(rng.choice([c for c in range(10) if c != label]))
    pair = [first, pool.draw(rng, other)]
    if rng.random() < 0.5:
        text, answer = "Do the two pictures show the same kind of item? Answer yes or no.", "yes" if same else "no"
    else:
        shown = int(rng.integers(2))
        text = f"Which picture shows a {FASHION_CLASSES[int(pool.labels[pair[shown]])]}: the first or the second?"
        answer = "both" if same else ("the first", "the second")[shown]
    return ChatSample(uid, [user_turn(text, 2)], [pool.picture(i) for i in pair], answer)


def _interleaved(pool: ImagePool, rng: np.random.Generator, uid: str) -> ChatSample:
    """1-3 demonstrations (user picture + question, assistant answer) then the query: the
    answers are class names (the `icl` prompt) or, in 1 of 3, arbitrary labels the
    demonstrations define (so the answer must be read from the context)."""
    n_demos = int(rng.integers(1, 4))
    indices = [pool.draw(rng) for _ in range(n_demos + 1)]
    labels = [int(pool.labels[i]) for i in indices]
    names = [FASHION_CLASSES[c] for c in labels]
    if rng.random() < 1 / 3:
        words = rng.permutation(list(LABEL_WORDS))
        mapping = {c: str(words[j % len(words)]) for j, c in enumerate(dict.fromkeys(labels))}
        names = [mapping[c] for c in labels]
    question = f"{rng.choice(QUESTIONS)} Answer with one of: {', '.join(dict.fromkeys(sorted(set(names))))}."
    return ChatSample(uid, demonstration_messages(question, names[:-1]), [pool.picture(i) for i in indices],
                      names[-1])


def demonstration_messages(question: str, demo_answers: Sequence[str]) -> list[dict]:
    """A user turn (one picture + `question`) and the assistant's answer per demonstration, then
    the query's user turn (one picture + `question`)."""
    messages: list[dict] = []
    for answer in demo_answers:
        messages += [user_turn(question), assistant_turn(answer)]
    return [*messages, user_turn(question)]


def defined_label_question(words: Sequence[str], rng: np.random.Generator | None = None) -> str:
    """The question of a defined-label sequence: a random `QUESTIONS` entry (the first without
    `rng`) and the allowed answers, the words in sorted order."""
    asked = QUESTIONS[0] if rng is None else str(rng.choice(QUESTIONS))
    return with_allowed_words(asked, words)


def with_allowed_words(question: str, words: Sequence[str]) -> str:
    """`question` and the allowed answers, the words in sorted order."""
    return f"{question} Answer with one of: {', '.join(sorted(words))}."


def defined_label_sample(pool: ImagePool, rng: np.random.Generator, uid: str) -> ChatSample:
    """One demonstration of each of 2-4 distinct classes in random order, each labelled with its
    own word of `LABEL_WORDS` (a fresh random mapping per sequence), then a query picture of one of
    those classes (never a demonstration's own picture): only the demonstrations tell which word
    answers it. `meta`: the class -> word mapping, the demonstrations' classes in order and the
    query's class."""
    n_ways = int(rng.integers(2, len(LABEL_WORDS) + 1))
    classes = [int(c) for c in rng.choice(len(FASHION_CLASSES), n_ways, replace=False)]
    words = [str(w) for w in rng.permutation(list(LABEL_WORDS))[:n_ways]]
    demos = [pool.draw(rng, c) for c in classes]
    asked = int(rng.integers(n_ways))
    query = pool.draw(rng, classes[asked])
    while query == demos[asked]:
        query = pool.draw(rng, classes[asked])
    order = rng.permutation(n_ways)
    messages = demonstration_messages(defined_label_question(words, rng), [words[j] for j in order])
    return ChatSample(uid, messages, [pool.picture(demos[j]) for j in order] + [pool.picture(query)], words[asked],
                      meta={"mapping": dict(zip(classes, words)), "demo_classes": [classes[j] for j in order],
                            "query_class": classes[asked]})


def defined_label_episode(pool: ImagePool, rng: np.random.Generator, uid: str, queries: int,
                          named: bool = False) -> ChatSample:
    """A defined-label sequence with `queries` labelled queries: one demonstration of each of 2-4
    distinct classes in random order, each labelled with its own word of `LABEL_WORDS` (a fresh
    mapping per sequence), then `queries` pictures, each of one of those classes drawn at random
    (never an earlier picture of the sequence), each followed by its class's word. Every query's
    reply is labelled (`label_replies`: the assistant messages of the queries before the last,
    whose reply is `target`), so one sequence gives `queries` examples of reading a word from the
    context instead of one. `named` (a text-only control): each turn names its class in words
    ("Item: coat. <question>") instead of showing a picture, and `images` is empty. `meta` as in
    `defined_label_sample`, with the query classes in order."""
    n_ways = int(rng.integers(2, len(LABEL_WORDS) + 1))
    classes = [int(c) for c in rng.choice(len(FASHION_CLASSES), n_ways, replace=False)]
    words = [str(w) for w in rng.permutation(list(LABEL_WORDS))[:n_ways]]
    turns = [int(j) for j in rng.permutation(n_ways)] + [int(j) for j in rng.integers(n_ways, size=queries)]
    shown: list[int] = []
    for j in turns:
        shown.append(pool.draw(rng, classes[j]))
        while shown[-1] in shown[:-1]:
            shown[-1] = pool.draw(rng, classes[j])
    question = defined_label_question(words, rng)
    messages: list[dict] = []
    for j in turns:
        text = named_item(classes[j], question) if named else question
        messages += [user_turn(text, 0 if named else 1), assistant_turn(words[j])]
    return ChatSample(uid, messages[:-1], [] if named else [pool.picture(i) for i in shown], words[turns[-1]],
                      label_replies=tuple(range(n_ways, n_ways + queries - 1)),
                      meta={"mapping": dict(zip(classes, words)), "demo_classes": [classes[j] for j in turns[:n_ways]],
                            "query_classes": [classes[j] for j in turns[n_ways:]],
                            "query_class": classes[turns[-1]]})


def context_tuning_sample(pool: ImagePool, rng: np.random.Generator, uid: str, share: float) -> ChatSample:
    """A defined-label sequence with probability `share`, else an `instruction_sample`."""
    if rng.random() < share:
        return defined_label_sample(pool, rng, uid)
    return instruction_sample(pool, rng, uid)


class ChatSampleCollator(VLMCollator):
    """`VLMCollator` for `ChatSample`s: any number of turns and images; the final reply is
    labelled (same output as `VLMCollator`), and so are the earlier replies a sample's
    `label_replies` names: each from after its assistant header (the text the chat template adds
    as the generation prompt) up to and including the first special token (its end of turn)."""

    def __call__(self, examples: Sequence[Any]) -> dict[str, Any]:
        """Collate `ChatSample`s (they carry the fields of an `Example` that collation reads)."""
        batch = super().__call__(list(examples))
        for row, ex in enumerate(examples):
            if ex.label_replies and self.train:
                self._label_earlier_replies(batch, row, ex)
        return batch

    def _label_earlier_replies(self, batch: dict[str, Any], row: int, ex: ChatSample) -> None:
        ids = batch["input_ids"][row].tolist()
        header = self._assistant_header()
        starts = [i + len(header) for i in range(len(ids)) if ids[i:i + len(header)] == header]
        n_replies = sum(m["role"] == "assistant" for m in ex.messages) + 1  # with the final reply
        if len(starts) != n_replies or not all(0 <= k < n_replies - 1 for k in ex.label_replies):
            raise DataError(f"found {len(starts)} assistant headers for {n_replies} replies, or a labelled "
                            f"reply {ex.label_replies} out of range", ex.source, ex.id)
        special = set(self.tokenizer.all_special_ids)
        for k in ex.label_replies:
            end = next(i for i in range(starts[k], len(ids)) if ids[i] in special)
            batch["labels"][row, starts[k]:end + 1] = batch["input_ids"][row, starts[k]:end + 1]

    def _assistant_header(self) -> list[int]:
        """Token ids of the assistant header: what the generation prompt adds to a conversation."""
        turn = [user_turn("x", 0)]
        bare, opened = (self.processor.apply_chat_template(turn, add_generation_prompt=g, tokenize=False)
                        for g in (False, True))
        return list(self.tokenizer(opened[len(bare):], add_special_tokens=False)["input_ids"])

    def _render(self, ex: Any, *, with_answer: bool) -> str:
        messages = [*ex.messages, assistant_turn(ex.target)] if with_answer else ex.messages
        return self.processor.apply_chat_template(messages, add_generation_prompt=not with_answer, tokenize=False)

    def _encode_prompts(self, examples: Sequence[Any], prompts: list[str]) -> dict[str, Any]:
        images = [ex.images for ex in examples] if any(ex.images for ex in examples) else None
        return self.processor(text=prompts, images=images, padding=True, return_tensors="pt")


def tokenizer_corpus() -> list[str]:
    """Text a zoo VLM's tokenizer is trained on: every template, question, class and group."""
    return [*CAPTION_TEMPLATES, *QUESTIONS, *DESCRIBE, ", ".join(FASHION_CLASSES), " ".join(GROUPS),
            "Do the two pictures show the same kind of item? Which picture shows the first or the second both",
            "Is this a ? Answer yes or no. Answer with one of: alpha beta gamma delta", ten_way_question()]
