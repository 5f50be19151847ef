"""Encoder-decoder models served with a cross-attention KV cache group are refused, not planned as plain decoders."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvledger.catalog.cross_attention import refuse_cross_attention
from kvledger.catalog.modelspec import parse_config
from kvledger.errors import ConfigError

WHISPER = Path(__file__).parents[1] / "fixtures" / "configs" / "whisper-large-v3.json"


def test_whisper_large_v3_is_refused_with_its_encoder_length():
    # Read as a decoder, whisper-large-v3 got 32 × 2 × 20 × 64 × 2 B = 163,840 B/token (the decoder's self-attention,
    # right) but 695,617,280 parameters (decoder only; the checkpoint's 1,543,490,560 add the encoder: conv1
    # 128·1280·3 + 1280 = 492,800, conv2 1280·1280·3 + 1280 = 4,916,480, 1500 × 1280 positions = 1,920,000,
    # 32 layers × 19,676,160 = 629,637,120, final LayerNorm 2,560 → 636,968,960; and 32 cross-attentions of
    # 4 × 1280² + 3 × 1280 = 6,557,440 plus a LayerNorm each in the decoder) and no cross-attention blocks: vLLM holds
    # cdiv(1500, 16) = 94 more blocks per request, so 448-token requests need 28 + 94 = 122 blocks, not 28.
    raw = json.loads(WHISPER.read_text())
    with pytest.raises(ConfigError, match="cross-attention KV not modelled") as err:
        parse_config(raw, source=str(WHISPER))
    assert "WhisperForConditionalGeneration" in str(err.value) and "1,500 encoder positions" in str(err.value)


def test_other_cross_attention_classes_and_bare_model_type_are_refused_decoders_are_not():
    for arch in ("CohereAsrForConditionalGeneration", "NemotronParseForConditionalGeneration"):
        with pytest.raises(ConfigError, match=arch):
            refuse_cross_attention({"architectures": [arch]}, "cfg.json")
    with pytest.raises(ConfigError, match="WhisperForConditionalGeneration"):
        refuse_cross_attention({"model_type": "whisper"}, "cfg.json")  # no architectures list
    # an encoder-decoder family's causal-LM head alone is a decoder (hfread reads its decoder_* fields)
    assert refuse_cross_attention({"architectures": ["BartForCausalLM"], "model_type": "bart"}, "cfg.json") is None


def test_plan_exits_2_without_a_traceback():
    p = subprocess.run([sys.executable, "-m", "kvledger.cli.main", "plan", str(WHISPER), "--gpu", "H100"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "Traceback" not in p.stderr and "cross-attention KV not modelled" in p.stderr, p.stderr
