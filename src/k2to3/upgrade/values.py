"""Values nested in layer configs: TensorShape dicts, dtype policies, initializer/regularizer objects."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from k2to3.upgrade.state import UpgradeState


def tensorshape(up: UpgradeState, obj: Any) -> Any:
    if isinstance(obj, dict):
        if obj.get("class_name") == "TensorShape" and "items" in obj:
            up.note(up.code("tensorshape"), "info", "decoded a TensorShape value to a list")
            return list(obj["items"]) if obj["items"] is not None else None
        return {k: tensorshape(up, v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [tensorshape(up, v) for v in obj]
    return obj


def dtype(up: UpgradeState, value: Any, layer: str) -> Any:
    if isinstance(value, dict) and value.get("class_name") in ("Policy", "DTypePolicy"):
        policy = value.get("config", {}).get("name", "float32")
        up.plan.dtype_policies.add(policy)
        up.note(up.code("dtype_policy"), "info", f"dtype policy '{policy}' kept as DTypePolicy", layer)
        return {"module": "keras", "class_name": "DTypePolicy", "config": {"name": policy},
                "registered_name": None}
    if isinstance(value, str):
        up.plan.dtype_policies.add(value)
    return value


def nested_objects(up: UpgradeState, obj: Any, layer: str) -> Any:
    """Initializer/regularizer/constraint dicts: drop TF1 `dtype`/`partition_info` keys."""
    if isinstance(obj, dict):
        cfg = obj.get("config")
        if "class_name" in obj and isinstance(cfg, dict) and ("dtype" in cfg or "partition_info" in cfg) \
                and obj["class_name"] not in ("Policy", "DTypePolicy"):
            cfg = {k: v for k, v in cfg.items() if k not in ("dtype", "partition_info")}
            up.note(up.code("initializer_dtype"), "info", f"dropped dtype from {obj['class_name']} config", layer)
            obj = {**obj, "config": cfg}
        return {k: nested_objects(up, v, layer) for k, v in obj.items()}
    if isinstance(obj, list):
        return [nested_objects(up, v, layer) for v in obj]
    return obj
