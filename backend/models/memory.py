"""Device-memory estimate of a training run, before it starts.

Pure arithmetic on the model's architecture numbers (from a preset or a
folder's config.json): no torch import, so the Train tab can update it on
every keystroke. The formula, its assumptions and a comparison against the
measured peak of real runs are in docs/MEMORY.md.

All sizes are in GiB (2**30 bytes), like `Device.memory_gb`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from backend.messages import UserError, msg
from backend.models.offline import OFFLINE_MODELS
from backend.models.presets import PRESETS

GIB = 2**30
BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
# bitsandbytes NF4 with double quantisation: 4 bits + an 8-bit absmax per block
# of 64 weights + an fp32 scale per 256 blocks.
NF4_BYTES = 0.5 + 1 / 64 + 4 / (64 * 256)
# LLM.int8: one byte per weight (+ an fp32 scale per output row, added separately).
INT8_BYTES = 1.0
# Optimizer state in bytes per trainable parameter.
OPTIMIZER_BYTES = {
    "adamw_torch": 8, "adamw_torch_fused": 8, "paged_adamw_32bit": 8,  # exp_avg + exp_avg_sq in fp32
    "adamw_8bit": 2, "paged_adamw_8bit": 2,                              # both moments in 8 bits
    "adafactor": 0.5,  # factored second moment: rows + columns, a small share of the weights
    "sgd": 0,          # no momentum by default
}
# Fixed costs that do not scale with the model: the CUDA context and kernels
# (not seen by torch's allocator, but they take device memory), or on the CPU
# the Python process with torch / transformers imported (measured, docs/MEMORY.md).
RUNTIME_GB = {"cuda": 0.6, "cpu": 0.5}
# On the CPU the peak RSS grows ~1.75x faster with batch x cutoff than the
# tensors counted below (glibc keeps freed blocks, backward temporaries):
# measured with bench/memory_vs_measured.py, see docs/MEMORY.md. Unmeasured on GPUs: 1.
ACTIVATION_FACTOR = {"cuda": 1.0, "cpu": 1.75}
# With gradient checkpointing each layer's full activations are freed after the forward and
# recomputed in backward; on the CPU glibc keeps part of those freed blocks resident, so the
# heap beyond the live tensors grows with the number of layers recomputed: this share of one
# layer's full activations per layer after the first, fitted on SmolLM2-135M (30 layers) and
# checked on the 2-layer demo (bench/checkpointing_memory.py, docs/MEMORY.md). A multiple of
# the live tensors instead (4.5x, fitted at 135M) said checkpointing raised the demo's memory.
# The CUDA caching allocator reuses freed blocks of the same sizes: 0, unmeasured.
CHECKPOINT_HEAP_SHARE = {"cuda": 0.0, "cpu": 0.55}
# Keep this share of the device free: allocator fragmentation, other processes.
HEADROOM = 0.10
LINEAR_NAMES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class EstimateUnavailable(UserError, ValueError):
    """No memory estimate for this model yet; the message (catalogued) says why."""


@dataclass(frozen=True)
class Architecture:
    """The numbers of a Llama / Qwen / Mistral-style decoder that memory depends on."""
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    head_dim: int
    tie_word_embeddings: bool = False

    @classmethod
    def from_config(cls, config: dict) -> Architecture:
        """From a Hugging Face config.json mapping (a `text_config` inside is used when present)."""
        config = config.get("text_config") or config
        try:
            hidden = int(config["hidden_size"])
            heads = int(config["num_attention_heads"])
            return cls(
                hidden_size=hidden,
                intermediate_size=int(config.get("intermediate_size") or 4 * hidden),
                num_hidden_layers=int(config["num_hidden_layers"]),
                num_attention_heads=heads,
                num_key_value_heads=int(config.get("num_key_value_heads") or heads),
                vocab_size=int(config["vocab_size"]),
                head_dim=int(config.get("head_dim") or hidden // heads),
                tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise EstimateUnavailable(msg("memory.arch_number", error=error)) from None

    @classmethod
    def from_preset(cls, preset) -> Architecture:
        """From a backend.models.presets.ModelPreset."""
        return cls(hidden_size=preset.hidden_size, intermediate_size=preset.intermediate_size,
                   num_hidden_layers=preset.num_layers, num_attention_heads=preset.num_heads,
                   num_key_value_heads=preset.num_kv_heads, vocab_size=preset.vocab_size,
                   head_dim=preset.head_dim or preset.hidden_size // preset.num_heads,
                   tie_word_embeddings=preset.tie_word_embeddings)

    @classmethod
    def from_folder(cls, folder: str | Path) -> Architecture:
        path = Path(folder) / "config.json"
        try:
            return cls.from_config(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise EstimateUnavailable(msg("memory.no_config", path=path)) from None
        except json.JSONDecodeError as error:
            raise EstimateUnavailable(msg("memory.bad_json", path=path, error=error)) from None

    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """(in_features, out_features) of each linear layer inside one decoder layer."""
        h, i = self.hidden_size, self.intermediate_size
        q, kv = self.num_attention_heads * self.head_dim, self.num_key_value_heads * self.head_dim
        return {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h),
                "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h)}

    def layer_linear_params(self) -> int:
        return sum(a * b for a, b in self.linear_shapes().values())

    def embedding_params(self) -> int:
        """Input embeddings plus the lm_head (once when they are tied)."""
        return self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)

    def other_params(self) -> int:
        """Norms: two per layer plus the final one (biases are below 0.1% and left out)."""
        return self.hidden_size * (2 * self.num_hidden_layers + 1)

    def num_parameters(self) -> int:
        return self.num_hidden_layers * self.layer_linear_params() + self.embedding_params() + self.other_params()


@dataclass(frozen=True)
class MemoryEstimate:
    weights_gb: float
    adapters_gb: float
    gradients_gb: float
    optimizer_gb: float
    activations_gb: float
    runtime_gb: float
    total_params: int
    trainable_params: int
    # Per GPU process: what cpu_offload keeps in CPU memory instead (not in total_gb).
    cpu_offload_gb: float = 0.0
    sharding: str = "none"   # none (one replica per GPU) | zero2 | zero3 | fsdp
    world_size: int = 1      # GPUs the shards are spread over
    reference_gb: float = 0.0  # preference stages: the reference model's copy and its no-grad forward
    generation_gb: float = 0.0  # grpo: the KV cache of sampling the completions (no-grad, before the loss)
    # Zero or negative: gradients and activations are never both whole at once (`backward_overlap`).
    overlap_gb: float = 0.0

    @property
    def total_gb(self) -> float:
        return (self.weights_gb + self.adapters_gb + self.gradients_gb + self.optimizer_gb
                + self.activations_gb + self.runtime_gb + self.reference_gb + self.generation_gb + self.overlap_gb)

    def fits(self, device_memory_gb: float) -> bool:
        return self.total_gb <= device_memory_gb * (1 - HEADROOM)

    def as_dict(self) -> dict:
        return {**asdict(self), "total_gb": self.total_gb}


def architecture_for(model: str, models_dir: str | Path) -> Architecture:
    """The architecture of 'demo' (its built folder), an offline model (its converted folder, else
    its preset numbers), a preset hub id or a local folder."""

    if model in OFFLINE_MODELS and (Path(models_dir) / model / "config.json").is_file():
        return Architecture.from_folder(Path(models_dir) / model)
    if model in PRESETS:
        return Architecture.from_preset(PRESETS[model])
    if model == "demo-tiny":
        model = "demo"
    folder = Path(models_dir) / "demo" if model == "demo" else Path(model).expanduser()
    if model == "demo" and not (folder / "config.json").is_file():
        raise EstimateUnavailable(msg("memory.demo_not_built"))
    return Architecture.from_folder(folder)


def lora_params(arch: Architecture, r: int, target: str | list[str]) -> int:
    """Adapter parameters: r * (in + out) per adapted linear layer.
    'all-linear' is every linear layer inside the decoder layers (peft leaves the lm_head out)."""
    shapes = arch.linear_shapes()
    return arch.num_hidden_layers * sum(r * (shapes[n][0] + shapes[n][1]) for n in target_names(target))


def target_names(target: str | list[str]) -> list[str]:
    """The decoder-layer linear names a `lora_target` setting adapts (unknown names add nothing)."""
    if target == "all-linear":
        return list(LINEAR_NAMES)
    names = [target] if isinstance(target, str) else target
    return [n for n in names if n in LINEAR_NAMES]


def activation_elements_per_token(arch: Architecture, lora_dropout_inputs: int = 0) -> int:
    """Tensors one decoder layer keeps for the backward pass, per token (elements).

    Attention through SDPA (no seq x seq score matrix is kept). Counted:
    residual input + norm output (2h), q/k/v before and after RoPE (2q + 3kv:
    v is not rotated), attention output (q), the second norm's input + output (2h),
    gate, up, silu(gate) and their product (4i); plus, with LoRA dropout, one
    dropped copy of each adapted layer's input."""
    h, i = arch.hidden_size, arch.intermediate_size
    q, kv = arch.num_attention_heads * arch.head_dim, arch.num_key_value_heads * arch.head_dim
    return 4 * h + 3 * q + 3 * kv + 4 * i + lora_dropout_inputs


