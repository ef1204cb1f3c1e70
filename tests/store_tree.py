"""A small model store for the batch/executor/S3 tests, built from committed fixtures (tests/fixtures/make_*.py):
nested folders, an artifact found by content under a non-model name, a Lambda model with its source beside it,
and a model no source in the tree can complete."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import FIXTURES, H5

TREE = {
    "a/fm19_hard_sigmoid.h5": H5 / "fm19_hard_sigmoid.h5",
    "a/b/model.bin": H5 / "fm07_conv1d.h5",
    "lam/lambda_activation.h5": FIXTURES / "src_models" / "lambda_activation.h5",
    "lam/k2_zoo.py": FIXTURES / "src" / "k2_zoo.py",
    "custom/custom.h5": FIXTURES / "src_models" / "custom.h5",
    "tf/tf_only.h5": FIXTURES / "src_models" / "tf_only.h5",
    "blocked/payload.h5": FIXTURES / "src_models" / "payload.h5",
    "notes.txt": None,
}
N_ARTIFACTS = 6
EXPECTED = {"a/fm19_hard_sigmoid.h5": "parity", "a/b/model.bin": "parity", "lam/lambda_activation.h5": "parity",
            "custom/custom.h5": "parity", "tf/tf_only.h5": "tf_only", "blocked/payload.h5": "not_portable"}
OUTPUTS = {"a/fm19_hard_sigmoid.keras", "a/b/model.keras", "lam/lambda_activation.keras", "custom/custom.keras",
           "tf/tf_only.keras"}


def make_tree(root: Path) -> Path:
    for rel, src in TREE.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if src is None:
            p.write_text("not a model\n")
        else:
            shutil.copy(src, p)
    return root
