"""K2T435: a Bidirectional layer's backward half as Keras 3 builds it.

Keras 2 made the backward layer from the forward config with `go_backwards` toggled
(`_recreate_layer_from_config(layer, go_backwards=True)`: `not config['go_backwards']`); Keras 3 sets it to True.
A forward layer saved with go_backwards=True (it reads the sequence reversed, its partner forward) is then
refused by Keras 3 ("Forward layer and backward layer should have different `go_backwards` value"). The backward
layer Keras 2 ran is written out as `backward_layer`, which Keras 3 takes as given. A saved `backward_layer`
without the key gets the value Keras 2's constructor default and check implied.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from k2to3.upgrade.state import UpgradeState


def _direction(cfg: dict[str, Any]) -> bool:
    return bool(cfg.get("go_backwards", False))


def backward_half(up: UpgradeState, cfg: dict[str, Any], layer: str) -> dict[str, Any]:
    fwd, bwd = cfg.get("layer"), cfg.get("backward_layer")
    if not isinstance(fwd, dict) or not isinstance(fwd.get("config"), dict):
        return cfg
    forward_backwards = _direction(fwd["config"])
    code = up.code("bidirectional_backward")
    if bwd is None:
        if not forward_backwards:
            return cfg  # Keras 3's go_backwards=True is Keras 2's toggle
        back = copy.deepcopy(fwd)
        back["config"]["go_backwards"] = False
        name = str(fwd["config"].get("name", "rnn"))
        back["config"]["name"] = "backward_" + name.removeprefix("forward_")  # the name Keras 2 gave it
        cfg["backward_layer"] = back
        up.note(code, "info", "forward layer has go_backwards=True: its backward half (go_backwards=False, as "
                "Keras 2 toggled it) written out as backward_layer", layer)
    elif isinstance(bwd, dict) and isinstance(bwd.get("config"), dict):
        if "go_backwards" not in bwd["config"]:
            bwd["config"]["go_backwards"] = not forward_backwards
            up.note(code, "info", f"backward_layer without go_backwards: set to {not forward_backwards}", layer)
        elif _direction(bwd["config"]) == forward_backwards:
            up.note(code, "error", f"forward and backward layers both have go_backwards={forward_backwards} "
                    "(Keras 2 refused this too: the file was edited or not written by Keras)", layer,
                    "re-save the model from Keras 2 with a backward_layer of the other direction")
    return cfg