def _weight_bytes(arch: Architecture, method: str, compute: int, quantization_bits: int | None, lora_r: int,
                  lora_target: str | list[str], device_kind: str) -> tuple[int, int, int]:
    """(bytes of the model's weights, trainable parameters, bytes of the adapters) on one device."""
    if method == "full":
        # The Trainer keeps fp32 master weights and autocasts to bf16 / fp16.
        return arch.num_parameters() * 4, arch.num_parameters(), 0
    if method == "qlora":
        linear = arch.num_hidden_layers * arch.layer_linear_params()
        rest = arch.embedding_params() + arch.other_params()
        per_weight = NF4_BYTES if (quantization_bits or 4) == 4 else INT8_BYTES
        row_scales = (4 * arch.num_hidden_layers * sum(out for _, out in arch.linear_shapes().values())
                      if quantization_bits == 8 else 0)
        # prepare_model_for_kbit_training casts the unquantised rest (embeddings, norms) to fp32.
        weights = linear * per_weight + row_scales + rest * 4
        if device_kind == "cpu":
            # The checkpoint's linear weights, read (memory-mapped) to be quantised, stay resident.
            weights += linear * compute
    else:
        weights = arch.num_parameters() * compute
    trainable = lora_params(arch, lora_r, lora_target)
    return weights, trainable, trainable * 4  # peft keeps adapter weights in fp32


