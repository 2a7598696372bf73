"""The book's chapter 4 bonus attention variants (rasbt/LLMs-from-scratch ch04/05_mla ..) for PyTorch 1.13,
the reference of nn/blocks/variants.h: the same classes, the same registration order (so torch.manual_seed(S)
then the class gives the C's weights), the same ops. The cache is passed in (a dict) rather than kept in the
module, as the C's nn_LayerCache is; the math is the book's."""
import torch
import torch.nn as nn


class MultiHeadLatentAttention(nn.Module):  # ch04/05_mla/gpt_with_kv_mla.py
    def __init__(self, d_in, d_out, dropout, num_heads, qkv_bias=False, latent_dim=None):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.latent_dim = latent_dim if latent_dim is not None else max(16, d_out // 8)
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_DKV = nn.Linear(d_in, self.latent_dim, bias=qkv_bias)
        self.W_UK = nn.Linear(self.latent_dim, d_out, bias=qkv_bias)
        self.W_UV = nn.Linear(self.latent_dim, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)

    @staticmethod
    def _reshape_to_heads(x, num_heads, head_dim):
        bsz, num_tokens, _ = x.shape
        return x.view(bsz, num_tokens, num_heads, head_dim).transpose(1, 2).contiguous()

    def forward(self, x, cache=None):
        """cache None: use_cache=False; else a dict {"c_kv": tensor or None, "pos": int}, the book's
        self.cache_c_kv and self.ptr_current_pos"""
        b, num_tokens, _ = x.shape
        queries_all = self.W_query(x)
        latent_new = self.W_DKV(x)
        if cache is not None:
            latent_total = latent_new if cache["c_kv"] is None else torch.cat([cache["c_kv"], latent_new], dim=1)
            cache["c_kv"] = latent_total
        else:
            latent_total = latent_new
        keys_all = self.W_UK(latent_total)
        values_all = self.W_UV(latent_total)
        queries = self._reshape_to_heads(queries_all, self.num_heads, self.head_dim)
        keys = self._reshape_to_heads(keys_all, self.num_heads, self.head_dim)
        values = self._reshape_to_heads(values_all, self.num_heads, self.head_dim)
        attn_scores = torch.matmul(queries, keys.transpose(-2, -1))
        num_tokens_Q = queries.shape[-2]
        num_tokens_K = keys.shape[-2]
        if cache is not None:
            q_positions = torch.arange(cache["pos"], cache["pos"] + num_tokens_Q, dtype=torch.long)
            cache["pos"] += num_tokens_Q
        else:
            q_positions = torch.arange(num_tokens_Q, dtype=torch.long)
        k_positions = torch.arange(num_tokens_K, dtype=torch.long)
        mask_bool = q_positions.unsqueeze(-1) < k_positions.unsqueeze(0)
        attn_scores.masked_fill_(mask_bool, -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        context_vec = (attn_weights @ values).transpose(1, 2)
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)
