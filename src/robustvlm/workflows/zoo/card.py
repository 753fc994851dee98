"""A zoo member's model card (README.md in its folder): recipe, data, stages with steps and CPU
seconds, held-out accuracy, and how to load it."""

from __future__ import annotations

from robustvlm.model_ref import ModelRef
from robustvlm.models.zoo_recipes import DUAL_ENCODERS

LOADERS = {True: "AutoModel", False: "AutoModelForImageTextToText"}


def render_card(info: dict) -> str:
    """Markdown of `info` (the member's zoo_member.json)."""
    r = info["recipe"]
    dual = r["arch"] in DUAL_ENCODERS
    method = ('zero-shot ("a photo of a <class>." nearest to the image)' if dual
              else 'summed option log-likelihood of "<letter>. <class>"')
    lines = [
        "---", "library_name: transformers", "tags: [robustvlm-zoo]", "---", "",
        f"# robustvlm zoo member `{info['name']}`", "",
        f"A {r['arch']} model pretrained offline by `robustvlm zoo build --members {info['name']}` "
        f"(recipe key `{info['key']}`).", "",
        "## Data", "",
        f"{info['n_train_images']} images of Fashion-MNIST's training split (Zalando, MIT licence), drawn "
        "as the `fashion` suite's clean domain; never the test split nor the shifted styles "
        "(rotation, colour, noise, inversion). Text is generated from the class names.", "",
        "## Recipe", "", "| field | value |", "|---|---|",
        *(f"| {k} | {v} |" for k, v in r.items()), "",
        "## Training", "", "| stage | steps | final loss | CPU seconds |", "|---|---|---|---|",
        *(f"| {s['stage']} | {s['steps']} | {s['final_loss']} | {s['cpu_seconds']} |" for s in info["stages"]),
        f"| total | {sum(s['steps'] for s in info['stages'])} | | {info['cpu_seconds']} |", "",
        "## Held-out accuracy", "",
        f"{info['heldout_accuracy']:.3f} on the 10-way Fashion-MNIST question over the first "
        f"{info['eval_images']} test-split images (chance 0.100), {method}.", "",
        *_context_check(info),
        "## Loading", "",
        f"`transformers.{LOADERS[dual]}.from_pretrained(folder)` and `AutoProcessor.from_pretrained(folder)`; "
        f"in robustvlm, `{ModelRef.zoo(info['name']).name}` wherever a model is named.", "",
    ]
    return "\n".join(lines)


def _context_check(info: dict) -> list[str]:
    """The card's defined-label section, when the build ran the check."""
    scores = info.get("defined_label_accuracy")
    if not scores:
        return []
    return [
        "## Defined-label accuracy (in-context check)", "",
        "One demonstration picture of each of N classes, labelled with words drawn per trial "
        "(alpha, beta, gamma, delta), then a query picture of one of them; pictures from the same "
        f"{info['eval_images']} test-split images; the allowed word of largest log-likelihood; "
        "0-shot: the same question without demonstrations.", "",
        "| ways | trials | accuracy | 0-shot | chance |", "|---|---|---|---|---|",
        *(f"| {ways} | {info['defined_label_trials']} | {scores[f'{ways}-way']:.3f} | "
          f"{scores[f'{ways}-way 0-shot']:.3f} | {1 / ways:.3f} |" for ways in _ways(scores)), "",
    ]


def _ways(scores: dict) -> list[int]:
    return sorted(int(k.split("-")[0]) for k in scores if k.endswith("-way"))