def estimate_memory(arch: Architecture, *, method: str, precision: str, batch_size: int, cutoff_len: int,
                    gradient_checkpointing: bool = False, quantization_bits: int | None = None,
                    lora_r: int = 16, lora_target: str | list[str] = "all-linear", lora_dropout: float = 0.0,
                    optim: str = "adamw_torch", device_kind: str = "cuda", stage: str = "sft",
                    chunked_loss: bool = False, gradient_accumulation_steps: int = 1,
                    max_completion_length: int = 0, beta: float = 0.1,
                    row_tokens: float | None = None) -> MemoryEstimate:
    """Peak memory of one training device. `precision` is the resolved one
    (bf16 / fp16 / fp32, never auto); `batch_size` is per device. `chunked_loss`:
    the worker's loss (backend/training/loss.py), which keeps no full logits.
    `row_tokens` (SFT): the tokens a row of the batch takes, from the real data
    (`step_row_tokens`); None: cutoff_len, the worst case. A step holds
    batch_size x min(cutoff_len, row_tokens) tokens.

    Preference stages: every example is two sequences (chosen + rejected for
    dpo / orpo / simpo; completion + the mismatched KL completion for kto), so
    activations double; dpo and kto also run the reference model: a second
    fp32 copy for full fine-tuning, the same weights with the adapter
    disabled for LoRA / QLoRA, plus the logits of its no-grad forward.

    grpo: `batch_size` counts completions already; each is a prompt (at most
    cutoff_len) plus up to max_completion_length sampled tokens. The sampling
    keeps a KV cache for the generation batch (batch_size x
    gradient_accumulation_steps completions, TRL's default); the reference
    runs only with beta above 0."""
    generation = 0
    if stage == "grpo":
        cutoff_len += max_completion_length
        kv_per_token = 2 * arch.num_hidden_layers * arch.num_key_value_heads * arch.head_dim * BYTES[precision]
        sequences = batch_size * gradient_accumulation_steps
        generation = sequences * cutoff_len * kv_per_token + sequences * arch.vocab_size * 4  # + one step's logits
    if stage not in ("sft", "grpo"):
        batch_size *= 2
    if stage != "sft":
        chunked_loss = False  # TRL's trainers compute their losses from full logits
    compute = BYTES[precision]
    layers = arch.num_hidden_layers
    weights, trainable, adapters = _weight_bytes(arch, method, compute, quantization_bits, lora_r, lora_target,
                                                 device_kind)
    gradients = trainable * 4
    optimizer = trainable * OPTIMIZER_BYTES.get(optim, 8)
    kind = "cpu" if device_kind == "cpu" else "cuda"
    length = cutoff_len if row_tokens is None or stage != "sft" else min(cutoff_len, row_tokens)
    activations = ACTIVATION_FACTOR[kind] * _activation_bytes(
        arch, method, compute, batch_size, length, gradient_checkpointing, lora_target, lora_dropout,
        chunked_loss)
    if gradient_checkpointing:
        layer = _layer_bytes(arch, method, compute, batch_size * length, lora_target, lora_dropout)
        activations += CHECKPOINT_HEAP_SHARE[kind] * (layers - 1) * layer
    # LoRA / QLoRA: the adapters' gradients are under 1% of the activations and the
    # CPU factor was fitted with them counted whole, so only full fine-tuning gets it.
    overlap = 0.0
    if method == "full" and gradient_accumulation_steps <= 1:
        overlap = backward_overlap(activations, gradients, layers)
    reference = 0
    if stage in ("dpo", "kto") or (stage == "grpo" and beta > 0):
        reference = batch_size * cutoff_len * arch.vocab_size * 4  # the reference logits (fp32 log-softmax)
        if method == "full":
            reference += arch.num_parameters() * 4
    return MemoryEstimate(
        reference_gb=reference / GIB, generation_gb=generation / GIB,
        weights_gb=weights / GIB, adapters_gb=adapters / GIB, gradients_gb=gradients / GIB,
        optimizer_gb=optimizer / GIB, activations_gb=activations / GIB,
        runtime_gb=RUNTIME_GB[kind], overlap_gb=-overlap / GIB if overlap else 0.0,
        total_params=arch.num_parameters() + (trainable if method != "full" else 0),
        trainable_params=trainable,
    )


