"""K2T436-K2T437: the layers whose Keras 3 output mask differs from Keras 2's, where a mask can reach them.

Which tensors may carry a mask is found on the graph spec, forwards from the layers that make one
(`Embedding(mask_zero=True)`, `Masking`, a TimeDistributed of either, a nested model holding one). The set is an
over-estimate (a layer that drops its mask may still be counted as passing one on): a layer replaced without
need computes the same output and the same mask as the Keras 3 one whenever no mask reaches it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from k2to3.upgrade.node_refs import all_refs
from k2to3.upgrade.plan import PORTABLE_PACKAGE, RNN_CLASSES

if TYPE_CHECKING:
    from k2to3.upgrade.state import UpgradeState

CONCATENATE = f"{PORTABLE_PACKAGE}>Keras2Concatenate"
TIME_DISTRIBUTED = f"{PORTABLE_PACKAGE}>Keras2TimeDistributed"


def _makes_mask(cls: str, cfg: dict[str, Any]) -> bool:
    if cls == "Embedding":
        return bool(cfg.get("mask_zero"))
    if cls == "Masking":
        return True
    inner = cfg.get("layer")
    if cls == "TimeDistributed" and isinstance(inner, dict):
        return _makes_mask(str(inner.get("class_name")), inner.get("config") or {})
    return False


def _drops_mask(cls: str, cfg: dict[str, Any]) -> bool:
    """An RNN (or Bidirectional) returning its last output only: Keras 2 and 3 both give it no output mask."""
    if cls == "Bidirectional" and isinstance(cfg.get("layer"), dict):
        cfg = cfg["layer"].get("config") or {}
        cls = "RNN"
    return cls in RNN_CLASSES and not cfg.get("return_sequences", False)


def _has_source(nested: dict[str, Any]) -> bool:
    return any(_makes_mask(s["class_name"], s["config"]) or (s["nested"] and _has_source(s["nested"]))
               for s in nested["layers"])


def keras2_masks(up: UpgradeState, model: dict[str, Any]) -> None:
    """Points the Concatenate and TimeDistributed layers of `model` (a graph spec) a mask may reach at the
    portable layers that compute Keras 2's mask."""
    masked: set[str] = set()
    previous: str | None = None
    for s in model["layers"]:
        cls, cfg, name = s["class_name"], s["config"], s["name"]
        if model["kind"] == "sequential":
            incoming = previous in masked
        else:
            incoming = any(r[0] in masked for r in all_refs(s["inbound_nodes"]))
        previous = name
        if s["registered_name"] is None and incoming and cls == "Concatenate":
            s["registered_name"] = CONCATENATE
            up.note(up.code("keras2_concatenate_mask"), "info", "Concatenate -> k2to3>Keras2Concatenate (a mask "
                    "reaches it: Keras 2 keeps a timestep only where every input's mask does)", s["orig_name"])
        inner = cfg.get("layer") if cls == "TimeDistributed" else None
        if (s["registered_name"] is None and isinstance(inner, dict) and inner.get("registered_name") is None
                and not (inner.get("config") or {}).get("stateful") and (incoming or _makes_mask(cls, cfg))):
            s["registered_name"] = TIME_DISTRIBUTED
            up.note(up.code("keras2_time_distributed_mask"), "info", "TimeDistributed -> "
                    "k2to3>Keras2TimeDistributed (a mask reaches it: Keras 2 reduces it to (batch, timesteps) "
                    f"when the wrapped {inner.get('class_name')} returns none)", s["orig_name"])
        if s["registered_name"] in (CONCATENATE, TIME_DISTRIBUTED):
            up.plan.needs_portable = True
        if _makes_mask(cls, cfg) or (s["nested"] and _has_source(s["nested"])):
            masked.add(name)
        elif incoming and not _drops_mask(cls, cfg):
            masked.add(name)
