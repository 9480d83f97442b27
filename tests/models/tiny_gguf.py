"""Tiny GGUF files written by the tests with the ``gguf`` package (llama.cpp's own writer), for the ``gguf``
model source: a 2-layer Llama with random weights and a small byte-level BPE tokenizer, laid out as llama.cpp's
``convert_hf_to_gguf.py`` lays out a Llama (tensor names, the q/k row permutation, the tokenizer metadata of
SmolLM2's file: ``tokenizer.ggml.model = gpt2``, no BOS token added).

:func:`tiny_llama_gguf` returns ``(path, reference)``: the ``.gguf`` file and the torch model it was written
from (``LlamaForCausalLM``, float32, eval mode) with its Hugging Face tokenizer, the independent reference
the adapters are compared with. ``q8_embeddings=True`` stores the token embeddings quantised (Q8_0, as in
SmolLM2's file); the reference then holds the dequantised values (gguf's own ``dequantize``).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from tests import tiny_models as tm

N_HEAD, N_HEAD_KV, HIDDEN, LAYERS, FFN, CONTEXT = 4, 2, 32, 2, 48, 2048


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's ``LlamaModel.permute`` of q / k rows (rotary halves interleaved), as its converter does."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape))


def tiny_llama_gguf(tmp_path, name: str = "tiny-llama.gguf", q8_embeddings: bool = False, seed: int = tm.SEED):
    import gguf
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = tm._gpt2_tokenizer()
    vocab = tokenizer.get_vocab()
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    eos = tokenizer.eos_token_id
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokens), hidden_size=HIDDEN, intermediate_size=FFN,
                         num_hidden_layers=LAYERS, num_attention_heads=N_HEAD, num_key_value_heads=N_HEAD_KV,
                         max_position_embeddings=CONTEXT, rms_norm_eps=1e-5, rope_theta=10000.0,
                         tie_word_embeddings=False, bos_token_id=eos, eos_token_id=eos, pad_token_id=eos)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():                       # norms away from 1, so a dropped norm would show
        for mod in model.modules():
            if type(mod).__name__.endswith("RMSNorm"):
                mod.weight.uniform_(0.5, 1.5)
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}

    path = Path(tmp_path) / name
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny-llama")
    w.add_context_length(CONTEXT)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(FFN)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(HIDDEN // N_HEAD)
    w.add_vocab_size(len(tokens))
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if q8_embeddings else gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.CONTROL if t == tokenizer.eos_token else gguf.TokenType.NORMAL
                       for t in tokens])
    w.add_token_merges([" ".join(m) for m in tokenizer.bpe_ranks] if hasattr(tokenizer, "bpe_ranks")
                       else _merges(tokenizer))
    w.add_bos_token_id(eos)
    w.add_eos_token_id(eos)
    w.add_pad_token_id(eos)
    w.add_add_bos_token(False)

    emb = sd["model.embed_tokens.weight"]
    if q8_embeddings:
        q = gguf.quants.quantize(emb, gguf.GGMLQuantizationType.Q8_0)
        w.add_tensor("token_embd.weight", q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        deq = gguf.quants.dequantize(q, gguf.GGMLQuantizationType.Q8_0).reshape(emb.shape)
        with torch.no_grad():
            model.model.embed_tokens.weight.copy_(torch.from_numpy(deq))
    else:
        w.add_tensor("token_embd.weight", emb)
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    w.add_tensor("output.weight", sd["lm_head.weight"])
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        w.add_tensor(f"blk.{i}.attn_norm.weight", sd[p + "input_layernorm.weight"])
        w.add_tensor(f"blk.{i}.attn_q.weight", _permute(sd[p + "self_attn.q_proj.weight"], N_HEAD))
        w.add_tensor(f"blk.{i}.attn_k.weight", _permute(sd[p + "self_attn.k_proj.weight"], N_HEAD_KV))
        w.add_tensor(f"blk.{i}.attn_v.weight", sd[p + "self_attn.v_proj.weight"])
        w.add_tensor(f"blk.{i}.attn_output.weight", sd[p + "self_attn.o_proj.weight"])
        w.add_tensor(f"blk.{i}.ffn_norm.weight", sd[p + "post_attention_layernorm.weight"])
        w.add_tensor(f"blk.{i}.ffn_gate.weight", sd[p + "mlp.gate_proj.weight"])
        w.add_tensor(f"blk.{i}.ffn_up.weight", sd[p + "mlp.up_proj.weight"])
        w.add_tensor(f"blk.{i}.ffn_down.weight", sd[p + "mlp.down_proj.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tokenizer.pad_token = tokenizer.eos_token
    return path, (model, tokenizer)


def _merges(tokenizer) -> list[str]:
    import json

    state = json.loads(tokenizer.backend_tokenizer.to_str())["model"]
    return [m if isinstance(m, str) else " ".join(m) for m in state["merges"]]