def backward_overlap(activations: float, gradients: float, layers: int) -> float:
    """How much of activations + gradients is never held at once (bytes or GiB, as given).

    The Trainer frees the gradients after each optimizer step (zero_grad sets
    them to None), so they are allocated again in backward, layer by layer,
    while each layer's activations are freed once its gradients exist. Their
    sum moves in a straight line from A (backward starts) to G (it ends), and
    the layer in flight holds both its activations and its gradients, so the
    peak is max(A, G) plus one layer's share of the smaller one: all but one
    layer's share of the smaller one is counted twice by A + G. With gradient
    accumulation the gradients of the previous micro-batch are there during the
    next forward: the callers pass nothing then."""
    smaller = min(activations, gradients)
    return smaller * (layers - 1) / max(layers, 1)


def step_row_tokens(lengths: list[int], cutoff_len: int, packed: bool) -> float | None:
    """The tokens a row takes in a training step, from the token lengths of the run's rows (each cut at
    cutoff_len): packed batches hold the rows' own tokens, so their mean; padded batches are padded to
    their longest row, and length grouping puts the longest rows in one batch, so the longest.
    None without lengths (the estimate then takes cutoff_len)."""
    cut = [min(cutoff_len, n) for n in lengths if n > 0]
    if not cut:
        return None
    return sum(cut) / len(cut) if packed else float(max(cut))


def _activation_bytes(arch: Architecture, method: str, compute: int, batch_size: int, cutoff_len: float,
                      checkpointing: bool, lora_target: str | list[str], lora_dropout: float,
                      chunked_loss: bool = False) -> int:
    tokens = batch_size * cutoff_len  # cutoff_len: the row length a step holds (at most the cutoff)
    per_layer = _layer_bytes(arch, method, compute, tokens, lora_target, lora_dropout)
    if checkpointing:
        # Only each layer's input is kept; one layer is recomputed at a time in backward.
        layers = arch.num_hidden_layers * arch.hidden_size * compute * tokens + per_layer
    else:
        layers = arch.num_hidden_layers * per_layer
    # Logits in the compute dtype, their fp32 upcast for the loss (none when
    # already fp32) and the fp32 log-softmax cross-entropy keeps: vocab-sized,
    # often the largest term for small models with big vocabularies.
    upcast = 0 if compute == 4 else 4
    logits = tokens * arch.vocab_size * (compute + upcast + 4)
    if chunked_loss:
        # One chunk of float32 logits and its gradient at a time, plus the
        # gradient of the selected hidden states (backend/training/loss.py).
        from_chunk = 2 * 64 * 2**20
        logits = min(logits, from_chunk) + tokens * arch.hidden_size * 4
    return layers + logits


