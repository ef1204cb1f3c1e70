"""The rank (number of axes, batch included) of each layer output in a Keras 1 model config (pure data).

Keras 1's `dot` and `cos` Merge computed what a Keras 3 `Dot` computes only for some input ranks (translate.py
`_merge`), and its config does not say the ranks: they come from the Input shapes through the graph, as Keras 1's
`get_output_shape_for` derived them. Only layers whose output rank follows from their config and input ranks are
followed; anything else (Lambda, nested models, layers not listed here) is unknown (None), and the caller takes the
safe path for an unknown rank.
"""

from __future__ import annotations

from typing import Any

# Output rank = the first input's rank (Keras 1 class names; the Keras 2 names a Keras 1 config may also hold).
SAME = frozenset({
    "Dense", "Activation", "Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D", "GaussianNoise",
    "GaussianDropout", "AlphaDropout", "BatchNormalization", "Masking", "Permute", "ActivityRegularization",
    "Convolution1D", "Convolution2D", "Convolution3D", "AtrousConvolution1D", "AtrousConvolution2D",
    "SeparableConvolution2D", "Deconvolution2D", "Conv1D", "Conv2D", "Conv3D", "Conv2DTranspose",
    "MaxPooling1D", "MaxPooling2D", "MaxPooling3D", "AveragePooling1D", "AveragePooling2D", "AveragePooling3D",
    "UpSampling1D", "UpSampling2D", "UpSampling3D", "ZeroPadding1D", "ZeroPadding2D", "ZeroPadding3D",
    "Cropping1D", "Cropping2D", "Cropping3D", "ELU", "LeakyReLU", "PReLU", "ThresholdedReLU", "ParametricSoftplus",
    "SReLU", "Highway", "TimeDistributedDense"})
GLOBAL = frozenset({"GlobalMaxPooling1D", "GlobalMaxPooling2D", "GlobalMaxPooling3D", "GlobalAveragePooling1D",
                    "GlobalAveragePooling2D", "GlobalAveragePooling3D", "Flatten", "MaxoutDense"})  # -> 2
RNN = frozenset({"LSTM", "GRU", "SimpleRNN"})
ELEMENTWISE_MERGE = frozenset({"sum", "mul", "ave", "max", "concat"})


def dot_rank(r1: int, r2: int) -> int:
    """Keras 1 Merge.get_output_shape_for in mode dot/cos: x's shape less its axis, then y's less the batch and
    its axis; a rank-1 result gets a unit axis."""
    return max(r1 + r2 - 3, 2)


def layer_rank(cls: Any, cfg: Any, ins: list[int | None]) -> int | None:
    """The output rank of one Keras 1 layer called on inputs of ranks `ins`; None when it does not follow."""
    if not isinstance(cls, str) or not isinstance(cfg, dict):
        return None
    if cls == "InputLayer":
        shape = cfg.get("batch_input_shape")
        return len(shape) if isinstance(shape, list) else None
    if not ins or any(r is None for r in ins):
        return None
    r = ins[0]
    assert r is not None
    if cls in SAME:
        return r
    if cls in GLOBAL:
        return 2
    if cls == "RepeatVector":
        return 3
    if cls == "Embedding":
        return r + 1
    if cls == "Reshape":
        target = cfg.get("target_shape")
        return len(target) + 1 if isinstance(target, list) else None
    if cls in RNN:
        return 3 if cfg.get("return_sequences") else 2
    if cls == "Bidirectional":
        inner = cfg.get("layer")
        if cfg.get("merge_mode") is None or not isinstance(inner, dict) or inner.get("class_name") not in RNN:
            return None
        return 3 if (inner.get("config") or {}).get("return_sequences") else 2
    if cls == "TimeDistributed":
        inner = cfg.get("layer")
        sub = layer_rank(inner.get("class_name"), inner.get("config"), [r - 1]) if isinstance(inner, dict) else None
        return None if sub is None else sub + 1
    if cls == "Merge":
        mode = cfg.get("mode")
        if cfg.get("mode_type", "raw") != "raw":
            return None
        if mode in ELEMENTWISE_MERGE:
            return r
        if mode in ("dot", "cos") and len(ins) == 2 and ins[1] is not None:
            return dot_rank(r, ins[1])
    return None


def sequential_rank(layers: list[dict[str, Any]], rank: int | None) -> int | None:
    """The rank after a list of Keras 1 layer entries applied in turn to an input of rank `rank` (None: read the
    first layer's batch_input_shape or input_dim / input_length, as Keras 1 built a Sequential's input)."""
    for i, entry in enumerate(layers):
        cfg = entry.get("config") if isinstance(entry, dict) else None
        if not isinstance(cfg, dict):
            return None
        if i == 0 and rank is None:
            shape = cfg.get("batch_input_shape")
            if isinstance(shape, list):
                rank = len(shape)
            elif cfg.get("input_dim") is not None:
                rank = 2 if entry.get("class_name") == "Embedding" or "input_length" not in cfg else 3
        rank = layer_rank(entry.get("class_name"), cfg, [rank])
        if rank is None:
            return None
    return rank


def functional_ranks(layers: list[dict[str, Any]]) -> dict[tuple[str, int], int | None]:
    """{(layer name, node index): output rank} over a Keras 1 functional config's layers and inbound_nodes."""
    ranks: dict[tuple[str, int], int | None] = {}
    for _ in range(len(layers) + 1):  # configs are in topological order; a few passes cover any that are not
        changed = False
        for entry in layers:
            name, nodes = entry.get("name"), entry.get("inbound_nodes")
            if not isinstance(name, str) or not isinstance(nodes, list):
                continue
            for i, node in enumerate(nodes or [[]]):
                if (name, i) in ranks and ranks[(name, i)] is not None:
                    continue
                ins = [ranks.get((ref[0], ref[1])) for ref in node
                       if isinstance(ref, list) and len(ref) >= 2 and isinstance(ref[0], str)
                       and isinstance(ref[1], int)] if isinstance(node, list) else []
                got = layer_rank(entry.get("class_name"), entry.get("config"), ins)
                if got is not None or (name, i) not in ranks:
                    changed = changed or got is not None
                    ranks[(name, i)] = got
        if not changed:
            break
    return ranks


def merge_input_ranks(entry: dict[str, Any], ranks: dict[tuple[str, int], int | None]) -> list[int | None] | None:
    """The ranks of a functional Merge entry's (first node's) inputs; None when the node is unreadable."""
    nodes = entry.get("inbound_nodes")
    if not isinstance(nodes, list) or len(nodes) != 1 or not isinstance(nodes[0], list):
        return None
    refs = nodes[0]
    if not all(isinstance(ref, list) and len(ref) >= 2 and isinstance(ref[0], str) and isinstance(ref[1], int)
               for ref in refs):
        return None
    return [ranks.get((ref[0], ref[1])) for ref in refs]
