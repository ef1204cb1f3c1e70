#!/usr/bin/env python
"""Keras 2 layer libraries converted from their own source (docs/convert.md "Layer libraries").

For each library: its sdist is downloaded from the package index (`pip download --no-deps`, into bench/.libs; nothing
is installed), a representative model is built and saved by tf_keras with the library imported from that folder, and
`k2to3 convert MODEL.h5 --src LIBRARY_FOLDER ... -o MODEL.keras` runs in a fresh process. Prints one row per library:
parity / mismatch / stop (with the line) / crash.

    python bench/libraries.py            # all
    python bench/libraries.py --only keras-tcn keras-pos-embd
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "bench" / ".libs"

# package==version -> its import folder inside the sdist
PACKAGES = {
    "keras-self-attention==0.51.0": "keras_self_attention",
    "keras-multi-head==0.29.0": "keras_multi_head",
    "keras-pos-embd==0.13.0": "keras_pos_embd",
    "keras-layer-normalization==0.16.0": "keras_layer_normalization",
    "keras-position-wise-feed-forward==0.8.0": "keras_position_wise_feed_forward",
    "keras-embed-sim==0.10.0": "keras_embed_sim",
    "keras-transformer==0.40.0": "keras_transformer",
    "keras-tcn==3.5.7": "tcn",
}

# library -> (the packages passed with --src, the tf_keras code that builds `model`)
MODELS = {
    "keras-self-attention": (["keras_self_attention"], """
from keras_self_attention import SeqSelfAttention, SeqWeightedAttention
x = keras.Input((7, 6))
h = SeqSelfAttention(attention_activation="sigmoid")(x)
model = keras.Model(x, keras.layers.Dense(2)(SeqWeightedAttention()(h)))"""),
    "keras-multi-head": (["keras_multi_head", "keras_self_attention"], """
from keras_multi_head import MultiHeadAttention
x = keras.Input((7, 8))
model = keras.Model(x, MultiHeadAttention(head_num=2)(x))"""),
    "keras-pos-embd": (["keras_pos_embd"], """
from keras_pos_embd import PositionEmbedding, TrigPosEmbedding
x = keras.Input((7,))
e = keras.layers.Embedding(20, 8)(x)
h = PositionEmbedding(input_dim=10, output_dim=8, mode=PositionEmbedding.MODE_ADD)(e)
model = keras.Model(x, TrigPosEmbedding(mode=TrigPosEmbedding.MODE_ADD)(h))"""),
    "keras-layer-normalization": (["keras_layer_normalization"], """
from keras_layer_normalization import LayerNormalization
x = keras.Input((7, 8))
model = keras.Model(x, LayerNormalization()(keras.layers.Dense(8)(x)))"""),
    "keras-position-wise-feed-forward": (["keras_position_wise_feed_forward"], """
from keras_position_wise_feed_forward import FeedForward
x = keras.Input((7, 8))
model = keras.Model(x, FeedForward(units=12)(x))"""),
    "keras-transformer": (["keras_transformer", "keras_multi_head", "keras_layer_normalization",
                           "keras_position_wise_feed_forward", "keras_self_attention"], """
from keras_transformer import get_encoders
x = keras.Input((7, 8))
model = keras.Model(x, get_encoders(1, x, head_num=2, hidden_dim=12))"""),
    "keras-tcn": (["tcn"], """
from tcn import TCN
x = keras.Input((16, 3))
model = keras.Model(x, keras.layers.Dense(2)(TCN(nb_filters=8, dilations=[1, 2], kernel_size=2)(x)))"""),
    "keras-embed-sim": (["keras_embed_sim"], """
from keras_embed_sim import EmbeddingRet, EmbeddingSim
x = keras.Input((7,))
e, w = EmbeddingRet(input_dim=20, output_dim=8)(x)
model = keras.Model(x, EmbeddingSim()([e, w]))"""),
}


def fetch() -> dict[str, Path]:
    """Each package's import folder, from its sdist (downloaded once)."""
    sdists = WORK / "sdist"
    sdists.mkdir(parents=True, exist_ok=True)
    folders: dict[str, Path] = {}
    for spec, module in PACKAGES.items():
        name, version = spec.split("==")
        found = [p for p in sdists.glob("*.tar.gz") if p.name.replace("_", "-").startswith(f"{name}-{version}")]
        if not found:
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", spec,
                            "-d", str(sdists)], check=True)
            found = [p for p in sdists.glob("*.tar.gz") if p.name.replace("_", "-").startswith(f"{name}-{version}")]
        root = WORK / "src" / found[0].name.removesuffix(".tar.gz")
        if not root.is_dir():
            with tarfile.open(found[0]) as t:
                t.extractall(WORK / "src", filter="data")
        folders[module] = root / module
    return folders


def build(library: str, folders: dict[str, Path]) -> Path:
    """The model, saved by tf_keras with the libraries imported from their folders (a fresh process)."""
    out = WORK / "models" / f"{library}.h5"
    out.parent.mkdir(parents=True, exist_ok=True)
    paths = sorted({str(p.parent) for p in folders.values()})
    code = (f"import os, sys\nos.environ['TF_USE_LEGACY_KERAS'] = '1'\nsys.path[:0] = {paths!r}\n"
            "import tensorflow as tf\nfrom tensorflow import keras\ntf.keras.utils.set_random_seed(1)\n"
            + textwrap.dedent(MODELS[library][1]) + f"\nmodel.save({str(out)!r})\n")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                   env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    return out


def convert(library: str, h5: Path, folders: dict[str, Path]) -> tuple[str, str]:
    out = WORK / "out" / library
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "k2to3", "convert", str(h5), "-o", str(out / "model.keras"), "--force", "--json"]
    for module in MODELS[library][0]:
        cmd += ["--src", str(folders[module])]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env={**os.environ, "COLUMNS": "200"})
    if "Traceback (most recent call last)" in r.stderr:
        return "crash", r.stderr.strip().splitlines()[-1]
    if r.returncode == 0:
        return "parity", ""
    if r.returncode == 1:
        report = json.loads(r.stdout) if r.stdout.strip() else {}
        return "mismatch", str({b: v.get("status") for b, v in report.get("backends", {}).items()})
    error = next((ln for ln in reversed(r.stderr.splitlines()) if ln.startswith("error:")), f"exit {r.returncode}")
    return ("stop" if r.returncode in (2, 3) else "crash"), error


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", help="library names")
    args = ap.parse_args()
    folders = fetch()
    rows = []
    for library in args.only or list(MODELS):
        outcome, why = convert(library, build(library, folders), folders)
        rows.append((library, outcome, why))
        print(f"{library}: {outcome} {why[:160]}", file=sys.stderr, flush=True)
    print("| library | outcome | line |\n|---|---|---|")
    for library, outcome, why in rows:
        print(f"| {library} | {outcome} | {why[:200]} |")
    print(f"\n{sum(o == 'parity' for _, o, _ in rows)} of {len(rows)} at parity")


if __name__ == "__main__":
    main()
