"""BERTScore (Zhang et al., 2020) with greedy token matching, as the bert-score package defines it.

Each sentence is encoded by an HF encoder; the hidden states of one layer are
L2-normalised per token. For a candidate/reference pair the cosine similarity matrix
S [len(cand) x len(ref)] gives, per candidate token, its best match in the reference
(precision) and per reference token its best match in the candidate (recall); the
weighted means of those maxima are P and R, and F1 = 2PR / (P + R).

Details copied from bert-score so the numbers agree with it:
- [CLS] and [SEP] take part in the matching but get weight 0 in the means.
- With ``idf=True`` the weights are idf values from the references of the call:
  idf(t) = ln((M + 1) / (df(t) + 1)) over M references, ln(M + 1) for unseen tokens.
- ``layer`` k is ``hidden_states[k]`` (0 = embedding output, k = output of block k).
- An empty candidate or reference scores 0 for P, R and F1.
- Optional baseline rescaling: x -> (x - b) / (1 - b) with b given per P, R, F1.

Known differences: bert-score zero-fills padded positions before the max, so a token
whose similarities are all negative gets 0 there and its true (negative) maximum here;
for models with a final norm (e.g. Qwen-based Stella), bert-score applies that norm to
an intermediate layer it truncates to, this module does not (the last layer agrees).
A candidate whose idf weights sum to 0 scores 0 here where bert-score gives NaN.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from robustvlm.errors import ConfigError
from robustvlm.evaluation.metrics.inputs import check_text_columns
from robustvlm.models.text_encoder import load_text_encoder

# Pairs per chunk: embeddings of one chunk's sentences are held at once, bounding memory.
PAIRS_PER_CHUNK = 1024


class BERTScorer:
    """Scores candidate/reference pairs with BERTScore.

    Args:
        model_name_or_path: HF encoder name or local folder; None = bundled all-MiniLM-L6-v2.
        layer: which hidden state to use (0..num_hidden_layers); None = the last layer.
        idf: weight tokens by idf computed from the references of each ``score`` call.
        batch_size: sentences per encoder forward pass.
        device: torch device for the encoder.
        baseline: (P, R, F1) baseline values for rescaling; None = raw scores.
        trust_remote_code: passed to ``from_pretrained`` (models with custom code).
    """

    model: Any  # the HF `AutoModel` encoder: `config` and its fields are dynamic

    def __init__(
        self,
        model_name_or_path: str | Path | None = None,
        *,
        layer: int | None = None,
        idf: bool = False,
        batch_size: int = 32,
        device: str = "cpu",
        baseline: tuple[float, float, float] | None = None,
        trust_remote_code: bool = False,
    ):
        encoder = load_text_encoder(model_name_or_path, trust_remote_code=trust_remote_code)
        self.tokenizer, self.model, source = encoder.tokenizer, encoder.model, encoder.source
        self.model.to(device)
        n_layers = self.model.config.num_hidden_layers
        self.layer = n_layers if layer is None else layer
        if not 0 <= self.layer <= n_layers:
            raise ConfigError(f"BERTScore layer must be in 0..{n_layers} for {source}, got {layer}")
        if batch_size < 1:
            raise ConfigError(f"BERTScore batch_size must be >= 1, got {batch_size}")
        if baseline is not None and (len(baseline) != 3 or any(b >= 1 for b in baseline)):
            raise ConfigError(
                f"BERTScore baseline must be 3 values (P, R, F1) below 1, got {baseline}"
            )
        self.idf = idf
        self.batch_size = batch_size
        self.device = device
        self.baseline = baseline
        self.max_length = min(
            self.tokenizer.model_max_length,
            getattr(self.model.config, "max_position_embeddings", self.tokenizer.model_max_length),
        )
        self.ignored_ids = {self.tokenizer.cls_token_id, self.tokenizer.sep_token_id} - {None}

    def score(self, candidates: Sequence[str], references: Sequence[str]) -> dict[str, list[float]]:
        """BERTScore of each candidate against its reference.

        Args:
            candidates: N generated strings.
            references: N reference strings.

        Returns:
            ``{"precision": [N], "recall": [N], "f1": [N]}``, floats (cosine scale,
            about 0-1 for real encoders; rescaled when a baseline is set).
        """
        check_text_columns("BERTScore", {"candidates": candidates, "references": references})
        ids = {s: self._token_ids(s) for s in {*candidates, *references}}
        weight = self._weight_fn([ids[r] for r in references])
        rows = []
        for start in range(0, len(candidates), PAIRS_PER_CHUNK):
            cands = candidates[start : start + PAIRS_PER_CHUNK]
            refs = references[start : start + PAIRS_PER_CHUNK]
            emb = self._embed({*cands, *refs}, ids)
            for c, r in zip(cands, refs):
                rows.append(_greedy_match(emb[c], weight(ids[c]), emb[r], weight(ids[r])))
        scores = torch.tensor(rows, dtype=torch.float64).reshape(-1, 3)
        if self.baseline is not None:
            b = torch.tensor(self.baseline, dtype=torch.float64)
            scores = (scores - b) / (1 - b)
        return {name: scores[:, k].tolist() for k, name in enumerate(("precision", "recall", "f1"))}

    def _token_ids(self, text: str) -> list[int]:
        return self.tokenizer.encode(
            text.strip(), add_special_tokens=True, truncation=True, max_length=self.max_length
        )

    def _weight_fn(self, reference_ids: list[list[int]]) -> Callable[[list[int]], torch.Tensor]:
        """Token id list -> [T] float weights (1 or idf; 0 for [CLS]/[SEP])."""
        if self.idf:
            n_refs = len(reference_ids)
            df = Counter(t for ids in reference_ids for t in set(ids))
            table = {t: math.log((n_refs + 1) / (c + 1)) for t, c in df.items()}
            unseen = math.log(n_refs + 1)
        else:
            table, unseen = {}, 1.0
        table.update(dict.fromkeys(self.ignored_ids, 0.0))
        return lambda ids: torch.tensor([table.get(t, unseen) for t in ids], dtype=torch.float32)

    @torch.no_grad()
    def _embed(self, sentences: set[str], ids: dict[str, list[int]]) -> dict[str, torch.Tensor]:
        """Sentence -> [T, d] L2-normalised token embeddings (CPU float32) of ``self.layer``."""
        # A sentence with no tokens at all (tokenizer without [CLS]/[SEP]) scores 0 anyway.
        out = {s: torch.zeros(0, self.model.config.hidden_size) for s in sentences if not ids[s]}
        for batch in _length_sorted_batches(sentences - out.keys(), ids, self.batch_size):
            lengths = [len(ids[s]) for s in batch]
            input_ids = torch.full((len(batch), max(lengths)), self.tokenizer.pad_token_id or 0)
            mask = torch.zeros_like(input_ids)
            for i, s in enumerate(batch):
                input_ids[i, : lengths[i]] = torch.tensor(ids[s])
                mask[i, : lengths[i]] = 1
            hidden = self.model(
                input_ids=input_ids.to(self.device),
                attention_mask=mask.to(self.device),
                output_hidden_states=True,
            ).hidden_states[self.layer]
            hidden = torch.nn.functional.normalize(hidden.float(), dim=-1).cpu()
            for i, s in enumerate(batch):
                out[s] = hidden[i, : lengths[i]]
        return out


def _length_sorted_batches(
    sentences: set[str], ids: dict[str, list[int]], batch_size: int
) -> Iterator[list[str]]:
    # ties broken by the text, so batches (and the float rounding they bring) do not depend on
    # the set's order, which varies with Python's hash seed
    ordered = sorted(sentences, key=lambda s: (-len(ids[s]), s))
    for start in range(0, len(ordered), batch_size):
        yield ordered[start : start + batch_size]


def _greedy_match(
    cand: torch.Tensor, cand_w: torch.Tensor, ref: torch.Tensor, ref_w: torch.Tensor
) -> tuple[float, float, float]:
    """(P, R, F1) of one pair from [Tc, d] / [Tr, d] unit vectors and [Tc] / [Tr] weights."""
    if cand_w.sum() <= 0 or ref_w.sum() <= 0:
        return 0.0, 0.0, 0.0
    sim = cand @ ref.T
    precision = float((sim.max(dim=1).values * cand_w).sum() / cand_w.sum())
    recall = float((sim.max(dim=0).values * ref_w).sum() / ref_w.sum())
    f1 = 2 * precision * recall / (precision + recall) if precision + recall != 0 else 0.0
    return precision, recall, f1
