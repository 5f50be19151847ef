"""An API row serving an FP8-quantized variant is named as such beside a self-hosted bill priced at the plan's own
weights (``api_cost.quantized_row_note``)."""

from __future__ import annotations

from kvledger.catalog.api_match import find_api_price
from kvledger.ledgers.api_cost import quantized_row_note


def test_turbo_and_fp8_rows_are_noted_and_bf16_rows_are_not():
    # DeepInfra's Llama-3.3-70B Turbo row: "Turbo" in the model name and "FP8" in the catalog's notes; Together's
    # Llama-4-Maverick row: "FP8" in the model name; DeepInfra's non-Turbo 70B row: its notes say BF16 (non-Turbo);
    # OpenAI's gpt-4.1: neither
    turbo = quantized_row_note(find_api_price("DeepInfra:meta-llama/Llama-3.3-70B-Instruct-Turbo"))
    assert turbo is not None and turbo.startswith("  note: DeepInfra:meta-llama/Llama-3.3-70B-Instruct-Turbo serves "
                                                  "an FP8-quantized variant")
    assert quantized_row_note(find_api_price("Together:meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8"))
    assert quantized_row_note(find_api_price("DeepInfra:meta-llama/Llama-3.3-70B-Instruct")) is None
    assert quantized_row_note(find_api_price("OpenAI:gpt-4.1")) is None


def test_sglang_note_asks_for_an_fp8_checkpoint_not_a_flag_it_refuses():
    # SGLang's search and simulation refuse --quantization (its online FP8 is not modelled), so under engine "sglang"
    # the note may not tell the reader to pass it: it names the checkpoint's own weights and an FP8 checkpoint instead
    row = find_api_price("DeepInfra:meta-llama/Llama-3.3-70B-Instruct-Turbo")
    vllm, sglang = quantized_row_note(row), quantized_row_note(row, None, "sglang")
    assert "unless --quantization fp8" in vllm and "--quantization" not in sglang
    assert sglang.endswith("self-hosted side is priced at the weights its plan loads (the checkpoint's own: SGLang's "
                           "online quantization is not modelled): compare quality separately, or price self-hosting "
                           "an FP8 checkpoint of the model too")
