"""FSDP2 (fully_shard) trains a small transformer over the backend given (--backend gloo or
lockstep) on the CPU; rank 0 saves the final full weights to --out, so that a test can compare two
backends' runs (tests/c10d/test_torch2.py). Deterministic: one thread, a fixed seed, no dropout,
the same synthetic token batches on every run (rank r takes its own slice of each step's batch).

--bench N instead times N steps after 3 warm-up steps and prints "FSDP_STEP_S <seconds>"
(scripts/compare_torch2.py), with a model of --dim/--layers (default: about 25M parameters).
"""
import argparse
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import lockstep  # noqa: F401

try:
    from torch.distributed.fsdp import fully_shard  # torch 2.6 and newer
except ImportError:  # torch 2.4 and 2.5
    from torch.distributed._composable.fsdp import fully_shard


class Transformer(nn.Module):
    def __init__(self, vocab, dim, layers, heads):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True)
            for _ in range(layers))
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def batches(steps, batch, seq, vocab):
    g = torch.Generator().manual_seed(1234)
    return [torch.randint(0, vocab, (batch, seq + 1), generator=g) for _ in range(steps)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", required=True)
    p.add_argument("--out")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--bench", type=int, default=0)
    p.add_argument("--dim", type=int, default=32)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--vocab", type=int, default=64)
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group(args.backend)
    r, w = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    model = Transformer(args.vocab, args.dim, args.layers, heads=4)
    for layer in model.layers:
        fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    per_rank, seq = 4, 16
    steps = args.bench + 3 if args.bench else args.steps
    data = batches(steps, per_rank * w, seq, args.vocab)
    if args.bench and r == 0:
        count = sum(p.numel() for p in Transformer(args.vocab, args.dim, args.layers, 4).parameters())
        print(f"FSDP_PARAMS {count}", flush=True)
    start = None
    for step, tokens in enumerate(data):
        if args.bench and step == 3:
            dist.barrier()
            start = time.perf_counter()
        mine = tokens[r * per_rank:(r + 1) * per_rank]
        logits = model(mine[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, args.vocab), mine[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
    if args.bench:
        dist.barrier()
        if r == 0:
            print(f"FSDP_STEP_S {(time.perf_counter() - start) / args.bench:.6f}", flush=True)
    else:
        full = {name: t.full_tensor() for name, t in model.state_dict().items()}
        if r == 0:
            torch.save(full, args.out)
            print(f"FSDP_OK loss={loss.item():.6f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
