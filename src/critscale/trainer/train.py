"""Train a GPT-2-architecture model (``transformers.GPT2LMHeadModel``) on the Python docs, or a Llama one.

``architecture="llama"`` trains ``transformers.LlamaForCausalLM`` instead, of the same width, depth and
heads: rotary positions (base 10 000) instead of learned ones, RMSNorm, a SwiGLU MLP of inner width
``4 * n_embd``, input and output embeddings tied.  Its context can be extended beyond ``n_positions``
through the config's ``rope_parameters`` (chapter 14).  The GPT-2 path and its cache keys are unchanged:
the architecture enters the key only when it is not GPT-2.

Pretrained GPT-2 weights are not downloadable here (theory.md §6 P-13, constraint), so
the book trains its own: byte-level vocabulary (256), learned positions, the GPT-2
block unchanged.  Training is deterministic for a fixed step count (seeded init, seeded
batch offsets, single-threaded order of operations as torch gives it); a time-bounded
run (``minutes=``, the GPU profile) stops at a wall-clock budget and records how many
steps it took.  A step-bounded run is cached under ``build/gpt2/<key>/`` where ``key``
hashes the config, the corpus's SHA-256 and the seed, so a rerun loads instead of training.

``steps=0`` is the *step-0* model: the seeded initialisation of the same shape, saved without a
single update (its held-out loss is still measured).  It is exactly the initial state of every
run with the same shape and seed, the untrained reference beside a trained model's attention.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .corpus import Corpus, byte_tokens

CACHE_ROOT = Path("build") / "gpt2"
ARCHITECTURES = ("gpt2", "llama")
ROPE_THETA = 10000.0


@dataclass(frozen=True)
class TrainConfig:
    """Shape and schedule of a training run (``steps`` or ``minutes`` bounds it)."""

    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    n_positions: int = 256
    batch_size: int = 16
    steps: int | None = 300
    minutes: float | None = None
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 30
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    seed: int = 12697
    log_every: int = 10
    eval_batches: int = 8
    bf16: bool = True  # autocast on CUDA only
    extra: dict = field(default_factory=dict)  # free-form, enters the cache key
    architecture: str = "gpt2"  # "gpt2" (learned positions) or "llama" (rotary positions)

    def __post_init__(self):
        if self.architecture not in ARCHITECTURES:
            raise ValueError(f"architecture must be one of {', '.join(ARCHITECTURES)}, got {self.architecture!r}")
        if (self.steps is None) == (self.minutes is None):
            raise ValueError("give exactly one of steps= or minutes= to bound training")
        if self.steps is not None and (isinstance(self.steps, bool) or int(self.steps) != self.steps
                                       or self.steps < 0):
            raise ValueError(f"steps must be an integer >= 0 (0: the seeded initialisation), got {self.steps!r}")
        if self.minutes is not None and not self.minutes > 0:
            raise ValueError(f"minutes must be > 0, got {self.minutes}")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd={self.n_embd} is not divisible by n_head={self.n_head}")

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def key_dict(self) -> dict:
        """What enters the cache key: every field, the architecture only when it is not GPT-2.

        A GPT-2 run keeps the key it had before the trainer knew other architectures.
        """
        fields = self.as_dict()
        if fields["architecture"] == "gpt2":
            del fields["architecture"]
        else:
            fields["subnormals"] = "flushed"  # trained with subnormal floats flushed to zero (train_model)
        return fields


def cache_key(config: TrainConfig, corpus: Corpus) -> str:
    """Hash of config + corpus + seed (the seed is part of the config)."""
    blob = json.dumps({"config": config.key_dict(), "corpus": corpus.sha256}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def gpt2_config(config: TrainConfig):
    from transformers import GPT2Config

    return GPT2Config(n_layer=config.n_layer, n_head=config.n_head, n_embd=config.n_embd,
                      n_positions=config.n_positions, vocab_size=256, bos_token_id=None,
                      eos_token_id=None, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                      attn_implementation="sdpa")


def llama_config(config: TrainConfig):
    """The ``LlamaConfig`` of a Llama run: rotary positions trained at ``n_positions`` tokens."""
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=256, hidden_size=config.n_embd, intermediate_size=4 * config.n_embd,
                       num_hidden_layers=config.n_layer, num_attention_heads=config.n_head,
                       num_key_value_heads=config.n_head, max_position_embeddings=config.n_positions,
                       rope_parameters={"rope_type": "default", "rope_theta": ROPE_THETA},
                       bos_token_id=None, eos_token_id=None, pad_token_id=None, tie_word_embeddings=True,
                       attention_dropout=0.0, attn_implementation="sdpa")


def build_model(config: TrainConfig):
    """The seeded, untrained model of ``config``'s architecture (seed torch before calling)."""
    from transformers import GPT2LMHeadModel, LlamaForCausalLM

    if config.architecture == "llama":
        return LlamaForCausalLM(llama_config(config))
    return GPT2LMHeadModel(gpt2_config(config))


def _lr_at(config: TrainConfig, step: int, progress: float) -> float:
    """Linear warmup, then cosine decay to ``min_lr_ratio * lr`` over ``progress`` in [0, 1]."""
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    cosine = 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
    return config.lr * (config.min_lr_ratio + (1 - config.min_lr_ratio) * cosine)


def _batch(tokens, offsets, length):
    import torch

    rows = np.stack([tokens[o:o + length + 1] for o in offsets])  # (B, length + 1)
    return torch.from_numpy(rows)


