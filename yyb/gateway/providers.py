"""Upstream providers as configuration: base URL, credential by variable name, API kinds.

A planned model id is ``provider/model``; the provider part routes the call, the model part is
what the provider knows the model as. Agents send either form (litellm-style clients send the
prefix, official SDKs do not); both are the same planned model.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from yyb.errors import InvalidArgument

ApiKind = Literal["openai", "anthropic"]
API_KINDS: tuple[ApiKind, ...] = ("openai", "anthropic")
# The version header Anthropic requires; sent upstream when the client sent none.
ANTHROPIC_VERSION = "2023-06-01"


@dataclass(frozen=True)
class Provider:
    """One upstream.

    Attributes:
        name: the provider part of planned model ids (``openai`` in ``openai/gpt-5``).
        base_url: the upstream's root, without ``/v1`` (``https://api.openai.com``).
        credential: the NAME of the controller's environment variable holding its key.
        apis: the API kinds it speaks.
    """

    name: str
    base_url: str
    credential: str
    apis: tuple[ApiKind, ...]

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name:
            raise InvalidArgument("provider", "a name without '/'", self.name)
        if not self.base_url.startswith(("http://", "https://")):
            raise InvalidArgument(f"providers.{self.name}.base_url", "an http(s) URL")
        unknown = [a for a in self.apis if a not in API_KINDS]
        if not self.apis or unknown:
            raise InvalidArgument(f"providers.{self.name}.apis", f"some of {list(API_KINDS)}")


@dataclass(frozen=True)
class Route:
    """A planned model resolved: its provider and the id the provider knows."""

    provider: Provider
    model: str

    @property
    def planned(self) -> str:
        """``provider/model``."""
        return f"{self.provider.name}/{self.model}"

    def same_model(self, requested: str | None) -> bool:
        """Whether a request's model is this one, as sent with or without the prefix."""
        return requested in (self.model, self.planned)


@dataclass(frozen=True)
class Providers:
    """The upstreams by name."""

    by_name: Mapping[str, Provider] = field(default_factory=dict)

    @classmethod
    def of(cls, *providers: Provider) -> Providers:
        """Providers from a list (names must differ)."""
        names = [p.name for p in providers]
        if len(set(names)) != len(names):
            raise InvalidArgument("providers", "distinct names", names)
        return cls({p.name: p for p in providers})

    def route(self, planned: str) -> Route:
        """The route of a planned ``provider/model`` id.

        Raises:
            InvalidArgument: not of that form, or no such provider.
        """
        name, slash, model = planned.partition("/")
        if not slash or not model:
            raise InvalidArgument("model", "a provider/model id", planned)
        provider = self.by_name.get(name)
        if provider is None:
            raise InvalidArgument("model", f"a model of one of {sorted(self.by_name)}", planned)
        return Route(provider, model)

    def credentials(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """Each provider's key, read by variable name from ``environ`` (the process's).

        Raises:
            InvalidArgument: a variable unset or empty (named; its value never is).
        """
        environ = os.environ if environ is None else environ
        keys = {}
        for provider in self.by_name.values():
            value = environ.get(provider.credential, "")
            if not value:
                raise InvalidArgument(
                    f"providers.{provider.name}.credential",
                    f"the environment variable {provider.credential} is not set",
                )
            keys[provider.name] = value
        return keys
