"""The table of a quantization library's quantizers (qkeras, larq), as the portable layers read a serialized
quantizer spec ({"quantizer": NAME, "config": {...}}): checked when the layer is built, applied in call()."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class QuantizerTable:
    def __init__(self, library: str, quantizers: dict[str, Callable[[Any, dict[str, Any]], Any]]) -> None:
        self.library, self.quantizers = library, quantizers

    def apply(self, x: Any, spec: dict[str, Any] | None) -> Any:
        """x through the quantizer `spec`; None keeps x."""
        if not spec:
            return x
        return self.quantizers[spec["quantizer"]](x, spec.get("config") or {})

    def check(self, spec: dict[str, Any] | None) -> dict[str, Any] | None:
        """`spec` itself, once its quantizer is known: an unknown name fails where the layer is configured."""
        if spec and spec.get("quantizer") not in self.quantizers:
            raise ValueError(f"unknown {self.library} quantizer {spec.get('quantizer')!r}; known: "
                             f"{sorted(self.quantizers)}")
        return spec
