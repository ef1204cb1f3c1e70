"""The weights of a tf.keras `.keras` archive (tf.keras 2.13-2.15, the "Keras v3" format), read as data: which
group of its `model.weights.h5` holds which layer's variables.

tf_keras 2.15+ and Keras 3 key a layer's variables by the layer's name (`layers/<name>/vars/0..n`). tf.keras 2.13 and
2.14 wrote a functional model's layers under `_layer_checkpoint_dependencies/<key>/vars`, where the key is the name the
layer object was created with (`conv2d_10`, `re_lu_3`): a model whose layers were renamed after they were created
(MobileNetV2-style names given to a decoder built in a loop) cannot be loaded by name, and tf_keras 2.21 stops
("Layer 'block_10_expand' expected 1 variables, but received 0"). Keras gave those creation names per class, in
creation order (`conv2d`, `conv2d_1`, ... by `backend.unique_object_name`): the layers of one class, in the config's
order, take that class's keys in their numeric order. Pure data, no keras import."""

from __future__ import annotations

import re

from k2to3.errors import NotPortable

CHECKPOINT_GROUP = "_layer_checkpoint_dependencies"


def snake_case(class_name: str) -> str:
    """Keras's to_snake_case: the prefix of a layer's automatic name (ReLU -> re_lu, UpSampling2D -> up_sampling2d)."""
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", class_name)
    s = re.sub(r"([a-z])([A-Z])", r"\1_\2", s).lower()
    return "private" + s if s.startswith("_") else s


def _order(key: str, prefix: str) -> int:
    suffix = key[len(prefix):]
    return 0 if not suffix else int(suffix[1:])


def layer_keys(keys: list[str], layers: list[tuple[str, str]]) -> dict[str, str]:
    """`keys`: the groups under the archive's layer group; `layers`: (name, class name) of the model's layers in the
    config's order. Returns layer name -> key: by name when every layer has its own key, else by creation name."""
    if all(name in keys for name, _ in layers):
        return {name: name for name, _ in layers}
    out: dict[str, str] = {}
    by_class: dict[str, list[str]] = {}
    for name, cls in layers:
        by_class.setdefault(cls, []).append(name)
    for cls, names in by_class.items():
        prefix = snake_case(cls)
        mine = sorted((k for k in keys if re.fullmatch(re.escape(prefix) + r"(_\d+)?", k)),
                      key=lambda k: _order(k, prefix))
        if len(mine) != len(names):
            raise NotPortable(f"the archive's weights name {len(mine)} {cls} layer(s) ({', '.join(mine[:4])}), the "
                              f"config has {len(names)}: its layers cannot be matched",
                              hint="load it in the tf.keras that saved it and model.save('model.h5')")
        out.update(zip(names, mine))
    return out
