"""What a converted model may import at load time: keras.ops implementations of Keras 2 objects that Keras 3
lacks or computes differently, registered as `k2to3>Name` for safe_mode loading. Imports keras (and numpy) only:
nothing else of k2to3, so a model converted by k2to3 needs no TensorFlow, no tf_keras and no k2to3 pipeline.

    import k2to3.portable  # registers k2to3>* objects
    model = keras.saving.load_model("model.keras")  # safe_mode stays on

The names below are a public API: generated `--src` modules and `k2to3 fix` output call `k2to3.portable.NAME`,
and saved configs name the registered ones; none of them is ever renamed or removed
(tests/test_portable_compat.py). One module per kind: activations, layers (Keras 2 and library layers),
removed (layers Keras 3 removed), masking (Keras 2's mask propagation), qkeras (QKeras layers and quantizers),
larq (larq's binarized layers), tfmot (quantization-aware training layers), tfops (TFOpLambda / tf.* translations
and the TF-only and dynamic-shape layers), backend (K.* functions), optimizers (Keras 2 update rules); registry holds
the package name.
"""

from __future__ import annotations

from k2to3.portable.activations import (
    keras2_hard_sigmoid,
)
from k2to3.portable.backend import (
    arange,
    batch_dot,
    batch_flatten,
    bias_add,
    cast_to_floatx,
    constant,
    conv1d,
    count_params,
    ctc_batch_cost,
    dtype,
    eye,
    in_top_k,
    int_shape,
    pool2d,
    pool3d,
    repeat,
    resize_images,
    resize_volumes,
    spatial_2d_padding,
    spatial_3d_padding,
    switch,
    temporal_padding,
)
from k2to3.portable.larq import (
    QuantConv1D,
    QuantConv2D,
    QuantDense,
    QuantDepthwiseConv2D,
)
from k2to3.portable.layers import (
    AddLoss,
    ContribInstanceNormalization,
    LayerScale,
    StochasticDepth,
    ThresholdedReLU,
)
from k2to3.portable.masking import (
    Keras2Concatenate,
    Keras2TimeDistributed,
)
from k2to3.portable.optimizers import (
    Keras2Adagrad,
    Keras2Nadam,
    Keras2RMSprop,
    SummedRowsAdadelta,
    SummedRowsAdagrad,
    SummedRowsAdam,
    SummedRowsAdamax,
    SummedRowsAdamW,
    SummedRowsFtrl,
    SummedRowsRMSprop,
)
from k2to3.portable.qkeras import (
    QActivation,
    QBatchNormalization,
    QClip,
    QConv2D,
    QDense,
)
from k2to3.portable.qkeras_folded import (
    QConv2DBatchnorm,
    QDenseBatchnorm,
)
from k2to3.portable.removed import (
    Highway,
    Keras1Merge,
    LocallyConnected1D,
    LocallyConnected2D,
    Maxout,
    MaxoutDense,
    WeightNormalization,
)
from k2to3.portable.tfmot import (
    QuantizeLayer,
    QuantizeWrapperV2,
)
from k2to3.portable.tfops import (
    ShapeOp,
    TFOpLayer,
    fake_quant_with_min_max_vars,
    gather_nd,
    matmul,
    norm,
    one_hot,
    segment_sum,
    shape,
    shape_arith,
    shape_index,
    shape_tensor,
    squared_difference,
)

__all__ = [
    "AddLoss",
    "ContribInstanceNormalization",
    "Highway",
    "Keras1Merge",
    "Keras2Adagrad",
    "Keras2Concatenate",
    "Keras2Nadam",
    "Keras2RMSprop",
    "Keras2TimeDistributed",
    "LayerScale",
    "LocallyConnected1D",
    "LocallyConnected2D",
    "Maxout",
    "MaxoutDense",
    "QActivation",
    "QBatchNormalization",
    "QClip",
    "QConv2D",
    "QConv2DBatchnorm",
    "QDense",
    "QDenseBatchnorm",
    "QuantConv1D",
    "QuantConv2D",
    "QuantDense",
    "QuantDepthwiseConv2D",
    "QuantizeLayer",
    "QuantizeWrapperV2",
    "ShapeOp",
    "StochasticDepth",
    "SummedRowsAdadelta",
    "SummedRowsAdagrad",
    "SummedRowsAdam",
    "SummedRowsAdamW",
    "SummedRowsAdamax",
    "SummedRowsFtrl",
    "SummedRowsRMSprop",
    "TFOpLayer",
    "ThresholdedReLU",
    "WeightNormalization",
    "arange",
    "batch_dot",
    "batch_flatten",
    "bias_add",
    "cast_to_floatx",
    "constant",
    "conv1d",
    "count_params",
    "ctc_batch_cost",
    "dtype",
    "eye",
    "fake_quant_with_min_max_vars",
    "gather_nd",
    "in_top_k",
    "int_shape",
    "keras2_hard_sigmoid",
    "matmul",
    "norm",
    "one_hot",
    "pool2d",
    "pool3d",
    "repeat",
    "resize_images",
    "resize_volumes",
    "segment_sum",
    "shape",
    "shape_arith",
    "shape_index",
    "shape_tensor",
    "spatial_2d_padding",
    "spatial_3d_padding",
    "squared_difference",
    "switch",
    "temporal_padding",
]
