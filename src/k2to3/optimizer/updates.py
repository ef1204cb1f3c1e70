"""Where Keras 3 computes a different update than Keras 2 for the same hyper-parameters (rules/optimizers.toml,
found by tests/optimizer_update_probe.py), and the Keras 3 optimizer config k2to3 writes for a Keras 2 one."""

from __future__ import annotations

from typing import Any


def is_optimizer_v2(cfg: dict[str, Any]) -> bool:
    """tf.keras optimizer_v2 and standalone Keras 2 configs have no `is_legacy_optimizer: false` (>= 2.11 ones do)."""
    return cfg.get("is_legacy_optimizer", True) is not False


def portable_class(cls: str, cfg: dict[str, Any]) -> str | None:
    """The k2to3 optimizer that keeps Keras 2's update where plain Keras 3's differs, else None."""
    if cls == "RMSprop" and is_optimizer_v2(cfg) and not cfg.get("momentum"):
        return "Keras2RMSprop"  # epsilon outside the square root (K2T602)
    if cls == "Adagrad" and is_optimizer_v2(cfg):
        return "Keras2Adagrad"  # epsilon outside the square root (K2T610)
    return None


PORTABLE_MODULES = {"Keras2RMSprop": "k2to3.optimizer.keras2_rmsprop",
                    "Keras2Adagrad": "k2to3.optimizer.keras2_adagrad"}


def update_findings(cls: str, cfg: dict[str, Any]) -> list[tuple[str, str]]:
    """(code, message) for the update differences Keras 3 cannot express (rules/optimizers.toml, status finding)."""
    if cls == "Nadam" and is_optimizer_v2(cfg):
        return [("K2T605", "Nadam (optimizer_v2): Keras 3's momentum schedule is 0.96**t, Keras 2's "
                 "0.96**(0.004*t); training continues with Keras 3's schedule")]
    if cls == "Nadam":
        return [("K2T606", "Nadam: tf_keras did not save u_product and multiplies it once per variable per step; "
                 "Keras 3 restarts it at 1.0 and multiplies once per step")]
    return []


def serialized(cls: str, cfg: dict[str, Any]) -> dict[str, Any]:
    """Keras 3 serialized optimizer for a translated config (keys already Keras 3's)."""
    port = portable_class(cls, cfg)
    clean = {k: v for k, v in cfg.items() if k != "is_legacy_optimizer"}
    if port:
        return {"module": PORTABLE_MODULES[port], "class_name": port, "config": clean,
                "registered_name": f"k2to3>{port}"}
    return {"module": "keras.optimizers", "class_name": cls, "config": clean, "registered_name": None}


def keras3_optimizer(keras: Any, cls: str, kwargs: dict[str, Any], flavour: str) -> Any:
    """The Keras 3 optimizer k2to3 writes for a Keras 2 `cls(**kwargs)` (flavour "legacy": tf.keras optimizer_v2,
    "new": tf.keras >= 2.11), deserialized as load_model does."""
    import k2to3.portable  # noqa: F401  registers k2to3>Keras2RMSprop, k2to3>Keras2Adagrad

    cfg = {**kwargs, "is_legacy_optimizer": flavour == "legacy"}
    return keras.optimizers.deserialize(serialized(cls, cfg))