def _layer_bytes(arch: Architecture, method: str, compute: int, tokens: int, lora_target: str | list[str],
                 lora_dropout: float) -> int:
    """What one decoder layer keeps for backward over `tokens` tokens (bytes)."""
    dropout_inputs = 0
    if method != "full" and lora_dropout > 0:
        shapes = arch.linear_shapes()
        dropout_inputs = sum(shapes[n][0] for n in target_names(lora_target))
    return activation_elements_per_token(arch, dropout_inputs) * compute * tokens


# distributed setting -> how the state is split over the GPUs.
SHARDING = {"auto": "none", "ddp": "none", "fsdp": "fsdp", "deepspeed_zero2": "zero2", "deepspeed_zero3": "zero3"}


def shard(estimate: MemoryEstimate, arch: Architecture, distributed: str, world_size: int,
          cpu_offload: bool = False, precision: str = "bf16") -> MemoryEstimate:
    """The per-GPU estimate when `world_size` GPUs share the run (docs/MEMORY.md,
    "Sharding"). ZeRO-2 splits gradients and optimizer state over the GPUs;
    ZeRO-3 and FSDP the weights (and adapters) too, and then hold the layer being
    computed gathered in full plus the next one prefetched. cpu_offload (ZeRO)
    moves this GPU's optimizer-state share, with ZeRO-3 also its weight share,
    to CPU memory (`cpu_offload_gb`). Activations are per GPU and do not shrink."""
    mode = SHARDING.get(distributed, "none")
    n = max(1, int(world_size))
    if mode == "none":
        return replace(estimate, world_size=n)
    gradients, optimizer = estimate.gradients_gb / n, estimate.optimizer_gb / n
    # FSDP frees its gradient shards like the Trainer does: the overlap follows the
    # smaller shards. DeepSpeed keeps its own gradient buffers between steps
    # (unmeasured here): no overlap counted, which errs on the safe side.
    overlap = 0.0
    if estimate.overlap_gb and mode == "fsdp":
        overlap = -backward_overlap(estimate.activations_gb, gradients, arch.num_hidden_layers)
    weights, adapters = estimate.weights_gb, estimate.adapters_gb
    if mode in ("zero3", "fsdp"):
        gathered = 2 * arch.layer_linear_params() * BYTES.get(precision, 2) / GIB
        weights, adapters = weights / n + gathered, adapters / n
    cpu = 0.0
    if cpu_offload and mode in ("zero2", "zero3"):
        cpu, optimizer = optimizer, 0.0
        if mode == "zero3":
            cpu += weights - gathered + adapters
            weights, adapters = gathered, 0.0
    return replace(estimate, weights_gb=weights, adapters_gb=adapters, gradients_gb=gradients,
                   optimizer_gb=optimizer, cpu_offload_gb=cpu, sharding=mode, world_size=n, overlap_gb=overlap)


def choose_checkpointing(setting: str | bool, device_memory_gb: float, **estimate_kwargs) -> tuple[bool, str]:
    """gradient_checkpointing "auto" | True | False -> (on, why). auto turns it on
    only when the estimate without it does not fit the device (it costs ~30% speed)."""
    if setting is True or setting is False:
        return setting, "set in the config"
    arch = estimate_kwargs.pop("arch")
    without = estimate_memory(arch, gradient_checkpointing=False, **estimate_kwargs)
    if without.fits(device_memory_gb):
        return False, f"auto: off, the run fits without it ({without.total_gb:.1f} of {device_memory_gb:.1f} GiB)"
    with_it = estimate_memory(arch, gradient_checkpointing=True, **estimate_kwargs)
    return True, (f"auto: on, without it the run needs about {without.total_gb:.1f} GiB of "
                  f"{device_memory_gb:.1f} GiB (with it {with_it.total_gb:.1f} GiB)")


def config_estimate_kwargs(config, precision: str, device_kind: str, row_tokens: float | None = None) -> dict:
    """estimate_memory's keyword arguments for a RunConfig (all but arch and gradient_checkpointing);
    `row_tokens`: step_row_tokens of the run's data, when known."""
    return dict(method=config.method, precision=precision, batch_size=config.per_device_train_batch_size,
                row_tokens=row_tokens,
                cutoff_len=config.cutoff_len, quantization_bits=config.quantization_bits, lora_r=config.lora_r,
                lora_target=config.lora_target, lora_dropout=config.lora_dropout, optim=config.optim,
                device_kind=device_kind, stage=getattr(config, "stage", "sft"),
                chunked_loss=config.loss_function is None,
                gradient_accumulation_steps=config.gradient_accumulation_steps,
                max_completion_length=config.max_completion_length if config.stage == "grpo" else 0,
                beta=config.beta)