@contextlib.contextmanager
def _subnormals_flushed(enabled: bool):
    """Flush subnormal floats to zero inside the block (torch's CPU setting; off again afterwards, torch's default).

    The Llama run's Adam second moments and rotary products fall into the subnormal range on a CPU, where
    each operation on them costs some hundred times a normal one: 15 steps of the chapter 14 model took
    39 s with subnormals and 5.5 s without on the same 2 cores.  The GPT-2 path keeps IEEE subnormals, so
    that its cached models and chapter 13's numbers stay those it had.
    """
    import torch

    if enabled:
        torch.set_flush_denormal(True)
    try:
        yield
    finally:
        if enabled:
            torch.set_flush_denormal(False)


def train_model(config: TrainConfig, corpus: Corpus, *, device: str = "cpu", progress: bool = True):
    """Train ``config`` on ``corpus`` (subnormals flushed to zero for the Llama architecture, see
    :func:`_subnormals_flushed`); returns what :func:`_train_model` returns."""
    with _subnormals_flushed(config.architecture != "gpt2"):
        return _train_model(config, corpus, device=device, progress=progress)


def _train_model(config: TrainConfig, corpus: Corpus, *, device: str = "cpu", progress: bool = True):
    """Train from scratch; returns ``(model, log)`` where ``log`` has the loss curve and timings."""
    import torch

    from ..models.load import quiet_transformers

    quiet_transformers()
    torch.manual_seed(config.seed)
    rng = np.random.default_rng([config.seed, 1])
    train_tokens = byte_tokens(corpus.train)
    held_tokens = byte_tokens(corpus.heldout)
    T = config.n_positions
    if len(train_tokens) <= T + 1 or len(held_tokens) <= T + 1:
        raise ValueError(f"corpus too short for context {T}: {len(train_tokens)} / {len(held_tokens)} tokens")
    model = build_model(config).to(device)
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=config.lr, betas=(0.9, 0.95))
    use_bf16 = config.bf16 and device.startswith("cuda")
    budget_s = None if config.minutes is None else 60.0 * config.minutes
    curve, step, start = [], 0, time.perf_counter()
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bounded = config.steps is not None
        bar = tqdm(total=config.steps if bounded else int(budget_s), unit="step" if bounded else "s",
                   desc="training", leave=False)
    model.train()
    while True:
        elapsed = time.perf_counter() - start
        if config.steps is not None and step >= config.steps:
            break
        if budget_s is not None and elapsed >= budget_s:
            break
        fraction = step / config.steps if config.steps else elapsed / budget_s
        for group in optimizer.param_groups:
            group["lr"] = _lr_at(config, step, fraction)
        offsets = rng.integers(0, len(train_tokens) - T - 1, size=config.batch_size)
        batch = _batch(train_tokens, offsets, T).to(device)  # (B, T + 1)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_bf16):
            logits = model(batch[:, :-1]).logits  # (B, T, 256)
            loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, 256), batch[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        step += 1
        if step % config.log_every == 0 or step == 1:
            curve.append({"step": step, "loss": float(loss.item()),
                          "elapsed_s": round(time.perf_counter() - start, 3)})
        if bar is not None:
            bar.update(1 if config.steps else int(time.perf_counter() - start) - bar.n)
    if bar is not None:
        bar.close()
    train_s = time.perf_counter() - start
    model.eval()
    held_loss = heldout_loss(model, held_tokens, T, config.eval_batches, config.seed, device, use_bf16)
    log = {"config": config.as_dict(), "corpus": corpus.describe(), "corpus_sha256": corpus.sha256,
           "steps": step, "train_seconds": round(train_s, 2), "loss_curve": curve,
           "final_train_loss": curve[-1]["loss"] if curve else None,
           "heldout_loss_nats_per_byte": held_loss,
           "heldout_bits_per_byte": held_loss / math.log(2), "device": device}
    return model, log


def heldout_loss(model, tokens, length, batches, seed, device, use_bf16=False) -> float:
    """Mean next-byte cross-entropy (nats) on ``batches`` seeded windows of held-out text."""
    import torch

    rng = np.random.default_rng([seed, 2])
    losses = []
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_bf16):
        for _ in range(batches):
            offsets = rng.integers(0, len(tokens) - length - 1, size=4)
            batch = _batch(tokens, offsets, length).to(device)
            logits = model(batch[:, :-1]).logits.float()
            losses.append(torch.nn.functional.cross_entropy(logits.reshape(-1, 256),
                                                            batch[:, 1:].reshape(-1)).item())
    return float(np.mean(losses))


def train_or_load(config: TrainConfig, corpus: Corpus, *, cache_root: str | Path = CACHE_ROOT,
                  device: str = "cpu", progress: bool = True) -> tuple[Path, dict]:
    """The directory of a trained model for ``config`` (trained now, or read from the cache).

    Only step-bounded runs are cached (a time-bounded run depends on the machine's speed).
    Returns ``(directory, log)``; ``log["cached"]`` says whether training was skipped.
    """
    if config.steps is None:
        raise ValueError("only step-bounded training (steps=) is cached; time-bounded runs use train_model")
    directory = Path(cache_root) / cache_key(config, corpus)
    log_path = directory / "train_log.json"
    if log_path.is_file() and (directory / "config.json").is_file():
        log = json.loads(log_path.read_text())
        log["cached"] = True
        return directory, log
    model, log = train_model(config, corpus, device=device, progress=progress)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    log_path.write_text(json.dumps(log, indent=1))
    log["cached"] = False
    return directory, log
