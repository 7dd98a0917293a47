"""The decoder: a stage (contiguous layers, optionally one TP shard of each) and the
single-process reference used by the oracle and the benchmarks."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ppx.core import ForwardInputs
from ppx.engine.model import weights as W
from ppx.engine.model.weights import Dims


class StageModel:
    """Layers [first_layer, last_layer) of the model on one rank.

    Kernels are called only through the registry; `all_reduce` is set in the TP phase, where
    `wo` and `w_down` produce partial sums over the shard's heads / MLP columns.
    """

    def __init__(
        self,
        d: Dims,
        seed: int,
        first_layer: int,
        last_layer: int,
        kernels,
        device: str = "cpu",
        dtype: torch.dtype = torch.float32,
        tp_rank: int = 0,
        tp_size: int = 1,
        all_reduce=None,
        source=None,
    ) -> None:
        # `source`: where the weights come from (weights.RandomWeights from `seed` by default,
        # hf_weights.HFWeights for a checkpoint); only this stage's tensors are asked for
        src = source if source is not None else W.RandomWeights(d, seed)
        self.d, self.k, self.device, self.dtype = d, kernels, device, dtype
        self.first_layer, self.last_layer = first_layer, last_layer
        self.tp_size, self.all_reduce = tp_size, all_reduce

        def placed(t: torch.Tensor) -> torch.Tensor:
            return t.to(device=device, dtype=dtype)

        self.layers = [
            _fuse({n: placed(t) for n, t in src.layer(i, tp_rank, tp_size).items()})
            for i in range(first_layer, last_layer)
        ]
        self.embed = placed(src.embedding()) if self.is_first else None
        if self.is_last:
            norm, lm = src.head()
            self.final_norm, self.lm_head = placed(norm), placed(lm)
        self.weight_bytes = sum(t.numel() * t.element_size() for t in self.tensors())
        self.bytes_read = src.bytes_read  # what building this stage read from disk

    @property
    def is_first(self) -> bool:
        return self.first_layer == 0

    @property
    def is_last(self) -> bool:
        return self.last_layer == self.d.layers

    @property
    def local_heads(self) -> int:
        """Query heads on this rank (its TP shard; every head in the PP phase)."""
        return self.d.heads // self.tp_size

    @property
    def local_kv_heads(self) -> int:
        return self.d.kv_heads // self.tp_size

    def tensors(self) -> list[torch.Tensor]:
        out = [t for w in self.layers for t in w.values()]
        if self.embed is not None:
            out.append(self.embed)
        if self.is_last:
            out += [self.final_norm, self.lm_head]
        return out

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def _reduce(self, x: torch.Tensor) -> torch.Tensor:
        return self.all_reduce(x) if self.tp_size > 1 else x

    @torch.inference_mode()
    def forward(
        self,
        fi: ForwardInputs,
        k_pool: list[torch.Tensor],
        v_pool: list[torch.Tensor],
        req_to_token: torch.Tensor,
    ) -> torch.Tensor:
        """Returns hidden states [T, H], or sampled token ids [B'] on the last stage."""
        d, k = self.d, self.k
        if self.is_first:
            assert self.embed is not None and fi.input_ids is not None, "stage 0 embeds ids"
            x = self.embed[fi.input_ids]
        else:
            assert fi.hidden is not None, "a later stage reads the previous stage's hidden states"
            x = fi.hidden.to(self.dtype)
        hd, nh, nkv = d.head_dim, self.local_heads, self.local_kv_heads
        scale = hd**-0.5
        if fi.mode == "prefill":
            prefix_indptr, prefix_idx = k.build_kv_indices(
                req_to_token, fi.req_rows, fi.prefix_lens
            )
        else:  # decode reads the whole sequence, the new token's KV included (written first)
            kv_indptr, kv_idx = k.build_kv_indices(req_to_token, fi.req_rows, fi.prefix_lens + 1)
        for li, w in enumerate(self.layers):
            h = k.rms_norm(x, w["attn_norm"], d.eps)
            qkv = h @ w["wqkv_t"]
            if "b_qkv" in w:  # Qwen2's q/k/v bias
                qkv = qkv + w["b_qkv"]
            q, kk, v = qkv.split([nh * hd, nkv * hd, nkv * hd], dim=-1)
            q, kk, v = q.reshape(-1, nh, hd), kk.reshape(-1, nkv, hd), v.reshape(-1, nkv, hd)
            q, kk = k.rope(q, kk, fi.positions, d.rope_theta)
            kp, vp = k_pool[li], v_pool[li]
            if fi.mode == "prefill":
                o = k.extend_attention(
                    q, kk, v, kp, vp, fi.qo_indptr, prefix_indptr, prefix_idx, scale
                )
                kp[fi.out_cache_loc] = kk.to(kp.dtype)
                vp[fi.out_cache_loc] = v.to(vp.dtype)
            else:
                kp[fi.out_cache_loc] = kk.to(kp.dtype)
                vp[fi.out_cache_loc] = v.to(vp.dtype)
                o = k.decode_attention(q, kp, vp, kv_indptr, kv_idx, scale)
            x = x + self._reduce(o.reshape(-1, nh * hd) @ w["wo_t"])
            h = k.rms_norm(x, w["mlp_norm"], d.eps)
            x = x + self._reduce(k.silu_and_mul(h @ w["w_gu_t"]) @ w["w_down_t"])
        if not self.is_last:
            return x
        h = k.rms_norm(x[fi.sample_rows], self.final_norm, d.eps)
        return (h @ self.lm_head.T).argmax(dim=-1)


def _fuse(w: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """One matmul for q/k/v and one for gate/up, weights pre-transposed; the unfused copies
    are dropped so a stage holds each weight once (a real checkpoint's memory is the point)."""
    out = {"attn_norm": w["attn_norm"], "mlp_norm": w["mlp_norm"]}
    out["wqkv_t"] = torch.cat([w["wq"], w["wk"], w["wv"]]).T.contiguous()
    out["w_gu_t"] = torch.cat([w["w_gate"], w["w_up"]]).T.contiguous()
    out["wo_t"], out["w_down_t"] = w["wo"].T.contiguous(), w["w_down"].T.contiguous()
    if "bq" in w:
        out["b_qkv"] = torch.cat([w["bq"], w["bk"], w["bv"]])
    return out


class Reference:
    """The whole model in one process, no cache, plain torch: the oracle's ground truth."""

    def __init__(self, d: Dims, seed: int, source=None) -> None:
        self.d = d
        src = source if source is not None else W.RandomWeights(d, seed)
        self.layers = [{n: t.float() for n, t in src.layer(i).items()} for i in range(d.layers)]
        self.embed = src.embedding().float()
        self.final_norm, self.lm_head = (t.float() for t in src.head())

    @staticmethod
    def _norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

    def _rope(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        hd = x.shape[-1]
        inv = 1.0 / (self.d.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        ang = pos[:, None].float() * inv[None, :]
        cos, sin = ang.cos()[:, None, :], ang.sin()[:, None, :]
        a, b = x[..., : hd // 2], x[..., hd // 2 :]
        return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)

    @torch.inference_mode()
    def logits(self, tokens: list[int]) -> torch.Tensor:
        """Logits [L, V] for every position of one sequence (teacher forcing)."""
        return self._run(tokens, None)

    @torch.inference_mode()
    def kv(self, tokens: list[int], first: int, last: int, heads: range) -> torch.Tensor:
        """What a fresh prefill of `tokens` writes into the pool of a stage running layers
        [first, last) with KV heads `heads`: [layers, 2, L, H, head_dim] (K after RoPE)."""
        kept: list[torch.Tensor] = []
        self._run(tokens, kept, last)
        return torch.stack(kept[first:last])[:, :, :, heads.start : heads.stop]

    def _run(self, tokens: list[int], kv_out: list | None, stop: int | None = None):
        d = self.d
        hd, rep = d.head_dim, d.heads // d.kv_heads
        ids = torch.tensor(tokens, dtype=torch.int64)
        pos = torch.arange(len(tokens))
        x = self.embed[ids]
        for w in self.layers[:stop]:
            h = self._norm(x, w["attn_norm"], d.eps)
            bq, bk, bv = (w.get(b, 0.0) for b in ("bq", "bk", "bv"))
            q = self._rope((h @ w["wq"].T + bq).view(-1, d.heads, hd), pos)
            k = self._rope((h @ w["wk"].T + bk).view(-1, d.kv_heads, hd), pos)
            v = (h @ w["wv"].T + bv).view(-1, d.kv_heads, hd)
            if kv_out is not None:
                kv_out.append(torch.stack([k, v]))
            k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
            o = F.scaled_dot_product_attention(
                q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), is_causal=True
            ).transpose(0, 1)
            x = x + o.reshape(-1, d.q_size) @ w["wo"].T
            h = self._norm(x, w["mlp_norm"], d.eps)
            x = x + (F.silu(h @ w["w_gate"].T) * (h @ w["w_up"].T)) @ w["w_down"].T
        if kv_out is not None:
            return None
        return self._norm(x, self.final_norm, d.eps) @ self.lm_head.T

    def greedy(self, prompt: list[int], max_new: int) -> list[int]:
        out: list[int] = []
        for _ in range(max_new):
            out.append(int(self.logits(prompt + out)[-1].argmax()))
        return out
