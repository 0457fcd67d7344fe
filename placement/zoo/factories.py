"""Factories of real architectures for ``placement import`` (``placement.zoo.factories:NAME``).

Each factory takes no arguments and returns ``(model, args)``: a freshly initialised
model (no pretrained weights; the plan depends only on shapes) and example inputs for
``torch.export``. Sizes follow the published configurations:

* :func:`bert_base` — BERT-Base for sequence classification (12 layers, hidden 768, 12
  heads, feed-forward 3072; HuggingFace ``BertConfig()`` defaults), batch 8, sequence 128;
* :func:`gpt2` — GPT-2 small with its language-model head (12 layers, hidden 768, 12
  heads; ``GPT2Config()`` defaults, ``use_cache=False``), batch 8, sequence 1024;
* :func:`resnet50` — ResNet-50 (:mod:`placement.zoo.resnet`), batch 32, 224×224 RGB;
* :func:`vit_base` — ViT-Base/16 for image classification (``ViTConfig()`` defaults:
  12 layers, hidden 768, patch 16, image 224), batch 32.

BERT, GPT-2 and ViT come from ``transformers``, built offline from their configurations;
ResNet-50 is written in this package. Models are returned in training mode.
"""

from __future__ import annotations

from typing import Any

BERT_BATCH, BERT_SEQ = 8, 128
GPT2_BATCH, GPT2_SEQ = 8, 1024
IMAGE_BATCH, IMAGE_SIZE = 32, 224
SEED = 0


def _transformers() -> tuple[Any, Any]:
    """``torch`` (seeded) and ``transformers``, or a :class:`~placement.errors.SolverUnavailableError` naming the
    extra that installs the missing one."""
    from placement.io.torch_export import require_torch

    torch = require_torch()
    try:
        import transformers
    except ImportError:
        from placement.errors import SolverUnavailableError

        raise SolverUnavailableError("this model needs transformers: pip install 'placement[models]'") from None
    torch.manual_seed(SEED)
    return torch, transformers


def bert_base() -> tuple[Any, tuple]:
    torch, transformers = _transformers()
    config = transformers.BertConfig()
    model = transformers.BertForSequenceClassification(config)
    return model, (torch.randint(0, config.vocab_size, (BERT_BATCH, BERT_SEQ)),)


def gpt2() -> tuple[Any, tuple]:
    torch, transformers = _transformers()
    config = transformers.GPT2Config(use_cache=False)
    model = transformers.GPT2LMHeadModel(config)
    return model, (torch.randint(0, config.vocab_size, (GPT2_BATCH, GPT2_SEQ)),)


def vit_base() -> tuple[Any, tuple]:
    torch, transformers = _transformers()
    config = transformers.ViTConfig()
    model = transformers.ViTForImageClassification(config)
    return model, (torch.randn(IMAGE_BATCH, 3, config.image_size, config.image_size),)


def resnet50() -> tuple[Any, tuple]:
    from placement.io.torch_export import require_torch
    from placement.zoo.resnet import resnet50 as build

    torch = require_torch()
    torch.manual_seed(SEED)
    return build(), (torch.randn(IMAGE_BATCH, 3, IMAGE_SIZE, IMAGE_SIZE),)
