"""Probe architectures: models written as users write them and never tuned on, run through
both doors (ONNX and ``tilecraft.torch.compile``) and checked against onnxruntime / eager.

    .venv/bin/python benchmarks/probe_architectures.py                       # all, both doors
    .venv/bin/python benchmarks/probe_architectures.py --only video3d,topk_head --door onnx
    .venv/bin/python benchmarks/probe_architectures.py --list

Why a probe and not more suite models: the public suite (public_suite.py) measures what the
compiler should be good at, block by block; a probe looks for what it is *bad* at. Round 30
wrote these 39 (recurrent, 1-D/3-D convolutions, video, point clouds, transposed
convolutions, selection and scans, attention forms, detection and segmentation heads,
graph and recommendation models, capsules) and found four op classes 5-1700x behind
onnxruntime (grouped/depthwise Conv3d, TopK, CumSum, strided ConvTranspose) and one refused
by the PyTorch door (``nn.Transformer*`` with masks): docs/performance.md, round 30. When a
probe model shows a gap, fix the class of op, then move the model to the held-out suite
(held_out.py) if it shows something the suite lacks.

Per model and door: the largest difference from the reference relative to its largest
magnitude, compile seconds (``cache=False``), and for ONNX the median call of tilecraft and
onnxruntime in alternating rounds (runtime/timing.py ``alternating``, a pause before each
turn for onnxruntime's spinning threads) and their ratio. Exporter refusals (PyTorch's own
ONNX exporter lacks some ops) are reported, not failures of tilecraft. No thresholds.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# ---- the models -------------------------------------------------------------------------

class GRUNet(nn.Module):
    def __init__(self): super().__init__(); self.gru = nn.GRU(40, 128, 2, batch_first=True); self.fc = nn.Linear(128, 30)
    def forward(self, x): y, _ = self.gru(x); return self.fc(y)

class TCN(nn.Module):
    def __init__(self):
        super().__init__(); self.inp = nn.Conv1d(16, 64, 1)
        self.convs = nn.ModuleList(nn.Conv1d(64, 64, 3, dilation=d) for d in (1, 2, 4, 8, 16))
        self.out = nn.Conv1d(64, 10, 1)
    def forward(self, x):
        h = self.inp(x)
        for c in self.convs:
            d = c.dilation[0]; h = h + F.relu(c(F.pad(h, (2 * d, 0))))
        return self.out(h)

class PointNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Conv1d(3, 64, 1), nn.BatchNorm1d(64), nn.ReLU(), nn.Conv1d(64, 128, 1), nn.BatchNorm1d(128), nn.ReLU(), nn.Conv1d(128, 512, 1))
        self.head = nn.Sequential(nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 40))
    def forward(self, x): return self.head(torch.max(self.f(x), dim=2)[0])

class ConformerConv(nn.Module):
    def __init__(self, d=144):
        super().__init__(); self.ln = nn.LayerNorm(d); self.pw1 = nn.Conv1d(d, 2 * d, 1); self.dw = nn.Conv1d(d, d, 31, padding=15, groups=d)
        self.bn = nn.BatchNorm1d(d); self.pw2 = nn.Conv1d(d, d, 1)
    def forward(self, x):  # x: B T D
        y = self.ln(x).transpose(1, 2); y = F.glu(self.pw1(y), dim=1); y = F.silu(self.bn(self.dw(y))); y = self.pw2(y)
        return x + y.transpose(1, 2)

class Decoder(nn.Module):
    def __init__(self):
        super().__init__(); self.l = nn.TransformerDecoderLayer(256, 4, 1024, batch_first=True, dropout=0.0)
    def forward(self, tgt, mem):
        T = tgt.shape[1]; mask = torch.triu(torch.full((T, T), float("-inf")), 1)
        return self.l(tgt, mem, tgt_mask=mask)

class DLRM(nn.Module):
    def __init__(self):
        super().__init__(); self.emb = nn.ModuleList(nn.Embedding(1000, 32) for _ in range(6))
        self.bot = nn.Sequential(nn.Linear(13, 64), nn.ReLU(), nn.Linear(64, 32)); self.top = nn.Sequential(nn.Linear(32 + 21, 64), nn.ReLU(), nn.Linear(64, 1))
    def forward(self, dense, idx):
        z = [self.bot(dense)] + [e(idx[:, i]) for i, e in enumerate(self.emb)]
        t = torch.stack(z, 1); inter = torch.bmm(t, t.transpose(1, 2))
        iu = torch.triu_indices(7, 7, 1); flat = inter[:, iu[0], iu[1]]
        return torch.sigmoid(self.top(torch.cat([z[0], flat], 1)))

class ESPCN(nn.Module):
    def __init__(self):
        super().__init__(); self.c1 = nn.Conv2d(3, 64, 5, padding=2); self.g = nn.GroupNorm(8, 64); self.c2 = nn.Conv2d(64, 32, 3, padding=1); self.c3 = nn.Conv2d(32, 3 * 9, 3, padding=1); self.ps = nn.PixelShuffle(3)
    def forward(self, x): return self.ps(self.c3(F.mish(self.c2(F.gelu(self.g(self.c1(x)), approximate="tanh")))))

class TextEncoder(nn.Module):
    def __init__(self):
        super().__init__(); self.tok = nn.Embedding(5000, 256); self.pos = nn.Parameter(torch.randn(77, 256) * 0.02)
        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True, norm_first=True, dropout=0.0, activation="gelu"), 2)
        self.ln = nn.LayerNorm(256); self.proj = nn.Linear(256, 128, bias=False)
    def forward(self, ids):
        T = ids.shape[1]; mask = torch.triu(torch.full((T, T), float("-inf")), 1)
        h = self.ln(self.enc(self.tok(ids) + self.pos[:T], mask=mask))
        return self.proj(h[torch.arange(h.shape[0]), ids.argmax(dim=-1)])

class LinearAttention(nn.Module):
    def __init__(self, d=128, h=4):
        super().__init__(); self.h = h; self.qkv = nn.Linear(d, 3 * d); self.o = nn.Linear(d, d)
    def forward(self, x):
        B, N, D = x.shape; q, k, v = self.qkv(x).reshape(B, N, 3, self.h, D // self.h).permute(2, 0, 3, 1, 4)
        q, k = F.elu(q) + 1, F.elu(k) + 1
        kv = torch.einsum("bhnd,bhne->bhde", k, v); z = 1 / (torch.einsum("bhnd,bhd->bhn", q, k.sum(2)) + 1e-6)
        y = torch.einsum("bhnd,bhde,bhn->bhne", q, kv, z)
        return self.o(y.transpose(1, 2).reshape(B, N, D))

class DenseBlock3D(nn.Module):
    def __init__(self):
        super().__init__(); self.c1 = nn.Conv3d(3, 16, 3, padding=1, stride=(1, 2, 2)); self.c2 = nn.Conv3d(16, 32, (3, 1, 1), padding=(1, 0, 0)); self.c3 = nn.Conv3d(32, 32, (1, 3, 3), padding=(0, 1, 1), groups=4); self.pool = nn.AdaptiveAvgPool3d(1); self.fc = nn.Linear(32, 10)
    def forward(self, x): return self.fc(self.pool(F.hardswish(self.c3(F.relu(self.c2(F.relu(self.c1(x))))))).flatten(1))

class RepVGG(nn.Module):
    def __init__(self, c=64):
        super().__init__(); self.stem = nn.Conv2d(3, c, 3, 2, 1)
        self.b3 = nn.ModuleList(nn.Sequential(nn.Conv2d(c, c, 3, 1, 1), nn.BatchNorm2d(c)) for _ in range(4))
        self.b1 = nn.ModuleList(nn.Sequential(nn.Conv2d(c, c, 1), nn.BatchNorm2d(c)) for _ in range(4))
        self.bn = nn.ModuleList(nn.BatchNorm2d(c) for _ in range(4)); self.fc = nn.Linear(c, 10)
    def forward(self, x):
        x = F.relu(self.stem(x))
        for a, b, n in zip(self.b3, self.b1, self.bn): x = F.relu(a(x) + b(x) + n(x))
        return self.fc(x.mean((2, 3)))

class ConvMixer(nn.Module):
    def __init__(self, d=128, depth=4, k=9):
        super().__init__(); self.patch = nn.Sequential(nn.Conv2d(3, d, 7, 7), nn.GELU(), nn.BatchNorm2d(d))
        self.blocks = nn.ModuleList(nn.ModuleList([nn.Sequential(nn.Conv2d(d, d, k, groups=d, padding="same"), nn.GELU(), nn.BatchNorm2d(d)),
                                                nn.Sequential(nn.Conv2d(d, d, 1), nn.GELU(), nn.BatchNorm2d(d))]) for _ in range(depth))
        self.fc = nn.Linear(d, 10)
    def forward(self, x):
        x = self.patch(x)
        for dw, pw in self.blocks: x = pw(x + dw(x))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))

class PoolFormer(nn.Module):
    def __init__(self, d=64):
        super().__init__(); self.patch = nn.Conv2d(3, d, 7, 4, 2); self.n1 = nn.GroupNorm(1, d); self.n2 = nn.GroupNorm(1, d)
        self.mlp = nn.Sequential(nn.Conv2d(d, 4 * d, 1), nn.GELU(), nn.Conv2d(4 * d, d, 1))
    def forward(self, x):
        x = self.patch(x); y = self.n1(x)
        x = x + (F.avg_pool2d(y, 3, 1, 1, count_include_pad=False) - y)
        return x + self.mlp(self.n2(x))

class PSP(nn.Module):
    def __init__(self, c=64):
        super().__init__(); self.stem = nn.Conv2d(3, c, 3, 4, 1)
        self.stages = nn.ModuleList(nn.Conv2d(c, c // 4, 1) for _ in (1, 2, 3, 6)); self.out = nn.Conv2d(2 * c, 8, 3, padding=1)
    def forward(self, x):
        x = F.relu(self.stem(x)); h, w = x.shape[2:]
        feats = [x] + [F.interpolate(conv(F.adaptive_avg_pool2d(x, b)), (h, w), mode="bilinear", align_corners=False) for b, conv in zip((1, 2, 3, 6), self.stages)]
        return self.out(torch.cat(feats, 1))

class VAEDecoder(nn.Module):
    def __init__(self):
        super().__init__(); self.fc = nn.Linear(32, 128 * 4 * 4)
        self.up = nn.Sequential(nn.ConvTranspose2d(128, 64, 4, 2, 1), nn.BatchNorm2d(64), nn.LeakyReLU(0.2), nn.ConvTranspose2d(64, 32, 4, 2, 1), nn.BatchNorm2d(32), nn.LeakyReLU(0.2), nn.ConvTranspose2d(32, 16, 4, 2, 1), nn.ReLU(), nn.ConvTranspose2d(16, 3, 4, 2, 1), nn.Tanh())
    def forward(self, z): return self.up(self.fc(z).view(-1, 128, 4, 4))

class GCN(nn.Module):
    def __init__(self):
        super().__init__(); self.l1 = nn.Linear(64, 128); self.l2 = nn.Linear(128, 16)
    def forward(self, x, adj):
        d = adj.sum(1).clamp(min=1).rsqrt(); a = d[:, None] * adj * d[None, :]
        return F.log_softmax(a @ self.l2(F.relu(a @ self.l1(x))), dim=1)

class Perceiver(nn.Module):
    def __init__(self, d=128):
        super().__init__(); self.latents = nn.Parameter(torch.randn(1, 64, d)); self.proj = nn.Linear(3, d)
        self.cross = nn.MultiheadAttention(d, 1, batch_first=True); self.self_ = nn.MultiheadAttention(d, 4, batch_first=True)
        self.ln = nn.LayerNorm(d); self.fc = nn.Linear(d, 10)
    def forward(self, x):
        kv = self.proj(x); l = self.latents.expand(x.shape[0], -1, -1)
        l = l + self.cross(self.ln(l), kv, kv, need_weights=False)[0]; l = l + self.self_(l, l, l, need_weights=False)[0]
        return self.fc(l.mean(1))

class T5Bias(nn.Module):
    def __init__(self, d=128, h=4, n=50):
        super().__init__(); self.h = h; self.qkv = nn.Linear(d, 3 * d); self.bias = nn.Embedding(32, h); self.n = n
    def forward(self, x):
        B, N, D = x.shape; q, k, v = self.qkv(x).view(B, N, 3, self.h, D // self.h).permute(2, 0, 3, 1, 4)
        pos = torch.arange(N); rel = pos[None, :] - pos[:, None]
        small = rel.abs() < 8; large = 8 + (torch.log(rel.abs().float().clamp(min=1) / 8) / math.log(128 / 8) * 8).long().clamp(max=7)
        bucket = torch.where(small, rel.abs(), large) + (rel > 0).long() * 16
        scores = q @ k.transpose(-1, -2) + self.bias(bucket).permute(2, 0, 1)[None]
        return (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, N, D)

class MobileViTBlock(nn.Module):
    def __init__(self, c=64, d=96, p=2):
        super().__init__(); self.p = p; self.local = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.SiLU(), nn.Conv2d(c, d, 1))
        self.tr = nn.TransformerEncoderLayer(d, 4, 2 * d, batch_first=True, dropout=0.0, norm_first=True); self.proj = nn.Conv2d(d, c, 1); self.fuse = nn.Conv2d(2 * c, c, 3, padding=1)
    def forward(self, x):
        y = self.local(x); B, D, H, W = y.shape; p = self.p
        t = y.reshape(B, D, H // p, p, W // p, p).permute(0, 3, 5, 2, 4, 1).reshape(B * p * p, (H // p) * (W // p), D)
        t = self.tr(t)
        y = t.reshape(B, p, p, H // p, W // p, D).permute(0, 5, 3, 1, 4, 2).reshape(B, D, H, W)
        return self.fuse(torch.cat([x, self.proj(y)], 1))

class TopKHead(nn.Module):
    def __init__(self):
        super().__init__(); self.fc = nn.Linear(256, 1000)
    def forward(self, x):
        v, i = torch.topk(self.fc(x).softmax(-1), 5); return v, i

class StyleNet(nn.Module):
    def __init__(self):
        super().__init__()
        def cb(i, o, k, st): return nn.Sequential(nn.ReflectionPad2d(k // 2), nn.Conv2d(i, o, k, st), nn.InstanceNorm2d(o, affine=True), nn.ReLU())
        self.down = nn.Sequential(cb(3, 32, 9, 1), cb(32, 64, 3, 2), cb(64, 128, 3, 2))
        self.res = nn.ModuleList(nn.Sequential(cb(128, 128, 3, 1), nn.ReflectionPad2d(1), nn.Conv2d(128, 128, 3), nn.InstanceNorm2d(128, affine=True)) for _ in range(2))
        self.up = nn.Sequential(nn.Upsample(scale_factor=2, mode="nearest"), cb(128, 64, 3, 1), nn.Upsample(scale_factor=2, mode="nearest"), cb(64, 32, 3, 1), nn.ReflectionPad2d(4), nn.Conv2d(32, 3, 9))
    def forward(self, x):
        h = self.down(x)
        for r in self.res: h = h + r(h)
        return self.up(h)

class STN(nn.Module):
    def __init__(self):
        super().__init__(); self.loc = nn.Sequential(nn.Conv2d(1, 8, 7), nn.MaxPool2d(2), nn.ReLU(), nn.Conv2d(8, 10, 5), nn.MaxPool2d(2), nn.ReLU()); self.fc = nn.Linear(10 * 3 * 3, 6)
        self.cls = nn.Sequential(nn.Conv2d(1, 10, 5), nn.MaxPool2d(2), nn.ReLU(), nn.Flatten(), nn.Linear(10 * 12 * 12, 10))
    def forward(self, x):
        theta = self.fc(self.loc(x).flatten(1)).view(-1, 2, 3)
        grid = F.affine_grid(theta, x.size(), align_corners=False)
        return self.cls(F.grid_sample(x, grid, align_corners=False))

class WaveNet(nn.Module):
    def __init__(self, c=64):
        super().__init__(); self.inp = nn.Conv1d(1, c, 1)
        self.f = nn.ModuleList(nn.Conv1d(c, c, 2, dilation=2 ** i) for i in range(8)); self.g = nn.ModuleList(nn.Conv1d(c, c, 2, dilation=2 ** i) for i in range(8))
        self.res = nn.ModuleList(nn.Conv1d(c, c, 1) for _ in range(8)); self.out = nn.Conv1d(c, 256, 1)
    def forward(self, x):
        h = self.inp(x); skip = 0
        for f, g, r in zip(self.f, self.g, self.res):
            d = f.dilation[0]; p = F.pad(h, (d, 0)); z = torch.tanh(f(p)) * torch.sigmoid(g(p)); h = h + r(z); skip = skip + z
        return self.out(F.relu(skip))

class KimCNN(nn.Module):
    def __init__(self):
        super().__init__(); self.emb = nn.Embedding(10000, 128); self.convs = nn.ModuleList(nn.Conv1d(128, 100, k) for k in (3, 4, 5)); self.fc = nn.Linear(300, 2)
    def forward(self, ids):
        e = self.emb(ids).transpose(1, 2)
        return self.fc(torch.cat([F.relu(c(e)).max(dim=2)[0] for c in self.convs], 1))

class Joiner(nn.Module):
    def __init__(self):
        super().__init__(); self.enc = nn.Linear(256, 320); self.pred = nn.Linear(256, 320); self.out = nn.Linear(320, 500)
    def forward(self, e, p): return F.log_softmax(self.out(torch.tanh(self.enc(e)[:, :, None] + self.pred(p)[:, None])), -1)

class MoE(nn.Module):
    def __init__(self, d=128, n=8):
        super().__init__(); self.gate = nn.Linear(d, n); self.w1 = nn.Parameter(torch.randn(n, d, 256) * 0.05); self.w2 = nn.Parameter(torch.randn(n, 256, d) * 0.05)
    def forward(self, x):
        probs = self.gate(x).softmax(-1); v, i = probs.topk(2, -1); v = v / v.sum(-1, keepdim=True)
        weights = torch.zeros_like(probs).scatter(-1, i, v)
        h = torch.einsum("td,edh->teh", x, self.w1); y = torch.einsum("teh,ehd->ted", F.gelu(h), self.w2)
        return torch.einsum("ted,te->td", y, weights)

class NeRF(nn.Module):
    def __init__(self):
        super().__init__(); self.mlp = nn.Sequential(nn.Linear(63, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 4))
    def forward(self, x):
        f = 2.0 ** torch.arange(10, dtype=torch.float32)
        xf = (x[..., None] * f).flatten(-2)
        return self.mlp(torch.cat([x, torch.sin(xf), torch.cos(xf)], -1))

class Siamese(nn.Module):
    def __init__(self):
        super().__init__(); self.f = nn.Sequential(nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 128))
    def forward(self, a, b): return F.cosine_similarity(self.f(a), self.f(b), dim=-1)

class CumAttn(nn.Module):
    def forward(self, x): return torch.cumsum(x, dim=1) / torch.arange(1, x.shape[1] + 1, dtype=torch.float32)[None, :, None]

class HRFuse(nn.Module):
    def __init__(self):
        super().__init__(); self.b1 = nn.Conv2d(32, 32, 3, padding=1); self.b2 = nn.Conv2d(32, 64, 3, 2, 1); self.b3 = nn.Conv2d(64, 128, 3, 2, 1)
        self.u2 = nn.Conv2d(64, 32, 1); self.u3 = nn.Conv2d(128, 32, 1)
    def forward(self, x):
        a = F.relu(self.b1(x)); b = F.relu(self.b2(a)); c = F.relu(self.b3(b))
        return F.relu(a + F.interpolate(self.u2(b), scale_factor=2, mode="nearest") + F.interpolate(self.u3(c), scale_factor=4, mode="bilinear", align_corners=False))

class QuartzNet(nn.Module):
    def __init__(self, c=256):
        super().__init__(); self.inp = nn.Conv1d(64, c, 33, 2, 16)
        self.blocks = nn.ModuleList(nn.Sequential(nn.Conv1d(c, c, k, padding=k // 2, groups=c), nn.Conv1d(c, c, 1), nn.BatchNorm1d(c), nn.ReLU()) for k in (33, 39, 51, 63))
        self.out = nn.Conv1d(c, 29, 1)
    def forward(self, x):
        h = F.relu(self.inp(x))
        for b in self.blocks: h = h + b(h)
        return self.out(h)

class RepLK(nn.Module):
    def __init__(self, c=64):
        super().__init__(); self.pw1 = nn.Conv2d(c, c, 1); self.dw = nn.Conv2d(c, c, 31, padding=15, groups=c); self.small = nn.Conv2d(c, c, 5, padding=2, groups=c); self.pw2 = nn.Conv2d(c, c, 1)
    def forward(self, x):
        y = F.relu(self.pw1(x)); return x + self.pw2(F.relu(self.dw(y) + self.small(y)))

class CBAM(nn.Module):
    def __init__(self, c=64):
        super().__init__(); self.conv = nn.Conv2d(c, c, 3, padding=1); self.mlp = nn.Sequential(nn.Conv2d(c, c // 8, 1), nn.ReLU(), nn.Conv2d(c // 8, c, 1)); self.sp = nn.Conv2d(2, 1, 7, padding=3)
    def forward(self, x):
        x = F.relu(self.conv(x))
        ca = torch.sigmoid(self.mlp(F.adaptive_avg_pool2d(x, 1)) + self.mlp(F.adaptive_max_pool2d(x, 1))); x = x * ca
        sa = torch.sigmoid(self.sp(torch.cat([x.mean(1, keepdim=True), x.amax(1, keepdim=True)], 1)))
        return x * sa

class ECA(nn.Module):
    def __init__(self, c=128):
        super().__init__(); self.conv = nn.Conv2d(c, c, 3, padding=1); self.k = nn.Conv1d(1, 1, 5, padding=2, bias=False)
    def forward(self, x):
        x = F.relu(self.conv(x)); y = F.adaptive_avg_pool2d(x, 1)
        y = self.k(y.squeeze(-1).transpose(-1, -2)).transpose(-1, -2).unsqueeze(-1)
        return x * torch.sigmoid(y)

class NonLocal(nn.Module):
    def __init__(self, c=64):
        super().__init__(); self.t = nn.Conv2d(c, c // 2, 1); self.p = nn.Conv2d(c, c // 2, 1); self.g = nn.Conv2d(c, c // 2, 1); self.o = nn.Conv2d(c // 2, c, 1)
    def forward(self, x):
        B, C, H, W = x.shape
        t = self.t(x).flatten(2).transpose(1, 2); p = self.p(x).flatten(2); g = self.g(x).flatten(2).transpose(1, 2)
        a = torch.softmax(t @ p, -1)
        return x + self.o((a @ g).transpose(1, 2).reshape(B, C // 2, H, W))

class LNCF(nn.Module):
    def __init__(self, c=96):
        super().__init__(); self.w = nn.Parameter(torch.ones(c)); self.b = nn.Parameter(torch.zeros(c)); self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c); self.pw = nn.Conv2d(c, 4 * c, 1); self.pw2 = nn.Conv2d(4 * c, c, 1)
    def forward(self, x):
        y = self.dw(x); u = y.mean(1, keepdim=True); v = (y - u).pow(2).mean(1, keepdim=True)
        y = (y - u) / torch.sqrt(v + 1e-6); y = self.w[:, None, None] * y + self.b[:, None, None]
        return x + self.pw2(F.gelu(self.pw(y)))

class SE1D(nn.Module):
    def __init__(self, c=64):
        super().__init__(); self.c1 = nn.Conv1d(12, c, 15, 2, 7); self.c2 = nn.Conv1d(c, c, 9, padding=4); self.fc1 = nn.Linear(c, c // 4); self.fc2 = nn.Linear(c // 4, c); self.head = nn.Linear(c, 5)
    def forward(self, x):
        h = F.relu(self.c2(F.relu(self.c1(x)))); w = torch.sigmoid(self.fc2(F.relu(self.fc1(h.mean(-1)))))
        h = h * w[..., None]; return self.head(h.amax(-1))

class Bilinear(nn.Module):
    def __init__(self):
        super().__init__(); self.conv = nn.Conv2d(3, 64, 3, 2, 1); self.fc = nn.Linear(64 * 64, 10)
    def forward(self, x):
        f = F.relu(self.conv(x)).flatten(2); g = torch.einsum("bcn,bdn->bcd", f, f) / f.shape[-1]
        g = torch.sign(g) * torch.sqrt(g.abs() + 1e-8); return self.fc(F.normalize(g.flatten(1), dim=1))

class Capsule(nn.Module):
    def __init__(self):
        super().__init__(); self.W = nn.Parameter(torch.randn(1, 32 * 6 * 6, 10, 16, 8) * 0.01); self.conv = nn.Conv2d(1, 256, 9); self.prim = nn.Conv2d(256, 256, 9, 2)
    def forward(self, x):
        u = self.prim(F.relu(self.conv(x))).view(x.shape[0], 32 * 6 * 6, 8)
        n = u.norm(dim=-1, keepdim=True); u = n ** 2 / (1 + n ** 2) * u / (n + 1e-8)
        uhat = (self.W @ u[:, :, None, :, None]).squeeze(-1)
        b = torch.zeros(uhat.shape[:3])
        for _ in range(3):
            c = b.softmax(2); v = (c[..., None] * uhat).sum(1); vn = v.norm(dim=-1, keepdim=True); v = vn ** 2 / (1 + vn ** 2) * v / (vn + 1e-8)
            b = b + (uhat * v[:, None]).sum(-1)
        return v.norm(dim=-1)


MODELS = {
    "gru": (GRUNet, lambda: (torch.randn(1, 50, 40),)),
    "tcn": (TCN, lambda: (torch.randn(1, 16, 400),)),
    "pointnet": (PointNet, lambda: (torch.randn(1, 3, 1024),)),
    "conformer_conv": (ConformerConv, lambda: (torch.randn(1, 200, 144),)),
    "decoder": (Decoder, lambda: (torch.randn(1, 40, 256), torch.randn(1, 60, 256))),
    "dlrm": (DLRM, lambda: (torch.randn(4, 13), torch.randint(0, 1000, (4, 6)))),
    "espcn": (ESPCN, lambda: (torch.randn(1, 3, 64, 64),)),
    "text_encoder": (TextEncoder, lambda: (torch.randint(0, 5000, (1, 77)),)),
    "linear_attention": (LinearAttention, lambda: (torch.randn(1, 197, 128),)),
    "video3d": (DenseBlock3D, lambda: (torch.randn(1, 3, 8, 56, 56),)),
    "repvgg": (RepVGG, lambda: (torch.randn(1, 3, 64, 64),)),
    "convmixer": (ConvMixer, lambda: (torch.randn(1, 3, 224, 224),)),
    "poolformer": (PoolFormer, lambda: (torch.randn(1, 3, 224, 224),)),
    "psp": (PSP, lambda: (torch.randn(1, 3, 112, 112),)),
    "vae_decoder": (VAEDecoder, lambda: (torch.randn(1, 32),)),
    "gcn": (GCN, lambda: (torch.randn(200, 64), (torch.rand(200, 200) < 0.05).float())),
    "perceiver": (Perceiver, lambda: (torch.randn(1, 1024, 3),)),
    "t5_bias": (T5Bias, lambda: (torch.randn(1, 50, 128),)),
    "mobilevit": (MobileViTBlock, lambda: (torch.randn(1, 64, 32, 32),)),
    "topk_head": (TopKHead, lambda: (torch.randn(2, 256),)),
    "style_transfer": (StyleNet, lambda: (torch.randn(1, 3, 128, 128),)),
    "stn": (STN, lambda: (torch.randn(4, 1, 28, 28),)),
    "wavenet": (WaveNet, lambda: (torch.randn(1, 1, 4000),)),
    "kim_cnn": (KimCNN, lambda: (torch.randint(0, 10000, (8, 60)),)),
    "rnnt_joiner": (Joiner, lambda: (torch.randn(1, 50, 256), torch.randn(1, 20, 256))),
    "moe": (MoE, lambda: (torch.randn(64, 128),)),
    "nerf": (NeRF, lambda: (torch.randn(4096, 3),)),
    "siamese": (Siamese, lambda: (torch.randn(32, 512), torch.randn(32, 512))),
    "cumsum_long": (CumAttn, lambda: (torch.randn(1, 2048, 64),)),
    "hrnet_fuse": (HRFuse, lambda: (torch.randn(1, 32, 64, 64),)),
    "quartznet": (QuartzNet, lambda: (torch.randn(1, 64, 800),)),
    "replknet": (RepLK, lambda: (torch.randn(1, 64, 56, 56),)),
    "cbam": (CBAM, lambda: (torch.randn(1, 64, 56, 56),)),
    "eca": (ECA, lambda: (torch.randn(1, 128, 28, 28),)),
    "non_local": (NonLocal, lambda: (torch.randn(1, 64, 32, 32),)),
    "convnext_ln_cf": (LNCF, lambda: (torch.randn(1, 96, 56, 56),)),
    "se1d_ecg": (SE1D, lambda: (torch.randn(1, 12, 5000),)),
    "bilinear_pool": (Bilinear, lambda: (torch.randn(2, 3, 64, 64),)),
    "capsnet": (Capsule, lambda: (torch.randn(1, 1, 28, 28),)),
}


def _relative_error(got, expected) -> float:
    got = got if isinstance(got, (list, tuple)) else [got]
    expected = expected if isinstance(expected, (list, tuple)) else [expected]
    return max(float(np.max(np.abs(np.asarray(g, np.float64) - np.asarray(e, np.float64)))
                     / (float(np.max(np.abs(np.asarray(e, np.float64)))) + 1e-12))
               for g, e in zip(got, expected))


def onnx_row(name: str, repeat: int) -> str:
    import onnxruntime
    import tilecraft
    from tilecraft.runtime.timing import alternating

    build, make_inputs = MODELS[name]
    torch.manual_seed(0)
    model, inputs = build().eval(), make_inputs()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, f"{name}.onnx")
        try:
            with torch.no_grad():
                torch.onnx.export(model, inputs, path, dynamo=False, opset_version=17)
        except Exception as error:  # PyTorch's exporter, not tilecraft
            return f"{name:<18} onnx   export refused by PyTorch: {type(error).__name__}: {str(error)[:90]}"
        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        feeds = {i.name: x.numpy() for i, x in zip(session.get_inputs(), inputs)}
        expected = session.run(None, feeds)
        try:
            start = time.perf_counter()
            compiled = tilecraft.compile(path, cache=False)
            seconds = time.perf_counter() - start
            error = _relative_error(compiled(**feeds), expected)
        except tilecraft.TilecraftError as failure:
            return f"{name:<18} onnx   FAILED {type(failure).__name__}: {str(failure)[:120]}"
        times = alternating({"tilecraft": lambda: compiled(**feeds), "onnxruntime": lambda: session.run(None, feeds)},
                            repeat=repeat, pause_s=0.05)
    return (f"{name:<18} onnx   rel.err {error:.1e}  compile {seconds:5.1f} s  tilecraft {times['tilecraft'] * 1e3:8.3f} ms"
            f"  onnxruntime {times['onnxruntime'] * 1e3:8.3f} ms  ratio {times['tilecraft'] / times['onnxruntime']:5.2f}")


def torch_row(name: str) -> str:
    import tilecraft

    build, make_inputs = MODELS[name]
    torch.manual_seed(0)
    model, inputs = build().eval(), make_inputs()
    try:
        start = time.perf_counter()
        compiled = tilecraft.torch.compile(model, inputs)
        seconds = time.perf_counter() - start
        with torch.no_grad():
            error = _relative_error([torch.as_tensor(t).numpy() for t in _as_list(compiled(*inputs))],
                                    [t.numpy() for t in _as_list(model(*inputs))])
    except tilecraft.TilecraftError as failure:
        return f"{name:<18} torch  FAILED {type(failure).__name__}: {str(failure)[:120]}"
    return f"{name:<18} torch  rel.err {error:.1e}  compile {seconds:5.1f} s"


def _as_list(value):
    return list(value) if isinstance(value, (list, tuple)) else [value]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated model names (default: all)")
    parser.add_argument("--door", choices=("onnx", "torch", "both"), default="both")
    parser.add_argument("--repeat", type=int, default=5, help="alternating rounds for the ONNX timing")
    parser.add_argument("--list", action="store_true", help="print the model names and stop")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(MODELS))
        return 0
    names = args.only.split(",") if args.only else list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error(f"unknown models: {', '.join(unknown)}")
    print(f"probe architectures: {len(names)} models; {os.environ.get('TILECRAFT_NUM_THREADS', 'all')} threads; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    for name in names:
        if args.door in ("onnx", "both"):
            print(onnx_row(name, args.repeat), flush=True)
        if args.door in ("torch", "both"):
            print(torch_row(name), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
