"""The `openai` family: a model behind an OpenAI-compatible server (`models.served`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from robustvlm.config import ServedConfig
from robustvlm.errors import ConfigError
from robustvlm.model_ref import ModelRef
from robustvlm.models.backends.base import Backend
from robustvlm.models.chat import ChatPrompt
from robustvlm.models.loglik import OptionScores
from robustvlm.models.served import ServedModel


class ServedBackend(Backend):
    """A model behind an OpenAI-compatible server (`models.served.ServedModel`): no weights here.
    A served model decodes at temperature 0, as a local one decodes greedily; a repetition
    penalty other than 1.0 is sent to the server, which must apply it or refuse it."""

    def __init__(self, name: str, family: str, served: ServedModel):
        self.name, self.family, self.served = name, family, served
        # no weights here: the operations reading `model` are refused or overridden
        self.model = self.processor = None  # type: ignore[assignment]

    @classmethod
    def load(cls, ref: ModelRef, family: str, *, corpus: list[str] | None, trust_remote_code: bool) -> Backend:
        raise ConfigError(f"model '{ref.name}' is served: give its server's address (--base-url URL)")

    @classmethod
    def connect(cls, ref: ModelRef, family: str, config: ServedConfig) -> ServedBackend:
        """The backend of "openai:MODEL" at the server `config` names."""
        return cls(ref.name, family, ServedModel(ref, config))

    def generate_chats(
        self, prompts: Sequence[ChatPrompt], *, max_new_tokens: int, repetition_penalty: float
    ) -> list[str]:
        """Greedy replies from the server, one per prompt (see the class docstring)."""
        return self.served.generate(prompts, max_new_tokens=max_new_tokens, repetition_penalty=repetition_penalty)

    def check_multi_image(self) -> None:
        """A chat-completions request may hold several images; a server that refuses them fails
        the request with its own message."""

    @property
    def usage(self) -> Mapping[str, int] | None:
        return self.served.usage

    def track_usage(self, sink: Callable[[Mapping[str, int]], None]) -> None:
        self.served.track_usage(sink)

    def option_logliks(self, messages: list[dict], continuations: Sequence[str], **options: Any) -> OptionScores:
        """Log-likelihoods from the server's prompt log-probabilities (`ServedModel.option_logliks`:
        images, record; `shared_prefix` is the server's business: its prefix cache)."""
        options.pop("shared_prefix", None)
        return self.served.option_logliks(messages, continuations, **options)

    def generate(self, batch: dict[str, Any], **options: Any) -> list[str]:
        raise ConfigError(f"model '{self.name}' is served: it answers chat prompts, not token batches")
